"""PlayStats: when an utterance's frames were sent (its first, the unbroken stretches): its TTFA, the benches."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class PlayStats:
    first_read_at: float | None = None  # monotonic time of the first real frame the voice driver sent
    buffered_at_start: int = 0  # frames in the buffer when the driver took the first one
    spans: list[list[float]] = field(default_factory=list)  # [monotonic start, frames] of each unbroken stretch
    _span_open: bool = False

    def played(self, queued: int) -> None:
        """One frame played, with `queued` frames buffered before it was taken."""
        now = time.monotonic()
        if self.first_read_at is None:
            self.first_read_at = now
            self.buffered_at_start = queued
        if not self._span_open:
            self.spans.append([now, 0])
            self._span_open = True
        self.spans[-1][1] += 1

    def broke(self) -> None:
        """Playing paused (it gave way at a boundary): the next frame starts a new stretch."""
        self._span_open = False
