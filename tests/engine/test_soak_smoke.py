"""bench/soak.py runs against a real engine server and prints its samples and goal lines."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]


def test_soak_server_smoke_prints_samples_and_goals() -> None:
    done = subprocess.run([sys.executable, "bench/soak.py", "--only", "server", "--warmup", "5", "--duration", "10",
                           "--clients", "2"], cwd=ROOT, capture_output=True, text=True, timeout=360)
    out = done.stdout
    for phase in ("start", "after warm-up", "end"):
        assert re.search(rf"^server: {phase} RSS \d+ MB, threads \d+, open files \d+, sessions \d+$", out, re.M), out
    goals = re.search(r"^soak: (\d+)/(\d+) goals met$", out, re.M)
    assert goals and int(goals[2]) >= 7, out + done.stderr[-2000:]
    assert "every request answered" in out and "0 tracebacks" in out
    assert done.returncode == (0 if goals[1] == goals[2] else 1)
