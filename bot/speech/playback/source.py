"""StreamingSource: one utterance's bounded frame buffer, fed PCM by the engine, read by the voice driver."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from bot.speech.playback.handoff import FrameHandoff
from bot.speech.queue.pacing import FRAME_S
from engine.base import FRAME_BYTES, AudioChunk

SILENCE = b"\x00" * FRAME_BYTES
log = logging.getLogger(__name__)


class StreamingSource:
    """One utterance's audio: the engine's chunks fill it on the loop (`start`), the voice driver reads it.

    All the two threads share is its FrameHandoff (bot/speech/playback/handoff.py); the rest is the loop's (the producer
    task, the waits) or the reader's. `read()` never blocks: it returns the next PCM frame, a silence frame (counted
    as an underrun) when the buffer is empty mid-utterance, or b"" once the producer has finished and the buffer is
    drained. The driver's Track encodes the frames `upcoming` to Opus ahead of reading them.
    """

    def __init__(self, max_frames: int = 1500) -> None:
        self._handoff = FrameHandoff(max_frames, self._space_freed)
        self.max_frames = self._handoff.max_frames
        self.error: BaseException | None = None
        self.underruns = 0  # the reader's: silence frames it read
        self._turn = False  # the player's: its turn came (the listener waits for it), until it gives way
        self.first_frame_ready: asyncio.Event = asyncio.Event()
        self._space: asyncio.Event = asyncio.Event()
        self._space.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._grew: asyncio.Event = asyncio.Event()  # set whenever frames are added or the producer ends

    # -- the producer's side (event loop) -----------------------------------------------------------
    def start(self, chunks: AsyncIterator[AudioChunk]) -> asyncio.Task:
        """Begin filling the buffer from `chunks` in a task on the running loop: cut into frames (the engine framed
        them), marking where each segment after the first starts, waiting while the buffer is full, until they end,
        fail or the source is closed; then it is finished."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._fill(chunks))
        return self._task

    async def _fill(self, chunks: AsyncIterator[AudioChunk]) -> None:
        segment: int | None = None
        try:
            async for chunk in chunks:
                if chunk.segment != segment:
                    if segment is not None:
                        self.mark_boundary()
                    segment = chunk.segment
                await self._push(chunk.pcm)
                if self.closed:
                    break
        except asyncio.CancelledError:
            self.error = self.error or asyncio.CancelledError()
        except Exception as exc:  # noqa: BLE001 - reported to the speaker, never raised in the player thread
            self.error = exc
        finally:
            try:
                await chunks.aclose()  # type: ignore[attr-defined]  # (the engine's Stream, an async generator)
            except Exception:
                log.debug("closing the engine stream failed", exc_info=True)
            self.finish()

    async def _push(self, pcm: bytes) -> None:
        """Add a chunk's frames: the engine frames audio once (engine.audio.FrameConverter), here it is only cut."""
        if len(pcm) % FRAME_BYTES:
            raise ValueError(f"the engine sent {len(pcm)} bytes of audio, not whole 20 ms frames")
        for offset in range(0, len(pcm), FRAME_BYTES):
            frame = pcm[offset:offset + FRAME_BYTES]
            while not self.closed and not self.offer(frame):
                await self.wait_space()
            if self.closed:
                return
        self.grew()

    def offer(self, frame: bytes) -> bool:
        """Add one PCM frame unless the buffer is full (then False: wait_space, and offer it again)."""
        if not self._handoff.put(frame):
            self._space.clear()  # on the loop: the reader's wake-up (_space_freed) comes after this
            return False
        self.first_frame_ready.set()
        return True

    async def wait_space(self) -> None:
        await self._space.wait()

    def mark_boundary(self) -> None:
        """A new segment starts with the next frame: the player may give way there."""
        self._handoff.mark_boundary()

    def grew(self) -> None:
        self._grew.set()

    def finish(self) -> None:
        """The producer will add nothing more."""
        self._handoff.finish()
        self.first_frame_ready.set()  # wake a waiter even when nothing came
        self._grew.set()

    # -- the player's view (event loop) -------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._handoff.closed

    @property
    def finished(self) -> bool:
        return self._handoff.finished

    @property
    def buffered_frames(self) -> int:
        return self._handoff.buffered

    @property
    def frames_written(self) -> int:
        return self._handoff.written

    @property
    def frames_read(self) -> int:
        return self._handoff.taken

    @property
    def producer(self) -> asyncio.Task | None:
        return self._task

    @property
    def giving_way(self) -> bool:
        return self._handoff.giving_way

    def heard_s(self) -> float | None:
        """Audio seconds the listener has heard since its turn came, None before (synthesized ahead) or while it gave
        way: the engine makes what a listener waits for before what nobody does yet (Engine.stream's `heard`)."""
        return self.frames_read * FRAME_S if self._turn and not self.yielded else None

    @property
    def yielded(self) -> bool:
        """The reader stopped at a boundary; the rest plays when it is started again."""
        return self._handoff.yielded

    async def wait_buffered(self, frames: int, timeout: float | None = None) -> None:
        """Wait (at most `timeout` s) until `frames` are buffered, the producer is done, the source closed or
        asked to give way before a frame was played."""
        try:
            async with asyncio.timeout(timeout):
                want = min(frames, self.max_frames)
                while not (self.finished or self.closed or self.buffered_frames >= want
                           or (self.giving_way and not self.frames_read)):
                    self._grew.clear()
                    await self._grew.wait()
        except TimeoutError:
            return

    async def wait_started(self, timeout: float) -> None:
        """Wait for the first frame, the producer's end or a give-way (TimeoutError after `timeout` s)."""
        async with asyncio.timeout(timeout):
            while not (self.first_frame_ready.is_set() or self.giving_way):
                self._grew.clear()
                await self._grew.wait()

    def give_way(self) -> None:
        """Stop the player at the next segment boundary (`yielded` tells it did); before a frame played, at once."""
        self._handoff.give_way()
        self._grew.set()

    def seconds_to_boundary(self) -> float | None:
        """Audio left before the player would give way, when the next boundary is already synthesized."""
        frames = self._handoff.frames_to_boundary()
        return frames * FRAME_S if frames is not None else None

    def resume(self) -> None:
        """Its turn (again, after giving way): the listener waits for it from now."""
        self._turn = True
        self._handoff.resume()

    # -- the reader's side (the voice driver's thread) ----------------------------------------------
    def read(self) -> bytes:
        """The next PCM frame; b"" at the end or at the segment boundary where it gives way; silence (counted as an
        underrun) when nothing is buffered."""
        frame = self._handoff.take()
        if frame is None:
            self.underruns += 1
            return SILENCE
        return frame

    def upcoming(self, skip: int, limit: int) -> list[bytes]:
        """The buffered frames the next reads return, after the first `skip`, at most `limit` (for encoding ahead)."""
        return self._handoff.upcoming(skip, limit)

    def is_opus(self) -> bool:
        return False

    def _space_freed(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._space.set)

    def cleanup(self) -> None:
        """When playback ends or is stopped: free the buffer, stop the producer (not when it gave way: the rest is
        played later, and whoever drops it closes it)."""
        if not self.yielded:
            self.close()

    def close(self) -> None:
        if self._handoff.close():
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
