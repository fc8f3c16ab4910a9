"""Every CLI error path exits with exactly its own one-line message, every time (no native leak reports)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = 20
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def _error_paths(tmp: Path) -> dict[str, list[str]]:
    not_audio = tmp / "not-audio.wav"
    out = str(tmp / "out.wav")
    return {
        "say_speed": ["say", "hi", "--speed", "0", "--out", out],
        "say_unknown_voice": ["say", "hi", "--voice", "nobody", "--out", out],  # fails inside synthesis
        "say_missing_model": ["say", "hi", "--model", str(tmp / "none.onnx"), "--out", out],
        "say_out_is_dir": ["say", "hi", "--out", str(tmp)],
        "register_not_audio": ["register", str(not_audio), "--out", str(tmp / "p.json")],
        "register_missing_clip": ["register", str(tmp / "none.wav"), "--out", str(tmp / "p.json")],
        "serve_bad_port": ["serve", "--port", "99999"],
        "unknown_option": ["say", "hi", "--out", out, "--bogus"],
    }


def _stderr(args: list[str]) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "engine", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("name", sorted(_error_paths(Path("/nonexistent"))))
def test_error_path_prints_one_line_every_time(tmp_path: Path, name: str) -> None:
    (tmp_path / "not-audio.wav").write_bytes(b"%PDF-1.4 " + b"x" * 4000)
    args = _error_paths(tmp_path)[name]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: _stderr(args), range(RUNS)))
    for code, err in results:
        assert code == 2, err
        assert err.endswith("\n") and err.count("\n") == 1 and err.startswith("error: "), err
