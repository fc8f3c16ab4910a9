"""Global synthesis capacity shared fairly: FIFO within a key, round-robin across keys, a per-key limit."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerStats:
    running: int
    waiting: dict[Hashable, int]
    running_per_key: dict[Hashable, int]


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
    served goes to the back of the ring), so one busy key cannot starve the others. A waiter that is
    cancelled leaves the queue; one cancelled just as it was granted gives the slot back. Must be
    used from one event loop.
    """

    def __init__(self, max_concurrency: int, per_key_limit: int | None = None) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.per_key_limit = max(1, per_key_limit) if per_key_limit else max_concurrency
        self._queues: dict[Hashable, deque[asyncio.Future[Grant]]] = {}
        self._ring: deque[Hashable] = deque()  # keys with waiters, in serving order
        self._running: dict[Hashable, int] = {}
        self._total = 0

    # -- public ---------------------------------------------------------------------------------

    async def acquire(self, key: Hashable) -> Grant:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Grant] = loop.create_future()
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            self._ring.append(key)
        queue.append(fut)
        self._dispatch()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                fut.result().release()  # granted in the same instant it was cancelled
            else:
                self._forget(key, fut)
            raise

    @asynccontextmanager
    async def slot(self, key: Hashable) -> AsyncIterator[Grant]:
        grant = await self.acquire(key)
        try:
            yield grant
        finally:
            grant.release()

    def stats(self) -> SchedulerStats:
        return SchedulerStats(
            running=self._total,
            waiting={k: len(q) for k, q in self._queues.items() if q},
            running_per_key={k: n for k, n in self._running.items() if n},
        )

    # -- internals ------------------------------------------------------------------------------

    def _forget(self, key: Hashable, fut: asyncio.Future[Grant]) -> None:
        queue = self._queues.get(key)
        if queue is None:
            return
        try:
            queue.remove(fut)
        except ValueError:
            pass
        if not queue:
            self._drop_key(key)
        self._dispatch()

    def _drop_key(self, key: Hashable) -> None:
        self._queues.pop(key, None)
        try:
            self._ring.remove(key)
        except ValueError:
            pass

    def _release(self, key: Hashable) -> None:
        self._total -= 1
        n = self._running.get(key, 0) - 1
        if n > 0:
            self._running[key] = n
        else:
            self._running.pop(key, None)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._total < self.max_concurrency and self._ring:
            for _ in range(len(self._ring)):
                key = self._ring[0]
                if self._running.get(key, 0) < self.per_key_limit:
                    break
                self._ring.rotate(-1)
            else:
                return  # every waiting key is at its limit
            key = self._ring.popleft()
            queue = self._queues[key]
            fut = queue.popleft()
            if fut.done():  # cancelled but not yet forgotten
                if queue:
                    self._ring.appendleft(key)
                else:
                    self._queues.pop(key, None)
                continue
            self._total += 1
            self._running[key] = self._running.get(key, 0) + 1
            fut.set_result(Grant(self, key))
            if queue:
                self._ring.append(key)  # back of the ring: the others go first
            else:
                self._queues.pop(key, None)
