"""StreamingEngine: real Piper output, framing, cancellation, timeouts, errors, async backends, loop latency.

Test doubles (named as such): FakeToneBackend (sine per segment, optional delay), StuckBackend (a
blocking call that ignores cancellation), FakeAsyncBackend (an AsyncBackend on the loop).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest

from engine import streaming
from engine.base import (
    FRAME_BYTES,
    BackendDefaults,
    BackendInfo,
    CancelToken,
    EngineError,
    SynthesisTimeout,
    TextRejected,
    Voice,
)
from engine.settings import EngineSettings
from engine.streaming import EngineCounters, StreamingEngine

pytestmark = pytest.mark.timeout(120)
RATE = 16000


class FakeToneBackend(BackendDefaults):
    """Test double: 0.5 s of tone per segment after `delay` seconds; honours the cancel token."""

    def __init__(self, delay: float = 0.0, fail_on: str | None = None) -> None:
        self.info = BackendInfo("fake", "1", RATE, clones=False, voices=("tone",))
        self.delay = delay
        self.fail_on = fail_on
        self.calls: list[str] = []

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        self.calls.append(text)
        if self.fail_on and self.fail_on in text:
            raise RuntimeError("boom")
        end = time.monotonic() + self.delay
        while time.monotonic() < end:
            if cancel is not None and cancel.cancelled:
                return
            time.sleep(0.005)
        t = np.arange(RATE // 2) / RATE
        yield (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None) -> bytes | None:
        return None

    def close(self) -> None:
        pass


class StuckBackend(FakeToneBackend):
    """Test double: a blocking call that ignores cancellation until `release` is set (like native code)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        self.release.wait(30)
        yield np.zeros(160, dtype=np.float32)


class FakeAsyncBackend:
    """Test double: an AsyncBackend streaming two chunks per segment from the loop."""

    def __init__(self) -> None:
        self.info = BackendInfo("fake-async", "1", 24000, clones=True)
        self.closed = False

    async def astream(self, text: str, voice: Voice) -> AsyncIterator[np.ndarray]:
        for _ in range(2):
            await asyncio.sleep(0.01)
            yield np.full(2400, 0.1, dtype=np.float32)

    async def warm_up(self) -> None:
        pass

    def voice_languages(self, voice: Voice) -> tuple[str, ...]:
        return self.info.languages

    async def aclose(self) -> None:
        self.closed = True


def _settings(**kw: object) -> EngineSettings:
    base = dict(workers=2, max_concurrency=2, per_key_limit=1, segment_timeout_s=5.0, first_segment_chars=20,
                max_segment_chars=40)
    base.update(kw)
    return EngineSettings(**base)  # type: ignore[arg-type]


async def _collect(engine: StreamingEngine, text: str, key: object = "k", voice: Voice = Voice(), **kw) -> list:
    return [c async for c in engine.stream(text, voice, key=key, **kw)]


SIX_SENTENCES = " ".join(f"Sentence number {n} is here." for n in range(6))


# -- real Piper ----------------------------------------------------------------------------------


def _speech_seconds(pcm: bytes) -> float:
    """Seconds of 20 ms frames whose level is above silence (left channel)."""
    x = np.frombuffer(pcm, dtype="<i2").reshape(-1, 2)[:, 0].astype(np.float64) / 32768
    n = len(x) // 960
    rms = np.sqrt(np.mean(x[: n * 960].reshape(n, 960) ** 2, axis=1))
    return float(np.sum(rms > 0.01)) * 0.02


async def test_real_piper_speech_length_grows_with_words(piper_backend) -> None:
    engine = StreamingEngine(piper_backend, EngineSettings(workers=1, max_concurrency=1))
    try:
        short = await _collect(engine, "Hello there, my friend.")
        long_text = (
            "Hello there, my friend. Today we will talk about the weather, the garden, and the long "
            "walk we took along the river last Sunday afternoon."
        )
        long = await _collect(engine, long_text)
    finally:
        await engine.close()
    for chunks in (short, long):
        assert all(len(c.pcm) % FRAME_BYTES == 0 and c.sample_rate == 48000 and c.channels == 2 for c in chunks)
        assert chunks[-1].final and not any(c.final for c in chunks[:-1])
    s_pcm, l_pcm = b"".join(c.pcm for c in short), b"".join(c.pcm for c in long)
    s_dur, l_dur = len(s_pcm) / 192000, len(l_pcm) / 192000
    assert 0.25 * 4 < s_dur < 0.8 * 4  # 4 words: roughly 0.25-0.8 s a word
    assert 0.25 * 27 < l_dur < 0.8 * 27
    assert 4 < l_dur / s_dur < 10  # proportional to the words (27 vs 4)
    assert _speech_seconds(l_pcm) > 0.6 * l_dur  # speech, not silence
    level = 20 * np.log10(np.sqrt(np.mean((np.frombuffer(l_pcm, "<i2") / 32768.0) ** 2)))
    assert -26 < level < -16  # normalized near the -20 dBFS target (pauses pull it down a little)


