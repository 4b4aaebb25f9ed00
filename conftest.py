"""What every test of the repository shares: albertkit's test settings, the CI rule against
skips, and fixtures for the library's tests (``tests/``) and the measurement scripts'
(``benchmarks/tests/``). With ALBERTKIT_FORBID_SKIPS=1 (CI) any skipped test fails the run.

The tiny model and run config of the library's tests are in ``tests/conftest.py``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

BENCHMARKS = Path(__file__).resolve().parent / "benchmarks"
# The measurement scripts' shared modules (benchmarks/benchlib), as the scripts import them.
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

_skipped: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_collection_modifyitems(session, config, items):
    """Multi-process tests (marked ``distributed``, about a minute each on two cores) first:
    with two xdist workers, the longest work starting first leaves no long test running
    alone at the end of the pass. A stable sort: the order is otherwise unchanged."""
    items.sort(key=lambda item: item.get_closest_marker("distributed") is None)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("ALBERTKIT_FORBID_SKIPS") == "1" and _skipped:
        print(f"\nERROR: {len(_skipped)} test(s) were skipped; CI forbids skips:")
        for nodeid in _skipped:
            print(f"  {nodeid}")
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def fresh_albertkit_logging():
    """The CLI's ``main`` (called in-process by many tests) binds the albertkit log handler
    to the sys.stderr of its first call, which pytest closes after that test, and stops
    propagation, which hides later records from caplog. Every test starts with no handler
    and gets the logger back as it was."""
    log = logging.getLogger("albertkit")
    saved = (list(log.handlers), log.level, log.propagate)
    log.handlers.clear()
    log.propagate = True
    yield
    log.handlers[:] = saved[0]
    log.setLevel(saved[1])
    log.propagate = saved[2]


@pytest.fixture
def jit_compile_calls(monkeypatch):
    """The ``jit_compile`` argument of every ``tf.function`` made while the test runs (None
    when not given), in order; start it after the setup whose functions do not matter."""

    def record():
        import tensorflow as tf

        seen: list = []
        real = tf.function

        def spy(*args, **kwargs):
            seen.append(kwargs.get("jit_compile"))
            return real(*args, **kwargs)

        monkeypatch.setattr(tf, "function", spy)
        return seen

    return record


@pytest.fixture
def autograph_conversions(monkeypatch):
    """The qualified names (``module.qualname``) of the functions AutoGraph converts while
    the test runs, in order. albertkit traces its graphs without AutoGraph (the training
    step, the kernels, the data pipelines: see :mod:`albertkit.training.step`), so a test
    can assert that none of ``albertkit.*`` is converted. It spies on AutoGraph's converter
    entry (TensorFlow-internal; ``test_step`` checks that it still sees conversions)."""
    from tensorflow.python.autograph.impl import api

    seen: list[str] = []
    real = api._convert_actual

    def spy(entity, program_ctx):
        module = getattr(entity, "__module__", None) or "?"
        seen.append(f"{module}.{getattr(entity, '__qualname__', repr(entity))}")
        return real(entity, program_ctx)

    monkeypatch.setattr(api, "_convert_actual", spy)
    return seen


@pytest.fixture(scope="session")
def load_script():
    """``load_script(name)``: ``benchmarks/<name>.py`` imported as a module (the scripts
    are not a package)."""

    def load(name: str):
        path = BENCHMARKS / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
