"""Fault injection: kill -9, SIGTERM, non-finite loss, disk full. Nothing may be lost
beyond the steps since the last checkpoint, and nothing partial may look complete."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors.numpy import load_file

from albertkit.config import TrainerConfig
from albertkit.errors import CheckpointError, TrainingError
from albertkit.training.checkpoint import CheckpointManager
from albertkit.training.trainer import AlbertTrainer
from conftest import tiny_raw_config


def raw_config(run_dir, **runtime):
    return tiny_raw_config(
        run_dir,
        model={"hidden_dropout_prob": 0.1},
        data={"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5,
              "num_examples": 256, "eval_examples": 0},
        optimizer={"kind": "adamw", "learning_rate": 1e-3, "schedule": {"warmup_steps": 5}},
        runtime={"micro_batch_size": 4, "global_batch_size": 8, "max_steps": 150,
                 "eval_every_steps": 0, "xla": False, **runtime},
        checkpoint={"every_steps": 10, "keep_last": 3},
        logging={"log_every_steps": 5, "progress_bar": False},
    )


def write_config(tmp_path, run_dir, **runtime):
    path = tmp_path / f"{run_dir.name}.yaml"
    path.write_text(json.dumps(raw_config(run_dir, **runtime)))
    return path


def cli(config_path):
    return [sys.executable, "-m", "albertkit.cli", "pretrain", "--config", str(config_path)]


def latest_step(run_dir):
    ckpts = CheckpointManager(run_dir / "checkpoints").list()
    return int(ckpts[-1].name.split("-")[1]) if ckpts else 0


def weights(run_dir):
    ckpt = CheckpointManager(run_dir / "checkpoints").latest()
    return ckpt.step, load_file(str(ckpt.path / "model.safetensors"))


@pytest.mark.slow
def test_kill9_then_same_command_equals_uninterrupted(tmp_path):
    reference = tmp_path / "reference"
    AlbertTrainer(TrainerConfig.model_validate(raw_config(reference))).fit()

    run = tmp_path / "killed"
    cfg_path = write_config(tmp_path, run)
    kill_after = random.Random(os.getpid()).choice([20, 30, 40, 50, 60])
    proc = subprocess.Popen(cli(cfg_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while latest_step(run) < kill_after and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed_at = latest_step(run)
    assert kill_after <= killed_at < 150

    done = subprocess.run(cli(cfg_path), capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from_step"] >= killed_at - 10 and summary["step"] == 150

    step_a, wa = weights(reference)
    step_b, wb = weights(run)
    assert step_a == step_b == 150
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)


@pytest.mark.slow
def test_sigterm_writes_checkpoint_and_exits_cleanly(tmp_path):
    run = tmp_path / "spot"
    cfg_path = write_config(tmp_path, run, max_steps=100000)
    proc = subprocess.Popen(cli(cfg_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 240
    metrics = run / "metrics.jsonl"
    while (not metrics.exists() or metrics.stat().st_size == 0) and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    took = time.time() - sent
    assert proc.returncode == 0, err[-2000:]
    assert took < 30, f"took {took:.1f}s to checkpoint and exit"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert latest_step(run) == summary["step"] > 0
    # The next run resumes from it (stop again right away with until_step).
    again = AlbertTrainer(TrainerConfig.from_yaml(cfg_path)).fit(until_step=summary["step"] + 1)
    assert again.summary["resumed_from_step"] == summary["step"]


def test_persistent_nonfinite_loss_stops_with_clear_error(tmp_path):
    run = tmp_path / "nan"
    raw = raw_config(run, max_steps=40, max_nonfinite_steps=3)
    raw["optimizer"] = {"kind": "adamw", "learning_rate": 1e30, "clip_norm": None}
    raw["checkpoint"] = {"every_steps": 1, "keep_last": 2}
    with pytest.raises(TrainingError, match="non-finite for 3 consecutive steps"):
        AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    ckpt = CheckpointManager(run / "checkpoints").latest()
    assert ckpt is not None  # the last good checkpoint is kept and verifies
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics and "skipped_steps" in metrics[-1]


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_float16_skipped_steps_are_counted_and_logged(tmp_path):
    run = tmp_path / "fp16"
    raw = raw_config(run, max_steps=6, precision="mixed_float16", initial_loss_scale=2.0**80)
    raw["logging"]["log_every_steps"] = 6
    trainer = AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    assert trainer.summary["skipped_steps"] >= 1
    logged = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in logged if r["kind"] == "train"]
    assert logged[-1]["skipped_steps"] == trainer.summary["skipped_steps"]
    assert logged[-1]["loss_scale"] < 2.0**80


def test_disk_full_while_checkpointing_leaves_nothing_partial(tmp_path, monkeypatch):
    import albertkit.training.checkpoint as ck

    run = tmp_path / "full"
    calls = {"n": 0}
    real = ck.save_file

    def failing_save(arrays, path, metadata=None):
        calls["n"] += 1
        if calls["n"] > 3:  # the first checkpoint works, the second hits a full disk
            raise OSError(28, "No space left on device")
        return real(arrays, path, metadata=metadata)

    monkeypatch.setattr(ck, "save_file", failing_save)
    raw = raw_config(run, max_steps=30)
    with pytest.raises(CheckpointError, match="No space left on device"):
        AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    mgr = CheckpointManager(run / "checkpoints")
    assert [p.name for p in mgr.list()] == ["ckpt-00000010"]
    assert not list((run / "checkpoints").glob(".tmp-*"))
    assert mgr.latest().step == 10


def test_unwritable_run_dir_gives_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    raw = raw_config(blocker / "run", max_steps=10)
    with pytest.raises(TrainingError, match=r"run_dir=.*file/run cannot be created"):
        AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