async def test_real_piper_speed_changes_duration(piper_backend) -> None:
    engine = StreamingEngine(piper_backend, EngineSettings(workers=1, max_concurrency=1))
    text = "The quick brown fox jumps over the lazy dog."
    try:
        normal = sum(c.duration for c in await _collect(engine, text))
        fast = sum(c.duration for c in await _collect(engine, text, voice=Voice(speed=2.0)))
    finally:
        await engine.close()
    assert 0.35 < fast / normal < 0.7


async def test_real_piper_skip_frees_slot_and_terminates_inference(piper_backend) -> None:
    engine = StreamingEngine(piper_backend, EngineSettings(workers=1, max_concurrency=1, max_segment_chars=400))
    long_sentence = "and then " * 40 + "it ended."
    try:
        agen = engine.stream("Hi. " + long_sentence, Voice(), key="a")
        # baseline in this run (the machine may be loaded): the long segment synthesized to its end
        t0 = time.monotonic()
        await asyncio.to_thread(lambda: list(piper_backend.synthesize(long_sentence, Voice())))
        full = time.monotonic() - t0
        await agen.__anext__()  # first segment heard; the long one is synthesizing now
        await asyncio.sleep(0.05)
        await agen.aclose()
        assert engine.stats().running == 0  # freed at once
        t0 = time.monotonic()
        while engine.stats().abandoned_now and time.monotonic() - t0 < 60:
            await asyncio.sleep(0.01)
        assert engine.stats().abandoned_now == 0
        # RunOptions.terminate stopped onnxruntime: the abandoned call ended well before a full synthesis
        assert time.monotonic() - t0 < 0.5 * full, (time.monotonic() - t0, full)
        chunks = await _collect(engine, "Next one.", key="b")
        assert chunks and chunks[-1].final
    finally:
        await engine.close()


# -- test doubles --------------------------------------------------------------------------------


async def test_segments_stream_in_order_and_one_ahead() -> None:
    backend = FakeToneBackend(delay=0.02)
    engine = StreamingEngine(backend, _settings())
    try:
        chunks = await _collect(engine, SIX_SENTENCES)
    finally:
        await engine.close()
    assert [c.segment for c in chunks] == sorted(c.segment for c in chunks)
    assert backend.calls == engine.segments(SIX_SENTENCES)
    assert engine.stats().segments_done == len(backend.calls)
    total = sum(c.duration for c in chunks)
    assert abs(total - 0.5 * len(backend.calls)) < 0.03


async def test_segment_timeout_raises_and_frees_the_slot() -> None:
    engine = StreamingEngine(FakeToneBackend(delay=3.0), _settings(segment_timeout_s=0.2))
    try:
        t0 = time.monotonic()
        with pytest.raises(SynthesisTimeout):
            await _collect(engine, "Too slow.")
        assert time.monotonic() - t0 < 2.5  # the timeout ended it, not the backend's 3 s
        assert engine.stats().running == 0
        assert engine.stats().timeouts == 1
    finally:
        await engine.close()


async def test_stuck_calls_are_bounded() -> None:
    """Abandoned calls free their slot up to max_abandoned; beyond that the slot stays held."""
    backend = StuckBackend()
    engine = StreamingEngine(backend, _settings(workers=1, max_concurrency=1, segment_timeout_s=0.1, max_abandoned=1))
    try:
        with pytest.raises(SynthesisTimeout):
            await _collect(engine, "one.", key="a")
        assert engine.stats().abandoned_now == 1 and engine.stats().running == 0
        with pytest.raises(SynthesisTimeout):
            await _collect(engine, "two.", key="b")
        assert engine.stats().running == 1  # over the bound: held until the thread returns
        backend.release.set()
        t0 = time.monotonic()
        while (engine.stats().running or engine.stats().abandoned_now) and time.monotonic() - t0 < 5:
            await asyncio.sleep(0.01)
        assert engine.stats().running == 0 and engine.stats().abandoned_now == 0
        assert await _collect(engine, "three.", key="c")
    finally:
        backend.release.set()
        await engine.close()


