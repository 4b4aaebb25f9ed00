"""A resume refuses a config that changes the checkpointed run's training settings, naming
each changed field; the settings listed as resumable, and ``checkpoint.allow_config_change``,
let it continue."""

from __future__ import annotations

import logging

import pytest
import yaml

from albertkit.config import ConfigError, TrainerConfig
from albertkit.errors import CheckpointError
from albertkit.training.config_change import (
    RESUMABLE_CHANGES,
    changed_settings,
    describe_changes,
    resumable,
    settings_fingerprint,
)
from albertkit.training.trainer import AlbertTrainer
from conftest import make_tiny_config, tiny_raw_config


def config(run_dir, *, optimizer=None, runtime=None, **sections):
    return make_tiny_config(
        run_dir,
        data={"num_examples": 32, "eval_examples": 8},
        optimizer={"learning_rate": 0.001, **(optimizer or {})},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 4,
                 "eval_every_steps": 0, "eval_steps": 1, **(runtime or {})},
        **{"checkpoint": {"every_steps": 2, "keep_best": False}, **sections},
    )


# --------------------------------------------------------------------------- pure
def test_changed_settings_name_each_field_with_old_and_new_value():
    old = config("runs/a")
    new = config("runs/b", optimizer={"learning_rate": 0.002, "weight_decay": 0.1},
                 runtime={"max_steps": 10, "precision": "mixed_bfloat16"},
                 logging={"log_every_steps": 1, "progress_bar": False})
    assert describe_changes(changed_settings(old, new)) == [
        "optimizer.learning_rate: 0.001 -> 0.002",
        "optimizer.weight_decay: 0.01 -> 0.1",
        "runtime.precision: float32 -> mixed_bfloat16",
    ]
    assert changed_settings(old, config("runs/c", runtime={"max_steps": 10})) == []


def test_the_resumable_list_names_real_fields():
    """Every entry of RESUMABLE_CHANGES is a field (or section) of some config, so the list
    cannot rot when a field is renamed."""
    tfrecord = TrainerConfig.from_dict(tiny_raw_config(data={
        "kind": "tfrecord", "train_files": ["a"], "eval_files": ["b"], "tokenizer": "t",
        "seq_length": 32, "max_predictions_per_seq": 5}))
    squad = TrainerConfig.from_dict(tiny_raw_config(data={
        "kind": "squad", "train_file": "a", "eval_file": "b", "tokenizer": "t",
        "max_seq_length": 64, "max_query_length": 16, "doc_stride": 16}))
    paths = set()
    for cfg in (tfrecord, squad):
        dump = cfg.model_dump(mode="json")
        for section, fields in dump.items():
            paths.add(section)
            if isinstance(fields, dict):
                paths.update(f"{section}.{name}" for name in fields)
    assert set(RESUMABLE_CHANGES) <= paths, set(RESUMABLE_CHANGES) - paths
    for kept in ("optimizer.learning_rate", "runtime.seed", "runtime.precision",
                 "data.seq_length", "model.hidden_size", "runtime.global_batch_size"):
        assert not resumable(kept), kept
    assert resumable("runtime.max_steps") and resumable("checkpoint.allow_config_change")


def test_fingerprint_follows_the_compared_settings_only():
    base = config("runs/a")
    assert settings_fingerprint(base) == settings_fingerprint(config("runs/a"))
    # resumable changes keep it: max_steps, logging, checkpoint cadence, run_dir
    assert settings_fingerprint(base) == settings_fingerprint(
        config("runs/other", runtime={"max_steps": 50}, checkpoint={"every_steps": 7}))
    # a trajectory change, or another replica count, changes it
    assert settings_fingerprint(base) != settings_fingerprint(
        config("runs/a", optimizer={"learning_rate": 0.002}))
    assert settings_fingerprint(base, replicas=8) != settings_fingerprint(base, replicas=4)
    # a default written out is the same setting as a default left out
    explicit = config("runs/a", runtime={"seed": 0, "precision": "float32"})
    assert settings_fingerprint(explicit) == settings_fingerprint(base)


# --------------------------------------------------------------------------- trainer
def test_changed_learning_rate_is_refused_naming_the_fields(tmp_path):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit(until_step=2)
    saved = (run / "config.yaml").read_text()
    changed = config(run, optimizer={"learning_rate": 0.002},
                     runtime={"precision": "mixed_bfloat16"})
    with pytest.raises(ConfigError) as err:
        AlbertTrainer(changed).fit()
    text = str(err.value)
    assert "optimizer.learning_rate: 0.001 -> 0.002" in text
    assert "runtime.precision: float32 -> mixed_bfloat16" in text
    assert "ckpt-00000002" in text and "checkpoint.allow_config_change=true" in text
    assert text.count(" -> ") == 3  # the two fields, and "config.yaml -> this config"
    # nothing was written: the run is still the old run
    assert (run / "config.yaml").read_text() == saved
    assert [p.name for p in (run / "checkpoints").glob("ckpt-*")] == ["ckpt-00000002"]


def test_resumable_changes_still_resume(tmp_path):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit(until_step=2)
    longer = config(run, runtime={"max_steps": 6, "eval_every_steps": 3, "eval_steps": 2},
                    checkpoint={"every_steps": 3, "keep_last": 2, "keep_best": False},
                    logging={"log_every_steps": 1, "progress_bar": False, "tensorboard": False})
    trainer = AlbertTrainer(longer).fit()
    assert trainer.summary["resumed_from_step"] == 2 and trainer.summary["step"] == 6


def test_allow_config_change_continues_with_the_new_settings(tmp_path, caplog):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit(until_step=2)
    escape = config(run, optimizer={"learning_rate": 0.002},
                    checkpoint={"every_steps": 2, "keep_best": False,
                                "allow_config_change": True})
    with caplog.at_level(logging.WARNING, logger="albertkit"):
        trainer = AlbertTrainer(escape).fit()
    assert trainer.summary["resumed_from_step"] == 2 and trainer.summary["step"] == 4
    assert "optimizer.learning_rate: 0.001 -> 0.002" in caplog.text
    assert yaml.safe_load((run / "config.yaml").read_text())["optimizer"]["learning_rate"] == 0.002
    # the data position's guard is not waived: another seed still cannot resume
    reseeded = config(run, runtime={"seed": 7, "max_steps": 6},
                      checkpoint={"allow_config_change": True})
    with pytest.raises(CheckpointError, match=r"cannot resume exactly.*seed"):
        AlbertTrainer(reseeded).fit()
