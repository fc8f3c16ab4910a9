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


async def test_urgent_waiters_are_served_before_the_others_and_fairly_among_themselves():
    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    holder = await sched.acquire("busy")
    order: list[str] = []

    async def wait(key: str, urgent: bool) -> None:
        grant = await sched.acquire(key, urgent=urgent)
        order.append(key)
        grant.release()

    tasks = [asyncio.create_task(wait(k, u)) for k, u in
             [("readout-a", False), ("readout-b", False), ("say-a", True), ("say-b", True), ("say-a", True)]]
    await asyncio.sleep(0)
    stats = sched.stats()
    assert stats.waiting_urgent == {"say-a": 2, "say-b": 1}
    assert stats.waiting == {"readout-a": 1, "readout-b": 1, "say-a": 2, "say-b": 1}
    holder.release()
    await asyncio.gather(*tasks)
    assert order == ["say-a", "say-b", "say-a", "readout-a", "readout-b"]


async def test_a_segment_with_audio_in_hand_lets_a_first_segment_go_first_and_one_running_dry_goes_before_it() -> None:
    import time

    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    held = await sched.acquire("busy")  # the only slot is taken while the others queue up
    order: list[str] = []

    async def wait(key: str, due=None) -> None:
        grant = await sched.acquire(key, due=due)
        order.append(key)
        grant.release()

    now = time.monotonic()
    tasks = [asyncio.create_task(wait("in-hand", lambda: now + 5.0))]  # 5 s of audio still to play
    await asyncio.sleep(0.01)
    tasks.append(asyncio.create_task(wait("first")))  # a new utterance's first segment, arrived later
    await asyncio.sleep(0.01)
    tasks.append(asyncio.create_task(wait("running-dry", lambda: now - 0.5)))  # runs out before it is made
    await asyncio.sleep(0.01)
    held.release()
    await asyncio.gather(*tasks)
    assert order == ["running-dry", "first", "in-hand"]


async def test_asked_for_speech_with_audio_in_hand_lets_readout_start_and_goes_first_once_it_runs_dry() -> None:
    """A long /say's later segments must not hold back every readout's first segment while it has audio to
    play (they did, for 10 s, under bench/load's under plan); once its audio runs low it goes first again."""
    import time

    sched = Scheduler(max_concurrency=1, per_key_limit=1)
    held = await sched.acquire("busy")
    order: list[str] = []

    async def wait(key: str, urgent: bool, due=None) -> None:
        grant = await sched.acquire(key, urgent=urgent, due=due)
        order.append(key)
        grant.release()

    now = time.monotonic()
    tasks = [asyncio.create_task(wait("say-in-hand", True, lambda: now + 5.0)),
             asyncio.create_task(wait("say-running-dry", True, lambda: now - 0.5))]
    await asyncio.sleep(0.01)
    tasks += [asyncio.create_task(wait("readout-first", False)),
              asyncio.create_task(wait("readout-running-dry", False, lambda: now - 0.7)),
              asyncio.create_task(wait("say-first", True))]
    await asyncio.sleep(0.01)
    held.release()
    await asyncio.gather(*tasks)
    assert order == ["readout-running-dry", "say-running-dry", "say-first", "readout-first", "say-in-hand"]
