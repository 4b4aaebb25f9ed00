"""Shared test settings and fixtures (a tiny model and run config). With
ALBERTKIT_FORBID_SKIPS=1 (CI) any skipped test fails the run."""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_skipped: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _skipped.append(report.nodeid)


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


# --------------------------------------------------------------------------- tiny runs
# A model small enough that a step takes milliseconds on a CPU, and the config of a short
# synthetic pretraining run around it; tests override the sections they are about.
TINY_MODEL = {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


def tiny_raw_config(run_dir=None, *, model=None, data=None, runtime=None, **sections) -> dict:
    """The raw mapping of a tiny synthetic run; ``model``/``runtime`` entries are merged over
    the defaults, ``data`` and other sections replace theirs."""
    raw = {
        "model": {**TINY_MODEL, **(model or {})},
        "data": data or {"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3},
        "runtime": {"micro_batch_size": 4, "global_batch_size": 8, "max_steps": 8,
                    "xla": False, **(runtime or {})},
        "logging": {"progress_bar": False},
        **sections,
    }
    if run_dir is not None:
        raw["run_dir"] = str(run_dir)
    return raw


def make_tiny_config(run_dir=None, **kwargs):
    from albertkit.config import TrainerConfig

    return TrainerConfig.from_dict(tiny_raw_config(run_dir, **kwargs))


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
def tiny_config():
    """Factory: ``tiny_config(run_dir=None, model=..., data=..., runtime=..., **sections)``."""
    return make_tiny_config


@pytest.fixture
def tiny_spec():
    """The tiny architecture (an ``AlbertSpec``)."""
    return make_tiny_config().model.spec


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as a module (the scripts are not a package)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
