"""bench/e2e.py runs end to end and prints its metric lines (no timing goals are asserted here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(\w+): (-?[\d.]+) \(goal [^)]+\) (OK|MISSED)", re.M)


def test_e2e_bench_quick_ttfa_prints_its_metrics():
    done = subprocess.run([sys.executable, "bench/e2e.py", "--quick", "--only", "ttfa", "--only", "join",
                           "--runs", "3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    names = [m.group(1) for m in LINE.finditer(done.stdout)]
    assert names == ["ttfa_e2e_vs_engine_p50", "ttfa_e2e_vs_engine_p95", "dave_dropped_frames"], done.stdout
    assert "engine first chunk p50" in done.stdout
    assert re.search(r"^ttfa_after_join_vs_engine: [\d.]+ .*^dave_handshake_ms_p50: ", done.stdout, re.M | re.S)
    assert re.search(r"^summary: \d/3 goals met", done.stdout, re.M), done.stdout
