"""Scheduler: capacity, per-key limit, FIFO within a key, round-robin across keys, cancellation safety."""

from __future__ import annotations

import asyncio

import pytest

from engine.scheduler import Scheduler

pytestmark = pytest.mark.timeout(30)


async def _work(sched: Scheduler, key: object, idx: int, log: list[tuple[str, object, int]], hold: float) -> None:
    async with sched.slot(key):
        log.append(("start", key, idx))
        await asyncio.sleep(hold)  # stands in for synthesis
        log.append(("end", key, idx))


async def test_eight_keys_five_segments_first_before_any_third() -> None:
    sched = Scheduler(max_concurrency=2, per_key_limit=1)
    log: list[tuple[str, object, int]] = []
    tasks = [asyncio.create_task(_work(sched, k, i, log, 0.005)) for k in range(8) for i in range(5)]
    await asyncio.gather(*tasks)
    pos = {(e, k, i): n for n, (e, k, i) in enumerate(log)}
    last_first_end = max(pos[("end", k, 0)] for k in range(8))
    first_third_start = min(pos[("start", k, 2)] for k in range(8))
    assert last_first_end < first_third_start
    for k in range(8):  # FIFO within a key
        starts = [i for e, kk, i in log if e == "start" and kk == k]
        assert starts == list(range(5))


async def test_capacity_and_per_key_limit_hold() -> None:
    sched = Scheduler(max_concurrency=3, per_key_limit=2)
    running: dict[object, int] = {}
    peak = {"total": 0, "per_key": 0}

    async def job(key: object) -> None:
        async with sched.slot(key):
            running[key] = running.get(key, 0) + 1
            peak["total"] = max(peak["total"], sum(running.values()))
            peak["per_key"] = max(peak["per_key"], running[key])
            await asyncio.sleep(0.002)
            running[key] -= 1

    await asyncio.gather(*(job(k % 2) for k in range(60)))  # 2 keys, 3 slots: one key gets 2
    assert peak == {"total": 3, "per_key": 2}
    assert sched.stats().running == 0 and sched.stats().waiting == {}


async def test_busy_key_cannot_starve_a_newcomer() -> None:
    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    log: list[tuple[str, object, int]] = []
    busy = [asyncio.create_task(_work(sched, "busy", i, log, 0.005)) for i in range(20)]
    await asyncio.sleep(0.012)
    newcomer = asyncio.create_task(_work(sched, "new", 0, log, 0.005))
    await newcomer
    busy_done_before = sum(1 for e, k, _ in log if e == "end" and k == "busy")
    assert busy_done_before <= 4  # served within a turn or two, not after all 20
    await asyncio.gather(*busy)


async def test_cancelled_waiter_leaves_the_queue_and_leaks_nothing() -> None:
    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    holder = await sched.acquire("a")
    waiter = asyncio.create_task(sched.acquire("b"))
    await asyncio.sleep(0)
    assert sched.stats().waiting == {"b": 1}
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert sched.stats().waiting == {}
    holder.release()
    holder.release()  # idempotent
    assert sched.stats().running == 0
    async with sched.slot("c"):
        assert sched.stats().running == 1


async def test_cancel_in_the_instant_of_the_grant_gives_the_slot_back() -> None:
    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    holder = await sched.acquire("a")
    waiter = asyncio.create_task(sched.acquire("b"))
    await asyncio.sleep(0)
    holder.release()  # grants b's future...
    waiter.cancel()  # ...and b is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert sched.stats().running == 0
    grant = await asyncio.wait_for(sched.acquire("c"), 1)
    grant.release()


async def test_cancelling_a_holder_frees_its_slot_at_once() -> None:
    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    log: list[tuple[str, object, int]] = []
    long = asyncio.create_task(_work(sched, "a", 0, log, 60))
    await asyncio.sleep(0.01)
    other = asyncio.create_task(_work(sched, "b", 0, log, 0))
    await asyncio.sleep(0.01)
    long.cancel()
    await asyncio.wait_for(other, 1)
    assert ("end", "b", 0) in log


