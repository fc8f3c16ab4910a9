"""bench/scaleout.py runs two real engine servers behind a real nginx and prints its two ratios."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_scaleout_bench_prints_both_ratios() -> None:
    done = subprocess.run([sys.executable, "bench/scaleout.py", "--seconds", "2", "--rounds", "1", "--ttfa-pairs", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=360)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("scaleout_throughput_two_vs_one", "scaleout_ttfa_nginx_vs_direct"):
        found = re.search(rf"^{name}: (\d+\.\d+) \(goal [^)]+\) (OK|MISSED)  \[.+\]$", done.stdout, re.M)
        assert found and float(found[1]) > 0, done.stdout
