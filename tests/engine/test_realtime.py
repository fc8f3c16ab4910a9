"""engine/realtime.py: the deadlines of a stream's units and the start rule that keeps a listener fed at any share."""

from __future__ import annotations

import pytest

from engine.base import Capacity
from engine.realtime import MAKING_MARGIN, READOUT_TTFA_S, SAY_TTFA_S, PlayOut, hold_s, stream_hold_s, upcoming


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def played_dry(audio_s: float, largest: float, growth: float, first: float, rate: float) -> tuple[float, int]:
    """An utterance of `audio_s` made a unit at a time (the first of `first` audio seconds, each next up to `growth`
    times larger, at most `largest`) at `rate` audio s per s, played once the start rule allows it: (when playing
    started, 20 ms frames the listener found empty)."""
    units = upcoming(first, audio_s, largest, growth)
    arrivals, t, made = [], 0.0, 0.0
    for unit in units:
        t += unit / rate
        made += unit
        arrivals.append((t, made))
    start = None
    for k, (at, made) in enumerate(arrivals):  # the player looks again whenever audio arrives
        rest = units[k + 1:]
        if made >= hold_s(rest, rate, rest[0] / rate if rest else 0.0):
            start = at
            break
    assert start is not None
    dry = 0
    for frame in range(int(round(audio_s / 0.02))):
        needed_at = start + frame * 0.02
        available = max((m for at, m in arrivals if at <= needed_at + 1e-9), default=0.0)
        dry += available < (frame + 1) * 0.02 - 1e-9
    return start, dry


@pytest.mark.parametrize("schedule", [(2.0, 1.0, 2.0), (2.0, 1.5, 0.8), (2.0, 4 / 3, 0.5)],
                         ids=["sentences", "windows", "windows-alone"])
@pytest.mark.parametrize("rate", [0.3, 0.6, 0.9, 1.1, 1.5, 2.2, 10.0])
@pytest.mark.parametrize("audio_s", [1.5, 6.0, 20.0])
def test_playback_that_starts_by_the_rule_never_runs_dry(audio_s, rate, schedule):
    largest, growth, first = schedule
    start, dry = played_dry(audio_s, largest, growth, first, rate)
    assert dry == 0, (start, dry)


def test_a_fast_engine_starts_at_the_first_unit_and_a_slow_one_makes_most_first():
    assert played_dry(20.0, 2.0, 1.5, 0.8, rate=2.2)[0] == pytest.approx(0.8 / 2.2)  # the first window
    assert played_dry(20.0, 2.0, 1.0, 2.0, rate=0.5)[0] > 20.0  # at half real time most of it is made first
    assert hold_s([], 0.0, 0.0) == 0.0 and hold_s([1.0], 0.0, 0.0) == float("inf")


def test_blocking_behind_another_streams_unit_is_held_for():
    alone = hold_s([1.2, 1.8], 1.7, 1.2 / 1.7)
    assert hold_s([1.2, 1.8], 1.7, 1.2 / 1.7, blocked_s=0.7) == pytest.approx(alone + 0.7)


def test_a_stream_holds_for_a_unit_its_own_guilds_next_utterance_may_be_making():
    """With the slots free for other guilds, another stream of its own key (made ahead of its turn) may still hold the
    key's one slot, unpreempted, when this one's next unit is due: the longest unit, or a run's first with its
    features (`unit_s`) where that is longer."""
    cap = Capacity(slots=2, running=1, waiting_others=0, audio_per_second=1.5, next_per_second=2.0, per_key=1)
    alone = stream_hold_s(cap, 1.2, 0.5, 6.0, 2.0, 1.5)
    beside_own = stream_hold_s(Capacity(**{**cap.__dict__, "key_streams": 2}), 1.2, 0.5, 6.0, 2.0, 1.5)
    assert beside_own == pytest.approx(alone + 2.0 / 2.0)  # the longest window at a later step's speed
    slow_first = stream_hold_s(Capacity(**{**cap.__dict__, "key_streams": 2}), 1.2, 1.4, 6.0, 2.0, 1.5)
    assert slow_first == pytest.approx(alone + 1.4)
    assert stream_hold_s(Capacity(**{**cap.__dict__, "key_streams": 1}), 1.2, 0.5, 6.0, 2.0, 1.5) == alone


def test_upcoming_units_grow_to_the_largest_and_end_with_the_rest():
    assert upcoming(0.8, 5.0, 2.0, 1.5) == pytest.approx([0.8, 1.2, 1.8, 1.2])
    assert upcoming(0.0, 3.0, 2.0, 1.0) == [2.0, 1.0]  # next unknown: the largest
    assert upcoming(0.5, 0.0, 2.0, 1.5) == []


def test_a_first_unit_is_due_by_its_class_target_from_when_its_listener_waits():
    clock = FakeClock()
    turn = {"heard": None}
    say = PlayOut(clock, urgent=True, heard=lambda: turn["heard"])
    readout = PlayOut(clock, urgent=False, heard=lambda: turn["heard"])
    assert say.deadline() is None and readout.deadline() is None  # made ahead of its turn: no deadline
    clock.t += 5.0
    turn["heard"] = 0.0  # its turn came
    assert say.deadline() == pytest.approx(clock.t + SAY_TTFA_S)
    assert readout.deadline() == pytest.approx(clock.t + READOUT_TTFA_S)
    clock.t += READOUT_TTFA_S
    # a readout late for its target still goes after a /say asked now: asked-for speech first
    assert readout.deadline() == pytest.approx(clock.t + SAY_TTFA_S)
    assert say.deadline() == clock.t  # late for its target: due now (not before a unit of speech running dry)
    cli = PlayOut(clock, urgent=True)  # no listener: it plays from its first chunk, its first is due by the target
    assert cli.deadline() == pytest.approx(clock.t + SAY_TTFA_S)
    held = PlayOut(clock, urgent=True, heard=lambda: 0.0)  # its turn came, its first audio made, held: none
    assert held.deadline() == pytest.approx(clock.t + SAY_TTFA_S)
    held.add(0.8)
    assert held.deadline() is None


def test_a_later_unit_is_due_before_the_audio_in_hand_runs_out_less_its_making_and_the_longest_units():
    clock = FakeClock()
    heard = {"s": 0.5}  # playing: half a second heard
    playout = PlayOut(clock, urgent=True, heard=lambda: heard["s"], making=lambda next_s: next_s / 2.0, largest=2.0)
    playout.add(3.0)
    assert playout.deadline(next_s=1.0) == pytest.approx(clock.t + 2.5 - MAKING_MARGIN * (0.5 + 1.0))
    clock.t += 1.0
    heard["s"] = 1.0
    assert playout.deadline(coming_s=0.5, next_s=1.0) == pytest.approx(clock.t + 2.5 - MAKING_MARGIN * (0.5 + 1.0))
    heard["s"] = None  # paused: nobody waits for it
    assert playout.deadline(next_s=1.0) is None
