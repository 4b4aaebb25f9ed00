#!/usr/bin/env bash
# Fresh machine -> the demo: creates .venv (if missing), installs albertkit, pretrains a tiny
# ALBERT on the built-in English corpus (about 5 minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e ".[report]"
albertkit demo "$@"
