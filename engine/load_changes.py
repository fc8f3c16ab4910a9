"""LoadChanges: wakes whoever waits for the engine's load to change (a slot asked for, granted or freed, a new
speed, a competing key forgotten), so the speech side waits on the change instead of polling the share."""

from __future__ import annotations

import asyncio


class LoadChanges:
    """One event loop's waiters for the next change of the engine's load."""

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def notify(self) -> None:
        """The load changed: wake every waiter (on the loop)."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def notify_later(self, delay: float) -> None:
        """The load will change in `delay` s by itself (a competing key ages out): notify then."""
        loop = asyncio.get_running_loop()
        at = loop.time() + delay
        if self._timer is not None and self._timer_at <= at:
            return  # an earlier notice is due; the waiters look again then
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = loop.call_at(at, self._fire), at

    def _fire(self) -> None:
        self._timer = None
        self.notify()

    async def wait(self) -> None:
        """Return at the next change."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut in self._waiters:
                self._waiters.remove(fut)
            raise

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.notify()
