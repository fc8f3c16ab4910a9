"""`python -m engine say --language auto|CODE`: one stderr line names the language and the voice it chose."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.test_cli import _check_wav, _say
from tests.piper_voices import drop_piper_voice

pytestmark = pytest.mark.timeout(180)
FRENCH = "Bonjour tout le monde, je suis ravi de vous retrouver ce soir."
GERMAN = "Guten Abend zusammen, ich freue mich sehr, euch heute alle wiederzusehen."


def _chosen(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("language ")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_auto_detects_french_for_kokoro_and_german_for_espeak(tmp_path: Path):
    proc, out = _say(tmp_path, FRENCH, "--language", "auto")
    assert proc.returncode == 0, proc.stderr
    assert _chosen(proc.stderr) == "language fr (French; detected, 100%), voice default"  # Kokoro's French voice
    assert _check_wav(out) > 1.5
    proc, out = _say(tmp_path, GERMAN, "--language", "auto")  # Kokoro speaks no German: eSpeak NG does
    assert _chosen(proc.stderr) == "language de (German; detected, 100%), voice espeak-ng"
    assert _check_wav(out) > 1.5


def test_a_dropped_voice_speaks_its_language_and_short_text_keeps_the_default(tmp_path: Path):
    drop_piper_voice(tmp_path / "voices", "de_DE-joe-medium", "de_DE")
    proc, _ = _say(tmp_path, GERMAN, "--language", "auto", "--voices-dir", str(tmp_path / "voices"))
    assert proc.returncode == 0, proc.stderr
    assert _chosen(proc.stderr).endswith("voice de_DE-joe-medium") and "language de (German;" in proc.stderr
    proc, _ = _say(tmp_path, "hi there", "--language", "auto")
    assert _chosen(proc.stderr) == "language en (English; too short or unclear to detect: the default), voice default"
    proc, _ = _say(tmp_path, "Hello", "--language", "en")
    assert _chosen(proc.stderr) == "language en (English; given), voice default"


def test_a_bad_language_is_one_error_line(tmp_path: Path):
    proc, out = _say(tmp_path, "Hello", "--language", "not a code")
    assert proc.returncode == 2
    assert proc.stderr == "error: --language takes auto or a language code such as fr, not 'not a code'.\n"
    assert not out.exists()