async def test_cancelling_the_consumer_task_frees_slots_for_others() -> None:
    backend = FakeToneBackend(delay=2.0)
    engine = StreamingEngine(backend, _settings(max_concurrency=1))
    try:
        slow = asyncio.create_task(_collect(engine, SIX_SENTENCES, key="a"))
        await asyncio.sleep(0.1)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert engine.stats().running == 0
        assert engine.stats().waiting == 0
        backend.delay = 0.0
        assert await asyncio.wait_for(_collect(engine, "Quick.", key="b"), 2)
    finally:
        await engine.close()


async def test_backend_error_fails_one_request_only() -> None:
    engine = StreamingEngine(FakeToneBackend(fail_on="bad"), _settings())
    try:
        with pytest.raises(EngineError, match="failed"):
            await _collect(engine, "This is bad.")
        assert engine.stats().errors == 1 and engine.stats().running == 0
        assert await _collect(engine, "This is fine.")
    finally:
        await engine.close()


async def test_text_rejections() -> None:
    engine = StreamingEngine(FakeToneBackend(), _settings(max_text_chars=100))
    try:
        for text in ("", "   \x00\x01 ", "😀🎉", "!!!"):
            with pytest.raises(TextRejected, match="nothing to say"):
                await _collect(engine, text)
        with pytest.raises(TextRejected, match="limit is 100"):
            await _collect(engine, "word " * 100)
    finally:
        await engine.close()


async def test_async_backend_runs_on_the_loop() -> None:
    backend = FakeAsyncBackend()
    engine = StreamingEngine(backend, _settings())
    try:
        chunks = await _collect(engine, "One. Two. Three.")
    finally:
        await engine.close()
    assert backend.closed
    assert all(len(c.pcm) % FRAME_BYTES == 0 for c in chunks)
    assert abs(sum(c.duration for c in chunks) - len(engine.segments("One. Two. Three.")) * 0.2) < 0.03


async def test_inference_never_runs_on_the_loop_thread(piper_backend) -> None:
    """Every step of the real Piper generator (phonemize, onnxruntime) runs on a worker thread."""
    steps: list[int] = []

    class Recording(BackendDefaults):
        info = piper_backend.info

        def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
            for chunk in piper_backend.synthesize(text, voice, cancel=cancel):
                steps.append(threading.get_ident())
                yield chunk

        def close(self) -> None:
            pass

    engine = StreamingEngine(Recording(), EngineSettings(workers=1, max_concurrency=1))  # type: ignore[arg-type]
    try:
        chunks = await _collect(engine, "This sentence is synthesized in a worker thread, never on the loop. " * 2)
    finally:
        await engine.close()
    assert chunks and steps
    assert threading.get_ident() not in steps


async def test_capacity_changed_returns_when_a_stream_takes_a_slot() -> None:
    engine = StreamingEngine(FakeToneBackend(), _settings())
    try:
        changed = asyncio.create_task(engine.capacity_changed())
        await asyncio.sleep(0)
        assert not changed.done()
        await _collect(engine, "One sentence.")
        await asyncio.wait_for(changed, 5)
    finally:
        await engine.close()


# -- a stepping backend: one slot per unit of work ------------------------------------------------------------


