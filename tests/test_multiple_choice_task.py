"""The ``multiple_choice`` task: masked padded choices, the loss and metrics against NumPy,
per-N accuracy, a tiny config that learns the synthetic set (CLI and Python alike), exact
resume after kill -9, the SageMaker dry run, and a plugin's subclass of the task. The task
contract itself is checked with every task's in tests/test_task_contract.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from albertkit.data.multiple_choice import (
    synthetic_examples,
    write_jsonl,
    write_synthetic_multiple_choice,
)
from albertkit.tasks.multiple_choice import multiple_choice_metrics
from test_resume_kill import assert_bit_identical, latest_step, processes_of

ROOT = Path(__file__).resolve().parents[1]
TINY_CONFIG = ROOT / "examples" / "configs" / "finetune_multiple_choice_tiny.yaml"
RACE_CONFIG = ROOT / "examples" / "configs" / "finetune_race_base.yaml"
MODEL = {"size": "tiny", "vocab_size": 128, "hidden_size": 32, "embedding_size": 16,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
         "classifier_dropout_prob": 0.0}


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory) -> Path:
    return write_synthetic_multiple_choice(tmp_path_factory.mktemp("mc") / "data", train=400, eval=64)


def task_for(data_dir: Path, **data):
    from albertkit.config import TrainerConfig
    from albertkit.tasks import build_task

    cfg = TrainerConfig.from_dict({
        "model": MODEL,
        "data": {"kind": "multiple_choice", "train_file": str(data_dir / "train.jsonl"),
                 "eval_file": str(data_dir / "dev.jsonl"),
                 "tokenizer": str(data_dir / "tokenizer"), "max_seq_length": 32, **data},
        "runtime": {"micro_batch_size": 4, "global_batch_size": 4, "xla": False}})
    return cfg, build_task(cfg, cfg.model.spec)


# --------------------------------------------------------------------------- masking and loss
def test_padded_choices_change_nothing_and_loss_is_the_softmax_cross_entropy(synthetic_dir):
    import keras
    import tensorflow as tf

    from albertkit.data.multiple_choice import encode_multiple_choice

    cfg, task = task_for(synthetic_dir)
    keras.utils.set_random_seed(3)
    model = task.build_model()
    examples = synthetic_examples(6, seed=9, num_choices=3)
    three, _ = encode_multiple_choice(examples, task.tokenizer, 32)
    five, _ = encode_multiple_choice(examples, task.tokenizer, 32, num_choices=5)
    assert three["input_ids"].shape[1] == 3 and five["input_ids"].shape[1] == 5
    loss3, stats3 = task.loss_and_stats(model, {k: tf.constant(v) for k, v in three.items()},
                                        training=False)
    loss5, stats5 = task.loss_and_stats(model, {k: tf.constant(v) for k, v in five.items()},
                                        training=False)
    assert float(loss3) == pytest.approx(float(loss5), rel=1e-6)
    assert float(stats3["correct"]) == float(stats5["correct"])
    per3 = task.example_losses(model, {k: tf.constant(v) for k, v in three.items()}).numpy()
    per5 = task.example_losses(model, {k: tf.constant(v) for k, v in five.items()}).numpy()
    np.testing.assert_allclose(per3, per5, rtol=1e-6)
    # the reference: NumPy's log-softmax of the model's own scores over the real choices
    logits = np.asarray(model({k: three[k] for k in ("input_ids", "input_mask",
                                                     "segment_ids")})["logits"], np.float64)
    z = logits - logits.max(-1, keepdims=True)
    ref = -(z - np.log(np.exp(z).sum(-1, keepdims=True)))[np.arange(6), three["labels"]]
    np.testing.assert_allclose(per3, ref, rtol=1e-5)
    assert float(loss3) == pytest.approx(ref.mean(), rel=1e-5)
    # the gradient never reaches a padded choice's score: its input may be anything
    noisy = {k: v.copy() for k, v in five.items()}
    noisy["input_ids"][:, 3:] = 7
    noisy["input_mask"][:, 3:] = 1
    loss_noisy, _ = task.loss_and_stats(model, {k: tf.constant(v) for k, v in noisy.items()},
                                        training=False)
    assert float(loss_noisy) == pytest.approx(float(loss3), rel=1e-6)


def test_metrics_per_number_of_choices():
    rng = np.random.default_rng(0)
    counts = rng.choice([2, 3, 5], size=200)
    mask = (np.arange(5)[None, :] < counts[:, None]).astype(np.int32)
    logits = rng.normal(size=(200, 5)) * 3
    labels = np.array([rng.integers(c) for c in counts])
    got = multiple_choice_metrics(logits, mask, labels)
    # independent reference: each example scored on its own choices only
    right, nll = [], []
    for row, c, y in zip(logits, counts, labels, strict=True):
        real = row[:c]
        right.append(int(np.argmax(real)) == y)
        nll.append(np.log(np.exp(real - real.max()).sum()) - (real[y] - real.max()))
    right = np.array(right)
    assert got["accuracy"] == pytest.approx(right.mean())
    assert got["loss"] == pytest.approx(np.mean(nll))
    for k in (2, 3, 5):
        assert got[f"accuracy_n{k}"] == pytest.approx(right[counts == k].mean())
        assert got[f"examples_n{k}"] == float((counts == k).sum())
    same = multiple_choice_metrics(logits[:, :4], np.ones((200, 4)), labels % 4)
    assert not any(k.startswith("accuracy_n") for k in same)  # one N: no per-N keys


def test_evaluate_reports_per_n_accuracy_on_a_mixed_file(synthetic_dir, tmp_path):
    mixed = synthetic_examples(6, seed=5, num_choices=4) + synthetic_examples(
        4, seed=6, num_choices=5)
    dev = write_jsonl(mixed, tmp_path / "mixed.jsonl")
    cfg, task = task_for(synthetic_dir, eval_file=str(dev))
    from albertkit.distributed.single import SingleProcess

    metrics = task.evaluate(task.build_model(), None, task.datasets(cfg, SingleProcess()),
                            cfg, None)
    assert metrics["examples_n4"] == 6.0 and metrics["examples_n5"] == 4.0
    assert task.best_metric == ("accuracy", True) and "accuracy" in metrics
    assert task.num_choices == 4  # the training file's (the eval file pads to its own)


# --------------------------------------------------------------------------- learning
def run_dir_summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


@pytest.mark.slow  # two ~3-minute trainings of the tiny config on 2 cores
def test_tiny_config_learns_the_synthetic_set_cli_and_python_identical(tmp_path):
    """The shipped tiny config reaches >= 90% held-out accuracy (chance 25%); the CLI and
    the Python API give the same summary."""
    from albertkit import AlbertTrainer, TrainerConfig

    data = write_synthetic_multiple_choice(tmp_path / "data")
    overrides = [f"data.train_file={data / 'train.jsonl'}", f"data.eval_file={data / 'dev.jsonl'}",
                 f"data.tokenizer={data / 'tokenizer'}", "logging.progress_bar=false"]
    cli_run, py_run = tmp_path / "cli", tmp_path / "python"
    proc = subprocess.run(
        [sys.executable, "-m", "albertkit.cli", "finetune", "--config", str(TINY_CONFIG),
         "--run-dir", str(cli_run), *[a for o in overrides for a in ("--set", o)]],
        capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    AlbertTrainer(TrainerConfig.from_yaml(TINY_CONFIG, [*overrides, f"run_dir={py_run}"])).fit()
    cli, py = run_dir_summary(cli_run), run_dir_summary(py_run)
    assert cli["eval"]["accuracy"] >= 0.90, cli["eval"]
    assert cli["eval"] == py["eval"]
    assert {k: v for k, v in cli["best"].items() if k != "path"} == {
        k: v for k, v in py["best"].items() if k != "path"}
    assert cli["step"] == py["step"]
    assert_bit_identical(cli_run, py_run)


def mc_raw_config(run_dir: Path, data: Path, max_steps: int) -> dict:
    return {
        "run_dir": str(run_dir),
        "model": {**MODEL, "hidden_dropout_prob": 0.1, "classifier_dropout_prob": 0.1},
        "data": {"kind": "multiple_choice", "train_file": str(data / "train.jsonl"),
                 "eval_file": str(data / "dev.jsonl"), "tokenizer": str(data / "tokenizer"),
                 "max_seq_length": 32},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3, "schedule": {"warmup_steps": 5}},
        "runtime": {"micro_batch_size": 4, "global_batch_size": 8, "max_steps": max_steps,
                    "eval_every_steps": 40, "xla": False, "seed": 5},
        "checkpoint": {"every_steps": 5, "keep_last": 3},
        "logging": {"log_every_steps": 5, "progress_bar": False, "tensorboard": False},
    }


@pytest.mark.slow  # two short trainings plus a restart
def test_kill9_resumes_bit_identical(synthetic_dir, tmp_path):
    """400 examples at 8 per step: an epoch is 50 steps; killed in the second epoch."""
    from albertkit import AlbertTrainer, TrainerConfig

    max_steps, kill_after = 120, 60
    reference = tmp_path / "reference"
    AlbertTrainer(TrainerConfig.model_validate(
        mc_raw_config(reference, synthetic_dir, max_steps))).fit()

    run, config = tmp_path / "killed", tmp_path / "killed.yaml"
    config.write_text(json.dumps(mc_raw_config(run, synthetic_dir, max_steps)))
    command = [sys.executable, "-m", "albertkit.cli", "finetune", "--config", str(config)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.time() + 400
    while latest_step(run) < kill_after and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training finished before it could be killed"
    for pid in processes_of(str(config), exclude=proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    killed_at = latest_step(run)
    assert kill_after <= killed_at < max_steps

    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = run_dir_summary(run)
    assert summary["resumed_from_step"] >= killed_at - 5 and summary["step"] == max_steps
    assert_bit_identical(reference, run)
    assert summary["eval"] == run_dir_summary(reference)["eval"]


# --------------------------------------------------------------------------- SageMaker
def test_launch_dry_run_of_the_race_config(tmp_path):
    """The RACE config with S3 channels for its data and model plans a SageMaker job."""
    import yaml

    raw = yaml.safe_load(RACE_CONFIG.read_text())
    raw["sagemaker"] = {"instance_type": "ml.g5.xlarge", "inputs": {
        "race": {"kind": "s3", "uri": "s3://bucket/RACE", "path_in_config": "data/RACE"},
        "model": {"kind": "s3", "uri": "s3://bucket/albert-base",
                  "path_in_config": "pretrained/albert-base"}}}
    config = tmp_path / "race_sagemaker.yaml"
    config.write_text(yaml.safe_dump(raw))
    env = {**os.environ,
           "ALBERTKIT_SM_ROLE_ARN": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
           "ALBERTKIT_SM_IMAGE_URI": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:1",
           "ALBERTKIT_SM_OUTPUT_PATH": "s3://albertkit-data-123456789012/output",
           "SAGEMAKER_VALIDATE_ROLE": "false"}
    proc = subprocess.run([sys.executable, "-m", "albertkit.cli", "launch", "--config",
                           str(config), "--dry-run"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    request = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert request["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    channels = {c["ChannelName"] for c in request["InputDataConfig"]}
    assert {"race", "model"} <= channels


# --------------------------------------------------------------------------- plugins
def test_a_plugin_can_subclass_the_task(synthetic_dir, builtins_only_registry):
    """A plugin's task built on MultipleChoiceTask (its own data kind, a different best
    metric) goes through the registry like any task and trains a step."""
    from typing import Literal

    from pydantic import Field

    from albertkit.config import TrainerConfig, register_task
    from albertkit.config.multiple_choice import MultipleChoiceData
    from albertkit.config.registry import DIRECT, run_registration
    from albertkit.distributed.single import SingleProcess
    from albertkit.tasks import build_task
    from albertkit.tasks.multiple_choice import MultipleChoiceTask

    class CommonsenseData(MultipleChoiceData):
        kind: Literal["commonsense"] = Field("commonsense")  # type: ignore[assignment]

    class CommonsenseTask(MultipleChoiceTask):
        name = "commonsense"

        @property
        def best_metric(self):
            return "loss", False

    run_registration(lambda: register_task("commonsense", CommonsenseTask,
                                           data=[CommonsenseData]), DIRECT)
    cfg = TrainerConfig.from_dict({
        "model": MODEL,
        "data": {"kind": "commonsense", "train_file": str(synthetic_dir / "train.jsonl"),
                 "tokenizer": str(synthetic_dir / "tokenizer"), "max_seq_length": 32},
        "runtime": {"micro_batch_size": 4, "global_batch_size": 4, "xla": False}})
    assert cfg.task == "commonsense"
    task = build_task(cfg, cfg.model.spec)
    assert type(task) is CommonsenseTask and task.best_metric == ("loss", False)
    batch = next(iter(task.datasets(cfg, SingleProcess()).train(accum=1)))
    assert tuple(batch["input_ids"].shape) == (1, 4, 4, 32)
    loss, stats = task.loss_and_stats(task.build_model(),
                                      {k: v[0] for k, v in batch.items()}, training=True)
    assert np.isfinite(float(loss)) and float(stats["examples"]) == 4.0


def test_an_example_with_fewer_choices_trains_beside_full_ones(synthetic_dir, tmp_path):
    """A file mixing 3- and 4-choice examples batches at 4 choices (the 3-choice ones
    padded and masked) and trains to finite losses."""
    from albertkit import AlbertTrainer, TrainerConfig

    mixed = synthetic_examples(24, seed=1, num_choices=4) + synthetic_examples(
        24, seed=2, num_choices=3)
    train = write_jsonl(mixed, tmp_path / "mixed.jsonl")
    raw = mc_raw_config(tmp_path / "run", synthetic_dir, max_steps=6)
    raw["data"].update(train_file=str(train), eval_file=str(train))
    raw["runtime"].update(eval_every_steps=0)
    trainer = AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    metrics = run_dir_summary(trainer.run_dir)["eval"]
    assert metrics["examples_n3"] == 24.0 and metrics["examples_n4"] == 24.0
    assert np.isfinite(metrics["loss"])
