"""The load benchmark's short version: nothing accepted is lost and every metric line is printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
LINES = ["accepted:", "spoken:", "rejected with a message:", "skipped by a user:", "lost:", "TTFA p50:",
         "underruns:", "peak resident memory:", "event-loop lag p99:", "tasks left running:"]


def test_quick_load_run_loses_nothing_and_prints_every_metric():
    run = subprocess.run([sys.executable, "-m", "bench.load", "--quick"], cwd=ROOT, capture_output=True,
                         text=True, timeout=240)
    out = run.stdout
    for line in LINES:
        assert line in out, (line, out, run.stderr[-3000:])
    values = {ln.split(":", 1)[0]: ln.split(":", 1)[1].split()[0] for ln in out.splitlines() if ":" in ln}
    assert int(values["lost"]) == 0, out
    assert int(values["accepted"]) > 50, out
    assert int(values["spoken"]) > 0, out
    assert "unanswered: 0" in out, out
    assert run.returncode == 0, (out, run.stderr[-3000:])
