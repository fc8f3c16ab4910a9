"""FrameHandoff: the one state an utterance's producer (the event loop) and its reader (the voice driver) share."""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable


class FrameHandoff:
    """A bounded FIFO of PCM frames with their segment boundaries, the producer's end and a give-way request, under
    one lock. The loop puts frames in; the voice driver's thread alone takes them out (so a frame it sees `upcoming`
    stays where it is until it takes it). `on_space` is called (on the reader's thread) when a take frees a full
    buffer."""

    def __init__(self, max_frames: int, on_space: Callable[[], None]) -> None:
        self.max_frames = max(2, max_frames)
        self._frames: collections.deque[bytes] = collections.deque()  # PCM, not taken yet
        # where each segment after the first starts (frame numbers): the reader may give way there
        self._boundaries: collections.deque[int] = collections.deque()
        self._lock = threading.Lock()
        self._on_space = on_space
        self.finished = False  # the producer will add nothing more
        self.closed = False  # dropped: nothing more in or out
        self.giving_way = False  # give way at the next segment boundary (asked-for speech is waiting)
        self.yielded = False  # the reader stopped at a boundary; the rest is taken when it reads again
        self.written = 0
        self.taken = 0

    # -- the producer's side (the event loop) ------------------------------------------------------
    def put(self, frame: bytes) -> bool:
        """Add one frame unless the buffer is full (False)."""
        with self._lock:
            if self.closed or len(self._frames) >= self.max_frames:
                return False
            self._frames.append(frame)
            self.written += 1
        return True

    def mark_boundary(self) -> None:
        """A new segment starts with the next frame put."""
        with self._lock:
            self._boundaries.append(self.written)

    def finish(self) -> None:
        with self._lock:
            self.finished = True

    def give_way(self) -> None:
        self.giving_way = True

    def resume(self) -> None:
        """Before the reader takes the rest after giving way."""
        self.yielded = self.giving_way = False

    def close(self) -> bool:
        """Drop every frame (any thread); True the first time."""
        with self._lock:
            if self.closed:
                return False
            self.closed = True
            self._frames.clear()
        return True

    @property
    def buffered(self) -> int:
        return len(self._frames)

    def frames_to_boundary(self) -> int | None:
        """Frames left before the reader would give way, when the next boundary is already put."""
        with self._lock:
            ahead = [b for b in self._boundaries if b >= self.taken]
            return ahead[0] - self.taken if ahead else None

    # -- the reader's side (the voice driver's thread) ---------------------------------------------
    def take(self) -> bytes | None:
        """The next frame; b"" at the end or at the segment boundary where it gives way; None when none is buffered
        yet."""
        wake = False
        with self._lock:
            if self.closed:
                return b""
            while self._boundaries and self._boundaries[0] < self.taken:
                self._boundaries.popleft()
            if self.giving_way and self._boundaries and self._boundaries[0] == self.taken and self.taken:
                self._boundaries.popleft()
                self.yielded = True
                return b""
            if self._frames:
                wake = len(self._frames) == self.max_frames
                frame: bytes | None = self._frames.popleft()
                self.taken += 1
            else:
                frame = b"" if self.finished else None
        if wake:
            self._on_space()
        return frame

    def upcoming(self, skip: int, limit: int) -> list[bytes]:
        """The frames the next takes return, after the first `skip`, at most `limit` (for encoding ahead)."""
        with self._lock:
            return list(itertools.islice(self._frames, skip, skip + max(0, limit)))
