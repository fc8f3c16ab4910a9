"""What the soaks measure and share: their sentences, a process's memory and sessions sampled, the requests' tally and
the goals a flat run must meet."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

GROWTH_LIMIT_MB = 50.0  # a flat run's memory may grow at most this much after its warm-up
SENTENCES = [
    "The library opened a new reading room last spring.",
    "Children come after school to read comics and picture books.",
    "On weekends the room hosts talks about local history, gardening and the stars.",
    "The weather this morning was bright and clear, with a gentle breeze from the west.",
]


@dataclass
class Sample:
    rss_mb: float
    threads: int
    files: int
    sessions: int | None

    def line(self) -> str:
        s = "n/a" if self.sessions is None else str(self.sessions)
        return f"RSS {self.rss_mb:.0f} MB, threads {self.threads}, open files {self.files}, sessions {s}"


def sample(pid: int, sessions: int | None = None) -> Sample:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M)[1]) / 1024  # type: ignore[index]
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M)[1])  # type: ignore[index]
    return Sample(rss, threads, len(os.listdir(f"/proc/{pid}/fd")), sessions)


@dataclass
class Tally:
    """Requests by kind: answered as expected, or not (with why)."""

    ok: Counter = field(default_factory=Counter)
    bad: Counter = field(default_factory=Counter)
    why: list[str] = field(default_factory=list)

    def record(self, kind: str, good: bool, why: str = "") -> None:
        (self.ok if good else self.bad)[kind] += 1
        if not good and len(self.why) < 20:
            self.why.append(f"{kind}: {why}")

    def summary(self) -> str:
        kinds = sorted(set(self.ok) | set(self.bad))
        return ", ".join(f"{k} {self.ok[k]}/{self.ok[k] + self.bad[k]}" for k in kinds)


@dataclass
class Goal:
    name: str
    met: bool
    detail: str


def flat_goals(who: str, start: Sample, warm: Sample, end: Sample, tracebacks: int, tally: Tally) -> list[Goal]:
    print(f"{who}: start {start.line()}\n{who}: after warm-up {warm.line()}\n{who}: end {end.line()}")
    growth = end.rss_mb - warm.rss_mb
    goals = [
        Goal(f"{who} RSS growth after warm-up <= {GROWTH_LIMIT_MB:g} MB", growth <= GROWTH_LIMIT_MB,
             f"{growth:+.0f} MB"),
        Goal(f"{who} threads flat", end.threads <= warm.threads + 2, f"{warm.threads} -> {end.threads}"),
        Goal(f"{who} open files flat", end.files <= warm.files + 4, f"{warm.files} -> {end.files}"),
        Goal(f"{who} every request answered", not tally.bad and bool(tally.ok),
             tally.summary() + ("; " + "; ".join(tally.why[:5]) if tally.why else "")),
        Goal(f"{who} 0 tracebacks in its log", tracebacks == 0, f"{tracebacks}"),
    ]
    if warm.sessions is not None and end.sessions is not None:
        goals.append(Goal(f"{who} sessions flat", end.sessions <= warm.sessions, f"{warm.sessions} -> {end.sessions}"))
    return goals


async def rss_series(pid: int, until: float, every: float = 10.0) -> list[int]:
    """RSS of `pid` every `every` seconds until `until` (printed with the samples: is growth levelling off?)."""
    out: list[int] = []
    while time.monotonic() < until:
        out.append(round(sample(pid).rss_mb))
        await asyncio.sleep(every)
    return out
