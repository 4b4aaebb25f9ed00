#!/usr/bin/env bash
# Fresh machine -> tests. Creates .venv (if missing), installs albertkit with its test
# extra, builds Horovod (needed by the distributed tests), lints, then runs the test suite:
# the tests not marked `slow` by default; TESTS=slow runs only those marked `slow`
# (multi-process, kill -9, the example scripts, end-to-end learning), TESTS=all both.
# CI (.ci/run) runs this script, then again with TESTS=slow. Skipped tests fail the run
# (ALBERTKIT_FORBID_SKIPS). Arguments go to pytest (e.g. a test file, or -x).
set -euo pipefail
cd "$(dirname "$0")/.."
# Which tests (checked before anything is installed).
case "${TESTS:-fast}" in
  fast) which=" and not slow" ;;
  slow) which=" and slow" ;;
  all) which="" ;;
  *) echo "TESTS=${TESTS}: expected fast (the default), slow or all" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
# SETUP=0 skips the install and the lint: for a second pass in the environment a first pass
# of this script has just installed and linted (.ci/run's slow pass).
if [ "${SETUP:-1}" != 0 ]; then
  python -m pip install --quiet --upgrade pip
  # The pinned set (scripts/test-constraints.txt), installed by uv from where pip installs
  # (scripts/uv_args.py), bytecode compiled as pip does it (without it, and with
  # PYTHONDONTWRITEBYTECODE set, every process would compile TensorFlow again: 13 s instead
  # of 5 s per `import tensorflow` here). If uv cannot be had or fails, pip installs the
  # same set (ALBERTKIT_INSTALLER=pip forces pip).
  # With it the example plugin (an outside package: its own pyproject, entry point and tests,
  # which pytest collects through testpaths), installed as a user would install it, with
  # build isolation: its dependency seqeval is an sdist whose version comes from setuptools_scm.
  plugin=examples/plugins/albertkit-tagging
  pins=scripts/test-constraints.txt
  installed=""
  if [ "${ALBERTKIT_INSTALLER:-uv}" = uv ] && python -m pip install --quiet "uv>=0.13,<0.14"; then
    mapfile -d '' uv_opts < <(python scripts/uv_args.py)
    mapfile -d '' uv_env < <(python scripts/uv_args.py --env)
    if env "${uv_env[@]}" python -m uv pip install --quiet --python "$VENV/bin/python" \
        --compile-bytecode --index-strategy unsafe-best-match "${uv_opts[@]}" \
        -c "$pins" -e ".[test]" -e "$plugin"; then
      installed=uv
    else
      echo "test.sh: uv could not install the test environment; pip installs it instead" >&2
    fi
  fi
  [ -n "$installed" ] || python -m pip install --quiet -c "$pins" -e ".[test]" -e "$plugin"
  bash scripts/build_horovod.sh
  ruff check .
  bash scripts/lint_infra.sh
fi
export ALBERTKIT_FORBID_SKIPS=1 TF_CPP_MIN_LOG_LEVEL=2
# The tests start hundreds of Python processes: let them keep albertkit's compiled bytecode
# (__pycache__, ignored by git) rather than compile the source again in each one.
unset PYTHONDONTWRITEBYTECODE
# Two passes. Most tests run on TEST_WORKERS processes (pytest-xdist; 2 by default: most of a
# test's time is single-threaded graph tracing, so two workers on two cores finish in about
# two thirds of the time). Tests marked `serial` measure wall time or load every CPU on
# purpose; they run alone afterwards. Exit status: the first failing pass's; a pass that
# selects nothing (exit 5) counts only when both do.
main=0
python -m pytest -q --durations=30 -n "${TEST_WORKERS:-2}" -m "not serial$which" "$@" || main=$?
alone=0
python -m pytest -q --durations=5 -m "serial$which" "$@" || alone=$?
if [ "$main" = 5 ] && [ "$alone" = 5 ]; then exit 5; fi
[ "$main" = 5 ] && main=0
[ "$alone" = 5 ] && alone=0
[ "$main" != 0 ] && exit "$main"
exit "$alone"
