"""bench/load.py finds each utterance in the capture: end-of-speech bursts close spurts, and two utterances that ran
together (a burst not tight on a busy machine) are split where the bot says the second started."""

from __future__ import annotations

from types import SimpleNamespace

from bench.load import split_at, spurts
from sandbox.capture import Packet

FRAME = 0.02


def capture_of(*runs: tuple[float, int, int, float]) -> SimpleNamespace:
    """Packets of utterances: (start, voiced frames, end silence frames, seconds between those silence frames)."""
    packets = []
    for start, voiced, silent, step in runs:
        at = start
        for _ in range(voiced):
            packets.append(Packet(at, len(packets), 0, 1, b"v", False))
            at += FRAME
        for _ in range(silent):
            packets.append(Packet(at, len(packets), 0, 1, b"s", True))
            at += step
    return SimpleNamespace(packets=packets)


def test_a_tight_end_burst_closes_each_utterance() -> None:
    found = spurts(capture_of((10.0, 50, 5, 0.0005), (11.2, 80, 5, 0.0005)))
    assert [(round(s.start, 2), s.frames) for s in found] == [(10.0, 50), (11.2, 80)]


def test_utterances_run_together_by_a_slow_burst_are_split_by_the_frames_each_played() -> None:
    # the first one's burst took 20 ms a frame (its player thread held up): no tight burst, one spurt in all
    merged = spurts(capture_of((10.0, 50, 5, FRAME), (11.2, 80, 5, 0.0005)))
    assert [s.frames for s in merged] == [135]
    parts = split_at(merged, [(10.0, 50), (11.15, 80)])
    assert [(round(s.start, 2), s.frames) for s in parts] == [(10.0, 50), (11.2, 80)]
    # one stretch within a spurt: left alone
    assert [s.frames for s in split_at(merged, [(10.0, 50)])] == [135]


def test_a_slow_burst_before_the_next_spurt_is_no_utterance() -> None:
    # the second utterance's first frame was read before the first's last packets arrived (the sandbox's loop
    # lagged), but its audio is a spurt of its own: the first keeps its frames, the burst's rest is dropped
    first = spurts(capture_of((10.0, 75, 5, FRAME)))
    assert [s.frames for s in first] == [80]
    parts = split_at(first, [(10.0, 75), (11.52, 48)])
    assert [(round(s.start, 2), s.frames) for s in parts] == [(10.0, 75)]
