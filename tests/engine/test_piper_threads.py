"""Threads per inference (engine.piper.intra_op_threads): set, or the CPUs this process may use (its affinity) shared
among the workers."""

from __future__ import annotations

import os

import pytest

from engine.backends.cpu import threads_per_worker
from engine.base import EngineError


@pytest.mark.parametrize(("cpus", "workers", "threads"), [({0}, 1, 1), ({0, 1}, 1, 2), ({0, 1}, 2, 1),
                                                          ({0, 1, 2, 3}, 2, 2),
                                                          ({0}, 2, 1)])
def test_auto_shares_the_cpus_this_process_may_use(monkeypatch: pytest.MonkeyPatch, cpus: set[int], workers: int,
                                                   threads: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: cpus)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the machine's count is not what a pinned process may use
    assert threads_per_worker(0, workers, "engine.piper.intra_op_threads") == threads


def test_a_set_count_wins_and_a_negative_one_is_refused() -> None:
    assert threads_per_worker(3, 2, "engine.piper.intra_op_threads") == 3
    with pytest.raises(EngineError, match="intra_op_threads"):
        threads_per_worker(-1, 1, "engine.piper.intra_op_threads")