class FakeClock:
    """The engine's clock in tests: seconds that move only when told."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def _order(sched: Scheduler, waiters: list[tuple[str, dict]]) -> list[str]:
    """The order in which `waiters` (key, acquire's keywords) are granted the one slot, each released at once."""
    held = await sched.acquire("busy")
    order: list[str] = []

    async def wait(key: str, kwargs: dict) -> None:
        grant = await sched.acquire(key, **kwargs)
        order.append(key)
        grant.release()

    tasks = []
    for key, kwargs in waiters:
        tasks.append(asyncio.create_task(wait(key, kwargs)))
        await asyncio.sleep(0)  # each arrives after the one before
    held.release()
    await asyncio.gather(*tasks)
    return order


async def test_the_earliest_deadline_goes_first_and_no_deadline_after_every_deadline() -> None:
    clock = FakeClock()
    sched = Scheduler(max_concurrency=1, per_key_limit=1, clock=clock)
    order = await _order(sched, [
        ("made-ahead", {}),  # no listener waits for it yet: no deadline
        ("in-hand", {"deadline": lambda: clock.t + 5.0}),  # 5 s of audio still to play
        ("first", {"deadline": lambda: clock.t + 1.0}),  # a new utterance's first unit
        ("running-dry", {"deadline": lambda: clock.t - 0.5}),  # runs out before it is made
        ("paused", {"deadline": lambda: None}),  # its listener stopped waiting
    ])
    assert order == ["running-dry", "first", "in-hand", "made-ahead", "paused"]


async def test_deadlines_are_asked_at_each_grant() -> None:
    """A deadline is the stream's now, not its arrival's: one whose audio in hand ran low since goes first."""
    clock = FakeClock()
    sched = Scheduler(max_concurrency=1, per_key_limit=1, clock=clock)
    later = {"at": clock.t + 5.0}
    holder = await sched.acquire("busy")
    order: list[str] = []

    async def wait(key: str, deadline) -> None:
        grant = await sched.acquire(key, deadline=deadline)
        order.append(key)
        grant.release()

    tasks = [asyncio.create_task(wait("was-slack", lambda: later["at"])),
             asyncio.create_task(wait("first", lambda: clock.t + 1.0))]
    await asyncio.sleep(0)
    later["at"] = clock.t  # its listener heard on; the audio in hand ran low
    holder.release()
    await asyncio.gather(*tasks)
    assert order == ["was-slack", "first"]


async def test_a_slot_is_kept_for_a_streams_next_unit_only_while_nobody_is_due_before_it() -> None:
    clock = FakeClock()
    sched = Scheduler(max_concurrency=1, per_key_limit=1, clock=clock)
    grant = await sched.acquire("a")
    assert sched.keep(grant, clock.t + 2.0)  # nobody waits
    assert not sched.keep(grant, None)  # no deadline: it asks again, in turn
    waiter = asyncio.create_task(sched.acquire("b", deadline=lambda: clock.t + 1.0))
    await asyncio.sleep(0)
    assert sched.keep(grant, clock.t + 0.5) and not sched.keep(grant, clock.t + 2.0)
    grant.release()
    (await waiter).release()


async def test_waiters_say_whether_they_are_asked_for_speech() -> None:
    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    holder = await sched.acquire("busy")
    tasks = [asyncio.create_task(sched.acquire(k, urgent=u)) for k, u in
             [("readout-a", False), ("say-a", True), ("say-a", True), ("say-b", True)]]
    await asyncio.sleep(0)
    stats = sched.stats()
    assert stats.waiting_urgent == {"say-a": 2, "say-b": 1}
    assert stats.waiting == {"readout-a": 1, "say-a": 2, "say-b": 1}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    holder.release()


async def test_a_slot_is_not_kept_for_a_stream_when_its_own_guilds_other_speech_is_due_first() -> None:
    clock = FakeClock()
    sched = Scheduler(max_concurrency=2, per_key_limit=1, clock=clock)
    grant = await sched.acquire("a")  # a's readout, made ahead of its turn
    say = asyncio.create_task(sched.acquire("a", deadline=lambda: clock.t + 0.5, urgent=True))  # a's /say, waiting
    await asyncio.sleep(0)
    assert not say.done()  # a's one slot is taken
    assert not sched.keep(grant, clock.t + 3.0) and sched.keep(grant, clock.t + 0.1)
    grant.release()
    (await say).release()


async def test_at_the_same_deadline_asked_for_speech_goes_first() -> None:
    clock = FakeClock()
    sched = Scheduler(max_concurrency=1, per_key_limit=1, clock=clock)
    order = await _order(sched, [("readout", {"deadline": lambda: clock.t}),
                                 ("say", {"deadline": lambda: clock.t, "urgent": True})])
    assert order == ["say", "readout"]
