"""`python -m engine say` on ordinary and hostile text: a valid 48 kHz WAV or one error line, exit 2."""

from __future__ import annotations

import subprocess
import sys
import wave
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(180)

ZALGO = "Z" + "\u0336\u0321\u0322\u031b\u0316\u0317" * 12 + "algo speaks"
HOSTILE = {
    "empty": "",
    "twenty_thousand": "x" * 20_000,
    "control_bytes": "he\x00\x01\x02\x1b[31mllo\x7f th\x08ere\x0c",
    "zalgo": ZALGO,
    "emoji_only": "😀😀🎉🔥👍🏽",
}


def _say(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out.wav"
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "say", *args, "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, input=stdin,
    )
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    return proc, out


def _check_wav(path: Path) -> float:
    with wave.open(str(path)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (48000, 2, 2)
        assert w.getnframes() % 960 == 0
        return w.getnframes() / 48000


def test_say_writes_what_the_bot_plays(tmp_path: Path) -> None:
    proc, out = _say(tmp_path, "Hello from the engine, this is a test.", "--speed", "1.2")
    assert proc.returncode == 0, proc.stderr
    assert 1.0 < _check_wav(out) < 5.0


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_gives_wav_or_one_error_line(tmp_path: Path, name: str) -> None:
    text = HOSTILE[name]
    # argv cannot carry NUL bytes: such text goes through standard input ("-")
    proc, out = _say(tmp_path, "-", stdin=text) if "\x00" in text else _say(tmp_path, text)
    if proc.returncode == 0:
        assert _check_wav(out) > 0
    else:
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
        assert not out.exists()


def test_bad_options_exit_2(tmp_path: Path) -> None:
    for args in (["hi", "--speed", "0"], ["hi", "--voice", "nobody"], ["hi", "--model", "/nonexistent.onnx"]):
        proc, _ = _say(tmp_path, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: "), proc.stderr
