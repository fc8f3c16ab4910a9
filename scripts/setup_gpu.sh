#!/usr/bin/env bash
# `make engine-gpu`: builds .venv-gpu, the GPU engine server's own environment (docs/gpu.md, section 6):
# CosyVoice's pinned stack and the server's imports (requirements-gpu.txt), then piper-tts, the bundled
# Piper voice and this project without their declared dependencies (requirements-gpu-nodeps.txt), and,
# with COSYVOICE_DIR=/path/to/a/CosyVoice/clone, a .pth file that puts the clone on the venv's path.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${GPU_VENV:-.venv-gpu}"
if ! "$PY" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null; then
  echo "engine-gpu: Python 3.11 or 3.12 is needed (torch 2.3.1 has no wheels past 3.12); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip
echo "engine-gpu: installing CosyVoice's stack into $VENV (torch 2.3.1 with CUDA 12.1: several GB)"
"${pip[@]}" install -q --build-constraint requirements-gpu-build.txt -r requirements-gpu.txt
"${pip[@]}" install -q --no-deps -r requirements-gpu-nodeps.txt
"${pip[@]}" install -q --no-deps -e .
if [ -n "${COSYVOICE_DIR:-}" ]; then
  dir="$(cd "$COSYVOICE_DIR" && pwd)"
  if [ ! -f "$dir/cosyvoice/cli/cosyvoice.py" ] || [ ! -d "$dir/third_party/Matcha-TTS/matcha" ]; then
    echo "engine-gpu: $dir is not a CosyVoice clone with its Matcha-TTS submodule (git submodule update --init --recursive)" >&2
    exit 1
  fi
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  printf '%s\n%s\n' "$dir" "$dir/third_party/Matcha-TTS" > "$site/cosyvoice-clone.pth"
  "$VENV/bin/python" -c "from cosyvoice.cli.cosyvoice import CosyVoice2" \
    || { echo "engine-gpu: the CosyVoice clone at $dir does not import (see above)" >&2; exit 1; }
  echo "engine-gpu: CosyVoice from $dir"
else
  echo "engine-gpu: no COSYVOICE_DIR given: clone CosyVoice (docs/gpu.md, section 2) and run again with COSYVOICE_DIR=/path/to/CosyVoice"
fi
"$VENV/bin/python" -c "import engine.server, engine.cosyvoice"
echo "engine-gpu: ready: $VENV/bin/python -m engine serve --config FILE (engine.backend = \"cosyvoice2\")"
