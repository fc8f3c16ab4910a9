"""The engine's capacity change: waiters wake when a slot is asked for, granted or freed, and when a key ages out."""

from __future__ import annotations

import asyncio

import pytest

from engine.load_changes import LoadChanges
from engine.scheduler import Scheduler

pytestmark = pytest.mark.timeout(30)


async def test_waiters_wake_on_notify_and_a_cancelled_one_is_forgotten():
    changes = LoadChanges()
    first, second = (asyncio.create_task(changes.wait()) for _ in range(2))
    await asyncio.sleep(0)
    second.cancel()
    await asyncio.sleep(0)
    changes.notify()
    await asyncio.wait_for(first, 5)
    assert second.cancelled() and not changes._waiters


async def test_a_later_notice_fires_once_at_the_earliest_time_asked():
    changes = LoadChanges()
    waiter = asyncio.create_task(changes.wait())
    changes.notify_later(0.01)
    changes.notify_later(60.0)  # later than the one pending: the waiters look again at the earlier one
    await asyncio.wait_for(waiter, 5)
    changes.close()


async def test_the_scheduler_tells_of_each_grant_and_release():
    sched = Scheduler(max_concurrency=1)
    changes = LoadChanges()
    sched.on_change = changes.notify
    woke = asyncio.create_task(changes.wait())
    await asyncio.sleep(0)
    grant = await sched.acquire("a")
    await asyncio.wait_for(woke, 5)
    woke = asyncio.create_task(changes.wait())
    await asyncio.sleep(0)
    grant.release()
    await asyncio.wait_for(woke, 5)
