"""`python -m engine serve` takes its settings from config.toml, VOICEBOT__ENGINE__ overrides and flags, in order."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from engine.__main__ import build_parser
from engine.backends.cosyvoice.settings import CosyVoiceSettings
from engine.cli.serve import settings_from

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def _args(*argv: str):
    parser, _ = build_parser("serve")
    return parser.parse_args(["serve", *argv])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "engine.toml"
    cfg.write_text('[engine]\nworkers = 1\n[engine.server]\nport = 8700\nmax_streams = 5\n'
                   '[engine.cosyvoice]\nmodel_dir = "/models/from-file"\n')
    env = {"VOICEBOT__ENGINE__SERVER__PORT": "8800", "VOICEBOT__ENGINE__COSYVOICE__MODEL_DIR": "/models/cv2"}
    s = settings_from(_args("--config", str(cfg)), env)
    cosyvoice = CosyVoiceSettings.of(s)
    assert (s.workers, s.server.port, s.server.max_streams, cosyvoice.model_dir) == (1, 8800, 5, "/models/cv2")
    s = settings_from(_args("--config", str(cfg), "--port", "8900", "--workers", "2"), env)
    assert (s.workers, s.server.port) == (2, 8900)


def test_a_bad_key_is_one_line_naming_it(tmp_path: Path) -> None:
    cfg = tmp_path / "engine.toml"
    cfg.write_text("[engine.server]\nprot = 1\n")
    proc = subprocess.run([sys.executable, "-m", "engine", "serve", "--config", str(cfg)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "engine.server.prot" in proc.stderr, proc.stderr


def test_serve_listens_on_the_port_from_the_environment() -> None:
    port = _free_port()
    env = {**os.environ, "VOICEBOT__ENGINE__SERVER__PORT": str(port), "VOICEBOT__ENGINE__WORKERS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "engine", "serve"], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # "engine server on URL (piper)" once it listens
        assert f"127.0.0.1:{port}" in line, line
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
