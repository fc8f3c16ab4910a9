"""The engine's slots, earliest deadline first: each unit of work says when it must start (engine/realtime.py), a
per-key cap, and units with no deadline now (made ahead of their turn) taking turns by key after every deadline."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

Deadline = Callable[[], float | None]  # when a unit must start (the clock's seconds); None: no deadline now


@dataclass(frozen=True)
class SchedulerStats:
    running: int
    waiting: dict[Hashable, int]  # all waiters per key, urgent ones included
    running_per_key: dict[Hashable, int]
    waiting_urgent: dict[Hashable, int] = field(default_factory=dict)  # asked-for speech's waiters per key


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
            self._scheduler._release(self)


class Scheduler:
    """At most `max_concurrency` grants at once, at most `per_key_limit` per key.

    Earliest deadline first: among the keys under their cap, the waiter whose `deadline` (asked at each grant) is
    earliest goes; at the same deadline asked-for speech (`urgent`) first, then in the order they came. A waiter whose
    deadline says None (speech no listener waits for yet) comes after every deadline, keys taking turns (due when it
    arrived, or when its key was last served if later), so one busy key cannot starve another. A unit is not
    preempted: a first unit may wait for the slot of a unit with slack that started before it came, at most one unit's
    making time (the start rule prices that: engine/realtime.py). A waiter that is cancelled leaves the queue; one
    cancelled just as it was granted gives the slot back.
    Must be used from one event loop; `clock` is the engine's (the loop's time in the simulator).
    """

    def __init__(self, max_concurrency: int, per_key_limit: int | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.per_key_limit = max(1, per_key_limit) if per_key_limit else max_concurrency
        self.clock = clock
        self._queues: dict[Hashable, deque[_Waiter]] = {}  # waiters per key, in order
        self._served: dict[Hashable, float] = {}  # when each key with waiters was last served
        self._running: dict[Hashable, int] = {}
        self._total = 0
        self._area = 0.0  # grants held times seconds, up to _area_at (how busy the slots were, integrated)
        self._area_at: float | None = None
        self.on_change: Callable[[], None] | None = None  # told after each waiter, grant and release

    # -- public ---------------------------------------------------------------------------------

    async def acquire(self, key: Hashable, *, deadline: Deadline | None = None, urgent: bool = False) -> Grant:
        """A slot for `key`'s next unit, by its `deadline`; `urgent`: asked-for speech (counted apart in stats, for the
        engine's view of the load)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Grant] = loop.create_future()
        waiter = _Waiter(fut, deadline, self.clock(), urgent)
        self._queues.setdefault(key, deque()).append(waiter)
        self._dispatch()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                fut.result().release()  # granted in the same instant it was cancelled
            else:
                self._forget(key, fut)
            raise

    def keep(self, grant: Grant, at: float | None) -> bool:
        """Whether `grant`'s key may keep its slot for its next unit, due at `at` (None: no deadline): no other waiter
        that could take the slot goes before it, its own key's included (the slot passes at a unit's boundary as if
        the next unit had asked, without the gap in which a later waiter would take it). False: the caller releases it
        and asks again."""
        if grant.released or at is None:
            return False
        best = self._best(freed=grant.key)
        return best is None or (at, -1) < best[1][:2]

    @property
    def running(self) -> int:
        """Grants held now."""
        return self._total

    def busy_area(self) -> float:
        """Grants held, integrated over time (grant-seconds since the first reading): the mean number of slots busy
        between two readings is their difference over the time between them."""
        now = self.clock()
        if self._area_at is not None:
            self._area += self._total * (now - self._area_at)
        self._area_at = now
        return self._area

    @asynccontextmanager
    async def slot(self, key: Hashable, *, deadline: Deadline | None = None) -> AsyncIterator[Grant]:
        grant = await self.acquire(key, deadline=deadline)
        try:
            yield grant
        finally:
            grant.release()

    def stats(self) -> SchedulerStats:
        waiting = {k: len(q) for k, q in self._queues.items() if q}
        urgent = {k: n for k, q in self._queues.items() if (n := sum(w.urgent for w in q))}
        return SchedulerStats(
            running=self._total,
            waiting=waiting,
            running_per_key={k: n for k, n in self._running.items() if n},
            waiting_urgent=urgent,
        )

    # -- internals ------------------------------------------------------------------------------

    def _forget(self, key: Hashable, fut: asyncio.Future[Grant]) -> None:
        queue = self._queues.get(key)
        if queue is None:
            return
        for waiter in queue:
            if waiter.fut is fut:
                queue.remove(waiter)
                break
        if not queue:
            self._queues.pop(key, None)
            self._served.pop(key, None)
        self._dispatch()

    def _release(self, grant: Grant) -> None:
        self.busy_area()
        self._total -= 1
        n = self._running.get(grant.key, 0) - 1
        if n > 0:
            self._running[grant.key] = n
        else:
            self._running.pop(grant.key, None)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._grant_one():
            pass
        if self.on_change is not None:
            self.on_change()

    def _best(self, freed: Hashable = None) -> tuple[Hashable, tuple[float, float, int], _Waiter] | None:
        """The key whose waiter goes first (under its cap, with one of `freed`'s grants counted as released), its order
        and the waiter."""
        best: tuple[Hashable, tuple[float, float, int], _Waiter] | None = None
        for key, queue in self._queues.items():
            if self._running.get(key, 0) - (key == freed) >= self.per_key_limit:
                continue
            for waiter in queue:  # (a key's speech being heard goes before its own speech made ahead)
                at = waiter.deadline() if waiter.deadline is not None else None
                # no deadline: after every deadline, keys in turn (by arrival, or the key's last service if later)
                order = (at, float(not waiter.urgent), waiter.seq) if at is not None else (
                    math.inf, max(waiter.arrived, self._served.get(key, -math.inf)), waiter.seq)
                if best is None or order < best[1]:
                    best = (key, order, waiter)
        return best

    def _grant_one(self) -> bool:
        """Grant the waiter that goes first; False when none may go now (every slot busy, or nobody waits)."""
        while self._total < self.max_concurrency:
            best = self._best()
            if best is None:
                return False
            key, _order, waiter = best
            queue = self._queues[key]
            queue.remove(waiter)
            if queue:  # its next waiter goes behind those already waiting
                self._served[key] = self.clock()
            else:  # (a waiter that comes later arrives after now anyway)
                self._queues.pop(key, None)
                self._served.pop(key, None)
            if waiter.fut.done():  # cancelled but not yet forgotten
                continue
            self.busy_area()
            self._total += 1
            self._running[key] = self._running.get(key, 0) + 1
            waiter.fut.set_result(Grant(self, key))
            return True
        return False


_SEQ = itertools.count()


class _Waiter:
    """One acquire: its future, when it must start (if it says), when it arrived, and whether it is asked-for speech."""

    __slots__ = ("fut", "deadline", "arrived", "urgent", "seq")

    def __init__(self, fut: asyncio.Future[Grant], deadline: Deadline | None, arrived: float, urgent: bool) -> None:
        self.fut = fut
        self.deadline = deadline
        self.arrived = arrived
        self.urgent = urgent
        self.seq = next(_SEQ)
