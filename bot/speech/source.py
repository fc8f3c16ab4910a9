"""StreamingSource: one utterance's bounded frame buffer, fed PCM by the engine, read by the voice driver."""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
from collections.abc import AsyncIterator, Callable

from bot.speech.feed import feed
from bot.speech.pacing import FRAME_S
from engine.base import FRAME_BYTES, AudioChunk

SILENCE = b"\x00" * FRAME_BYTES


class StreamingSource:
    """Frames in from an async producer on the loop, out to the voice driver's thread (bot/speech/driver.py).

    `read()` never blocks: it returns the next frame, a silence frame (counted as an underrun) when
    the buffer is empty mid-utterance, or b"" once the producer has finished and the buffer is drained.
    The driver encodes the frames `upcoming` to Opus ahead of reading them (its Track keeps them), off its 20 ms sends.
    """

    def __init__(self, max_frames: int = 1500) -> None:
        self.max_frames = max(2, max_frames)
        self._frames: collections.deque[bytes] = collections.deque()  # PCM, not read yet
        self._lock = threading.Lock()
        self._finished = False  # the producer will add nothing more
        self._closed = False  # cleanup ran: drop everything
        self.error: BaseException | None = None
        self.underruns = 0
        self.frames_read = 0
        self.frames_written = 0
        self.first_frame_ready: asyncio.Event = asyncio.Event()
        self._space: asyncio.Event = asyncio.Event()
        self._space.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._grew: asyncio.Event = asyncio.Event()  # set whenever frames are added or the producer ends
        # where each segment after the first starts (frame numbers): the player may give way there
        self._boundaries: collections.deque[int] = collections.deque()
        self._yield = False  # give way at the next segment boundary (asked-for speech is waiting)
        self.yielded = False  # the player stopped at a boundary; the rest plays when it is started again

    # -- producer side (event loop) -------------------------------------------------------------
    def start(self, chunks: AsyncIterator[AudioChunk]) -> asyncio.Task:
        """Begin filling the buffer from `chunks` (bot/speech/feed.py) in a task on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(feed(self, chunks))
        return self._task

    def offer(self, frame: bytes) -> bool:
        """Add one PCM frame unless the buffer is full (then False: wait_space, and offer it again)."""
        with self._lock:
            if len(self._frames) >= self.max_frames:
                self._space.clear()
                return False
            self._frames.append(frame)
            self.frames_written += 1
        self.first_frame_ready.set()
        return True

    async def wait_space(self) -> None:
        await self._space.wait()

    def mark_boundary(self) -> None:
        """A new segment starts with the next frame: the player may give way there."""
        with self._lock:
            self._boundaries.append(self.frames_written)

    def grew(self) -> None:
        self._grew.set()

    def finish(self) -> None:
        """The producer will add nothing more."""
        with self._lock:
            self._finished = True
        self.first_frame_ready.set()  # wake a waiter even when nothing came
        self._grew.set()

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait_buffered(self, frames: int, timeout: float | None = None) -> None:
        """Wait (at most `timeout` s) until `frames` are buffered, the producer is done, the source closed or
        asked to give way before a frame was played."""
        try:
            async with asyncio.timeout(timeout):
                want = min(frames, self.max_frames)
                while not (self._finished or self._closed or self.buffered_frames >= want
                           or (self._yield and not self.frames_read)):
                    self._grew.clear()
                    await self._grew.wait()
        except TimeoutError:
            return

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def buffered_frames(self) -> int:
        return len(self._frames)

    @property
    def producer(self) -> asyncio.Task | None:
        return self._task

    def give_way(self) -> None:
        """Stop the player at the next segment boundary (`yielded` tells it did); before a frame played, at once."""
        self._yield = True
        self._grew.set()

    async def wait_started(self, timeout: float) -> None:
        """Wait for the first frame, the producer's end or a give-way (TimeoutError after `timeout` s)."""
        async with asyncio.timeout(timeout):
            while not (self.first_frame_ready.is_set() or self._yield):
                self._grew.clear()
                await self._grew.wait()

    @property
    def giving_way(self) -> bool:
        return self._yield

    def seconds_to_boundary(self) -> float | None:
        """Audio left before the player would give way, when the next boundary is already synthesized."""
        with self._lock:
            ahead = [b for b in self._boundaries if b >= self.frames_read]
            return (ahead[0] - self.frames_read) * FRAME_S if ahead else None

    def resume(self) -> None:
        """Before playing the rest after giving way."""
        self.yielded = self._yield = False

    # -- consumer side (the voice driver's thread) -----------------------------------------------
    def upcoming(self, skip: int, limit: int) -> list[bytes]:
        """The buffered frames the next reads return, after the first `skip`, at most `limit` (for encoding ahead).
        Only the reading thread may call it: it alone takes frames out, so they stay where they are."""
        with self._lock:
            return list(itertools.islice(self._frames, skip, skip + max(0, limit)))

    def is_opus(self) -> bool:
        return False

    def read(self) -> bytes:
        """The next PCM frame; b"" at the end or at the segment boundary where it gives way; silence (counted as an
        underrun) when nothing is buffered."""
        if self._closed:
            return b""
        with self._lock:
            while self._boundaries and self._boundaries[0] < self.frames_read:
                self._boundaries.popleft()
            if self._yield and self._boundaries and self._boundaries[0] == self.frames_read and self.frames_read:
                self._boundaries.popleft()
                self.yielded = True
                return b""
            queued = len(self._frames)
            if self._frames:
                frame = self._frames.popleft()
            elif self._finished:
                return b""
            else:
                frame = None
            wake = queued == self.max_frames
        if frame is None:
            self.underruns += 1
            frame = SILENCE
        else:
            self.frames_read += 1
        if wake and self._loop is not None:
            self._loop.call_soon_threadsafe(self._space.set)
        return frame

    def cleanup(self) -> None:
        """When playback ends or is stopped: free the buffer, stop the producer (not when it gave way: the rest is
        played later, and whoever drops it closes it)."""
        if not self.yielded:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._frames.clear()
        _call_on_loop(self._loop, self._stopped)

    def _stopped(self) -> None:
        """On the loop, once closed: the producer cancelled, whoever waits woken."""
        self._space.set()
        self._grew.set()
        if self._task is not None and not self._task.done():
            self._task.cancel()


def _call_on_loop(loop: asyncio.AbstractEventLoop | None, fn: Callable[[], None]) -> None:
    """Call `fn` on `loop`: now from its own thread, else soon; not at all once it is closed."""
    if loop is None or loop.is_closed():
        return
    try:
        if _on_loop(loop):
            fn()
        else:
            loop.call_soon_threadsafe(fn)
    except RuntimeError:
        pass  # the loop closed meanwhile


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
