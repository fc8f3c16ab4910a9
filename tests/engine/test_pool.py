"""WorkerPool: a parked thread holds nothing of the calls it ran, and shutdown waits for idle threads."""

from __future__ import annotations

import gc
import time
import weakref

import pytest

from engine.backends.pool import WorkerPool


class _Held:
    """Stands for a native resource (a soxr resampler) reachable from a failed call's traceback."""


def _fail_holding(registry: list[weakref.ref]) -> None:
    held = _Held()
    registry.append(weakref.ref(held))
    raise ValueError("synthesis failed")


def test_parked_thread_keeps_no_finished_call_alive() -> None:
    pool = WorkerPool(1)
    refs: list[weakref.ref] = []
    fut = pool.submit(lambda: _fail_holding(refs))
    with pytest.raises(ValueError):
        fut.result(timeout=10)
    del fut
    # once the thread is parked in queue.get() nothing may hold the failed call: before the fix its
    # frame kept (future, call), so the exception's traceback kept `held` alive until the process
    # exited (nanobind's leak report at exit when `held` was a soxr resampler)
    deadline = time.monotonic() + 5
    while refs[0]() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
        gc.collect()
    assert refs[0]() is None
    pool.shutdown()


def test_shutdown_waits_for_idle_threads() -> None:
    pool = WorkerPool(2)
    pool.submit(lambda: 1).result(timeout=10)
    threads = list(pool._threads)
    pool.shutdown()
    assert not any(t.is_alive() for t in threads)
