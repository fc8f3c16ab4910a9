"""The load benchmark's short version: every accepted item is heard, told or skipped (from the sandbox's side),
every command is answered, and every goal line is printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
GOALS = ["underruns_per_100_utterances:", "say_ttfa_p95_s:", "readout_delay_p95_s:", "lost_heard:",
         "bot_peak_rss_mb:", "loop_lag_p99_ms:", "commands_unanswered:"]


def test_quick_load_run_loses_nothing_and_prints_every_goal():
    run = subprocess.run([sys.executable, "-m", "bench.load", "--quick"], cwd=ROOT, capture_output=True,
                         text=True, timeout=420)
    out = run.stdout
    for line in ["offered_vs_capacity:", *GOALS]:
        assert line in out, (line, out, run.stderr[-3000:])
    values = {ln.split(":", 1)[0]: ln.split(":", 1)[1].split()[0] for ln in out.splitlines() if ":" in ln}
    assert int(values["lost_heard"]) == 0, out
    assert int(values["commands_unanswered"]) == 0, out
    accepted = out.split("accepted ", 1)[1]
    assert int(accepted.split(":")[0]) > 20 and int(accepted.split("heard ")[1].split(",")[0]) > 10, out
    assert "audio of no item 0 spurts" in out, out
    assert out.rstrip().splitlines()[-1].startswith("load: "), out