class FakeWindowBackend(FakeToneBackend):
    """Test double: whole sentences, `windows` items of 0.5 s tone each (with whether another follows), every item one
    unit of work (steps) taking
    `delay` seconds; records each item's thread and when it was made."""

    def __init__(self, windows: int = 4, delay: float = 0.02) -> None:
        super().__init__(delay=delay)
        self.info = BackendInfo("fake-windows", "1", RATE, clones=False, voices=("tone",), sentence_chars=400,
                                steps=True)
        self.windows = windows
        self.made: list[tuple[str, int, float]] = []  # (text, item, monotonic time)

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        self.calls.append(text)
        for k in range(self.windows):
            time.sleep(self.delay)
            self.made.append((text, k, time.monotonic()))
            yield (0.3 * np.sin(2 * np.pi * 200 * np.arange(RATE // 2) / RATE)).astype(np.float32), k < self.windows - 1


class FakeAloneBackend(FakeWindowBackend):
    """Records the `alone` the engine gives each run."""

    def __init__(self) -> None:
        super().__init__(windows=2, delay=0.0)
        self.alone: list[bool] = []

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None,  # type: ignore[override]
                   alone: bool = True) -> Iterator[np.ndarray]:
        self.alone.append(alone)
        return super().synthesize(text, voice, cancel=cancel)


async def test_a_run_is_alone_until_another_key_used_the_engine_within_alone_s(monkeypatch) -> None:
    backend = FakeAloneBackend()
    engine = StreamingEngine(backend, _settings())
    try:
        await _collect(engine, "First words.", key="a")
        await _collect(engine, "More words.", key="a")  # its own key again: still alone
        await _collect(engine, "Other words.", key="b")  # "a" asked moments ago
        monkeypatch.setattr(streaming, "ALONE_S", 0.05)
        await asyncio.sleep(0.1)
        await _collect(engine, "Later words.", key="a")  # "b" asked longer ago than ALONE_S
    finally:
        await engine.close()
    assert backend.alone == [True, True, False, True]


async def test_the_first_guild_after_warming_up_has_the_engine_alone() -> None:
    """Warming up is no guild: the first one's speech after it is made as the engine's alone (its first words sooner),
    not as if another guild might be back mid-utterance."""
    backend = FakeAloneBackend()
    engine = StreamingEngine(backend, _settings())
    try:
        await engine.warm_up()
        await _collect(engine, "First words.", key="a")
        capacity = engine.capacity("a")
    finally:
        await engine.close()
    assert backend.alone[-1] is True and capacity.other_keys == 0


async def test_a_sentence_backend_gets_whole_sentences_and_one_slot_per_window() -> None:
    backend = FakeWindowBackend(windows=3)
    engine = StreamingEngine(backend, _settings())
    text = "This sentence is a good deal longer than forty characters, and it is not cut. Short one."
    granted: list[int] = []
    engine.trace = lambda event, key, index: granted.append(index) if event == "granted" else None
    try:
        chunks = await _collect(engine, text)
    finally:
        await engine.close()
    assert backend.calls == [text[:text.index("cut.") + 4], "Short one."]
    assert granted == [0, 0, 0, 1, 1, 1]  # a slot for every window
    assert [c.segment for c in chunks[:-1]] == [0, 0, 0, 1, 1, 1]
    assert engine.stats().segments_done == 2 and engine.stats().running == 0
    assert set(engine.counters.speeds) == {1}


async def test_a_long_sentences_later_windows_let_another_guilds_first_window_go_first() -> None:
    """One slot: guild a's sentence of 8 windows (0.5 s of audio made in 0.05 s each) has audio in hand after its
    first; guild b's first window, asked for meanwhile, goes once a's next window is due later than b's (a readout's:
    a second from now at the least), long before a's last."""
    backend = FakeWindowBackend(windows=8, delay=0.05)
    engine = StreamingEngine(backend, _settings(workers=1, max_concurrency=1))
    try:
        a = asyncio.create_task(_collect(engine, "A long sentence.", key="a"))
        while not backend.made:
            await asyncio.sleep(0.005)
        b = await _collect(engine, "B first.", key="b")
        await a
    finally:
        await engine.close()
    assert b
    order = [text for text, _, _ in backend.made]
    # a's windows while its next is due before b's first, then b's: about 1.5 s in hand at 10x real time
    assert 2 <= order.index("B first.") <= 6
    assert order.count("A long sentence.") == 8


async def test_a_stream_no_listener_waits_for_takes_turns_with_another_guilds_first_window() -> None:
    """One slot, and a heard stream always short of audio (its listener has heard all it was given): guild a's
    sentence of 8 windows keeps the slot for every window before b's first (and b gets no express grant beside a
    stream behind); made ahead of its turn (no listener waits yet), its windows have no deadline and b's first window
    goes in turn."""
    b_at = {}
    for name, heard in (("heard", lambda: 1e9), ("unheard", lambda: None)):
        backend = FakeWindowBackend(windows=8, delay=0.05)
        engine = StreamingEngine(backend, _settings(workers=1, max_concurrency=1))
        try:
            a = asyncio.create_task(_collect(engine, "A long sentence.", key="a", heard=heard))
            while not backend.made:
                await asyncio.sleep(0.005)
            await _collect(engine, "B first.", key="b")
            await a
        finally:
            await engine.close()
        b_at[name] = [text for text, _, _ in backend.made].index("B first.")
    assert b_at == {"heard": 8, "unheard": b_at["unheard"]} and b_at["unheard"] <= 2


async def test_a_cancelled_utterance_stops_at_its_next_window() -> None:
    backend = FakeWindowBackend(windows=50, delay=0.05)
    engine = StreamingEngine(backend, _settings())
    try:
        task = asyncio.create_task(_collect(engine, "Fifty windows long."))
        while len(backend.made) < 3:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        made = len(backend.made)
        await asyncio.sleep(0.3)
        assert len(backend.made) <= made + 1  # the window running then, no more
        assert engine.stats().running == 0 and engine.stats().waiting == 0
    finally:
        await engine.close()


def test_speed_is_taken_at_the_load_it_was_measured_at() -> None:
    counters = EngineCounters()
    assert counters.speed(2) == 0.0
    counters.made(1.0, 3.0, busy=1)
    assert counters.speed(1) == 3.0
    assert counters.speed(2) == 1.5  # not measured with two busy: the one slot's total shared by two
    counters.made(1.0, 1.0, busy=2)
    assert counters.speed(2) == 1.0 and counters.speed(1) == 3.0
    assert counters.speed(4) == 0.5


def test_the_first_measures_are_averaged_then_the_newest_weighs_most() -> None:
    counters = EngineCounters()
    counters.made(1.0, 0.5, busy=1)  # a cold first window
    for _ in range(4):
        counters.made(1.0, 2.0, busy=1)
    assert counters.speed(1) == pytest.approx((0.5 + 4 * 2.0) / 5)  # not 0.5 carried at a tenth per window
    for _ in range(100):
        counters.made(1.0, 3.0, busy=1)
    assert counters.speed(1) == pytest.approx(3.0, abs=1e-3)


def test_a_runs_later_steps_have_their_own_speed_and_count_in_the_blend() -> None:
    counters = EngineCounters()
    counters.made(1.0, 1.0, busy=1)  # a run's first step: its features and first window
    assert counters.speed(1, next_step=True) == 0.0
    counters.made(1.0, 3.0, busy=1, later_step=True)
    assert counters.speed(1, next_step=True) == 3.0 and counters.speed(1) == 2.0


def test_a_keys_share_is_its_slots_at_the_speed_over_all_units() -> None:
    from engine.base import Capacity

    alone = Capacity(slots=2, running=1, waiting_others=0, audio_per_second=1.5, next_per_second=2.0)
    assert alone.share() == 1.5  # one slot per key
    shared = Capacity(slots=2, running=2, waiting_others=1, audio_per_second=1.2, other_keys=2, next_per_second=1.6)
    assert shared.share() == pytest.approx(1.2 * 2 / 3)


async def test_streams_closed_while_their_steps_come_back_are_no_failure() -> None:
    """A step that comes back as its stream closes (asyncio.wait_for keeps the result, not the cancel) ends the
    stream's work quietly: it logged a backend failure and counted an error."""
    engine = StreamingEngine(FakeWindowBackend(windows=3, delay=0.0), _settings(max_concurrency=2))
    try:
        streams = [engine.stream(f"{k} first.", Voice(), key=k, heard=lambda: 0.0) for k in "bc"]
        for stream in streams:
            await stream.__anext__()
        for stream in streams:
            await stream.aclose()
        await asyncio.sleep(0.1)  # their steps under way come back
    finally:
        await engine.close()
    assert engine.counters.errors == 0


async def test_capacity_is_priced_at_full_load_while_another_guild_used_the_engine_lately(monkeypatch) -> None:
    """A guild alone sees a slot's speed with its own work; once another guild used the engine within ALONE_S (it
    may come back mid-utterance), a slot's speed with every slot busy."""
    engine = StreamingEngine(FakeWindowBackend(windows=1, delay=0.0), _settings(max_concurrency=2))
    try:
        engine.counters.made(1.0, 3.0, busy=1)
        engine.counters.made(1.0, 1.0, busy=2)
        await _collect(engine, "A first.", key="a")
        alone = engine.capacity("a").audio_per_second
        await _collect(engine, "B first.", key="b")
        monkeypatch.setattr(streaming, "RECENT_KEYS_S", 0.0)  # b no longer competes now, but used it lately
        beside = engine.capacity("a").audio_per_second
    finally:
        await engine.close()
    assert alone > beside == engine.counters.speed(2)
