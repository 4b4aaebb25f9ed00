"""Every ``>>>`` example in albertkit's docstrings runs, and prints what it says it prints.

The examples are the first code a reader copies, so they are tested like code: each module of
``src/albertkit`` that holds an example is one test, run by the standard library's doctest
with the module's own namespace, in a fresh working directory (examples that write files write
them there). An example marked ``# doctest: +SKIP`` is not run: those submit cloud jobs, spawn
processes or train for minutes, and say so beside the mark. A module whose examples are all
skipped fails here, so that a skip cannot hide a whole module.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules_with_examples() -> list[str]:
    found = []
    for path in sorted((SRC / "albertkit").rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return found


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    # a wrong SRC or a renamed tree would leave nothing to run and every test below green
    assert len(MODULES) >= 30, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch, builtins_only_registry):
    # the examples show albertkit alone: plugins installed here (CI's example) set aside
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder(exclude_empty=True).find(module, name)
             if t.examples and t.filename and Path(t.filename).resolve().is_relative_to(SRC)]
    assert tests, f"{name}: '>>>' in its source but no docstring example was found"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    ran = 0
    for test in tests:
        runner.run(test, out=report.append)
        ran += sum(not ex.options.get(doctest.SKIP) for ex in test.examples)
    assert runner.failures == 0, f"{name}: docstring examples failed:\n" + "".join(report)
    assert ran > 0, f"{name}: every example is marked +SKIP; make at least one run"
