#!/usr/bin/env bash
# The documentation site with its API reference, built in strict mode: any warning (a
# docstring the reference cannot render, a name it cannot resolve, a broken link) fails.
# Creates .docs-venv (if missing) with only the docs tools, the `docs` extra of
# pyproject.toml: mkdocstrings reads albertkit's source (src/) without importing it, so
# neither albertkit nor TensorFlow is installed. The site goes to site/ (or $SITE_DIR).
# CI (.ci/run) runs this beside the tests; scripts/test.sh does not.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=${DOCS_VENV:-.docs-venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install --quiet --upgrade pip
python - > "$VENV/docs-requirements.txt" <<'PYEOF'
import tomllib

with open("pyproject.toml", "rb") as fh:
    print("\n".join(tomllib.load(fh)["project"]["optional-dependencies"]["docs"]))
PYEOF
python -m pip install --quiet -r "$VENV/docs-requirements.txt"
python -m mkdocs build --strict --clean --site-dir "${SITE_DIR:-site}"
