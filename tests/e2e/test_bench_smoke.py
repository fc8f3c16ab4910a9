"""bench/e2e.py and bench/playback.py run end to end and print their metric lines (no timing goal is asserted here)."""

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


def test_playback_bench_measures_both_ways_of_playing_and_every_part():
    done = subprocess.run([sys.executable, "bench/playback.py", "--guilds", "3", "--seconds", "2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    values = dict(re.findall(r"^(\w+): (-?[\d.]+)", done.stdout, re.M))
    for part in ("opus_encode_as_before", "opus_encode_with_complexity", "dave_encrypt",
                 "dave_and_transport_encrypt_rtp", "send_audio_packet_all_but_encode"):
        assert float(values[f"part_{part}_us_per_frame"]) > 0, done.stdout
    assert float(values["thread_per_guild_cpu_us_per_frame"]) > 0 and float(values["driver_cpu_us_per_frame"]) > 0
    assert "3 guilds x 100 frames" in done.stdout and re.search(r"^driver_vs_thread_per_guild_cpu: ", done.stdout, re.M)
