#!/usr/bin/env bash
# Fresh machine -> all tests. Creates .venv (if missing), installs albertkit with its test
# extra, builds Horovod (needed by the distributed tests), lints, then runs the whole suite.
# CI (.ci/run) runs exactly this script. Skipped tests fail the run (ALBERTKIT_FORBID_SKIPS).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e ".[test]"
bash scripts/build_horovod.sh
ruff check .
bash scripts/lint_infra.sh
export ALBERTKIT_FORBID_SKIPS=1 TF_CPP_MIN_LOG_LEVEL=2
python -m pytest -q --durations=30 "$@"
