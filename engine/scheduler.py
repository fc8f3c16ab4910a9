"""Global synthesis capacity shared fairly: FIFO within a key, round-robin across keys, a per-key limit; urgent
waiters (asked-for speech) are served before the others; a waiter that says when it is due (a later segment of
audio already playing) goes by that deadline, so one with enough audio in hand lets a first segment go first."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SchedulerStats:
    running: int
    waiting: dict[Hashable, int]  # all waiters per key, urgent ones included
    running_per_key: dict[Hashable, int]
    waiting_urgent: dict[Hashable, int] = field(default_factory=dict)  # urgent waiters per key


class Grant:
    """One slot held by one key; `release()` is idempotent and frees the slot at once."""

    __slots__ = ("key", "_scheduler", "_released")

    def __init__(self, scheduler: Scheduler, key: Hashable) -> None:
        self.key = key
        self._scheduler = scheduler
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._scheduler._release(self.key)


class Scheduler:
    """At most `max_concurrency` grants at once, at most `per_key_limit` per key.

    Waiters of one key are served in order. Among keys, the waiter due first goes first: a plain waiter is
    due when it arrived, or when its key was last served if that is later (so keys take turns and one busy
    key cannot starve the others); a waiter with `due` (a callable, monotonic seconds, asked at each grant)
    is due then: a later segment of speech that is playing, due shortly before its audio in hand runs out (a
    `due` that says None has no deadline now, and waits like a plain waiter: speech no listener waits for yet).
    Urgent waiters have a level of their own, served first (the bot's /say before channel readout), except an
    urgent waiter with a deadline still ahead (a later segment with audio in hand), which waits its turn by
    that deadline among the others, and a waiter of either level whose deadline has come goes first. A
    waiter that is cancelled leaves the queue; one cancelled just as it was granted gives the slot back.
    Must be used from one event loop.
    """

    def __init__(self, max_concurrency: int, per_key_limit: int | None = None) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.per_key_limit = max(1, per_key_limit) if per_key_limit else max_concurrency
        # [urgent, normal]: waiters per key, and the keys with waiters in serving order
        self._levels: tuple[_Level, _Level] = (_Level(), _Level())
        self._running: dict[Hashable, int] = {}
        self._total = 0
        self._area = 0.0  # grants held times seconds, up to _area_at (how busy the slots were, integrated)
        self._area_at = time.monotonic()
        self.on_change: Callable[[], None] | None = None  # told after each waiter, grant and release

    # -- public ---------------------------------------------------------------------------------

    async def acquire(self, key: Hashable, *, urgent: bool = False,
                      due: Callable[[], float | None] | None = None) -> Grant:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Grant] = loop.create_future()
        level = self._levels[0 if urgent else 1]
        queue = level.queues.get(key)
        if queue is None:
            queue = level.queues[key] = deque()
        waiter = _Waiter(fut, due)
        queue.append(waiter)
        self._dispatch()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                fut.result().release()  # granted in the same instant it was cancelled
            else:
                self._forget(level, key, fut)
            raise

    @property
    def running(self) -> int:
        """Grants held now."""
        return self._total

    def busy_area(self) -> float:
        """Grants held, integrated over time (grant-seconds since the scheduler was made): the mean number of slots
        busy between two readings is their difference over the time between them."""
        now = time.monotonic()
        self._area += self._total * (now - self._area_at)
        self._area_at = now
        return self._area

    @asynccontextmanager
    async def slot(self, key: Hashable, *, urgent: bool = False) -> AsyncIterator[Grant]:
        grant = await self.acquire(key, urgent=urgent)
        try:
            yield grant
        finally:
            grant.release()

    def stats(self) -> SchedulerStats:
        urgent, normal = self._levels
        waiting = {k: len(q) for k, q in normal.queues.items() if q}
        for k, q in urgent.queues.items():
            if q:
                waiting[k] = waiting.get(k, 0) + len(q)
        return SchedulerStats(
            running=self._total,
            waiting=waiting,
            running_per_key={k: n for k, n in self._running.items() if n},
            waiting_urgent={k: len(q) for k, q in urgent.queues.items() if q},
        )

    # -- internals ------------------------------------------------------------------------------

    def _forget(self, level: _Level, key: Hashable, fut: asyncio.Future[Grant]) -> None:
        queue = level.queues.get(key)
        if queue is None:
            return
        for waiter in queue:
            if waiter.fut is fut:
                queue.remove(waiter)
                break
        if not queue:
            level.queues.pop(key, None)
            level.served.pop(key, None)
        self._dispatch()

    def _release(self, key: Hashable) -> None:
        self.busy_area()
        self._total -= 1
        n = self._running.get(key, 0) - 1
        if n > 0:
            self._running[key] = n
        else:
            self._running.pop(key, None)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._total < self.max_concurrency:
            if not self._grant_one():
                break  # nobody waits, or every waiting key is at its limit
        if self.on_change is not None:
            self.on_change()

    def _grant_one(self) -> bool:
        """Grant the waiter that goes first and whose key is under its limit; False when there is none.

        First: urgent waiters without a deadline, and waiters whose deadline has come (speech about to run dry,
        at either level); by when they are due. Then every other waiter by when it is due: a later segment of
        urgent speech with enough audio in hand waits like any other (it does not hold back readout's first
        segments for as long as it has audio to play)."""
        now = time.monotonic()
        while True:
            best, best_at = None, (2, math.inf, math.inf)
            for level in self._levels:
                for key, queue in level.queues.items():
                    if self._running.get(key, 0) >= self.per_key_limit:
                        continue
                    waiter = queue[0]
                    due, deadline = level.due(key, waiter)
                    first = (level is self._levels[0] and not deadline) or (deadline and due <= now)
                    at = (0 if first else 1, due, waiter.seq)
                    if at < best_at:
                        best, best_at = (level, key), at
            if best is None:
                return False
            level, key = best
            queue = level.queues[key]
            waiter = queue.popleft()
            if queue:  # its next waiter goes behind those already waiting
                level.served[key] = time.monotonic()
            else:  # (a waiter that comes later arrives after now anyway)
                level.queues.pop(key, None)
                level.served.pop(key, None)
            if waiter.fut.done():  # cancelled but not yet forgotten
                continue
            self.busy_area()
            self._total += 1
            self._running[key] = self._running.get(key, 0) + 1
            waiter.fut.set_result(Grant(self, key))
            return True


_SEQ = itertools.count()


class _Waiter:
    """One acquire: its future, when it arrived, and when it is due (if it says)."""

    __slots__ = ("fut", "due", "arrived", "seq")

    def __init__(self, fut: asyncio.Future[Grant], due: Callable[[], float | None] | None) -> None:
        self.fut = fut
        self.due = due
        self.arrived = time.monotonic()
        self.seq = next(_SEQ)


class _Level:
    """One priority level's waiters: a FIFO per key, and when each key was last served."""

    __slots__ = ("queues", "served")

    def __init__(self) -> None:
        self.queues: dict[Hashable, deque[_Waiter]] = {}
        self.served: dict[Hashable, float] = {}

    def due(self, key: Hashable, waiter: _Waiter) -> tuple[float, bool]:
        """When `waiter` is due, and whether by a deadline of its own (its `due` says one now: speech being heard)."""
        at = waiter.due() if waiter.due is not None else None
        if at is not None:
            return at, True
        return max(waiter.arrived, self.served.get(key, -math.inf)), False
