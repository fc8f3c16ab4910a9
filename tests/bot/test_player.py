"""Player with a fake connection and sink (test doubles for a Discord call) and the real voice driver and Opus: how
an utterance ends (played, skipped, no call, E2EE never ready), who is told, and that nothing is sent unheard."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from bot.speech.playback.driver import VoiceDriver
from bot.speech.playback.player import Player
from bot.speech.playback.source import StreamingSource
from bot.speech.queue.pacing import Pacer
from bot.speech.queue.utterance import Outcome, Request, Utterance
from engine.base import FRAME_BYTES, AudioChunk, Capacity
from tests.sinks import FakeSink


class FakeConnection:
    """A call that is joined (or not) and whose E2EE gets ready (or not)."""

    def __init__(self, joined: bool = True, e2ee: bool = True) -> None:
        self.joined, self.e2ee, self.sink = joined, e2ee, FakeSink()

    async def ensure(self) -> bool:
        return self.joined

    async def wait_e2ee(self, timeout: float) -> bool:
        return self.e2ee


async def speech(frames: int):
    yield AudioChunk(b"\x10\x00" * (FRAME_BYTES // 2) * frames, 48_000, 2, final=True)


async def never_changes() -> None:
    await asyncio.sleep(3600)


def ample(_request: Request) -> Capacity:
    """An idle engine ten times faster than speech."""
    return Capacity(slots=1, running=0, waiting_others=0, audio_per_second=10.0)


async def play(conn: FakeConnection, *, skipped: bool = False, frames: int = 25) -> tuple[Outcome | None, Utterance,
                                                                                         list[str], Pacer]:
    told: list[str] = []
    utt = Utterance(Request("A sentence long enough to learn from.", notify=telling(told)), skipped=skipped)
    pacer = Pacer()
    outcome = await play_in(conn, utt, speech(frames), ample, pacer)
    return outcome, utt, told, pacer


def telling(told: list[str]) -> Callable[[str], Awaitable[None]]:
    """An author's notify that keeps what they were told in `told`."""
    async def notify(message: str) -> None:
        told.append(message)
    return notify


class FakeStream:
    """Test double of an engine Stream: `chunks`, and the audio it says to hold before playing (`hold`)."""

    def __init__(self, chunks: AsyncIterator[AudioChunk], hold: float) -> None:
        self.chunks, self.hold = chunks, hold

    def __aiter__(self) -> FakeStream:
        return self

    async def __anext__(self) -> AudioChunk:
        return await self.chunks.__anext__()

    async def aclose(self) -> None:
        await self.chunks.aclose()  # type: ignore[attr-defined]

    def hold_s(self) -> float:
        return self.hold


async def play_in(conn: FakeConnection, utt: Utterance, chunks: AsyncIterator[AudioChunk],
                  capacity: Callable[[Request], Capacity], pacer: Pacer, hold: float = 0.0) -> Outcome | None:
    """Play `utt`, made of `chunks` by an engine that says to hold `hold` audio seconds first, through a Player and
    the real voice driver at the engine load `capacity`."""
    driver = VoiceDriver()
    player = Player(1, conn, driver, pacer, capacity=capacity,  # type: ignore[arg-type]
                    load_changed=never_changes, e2ee_wait_s=0.5)
    utt.source = StreamingSource(500)
    utt.stream = FakeStream(chunks, hold)
    utt.source.start(utt.stream)
    try:
        return await asyncio.wait_for(player.play(utt), 10.0)
    finally:
        driver.close()


def test_an_utterance_plays_every_frame_and_the_pacer_learns_its_length() -> None:
    conn = FakeConnection()
    outcome, utt, told, pacer = asyncio.run(play(conn))
    assert outcome is Outcome.PLAYED and told == []
    assert len(conn.sink.sent) >= 25 and utt.source is not None and utt.source.frames_read == 25
    assert pacer.seconds_per_char != Pacer().seconds_per_char and utt.ttfa is not None


def test_not_in_a_call_fails_and_tells_the_author_without_sending() -> None:
    conn = FakeConnection(joined=False)
    outcome, _, told, _ = asyncio.run(play(conn))
    assert outcome is Outcome.FAILED and conn.sink.sent == []
    assert told and "/join" in told[0]


