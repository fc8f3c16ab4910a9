"""A warmed-up Piper session is at its steady memory: ordinary sentences afterwards do not grow the process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.backends.cpu import WARM_UP_TEXT
from engine.backends.piper.backend import PiperBackend
from engine.base import Voice
from engine.settings import EngineSettings

ROOT = Path(__file__).resolve().parents[2]

# In a fresh process (RSS of this one carries every earlier test): warm up, then the soak's sentences twice.
AFTER_WARM_UP = """
import json
from bench.soak_measures import SENTENCES
from engine.base import Voice
from engine.backends.piper.backend import PiperBackend

def rss_mb():
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))

backend = PiperBackend(workers=1)
backend.warm_up()
before = rss_mb()
for text in SENTENCES * 2:
    for _ in backend.synthesize(text, Voice()):
        pass
print(json.dumps([before, rss_mb()]))
"""


def test_warm_up_text_is_one_sentence_as_long_as_the_longest_segment(piper_backend: PiperBackend) -> None:
    assert len(WARM_UP_TEXT) >= EngineSettings().max_segment_chars
    assert len(list(piper_backend.synthesize(WARM_UP_TEXT, Voice()))) == 1  # Piper runs one sentence at a time


@pytest.mark.slow
def test_sentences_after_warm_up_do_not_grow_memory() -> None:
    # Warmed with "Hi." (before the fix) these 8 sentences grew RSS by ~100 MB: onnxruntime's arena grew
    # and touched new pages; warmed with WARM_UP_TEXT they fit in what the warm-up already touched.
    out = subprocess.run([sys.executable, "-c", AFTER_WARM_UP], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert after - before < 25, f"RSS grew {after - before:.0f} MB after warm-up ({before:.0f} -> {after:.0f} MB)"
