"""What the CPU backends share: the cores this process may use, threads per inference, and the sentence they warm up
on."""

from __future__ import annotations

import os

from engine.base import EngineError

# The warm-up text: one sentence as long as the engine's longest segment (engine.max_segment_chars, 150).
# onnxruntime keeps each session's memory arena at the largest run it has seen, in power-of-two regions whose
# pages are touched only when a run first reaches them: warmed with "Hi.", a Piper session's RSS grew by ~200 MB
# under traffic, the last ~60 MB in one step at some random later request (bench/soak.py). Warmed with
# this, the arena is that size from the start and ordinary sentences no longer grow it.
WARM_UP_TEXT = (
    "When the old lighthouse keeper finally climbed the narrow stairs that evening, he found the great lamp "
    "dark and cold, and a small gray bird asleep by the rail."
)


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity: taskset, a container's cpuset), not all the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def threads_per_worker(setting: int, workers: int, name: str) -> int:
    """The threads each of `workers` inferences runs: `setting` (the key `name`), or when 0 the usable CPUs shared
    among them (a server pinned to one core that ran 2 threads there synthesized a third slower)."""
    if setting < 0:
        raise EngineError(f"{name} must be 0 (one share of the usable CPUs) or more.")
    return setting or max(1, usable_cores() // max(1, workers))
