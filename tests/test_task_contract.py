"""The task contract, checked the same way on every task (pretraining, SQuAD, classification,
multiple choice).

``run_task_contract_test(task, batch, ...)`` asserts what the trainer relies on:

* every member of the :class:`~albertkit.tasks.Task` protocol is there, and ``datasets``
  gives a :class:`~albertkit.tasks.TaskData`;
* stats are sums: one batch of 8 as 2 accumulated micro-batches of 4 (the shared step's
  in-graph accumulation) gives the stats, metrics and gradients of the batch taken whole;
* the same batch split over 2 replicas whose stats are all-reduced gives the stats and
  metrics of the whole batch too (run
  with two replicas on two logical CPUs in a subprocess, since TensorFlow's devices are
  fixed once it starts);
* a checkpoint written and restored through the checkpoint manager gives back identical
  weights, optimizer state and metrics.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_config

SEQ, PREDS, BATCH = 16, 4, 8
CHOICES = 3  # multiple choice: sequences per example (one example padded to 2 of them)
# No dropout anywhere: a split batch must see exactly the computation of the whole one.
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
              "classifier_dropout_prob": 0.0}
DATA = {
    "pretraining": {"kind": "synthetic", "seq_length": SEQ, "max_predictions_per_seq": PREDS},
    "squad": {"kind": "squad", "train_file": "train.json", "tokenizer": "tok",
              "max_seq_length": 24, "doc_stride": 4, "max_query_length": 8},
    "classification": {"kind": "classification", "task": "sst2", "train_file": "train.tsv",
                       "tokenizer": "tok", "max_seq_length": SEQ},
    "multiple_choice": {"kind": "multiple_choice", "train_file": "train.jsonl",
                        "tokenizer": "tok", "max_seq_length": SEQ, "num_choices": CHOICES},
}


def contract_case(name: str, seed: int = 0):
    """The task called ``name`` (built like the trainer builds it) and a batch of 8."""
    from albertkit.tasks import build_task

    cfg = make_tiny_config(model=NO_DROPOUT, data=DATA[name])
    task = build_task(cfg, cfg.model.spec)
    rng = np.random.default_rng(seed)
    vocab = cfg.model.spec.vocab_size
    seq = SEQ if name == "pretraining" else cfg.data.max_seq_length
    rows = BATCH * CHOICES if name == "multiple_choice" else BATCH
    lengths = rng.integers(seq // 2, seq + 1, size=rows)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(5, vocab, size=(rows, seq)).astype(np.int32) * mask
    batch = {"input_ids": ids, "input_mask": mask,
             "segment_ids": ((np.arange(seq)[None, :] >= lengths[:, None] // 2) * mask
                             ).astype(np.int32)}
    if name == "pretraining":
        pos = np.stack([rng.choice(np.arange(1, n), PREDS, replace=False) for n in lengths])
        batch.update(masked_lm_positions=pos.astype(np.int32),
                     masked_lm_ids=np.take_along_axis(ids, pos, 1).astype(np.int32),
                     masked_lm_weights=np.ones((BATCH, PREDS), np.float32),
                     next_sentence_labels=rng.integers(0, 2, size=BATCH).astype(np.int32))
    elif name == "multiple_choice":
        batch = {k: v.reshape(BATCH, CHOICES, seq) for k, v in batch.items()}
        choice_mask = np.ones((BATCH, CHOICES), np.int32)
        choice_mask[2, 2] = 0  # example 2 has two choices: its third is padding
        for k in batch:
            batch[k][2, 2] = 0
        batch.update(choice_mask=choice_mask,
                     labels=rng.integers(0, 2, size=BATCH).astype(np.int32))
    elif name == "squad":
        starts = rng.integers(0, seq // 2, size=BATCH)
        batch.update(start_positions=starts.astype(np.int32),
                     end_positions=(starts + rng.integers(0, 3, size=BATCH)).astype(np.int32))
    else:
        batch["labels"] = rng.integers(0, 2, size=BATCH).astype(np.int32)
    return cfg, task, batch


def _build(cfg, task, distributor, accum: int):
    import keras

    from albertkit.training.step import TrainStep

    keras.utils.set_random_seed(0)
    with distributor.scope():
        model = task.build_model()
        optimizer = cfg.optimizer.build(total_steps=cfg.runtime.max_steps)
        step = TrainStep(task, model, optimizer, distributor, cfg.runtime, accum,
                         cfg.optimizer.clip_norm)
    return model, optimizer, step


def _split(batch, parts: int):
    import tensorflow as tf

    return {k: tf.constant(v.reshape((parts, -1) + v.shape[1:])) for k, v in batch.items()}


def _assert_same_stats(task, a, b, what: str) -> None:
    keys = set(a) - {"grad_norm", "loss_scale", "finite"}
    assert keys == set(b) - {"grad_norm", "loss_scale", "finite"}, what
    for k in sorted(keys):
        np.testing.assert_allclose(float(a[k]), float(b[k]), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{what}: stat {k}")
    ma = task.metrics({k: float(a[k]) for k in keys})
    mb = task.metrics({k: float(b[k]) for k in keys})
    assert set(ma) == set(mb)
    for k in ma:
        assert ma[k] == pytest.approx(mb[k], rel=1e-5, abs=1e-6), f"{what}: metric {k}"


def run_task_contract_test(task, batch, cfg, checkpoint_dir: Path | None = None,
                           distributor=None) -> None:
    """Assert the task contract for ``task`` on ``batch`` (8 examples, NumPy arrays).

    Args:
        cfg: the config the task was built from (optimizer and runtime of the step).
        checkpoint_dir: where to check save/restore (skipped if None).
        distributor: a two-replica backend: check all-reduced stats (skipped if None).
    """
    import tensorflow as tf

    from albertkit.config import SiftingConfig
    from albertkit.distributed.single import SingleProcess
    from albertkit.tasks import TASK_NAMES, LogKeys, Task, TaskData

    # ---- the protocol
    assert isinstance(task, Task)
    assert task.name in TASK_NAMES and task.name == cfg.task
    assert isinstance(task.log_keys, LogKeys) and "loss" in task.log_keys.train
    assert set(task.log_keys.progress) <= set(task.log_keys.train) | {"f1", "pearson"}
    key, higher = task.best_metric
    assert isinstance(key, str) and isinstance(higher, bool)
    assert task.micro_batch_size == cfg.runtime.micro_batch_size
    for member in ("build_model", "dummy_batch", "loss_and_stats", "example_losses", "metrics",
                   "datasets", "evaluate"):
        assert callable(getattr(task, member)), member
    dummy = task.dummy_batch(2)
    assert set(dummy) == set(batch), "dummy_batch has the features of a real batch"
    data = task.datasets(cfg, SingleProcess())  # cheap: examples are read on first use
    assert isinstance(data, TaskData) and isinstance(data.has_eval, bool)

    # ---- accumulated (2 x 4) == whole (1 x 8)
    _, _, whole = _build(cfg, task, SingleProcess(), accum=1)
    g1, s1 = whole._compute(_split(batch, 1), tf.constant(1.0))
    _, _, accumulated = _build(cfg, task, SingleProcess(), accum=2)
    g2, s2 = accumulated._compute(_split(batch, 2), tf.constant(1.0))
    _assert_same_stats(task, s1, s2, "accumulated")
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)

    # ---- per-example losses (what sifting ranks by) average to the batch's loss: every
    # example of the case has the same number of masked tokens, so the MLM's token mean
    # is the mean of the per-sequence means
    model = whole.model
    tensors = {k: tf.constant(v) for k, v in batch.items()}
    per_example = task.example_losses(model, tensors).numpy()
    assert per_example.shape == (8,) and per_example.dtype == np.float32
    loss, _ = task.loss_and_stats(model, tensors, training=False)
    assert float(np.mean(per_example)) == pytest.approx(float(loss), rel=1e-5)
    one = task.example_losses(model, {k: v[3:4] for k, v in tensors.items()}).numpy()
    assert one[0] == pytest.approx(per_example[3], rel=1e-4), "a row's loss is its own"

    # ---- all-reduced over 2 replicas (1 x 4 each) == whole (1 x 8)
    if distributor is not None:
        assert distributor.replicas == 2
        ref = whole.evaluate_batch({k: tf.constant(v) for k, v in batch.items()})
        _, _, replicated = _build(cfg, task, distributor, accum=1)
        halves = [{k: v[4 * r: 4 * (r + 1)] for k, v in batch.items()} for r in range(2)]
        signature = {k: tf.TensorSpec((4,) + v.shape[1:], tf.as_dtype(v.dtype))
                     for k, v in batch.items()}
        data = tf.data.Dataset.from_generator(lambda: iter(halves),
                                              output_signature=signature)
        # each replica computes the stats of its half; evaluate_batch all-reduces them
        out = replicated.evaluate_batch(next(iter(distributor.distribute_dataset(data))))
        _assert_same_stats(task, ref, out, "all-reduced")
        # a sifted step (beta 0.5): each replica trains on the 2 hardest of its 4 examples,
        # the counters are summed over the replicas
        sift = cfg.model_copy(update={"runtime": cfg.runtime.model_copy(
            update={"sifting": SiftingConfig(beta=0.5, warmup_steps=0)})})
        _, _, sifted = _build(sift, task, distributor, accum=1)
        accum_halves = [{k: v[None] for k, v in h.items()} for h in halves]
        signature = {k: tf.TensorSpec((1, 4) + v.shape[1:], tf.as_dtype(v.dtype))
                     for k, v in batch.items()}
        data = tf.data.Dataset.from_generator(lambda: iter(accum_halves),
                                              output_signature=signature)
        out = sifted(next(iter(distributor.distribute_dataset(data))))
        assert (float(out["sift_seen"]), float(out["sift_kept"])) == (8.0, 4.0)
        assert float(out["finite"]) == 1.0

    # ---- save / restore through the checkpoint manager
    if checkpoint_dir is not None:
        from albertkit.training.checkpoint import CheckpointManager

        model, optimizer, step = _build(cfg, task, SingleProcess(), accum=1)
        step(_split(batch, 1))  # optimizer slots and counters hold something
        groups = {"model": list(model.variables), "optimizer": list(optimizer.variables),
                  "step": step.state_variables}
        manager = CheckpointManager(checkpoint_dir)
        manager.save(1, groups, {"task": task.name})
        before = step.evaluate_batch({k: tf.constant(v) for k, v in batch.items()})
        saved = [v.numpy().copy() for vs in groups.values() for v in vs]

        import keras

        keras.utils.set_random_seed(1)  # a differently initialised copy
        model2, optimizer2, step2 = _build(cfg, task, SingleProcess(), accum=1)
        step2(_split(batch, 1))
        groups2 = {"model": list(model2.variables), "optimizer": list(optimizer2.variables),
                   "step": step2.state_variables}
        ckpt = manager.latest()
        assert ckpt is not None and ckpt.step == 1 and ckpt.state["task"] == task.name
        manager.restore(ckpt, groups2)
        restored = [v.numpy() for vs in groups2.values() for v in vs]
        assert len(saved) == len(restored)
        for a, b in zip(saved, restored, strict=True):
            np.testing.assert_array_equal(a, b)
        after = step2.evaluate_batch({k: tf.constant(v) for k, v in batch.items()})
        _assert_same_stats(task, before, after, "restored")


@pytest.mark.parametrize("name", ["pretraining", "squad", "classification", "multiple_choice"])
def test_task_contract(name, tmp_path):
    cfg, task, batch = contract_case(name)
    run_task_contract_test(task, batch, cfg, checkpoint_dir=tmp_path / "checkpoints")


def test_every_task_has_a_contract_case():
    from albertkit.tasks import TASK_NAMES

    assert set(DATA) == set(TASK_NAMES)


_ALL_REDUCED = """
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, {tests!r})
from albertkit.distributed.multiworker import MultiWorkerDistributor
from test_task_contract import contract_case, run_task_contract_test

# one task per process: a second MirroredStrategy over the same devices in one process
# reuses the first one's collective keys, and training steps of different models then
# disagree on the shapes of "the same" collective
name = sys.argv[1]
dist = MultiWorkerDistributor(strategy=tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
cfg, task, batch = contract_case(name)
run_task_contract_test(task, batch, cfg, distributor=dist)
print("ALL_REDUCED_OK", name, flush=True)
"""


@pytest.mark.parametrize("name", ["pretraining", "squad", "classification", "multiple_choice"])
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_task_contract_all_reduced_over_two_replicas(name, tmp_path):
    script = tmp_path / "all_reduced.py"
    script.write_text(textwrap.dedent(_ALL_REDUCED.format(tests=str(Path(__file__).parent))))
    proc = subprocess.run([sys.executable, str(script), name], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"ALL_REDUCED_OK {name}" in proc.stdout, proc.stdout
