"""RunState: the run's mutable state goes into a checkpoint's state.json and comes back out.

The on-disk form is the one albertkit wrote before RunState existed (same keys, same order),
so checkpoints of earlier runs still resume.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from albertkit.errors import CheckpointError
from albertkit.training.checkpoint import Checkpoint, CheckpointManager
from albertkit.training.state import RunState, SiftCounters

IDENTITY = {"seed": 7, "micro_batch_size": 4, "global_batch_size": 8, "replicas": 1,
            "shuffle_buffer": 64, "model_spec": {"hidden_size": 32}, "task": "pretraining"}
BEST = {"metric": "loss", "value": 1.25, "step": 6, "path": "/runs/x/checkpoints/ckpt-00000006"}


def _groups():
    return {"model": [np.arange(3, dtype=np.float32)], "optimizer": [np.int64(2)],
            "step": [np.float32(1.0)]}


def _sifting(seen=0, kept=0, scored=0) -> SiftCounters:
    counters = SiftCounters(forward_flops=10.0)
    counters(1, {"sift_seen": seen, "sift_kept": kept, "sift_scored": scored})
    return counters


def test_saved_state_is_the_format_checkpoints_already_have():
    state = RunState(best=BEST, sifting=_sifting(seen=16, kept=10, scored=16))
    saved = state.to_checkpoint(step=9, accum=2, identity=IDENTITY, reason="periodic")
    # exactly what the checkpointing hook wrote before RunState, key order included
    assert list(saved.items()) == [
        ("consumed_micro_batches", 18),
        ("data_position", {"format": 2, "consumed_micro_batches": 18}),
        *IDENTITY.items(),
        ("best", BEST), ("reason", "periodic"),
        ("sifting", {"seen": 16, "kept": 10, "scored": 16}),
    ]
    assert "sifting" not in RunState().to_checkpoint(9, 2, IDENTITY, "final")


def test_state_round_trips_through_a_checkpoint_on_disk(tmp_path):
    manager = CheckpointManager(tmp_path / "checkpoints", keep_last=2)
    before = RunState(start_step=0, best=BEST, stream_version=1,
                      sifting=_sifting(seen=8, kept=5, scored=8))
    manager.save(12, _groups(), before.to_checkpoint(12, 3, IDENTITY, "interrupted"))

    after = RunState(sifting=SiftCounters(forward_flops=10.0))
    after.restore(manager.latest())
    assert (after.start_step, after.best, after.stream_version) == (12, BEST, 1)
    assert after.sifting.state() == {"seen": 8, "kept": 5, "scored": 8}
    assert after.sifting.totals() == before.sifting.totals()
    assert after.last_checkpoint is None  # this process has written nothing yet


def test_a_state_json_written_before_run_state_restores(tmp_path):
    """A checkpoint directory as the previous code wrote it (state.json literally)."""
    manager = CheckpointManager(tmp_path / "checkpoints")
    legacy = {"consumed_micro_batches": 40,
              "data_position": {"format": 2, "consumed_micro_batches": 40},
              **IDENTITY, "best": BEST, "reason": "best",
              "sifting": {"seen": 30, "kept": 20, "scored": 30}}
    path = manager.save(20, _groups(), legacy)
    on_disk = json.loads((path / "state.json").read_text())
    assert on_disk == {"step": 20, **legacy}

    state = RunState(sifting=SiftCounters(forward_flops=1.0))
    state.restore(manager.latest())
    assert (state.start_step, state.best, state.stream_version) == (20, BEST, 2)
    assert state.sifting.state() == {"seen": 30, "kept": 20, "scored": 30}
    # saved again, it writes the same state back (the reason aside)
    assert state.to_checkpoint(20, 2, IDENTITY, "best") == legacy


def test_restore_without_sifting_or_best_or_position(caplog):
    # a 0.1 checkpoint: no data_position, no best, no sifting totals
    ckpt = Checkpoint(path=None, step=5, state={"step": 5, "consumed_micro_batches": 10})
    state = RunState(best=BEST, sifting=_sifting(seen=3, kept=3))
    with caplog.at_level(logging.INFO, logger="albertkit"):
        state.restore(ckpt)
    assert (state.start_step, state.best, state.stream_version) == (5, None, 1)
    assert state.sifting.state() == {"seen": 0, "kept": 0, "scored": 0}
    assert "written by albertkit 0.1" in caplog.text


def test_a_newer_data_position_is_refused_before_anything_changes():
    ckpt = Checkpoint(path=None, step=5,
                      state={"data_position": {"format": 3, "consumed_micro_batches": 10}})
    state = RunState(start_step=2, best=BEST)
    with pytest.raises(CheckpointError, match="format 3 is newer"):
        state.restore(ckpt)
    assert (state.start_step, state.best, state.stream_version) == (2, BEST, 2)
