"""Global synthesis capacity shared fairly: FIFO within a key, round-robin across keys, a per-key limit; urgent
waiters (asked-for speech) are served before the others."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Hashable
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

    Waiters of one key are served in order; keys with waiters take turns (a key that was just
    served goes to the back of the ring), so one busy key cannot starve the others. Urgent waiters have
    rings of their own, served first (the bot's /say before channel readout). A waiter that is
    cancelled leaves the queue; one cancelled just as it was granted gives the slot back. Must be
    used from one event loop.
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

    # -- public ---------------------------------------------------------------------------------

    async def acquire(self, key: Hashable, *, urgent: bool = False) -> Grant:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Grant] = loop.create_future()
        level = self._levels[0 if urgent else 1]
        queue = level.queues.get(key)
        if queue is None:
            queue = level.queues[key] = deque()
            level.ring.append(key)
        queue.append(fut)
        self._dispatch()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                fut.result().release()  # granted in the same instant it was cancelled
            else:
                self._forget(level, key, fut)
            raise

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
        try:
            queue.remove(fut)
        except ValueError:
            pass
        if not queue:
            level.queues.pop(key, None)
            try:
                level.ring.remove(key)
            except ValueError:
                pass
        self._dispatch()

    def _release(self, key: Hashable) -> None:
        self._total -= 1
        n = self._running.get(key, 0) - 1
        if n > 0:
            self._running[key] = n
        else:
            self._running.pop(key, None)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._total < self.max_concurrency:
            if not any(self._grant_one(level) for level in self._levels):
                return  # nobody waits, or every waiting key is at its limit

    def _grant_one(self, level: _Level) -> bool:
        """Grant the next waiter of `level` whose key is under its limit; False when there is none."""
        ring = level.ring
        while ring:
            for _ in range(len(ring)):
                if self._running.get(ring[0], 0) < self.per_key_limit:
                    break
                ring.rotate(-1)
            else:
                return False
            key = ring.popleft()
            queue = level.queues[key]
            fut = queue.popleft()
            if fut.done():  # cancelled but not yet forgotten
                if queue:
                    ring.appendleft(key)
                else:
                    level.queues.pop(key, None)
                continue
            self._total += 1
            self._running[key] = self._running.get(key, 0) + 1
            fut.set_result(Grant(self, key))
            if queue:
                ring.append(key)  # back of the ring: the others go first
            else:
                level.queues.pop(key, None)
            return True
        return False


class _Level:
    """One priority level's waiters: a FIFO per key and the ring of keys with waiters."""

    __slots__ = ("queues", "ring")

    def __init__(self) -> None:
        self.queues: dict[Hashable, deque[asyncio.Future[Grant]]] = {}
        self.ring: deque[Hashable] = deque()
