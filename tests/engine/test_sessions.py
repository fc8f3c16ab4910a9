"""Skips free their sessions: a cancelled segment's pool thread is retired, its session is reused (real Piper)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from engine.backends.piper.backend import PiperBackend
from engine.backends.sessions import SessionPool
from engine.base import BackendDefaults, BackendInfo, CancelToken, Voice
from engine.settings import EngineSettings
from engine.streaming import StreamingEngine

pytestmark = pytest.mark.timeout(300)

LONG = "Hi there. And then " + "it went on and on " * 12 + "until it ended."


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def _skip_mid_segment(engine: StreamingEngine, key: str) -> None:
    """Hear the first sentence, then hang up while the next one is synthesizing (a /skip)."""
    agen = engine.stream(LONG, Voice(), key=key)
    await agen.__anext__()
    await agen.aclose()


async def _settled(engine: StreamingEngine) -> None:
    for _ in range(500):  # bounded: retired calls stop at RunOptions.terminate
        if engine.stats().abandoned_now == 0 and engine._pool.retired_running == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("retired inference calls did not finish")


async def test_fifty_skips_keep_sessions_and_memory_flat() -> None:
    workers = 2
    backend = PiperBackend(workers=workers)
    settings = EngineSettings(workers=workers, max_concurrency=2, max_segment_chars=400, first_segment_chars=400)
    engine = StreamingEngine(backend, settings)
    try:
        await engine.warm_up()
        for i in range(5):  # warm-up: allocator pools and every code path touched once
            await _skip_mid_segment(engine, f"w{i}")
        await _settled(engine)
        before = _rss_mb()
        for i in range(50):
            await _skip_mid_segment(engine, f"k{i}")
        await _settled(engine)
        after = _rss_mb()
        assert engine.stats().cancelled >= 50
        assert backend.sessions_alive <= workers
        assert after - before < 50, f"RSS grew {after - before:.0f} MB over 50 skips ({before:.0f} -> {after:.0f})"
        assert await engine.synthesize_all("Still speaking.", Voice())  # the pool still works
    finally:
        await engine.close()


class ThreadRecordingBackend(BackendDefaults):
    """Test double: yields `chunks` short tones, recording the thread of every resumption."""

    def __init__(self, chunks: int = 20) -> None:
        self.info = BackendInfo("threads", "1", 16000, clones=False, voices=("tone",))
        self.chunks = chunks
        self.threads: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        for _ in range(self.chunks):
            with self._lock:
                self.threads.setdefault(text, set()).add(threading.get_ident())
            time.sleep(0.002)
            yield np.full(160, 0.1, dtype=np.float32)

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None) -> bytes | None:
        return None

    def close(self) -> None:
        pass


async def test_a_generator_never_changes_thread() -> None:
    backend = ThreadRecordingBackend()
    engine = StreamingEngine(backend, EngineSettings(workers=2, max_concurrency=6, per_key_limit=1))
    texts = [f"Generator number {n}." for n in range(6)]
    try:
        await asyncio.gather(*(engine.synthesize_all(t, Voice(), key=t) for t in texts))
    finally:
        await engine.close()
    assert len(backend.threads) == 6
    hopped = {t: len(ids) for t, ids in backend.threads.items() if len(ids) > 1}
    assert not hopped, f"generators resumed on several threads: {hopped}"


def test_session_pool_keeps_at_most_size_at_rest() -> None:
    made: list[object] = []

    def create() -> object:
        made.append(object())
        return made[-1]

    pool: SessionPool[object] = SessionPool(create, size=2, wait_s=0.0)
    with pool.lease() as a, pool.lease() as b, pool.lease() as c:  # a third one past the bound: an extra
        assert len({id(a), id(b), id(c)}) == 3 and pool.alive == 3
    assert pool.alive == 2  # the extra was dropped on return
    with pool.lease() as d:
        assert d in made[:3] and len(made) == 3  # reused, not created
    pool.close()
    assert pool.alive == 0
