#!/usr/bin/env bash
# `make lock`: resolve pyproject.toml (with the test extra) in a scratch venv and write requirements.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip install -q -e ".[test]"
{
  sed -n '/^#/p' requirements.lock
  "$tmp/venv/bin/python" -m pip freeze --all --exclude-editable | sort -f
} > "$tmp/lock"
mv "$tmp/lock" requirements.lock
echo "lock: wrote requirements.lock ($(grep -vc '^#' requirements.lock) packages)"
