"""Lookahead with a fake engine (a test double: it records what it is asked and streams silence): what is
synthesized ahead, at which speed and priority, and that stale readout is never started."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from bot.speech.queue.lookahead import Lookahead
from bot.speech.queue.pacing import Pacer
from bot.speech.queue.queue_policy import SpeechQueue
from bot.speech.queue.utterance import Request, Utterance
from engine.base import FRAME_BYTES, AudioChunk, Voice


class FakeEngine:
    """Streams 0.2 s of silence per request and records (text, speed, urgent)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, float, bool]] = []

    async def stream(self, text: str, voice: Voice, *, key: int, urgent: bool = False,
                     heard: Callable[[], float | None] | None = None) -> AsyncIterator[AudioChunk]:
        self.asked.append((text, voice.speed, urgent))
        yield AudioChunk(bytes(FRAME_BYTES * 10), 48_000, 2, final=True)


def lookahead(q: SpeechQueue, engine: FakeEngine, stale: list[Utterance], **kw) -> Lookahead:
    return Lookahead(7, engine, q, Pacer(), rate=lambda _r: 1.0, stale=stale.append, **kw)  # type: ignore[arg-type]


async def settle(*utts: Utterance) -> None:
    for u in utts:
        assert u.source is not None
        await asyncio.wait_for(u.source.wait_buffered(10, 1.0), 2.0)


def test_synthesizes_what_plays_and_the_next_depth_queued() -> None:
    async def go():
        q, engine, stale = SpeechQueue(), FakeEngine(), []
        utts = [q.admit(Request(t), Pacer(), 1.0)[0] for t in ("one", "two", "three")]
        q.current = q.pop()
        lookahead(q, engine, stale, depth=1).start()
        await settle(*utts[:2])
        return [t for t, _, _ in engine.asked], utts[2].source
    asked, third = asyncio.run(go())
    assert asked == ["one", "two"] and third is None


def test_readout_is_made_faster_while_the_channel_is_behind_and_a_preview_never() -> None:
    async def go():
        q, engine, stale = SpeechQueue(), FakeEngine(), []
        long = "word " * 400  # about 28 s of speech ahead of the rest
        first = q.admit(Request(long, kind="readout"), Pacer(), 1.0)[0]
        q.current = q.pop()
        first.source = object.__new__(type("Started", (), {"frames_written": 0, "frames_read": 0, "finished": False,
                                                           "next_s": 0.0}))
        behind = q.admit(Request("Behind.", kind="readout"), Pacer(), 1.0)[0]
        preview = q.admit(Request("A preview.", kind="preview"), Pacer(), 1.0)[0]
        lookahead(q, engine, stale, depth=2, catch_up=1.3).start()
        await settle(behind, preview)
        return {t: (s, u) for t, s, u in engine.asked}
    asked = asyncio.run(go())
    assert asked["Behind."][0] > 1.0 and asked["Behind."][1] is False
    assert asked["A preview."] == (1.0, True)


def test_stale_readout_leaves_the_queue_unsynthesized() -> None:
    async def go():
        q, engine, stale = SpeechQueue(), FakeEngine(), []
        playing = q.admit(Request("Playing now."), Pacer(), 1.0)[0]
        q.current = q.pop()
        late = q.admit(Request("Too late.", kind="readout"), Pacer(), 1.0, max_delay=60.0)[0]
        late.request.start_by = time.monotonic() - 1.0
        fresh = q.admit(Request("In time.", kind="readout"), Pacer(), 1.0, max_delay=600.0)[0]
        lookahead(q, engine, stale, depth=2).start()
        await settle(playing, fresh)
        return [t for t, _, _ in engine.asked], stale, late.source, list(q)
    asked, stale, late_source, waiting = asyncio.run(go())
    assert asked == ["Playing now.", "In time."]
    assert [u.request.text for u in stale] == ["Too late."] and late_source is None
    assert [u.request.text for u in waiting] == ["In time."]
