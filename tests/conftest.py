"""The library tests' fixtures: a tiny model and run config. The settings and fixtures every
test shares (the CI rule against skips, ``jit_compile_calls``) are in the repository's
top-level ``conftest.py``."""

from __future__ import annotations

import pytest

from albertkit.config.sizes import SIZES, AlbertSpec

# --------------------------------------------------------------------------- tiny runs
# A model small enough that a step takes milliseconds on a CPU, and the config of a short
# synthetic pretraining run around it; tests override the sections they are about.
TINY_MODEL = {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
# The same architecture as an ``AlbertSpec``, for the model tests; a test that needs another
# shape derives it from this one with ``tiny_spec_with(...)``.
TINY_SPEC = AlbertSpec(**{**SIZES[TINY_MODEL["size"]],
                          **{k: v for k, v in TINY_MODEL.items() if k != "size"}})


def tiny_spec_with(**overrides) -> AlbertSpec:
    """``TINY_SPEC`` with ``overrides`` (validated, unlike ``model_copy``)."""
    return AlbertSpec(**{**TINY_SPEC.model_dump(), **overrides})


# Overrides for the tests of ALBERT's layer sharing: 3 layer applications over 2 groups of 2
# inner layers (group 0 runs twice, group 1 once); also 4 heads and initial weights of range
# 0.2 instead of 0.02, as the model tests were written with.
GROUPED_LAYERS = {"num_hidden_layers": 3, "num_hidden_groups": 2, "inner_group_num": 2,
                  "num_attention_heads": 4, "max_position_embeddings": 32,
                  "initializer_range": 0.2}

TINY_DATA = {"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5}
TINY_OPTIMIZER = {"kind": "adamw", "learning_rate": 1e-3}


def tiny_raw_config(run_dir=None, *, model=None, data=None, optimizer=None, runtime=None,
                    logging=None, **sections) -> dict:
    """The raw mapping of a tiny synthetic run. ``model``, ``runtime`` and ``logging`` entries
    are merged over the defaults; so are ``data`` and ``optimizer`` entries that name no
    ``kind`` (``data={"num_examples": 64}``), while a section that names its ``kind``
    replaces the default one. Other sections are added as given."""
    raw = {
        "model": {**TINY_MODEL, **(model or {})},
        "data": _kind_or_merged(TINY_DATA, data),
        "optimizer": _kind_or_merged(TINY_OPTIMIZER, optimizer),
        "runtime": {"micro_batch_size": 4, "global_batch_size": 8, "max_steps": 8,
                    "xla": False, **(runtime or {})},
        "logging": {"progress_bar": False, **(logging or {})},
        **sections,
    }
    if run_dir is not None:
        raw["run_dir"] = str(run_dir)
    return raw


def _kind_or_merged(default: dict, given: dict | None) -> dict:
    return dict(given) if given and "kind" in given else {**default, **(given or {})}


def make_tiny_config(run_dir=None, **kwargs):
    from albertkit.config import TrainerConfig

    return TrainerConfig.from_dict(tiny_raw_config(run_dir, **kwargs))


@pytest.fixture
def tiny_config():
    """Factory: ``tiny_config(run_dir=None, model=..., data=..., optimizer=..., runtime=...,
    logging=..., **sections)`` (see ``tiny_raw_config``)."""
    return make_tiny_config


@pytest.fixture
def tiny_spec():
    """The tiny architecture (``TINY_SPEC``, an ``AlbertSpec``)."""
    return TINY_SPEC


# --------------------------------------------------------------------------- tokenizers
@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory):
    """Factory: ``tiny_tokenizer_dir(vocab_size=1000)`` -> a trained SentencePiece tokenizer
    directory (``spiece.model`` + Hugging Face files) on a small English corpus. Built once
    per vocabulary size and session, and shared by every test that asks for that size: tests
    must not write into it."""
    from fixtures.tiny_tokenizer import build_tiny_tokenizer

    built: dict[int, object] = {}

    def make(vocab_size: int = 1000):
        if vocab_size not in built:
            out = tmp_path_factory.mktemp(f"tok{vocab_size}") / "tok"
            built[vocab_size] = build_tiny_tokenizer(out, vocab_size=vocab_size)
        return built[vocab_size]

    return make


# --------------------------------------------------------------------------- no network
def refuse_network(monkeypatch) -> list:
    """Make every TCP/UDP connect in this test fail (Unix sockets still work) and return the
    list of addresses that were attempted: the caller asserts it stays empty, so a test that
    would reach a real AWS endpoint fails instead of hanging or succeeding by accident."""
    import socket

    attempts: list = []
    real_connect = socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError(f"network access attempted in a test: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return attempts


# --------------------------------------------------------------------------- registry
@pytest.fixture
def builtins_only_registry():
    """The registries holding albertkit's own parts only, as in an environment without
    plugins: an installed plugin (CI installs examples/plugins/albertkit-tagging) is set
    aside for the test and brought back afterwards."""
    import copy

    from albertkit.config import registry

    reg = registry._REGISTRY
    registry.load_plugins()
    saved = copy.copy(vars(reg))
    saved["tables"] = {k: dict(v) for k, v in reg.tables.items()}
    saved["loaded"], saved["broken"] = set(reg.loaded), dict(reg.broken)
    reg.tables = {k: {n: e for n, e in v.items() if e.source.builtin}
                  for k, v in saved["tables"].items()}
    reg.broken = {}
    yield reg
    vars(reg).update(saved)