def test_e2ee_never_ready_fails_and_says_why_without_sending() -> None:
    conn = FakeConnection(e2ee=False)
    outcome, _, told, _ = asyncio.run(play(conn))
    assert outcome is Outcome.FAILED and conn.sink.sent == []
    assert told and "end-to-end encryption" in told[0]


def test_skipped_before_its_turn_sends_nothing() -> None:
    conn = FakeConnection()
    outcome, _, told, _ = asyncio.run(play(conn, skipped=True))
    assert outcome is Outcome.SKIPPED and conn.sink.sent == [] and told == []


async def stalls_after(frames: int, stall_s: float = 3600.0):
    """A first chunk, then an engine that makes nothing more for `stall_s` (an overloaded one), then the rest."""
    if frames:
        yield AudioChunk(b"\x10\x00" * (FRAME_BYTES // 2) * frames, 48_000, 2)
    await asyncio.sleep(stall_s)
    yield AudioChunk(b"\x10\x00" * (FRAME_BYTES // 2) * 20, 48_000, 2, final=True)


def slow(_request: Request) -> Capacity:
    """An engine making a tenth of real time, other guilds waiting for it: the player holds a long utterance back."""
    return Capacity(slots=1, running=1, waiting_others=3, audio_per_second=0.1, other_keys=3)


def slow_alone(_request: Request) -> Capacity:
    """The same engine with no other guild waiting for it."""
    return Capacity(slots=1, running=1, waiting_others=0, audio_per_second=0.1)


async def play_readout(first_frames: int, stall_s: float = 3600.0, capacity: Callable[[Request], Capacity] = slow,
                       hold: float = 0.0) -> tuple[Outcome | None, FakeConnection, list[str], Utterance]:
    conn, told = FakeConnection(), []
    request = Request("A readout message long enough to be held back for a while. " * 3, kind="readout",
                      notify=telling(told))
    request.start_by = request.created_at + 0.3
    utt = Utterance(request)
    outcome = await play_in(conn, utt, stalls_after(first_frames, stall_s), capacity, Pacer(), hold)
    return outcome, conn, told, utt


def test_a_readout_whose_first_audio_comes_past_its_start_by_is_stale_while_other_guilds_wait() -> None:
    outcome, conn, told, _ = asyncio.run(play_readout(0))
    assert outcome is Outcome.STALE and conn.sink.sent == [] and told == []  # counted into the catch-up notice


def test_a_readout_whose_first_audio_comes_past_its_start_by_plays_late_when_no_other_guild_waits() -> None:
    outcome, conn, told, _ = asyncio.run(play_readout(0, stall_s=0.6, capacity=slow_alone))
    assert outcome is Outcome.PLAYED and len(conn.sink.sent) >= 20 and told == []


def test_a_readout_held_back_past_its_start_by_plays_late_when_no_other_guild_waits() -> None:
    """The engine says to make all of it first (a slow engine): held past its start_by, it plays whole, never dry."""
    outcome, conn, told, utt = asyncio.run(play_readout(5, stall_s=0.6, capacity=slow_alone, hold=float("inf")))
    assert outcome is Outcome.PLAYED and len(conn.sink.sent) >= 25 and told == []
    assert utt.prerolled and utt.held_s >= 0.5 and utt.source is not None and utt.source.underruns == 0


def test_a_readout_held_back_past_its_start_by_is_stale_while_other_guilds_wait() -> None:
    outcome, conn, told, utt = asyncio.run(play_readout(5, stall_s=0.6, hold=float("inf")))
    assert outcome is Outcome.STALE and conn.sink.sent == [] and told == []  # counted into the catch-up notice


def test_playing_starts_once_the_audio_in_hand_covers_what_the_engine_says_to_hold() -> None:
    outcome, conn, _, utt = asyncio.run(play_readout(5, stall_s=0.6, hold=0.05))  # 5 frames in hand cover 50 ms
    assert outcome is Outcome.PLAYED and utt.held_s < 0.5
