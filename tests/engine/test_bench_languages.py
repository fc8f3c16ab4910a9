"""`python -m engine bench --only languages` runs and prints its two lines with their goals (values not judged)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def test_the_languages_bench_prints_detection_p99_and_espeak_against_piper():
    done = subprocess.run([sys.executable, "-m", "engine", "bench", "--only", "languages", "--rounds", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout
    assert re.fullmatch(r"langid_2000_chars_p99_ms: \d+\.\d{3} \(goal <= 5 ms\) (OK|MISSED)  \[300 runs of each: "
                        r"French p99 [\d.]+ ms, Chinese p99 [\d.]+ ms, random 4-byte p99 [\d.]+ ms\]",
                        lines[0]), lines[0]
    assert re.fullmatch(r"espeak_vs_piper_first_frame: \d+\.\d{3} \(goal <= 1\.0\) (OK|MISSED)  \[eSpeak NG [\d.]+ ms "
                        r"vs Piper [\d.]+ ms to the first frame, medians of \d+, the same sentence\]",
                        lines[1]), lines[1]
