"""StreamingSource: non-blocking reads, silence and underrun counting, back-pressure, cleanup cancels."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from bot.speech.playback.source import SILENCE, StreamingSource
from engine.base import FRAME_BYTES, AudioChunk


def chunk(n_frames: int, value: int = 1) -> AudioChunk:
    return AudioChunk(bytes([value]) * (FRAME_BYTES * n_frames), 48_000, 2)


async def gen(chunks, delay=0.0):
    for c in chunks:
        if delay:
            await asyncio.sleep(delay)
        yield c


async def test_frames_then_end():
    src = StreamingSource(max_frames=100)
    src.start(gen([chunk(2), chunk(1, 2)]))
    await asyncio.wait_for(src.producer, 5)
    frames = []
    while (f := src.read()) != b"":
        frames.append(f)
    assert len(frames) == 3 and all(len(f) == FRAME_BYTES for f in frames)
    assert frames[2] == b"\x02" * FRAME_BYTES
    assert src.underruns == 0 and src.error is None


async def test_a_chunk_not_whole_frames_ends_the_utterance_with_an_error():
    """The engine frames audio once; a chunk that breaks that contract is an error, not padded again here."""
    src = StreamingSource(max_frames=100)
    odd = AudioChunk(b"\x02" * (FRAME_BYTES + 10), 48_000, 2)
    src.start(gen([chunk(2), odd, chunk(1)]))
    await asyncio.wait_for(src.producer, 5)
    assert isinstance(src.error, ValueError) and "not whole 20 ms frames" in str(src.error)
    frames = []
    while (f := src.read()) != b"":
        frames.append(f)
    assert len(frames) == 2 and src.finished


async def test_empty_buffer_mid_utterance_gives_silence_and_counts_underrun():
    src = StreamingSource()
    src.start(gen([chunk(1), chunk(1)], delay=0.2))
    await asyncio.wait_for(src.first_frame_ready.wait(), 5)
    assert src.read() != SILENCE
    assert src.read() == SILENCE
    assert src.underruns == 1
    await asyncio.wait_for(src.producer, 5)
    assert src.read() != SILENCE and src.read() == b""


async def test_read_never_blocks_and_backpressure_bounds_memory():
    src = StreamingSource(max_frames=10)
    src.start(gen([chunk(5) for _ in range(20)]))
    await asyncio.sleep(0.1)
    assert src.buffered_frames <= 10 and not src.producer.done()
    got = []

    took: list[float] = []

    def player():
        for _ in range(200):
            t = time.perf_counter()
            f = src.read()
            took.append(time.perf_counter() - t)
            if f == b"":
                return
            if f != SILENCE:
                got.append(f)
            time.sleep(0.001)

    th = threading.Thread(target=player)
    th.start()
    while th.is_alive():
        await asyncio.sleep(0.01)
    assert len(got) == 100
    # read() never waits for the producer: nearly every call returns in well under a millisecond (the
    # 95th percentile, so a thread descheduled by a busy machine does not count as blocking)
    assert sorted(took)[int(len(took) * 0.95)] < 0.005, sorted(took)[-5:]


async def test_cleanup_from_driver_thread_cancels_producer_and_frees_buffer():
    closed = asyncio.Event()

    async def endless():
        try:
            while True:
                yield chunk(5)
                await asyncio.sleep(0)
        finally:
            closed.set()

    src = StreamingSource(max_frames=20)
    src.start(endless())
    await asyncio.sleep(0.05)
    threading.Thread(target=src.cleanup).start()
    await asyncio.wait_for(closed.wait(), 5)
    await asyncio.wait_for(src.producer, 5)
    assert src.buffered_frames == 0 and src.read() == b""


async def test_producer_error_is_kept_not_raised():
    async def broken():
        yield chunk(1)
        raise RuntimeError("engine exploded")

    src = StreamingSource()
    src.start(broken())
    await asyncio.wait_for(src.producer, 5)
    assert isinstance(src.error, RuntimeError)
    assert src.read() != b"" and src.read() == b""


async def test_wait_buffered_returns_at_the_count_at_the_end_or_at_the_timeout():
    src = StreamingSource(max_frames=100)
    src.start(gen([chunk(1)] * 30, delay=0.01))
    await asyncio.wait_for(src.wait_buffered(10, 5.0), 6)
    assert 10 <= src.buffered_frames < 30 and not src.finished
    await asyncio.wait_for(src.wait_buffered(1000, 5.0), 6)  # more than will ever come: ends with the producer
    assert src.finished and src.buffered_frames == 30

    slow = StreamingSource(max_frames=100)
    slow.start(gen([chunk(1)] * 5, delay=1.0))
    t0 = time.monotonic()
    await slow.wait_buffered(5, 0.3)
    assert time.monotonic() - t0 < 4.0 and slow.buffered_frames < 5  # the timeout, not the 5 s of chunks
    slow.close()
    await asyncio.wait_for(slow.wait_buffered(5, 5.0), 1)  # a closed source does not keep anyone waiting


async def test_wait_buffered_returns_when_asked_to_give_way_before_a_frame_played():
    src = StreamingSource(max_frames=100)
    src.start(gen([chunk(1)] * 5, delay=1.0))
    waiting = asyncio.create_task(src.wait_buffered(5))
    await asyncio.sleep(0)
    src.give_way()
    await asyncio.wait_for(waiting, 5)
    assert src.buffered_frames < 5
    src.close()


async def test_heard_is_told_from_its_turn_until_it_gives_way_at_a_boundary():
    """What the engine is told (Engine.stream's `heard`): nothing before its turn (made ahead), the seconds read
    from its turn on, nothing again once it stopped at a sentence boundary to give way."""
    src = StreamingSource(max_frames=100)
    src.start(gen([AudioChunk(bytes(FRAME_BYTES * 3), 48_000, 2, segment=0),
                   AudioChunk(bytes(FRAME_BYTES * 2), 48_000, 2, segment=1, final=True)]))
    await asyncio.wait_for(src.producer, 5)
    assert src.heard_s() is None
    src.resume()
    assert src.heard_s() == 0.0
    src.read(), src.read()
    assert src.heard_s() == pytest.approx(0.04)
    src.give_way()
    assert src.read() and src.heard_s() == pytest.approx(0.06)  # the sentence plays to its end
    assert src.read() == b"" and src.yielded and src.heard_s() is None
    src.resume()
    assert src.heard_s() == pytest.approx(0.06)
