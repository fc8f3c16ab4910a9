"""The GPU engine environment's CPU-side parts: its requirements resolve, and the server refuses clearly without CUDA
or the model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from engine.backends.cosyvoice import loader as cosyvoice_loader

ROOT = Path(__file__).resolve().parents[2]
GPU_REQS = ROOT / "requirements-gpu.txt"
NODEPS_REQS = ROOT / "requirements-gpu-nodeps.txt"
BUILD_CONSTRAINTS = ROOT / "requirements-gpu-build.txt"


def pins(path: Path) -> dict[str, str]:
    """name (normalized) -> version of each `name==version` line."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line.strip())
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def test_the_gpu_stack_is_cosyvoices_pins():
    gpu = pins(GPU_REQS)
    assert {k: gpu[k] for k in ("torch", "torchaudio", "numpy", "onnxruntime-gpu")} == {
        "torch": "2.3.1", "torchaudio": "2.3.1", "numpy": "1.26.4", "onnxruntime-gpu": "1.18.0",
    }
    assert "onnxruntime" not in gpu  # the CPU distribution would overwrite onnxruntime-gpu's module


def test_what_is_installed_without_dependencies_finds_them_in_the_gpu_stack():
    """piper-tts and the Piper voice are installed with --no-deps: each dependency they declare (outside
    extras) must be pinned in requirements-gpu.txt, onnxruntime by onnxruntime-gpu."""
    gpu = pins(GPU_REQS)
    provided_by = {"onnxruntime": "onnxruntime-gpu"}
    for dist in pins(NODEPS_REQS):
        for req in metadata.requires(dist) or []:
            if "extra ==" in req:
                continue
            name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", req).group(0)).lower()  # type: ignore[union-attr]
            assert provided_by.get(name, name) in gpu, f"{dist} needs {req}, which requirements-gpu.txt does not pin"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_gpu_requirements_resolve(tmp_path):  # noqa: ANN001
    """pip resolves requirements-gpu.txt from PyPI for this Python without installing anything (the extra
    indexes of CUDA builds are left out: they host the same versions, and CI reaches PyPI only)."""
    reqs = tmp_path / "requirements-gpu-pypi.txt"
    lines = [line for line in GPU_REQS.read_text().splitlines() if not line.startswith("--extra-index-url")]
    reqs.write_text("".join(line + "\n" for line in lines))
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--disable-pip-version-check"]
    done = subprocess.run([*pip, "--build-constraint", str(BUILD_CONSTRAINTS), "--report", str(report), "-r",
                           str(reqs)],
                          capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {re.sub(r"[-_.]+", "-", i["metadata"]["name"]).lower(): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]}
    for name, version in pins(GPU_REQS).items():
        assert name in resolved and Version(resolved[name]) == Version(version), (name, version, resolved.get(name))
    assert "onnxruntime" not in resolved  # nothing pulls in the CPU build beside onnxruntime-gpu
    done = subprocess.run([*pip, "--no-deps", "--report", str(report), "-r", str(NODEPS_REQS)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def serve(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine", "serve", "--config", str(config), "--port", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


def test_the_server_refuses_clearly_without_the_model_or_cuda(tmp_path):  # noqa: ANN001
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "",
           "XDG_DATA_HOME": str(tmp_path / "data")}  # no GPU, whatever the machine
    config = tmp_path / "engine-gpu.toml"
    config.write_text(f'[engine]\nbackend = "cosyvoice2"\n\n[engine.cosyvoice]\nmodel_dir = "{tmp_path / "missing"}"\n')
    done = serve(config, env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.fullmatch(r"error: CosyVoice2 model folder \S+missing does not exist: download CosyVoice2-0.5B into "
                        r"it.*\n",
                        done.stderr), done.stderr

    model = tmp_path / "CosyVoice2-0.5B"  # every file the backend checks for, so the next check is CUDA's
    model.mkdir()
    for name in cosyvoice_loader.REQUIRED_FILES:
        (model / name).mkdir() if name == "CosyVoice-BlankEN" else (model / name).write_bytes(b"x")
    config.write_text(f'[engine]\nbackend = "cosyvoice2"\n\n[engine.cosyvoice]\nmodel_dir = "{model}"\ndevice = '
                      '"cuda:1"\n')
    done = serve(config, env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.fullmatch(r"error: No CUDA device for the cosyvoice2 backend: .*make engine-gpu.*\n",
                        done.stderr), done.stderr
