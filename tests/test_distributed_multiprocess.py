"""Distributed backends for real: 2 Horovod ranks (Gloo) and 2 multi-worker processes on
localhost, started by albertkit's own launcher, checked against NumPy and against a
single-process run of the trainer.

Horovod must be built (scripts/build_horovod.sh; CI does it): these tests fail, not skip,
when it is missing.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from albertkit.distributed.launch import launch_local

pytestmark = [pytest.mark.distributed, pytest.mark.slow]  # each test starts processes

BACKENDS = ["horovod", "tf_multiworker"]


def _launch(script: str, args: list[str], backend: str, tmp_path: Path, timeout: float = 240,
            grace: float = 5.0) -> tuple[int, str]:
    path = tmp_path / "worker.py"
    path.write_text(textwrap.dedent(script))
    out = io.StringIO()
    code = launch_local([sys.executable, str(path), *args], 2, backend, output=out,
                        timeout=timeout, grace_seconds=grace)
    return code, out.getvalue()


# ------------------------------------------------------------------------ collectives
_COLLECTIVES = """
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras
import numpy as np
import tensorflow as tf
from albertkit.config import DistributedConfig
from albertkit.distributed import build_distributor

backend, out_dir = sys.argv[1], sys.argv[2]
dist = build_distributor(DistributedConfig(backend=backend))
r = dist.rank
x = tf.constant([1.0, -2.0, 1000.0, 1e-3], tf.float32) * float(r + 1)


def step(x):
    g = dist.reduce_mean([x, tf.reshape(x, [2, 2])])
    s = dist.reduce_sum({"b": tf.reduce_sum(x), "a": tf.constant(1.0)})
    return {"mean": g[0], "mean2d": g[1], **s}


res = dist.local_value(dist.run(tf.function(step), x))
dist.fp16_compression = True
res16 = dist.local_value(dist.run(tf.function(step), x))
with dist.scope():
    f = keras.Variable(tf.zeros([3]), name="f")
    i = keras.Variable(tf.constant(0, tf.int64), name="i", trainable=False)
    b = keras.Variable(False, dtype="bool", name="b", trainable=False)
f.assign(tf.fill([3], float(r + 1)))
i.assign(10 * (r + 1))
b.assign(r == 0)
dist.broadcast_variables([f, i, b])
dist.barrier()
shard = [int(v) for v in dist.shard(tf.data.Dataset.range(11)).as_numpy_iterator()]

# a stop signal that reached only rank 1 stops both, at the same (agreed) step
import threading
from albertkit.training.hooks import StopSignal

event = threading.Event()
if r == 1:
    event.set()
stop = StopSignal(event, dist, check_every=5)
stops = [stop.requested(3), stop.requested(5)]
json.dump({
    "rank": r, "size": dist.size, "replicas": dist.replicas, "chief": dist.is_chief,
    "mean": res["mean"].numpy().tolist(), "mean2d": res["mean2d"].numpy().tolist(),
    "sum_a": float(res["a"]), "sum_b": float(res["b"]),
    "mean16": res16["mean"].numpy().tolist(), "dtype16": res16["mean"].dtype.name,
    "f": f.numpy().tolist(), "i": int(i.numpy()), "b": bool(b.numpy()), "shard": shard,
    "stops": stops,
}, open(os.path.join(out_dir, f"rank{r}.json"), "w"))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_collectives_two_processes(backend, tmp_path):
    code, log = _launch(_COLLECTIVES, [backend, str(tmp_path)], backend, tmp_path)
    assert code == 0, log[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    x = np.array([1.0, -2.0, 1000.0, 1e-3], np.float32)
    expected_mean = (x * 1 + x * 2) / 2
    for r, res in enumerate(ranks):
        assert (res["rank"], res["size"], res["replicas"], res["chief"]) == (r, 2, 2, r == 0)
        np.testing.assert_allclose(res["mean"], expected_mean, rtol=1e-6)
        np.testing.assert_allclose(np.ravel(res["mean2d"]), expected_mean, rtol=1e-6)
        assert res["sum_a"] == 2.0
        np.testing.assert_allclose(res["sum_b"], x.sum() * 3, rtol=1e-6)
        assert res["dtype16"] == "float32"
        np.testing.assert_allclose(res["mean16"], expected_mean, rtol=1e-3)
        # rank 0's values everywhere, for float, int64 and bool variables
        assert (res["f"], res["i"], res["b"]) == ([1.0, 1.0, 1.0], 10, True)
        assert res["stops"] == [False, True]
    shards = [set(res["shard"]) for res in ranks]
    assert not shards[0] & shards[1] and shards[0] | shards[1] == set(range(11))


# ------------------------------------------------------------------------ local replicas
_LOCAL_REPLICAS = """
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from albertkit.config import TrainerConfig
from albertkit.distributed.multiworker import MultiWorkerDistributor
from albertkit.distributed.single import SingleProcess
from albertkit.training.step import TrainStep
from albertkit.tasks import build_task
from albertkit.training.builders import resolve_spec

SEQ, PREDS, VOCAB = 16, 4, 97
cfg = TrainerConfig.from_dict({
    "model": {"size": "tiny", "vocab_size": VOCAB, "hidden_size": 32, "embedding_size": 16,
              "num_attention_heads": 2, "intermediate_size": 64, "num_hidden_layers": 2,
              "max_position_embeddings": 64, "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0, "classifier_dropout_prob": 0.0},
    "data": {"kind": "synthetic", "seq_length": SEQ, "max_predictions_per_seq": PREDS},
    "optimizer": {"kind": "lamb", "learning_rate": 1e-2, "clip_norm": 0.05},
    "runtime": {"micro_batch_size": 4, "global_batch_size": 16, "max_steps": 10, "xla": False},
})


def batch(n, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, size=(n, SEQ)).astype(np.int32)
    pos = np.stack([rng.choice(np.arange(1, SEQ), PREDS, replace=False) for _ in range(n)])
    return {"input_ids": ids, "input_mask": np.ones((n, SEQ), np.int32),
            "segment_ids": (np.arange(SEQ)[None] >= SEQ // 2).repeat(n, 0).astype(np.int32),
            "masked_lm_positions": pos.astype(np.int32),
            "masked_lm_ids": np.take_along_axis(ids, pos, 1).astype(np.int32),
            "masked_lm_weights": np.ones((n, PREDS), np.float32),
            "next_sentence_labels": rng.integers(0, 2, size=n).astype(np.int32)}


def build(dist, accum):
    keras.utils.set_random_seed(0)
    task = build_task(cfg, resolve_spec(cfg))
    with dist.scope():
        model = task.build_model()
        opt = cfg.optimizer.build(cfg.runtime.max_steps)
        step = TrainStep(task, model, opt, dist, cfg.runtime, accum, cfg.optimizer.clip_norm)
    return model, step


batches = [batch(16, s) for s in range(3)]
stack = lambda b, a: {k: tf.constant(v.reshape((a, -1) + v.shape[1:])) for k, v in b.items()}
m1, s1 = build(SingleProcess(), 4)            # 4 micro-batches of 4 on one replica
outs1 = [s1(stack(b, 4)) for b in batches]

dist = MultiWorkerDistributor(strategy=tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
assert dist.replicas == 2 and dist.local_replicas == 2
m2, s2 = build(dist, 2)                        # 2 replicas x 2 micro-batches of 4


def replica_batches():
    for b in batches:                          # replica r gets micro-batches 2r, 2r+1
        st = stack(b, 4)
        for r in range(2):
            yield {k: v[2 * r: 2 * r + 2] for k, v in st.items()}


spec = {k: tf.TensorSpec((2, 4) + v.shape[1:], tf.as_dtype(v.dtype)) for k, v in batches[0].items()}
it = iter(dist.distribute_dataset(tf.data.Dataset.from_generator(replica_batches,
                                                                 output_signature=spec)))
outs2 = [s2(next(it)) for _ in batches]
for o1, o2 in zip(outs1, outs2):
    for k in o1:
        np.testing.assert_allclose(float(o1[k]), float(o2[k]), rtol=1e-4, atol=1e-5, err_msg=k)
assert float(outs1[0]["grad_norm"]) > 0.05    # clipping was active
for a, b in zip(m1.variables, m2.variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5, err_msg=a.path)
assert int(s2.optimizer.iterations.numpy()) == 3
print("LOCAL_REPLICAS_OK", flush=True)
"""


def test_multiworker_local_replicas_match_single_process(tmp_path):
    """Two replicas in one worker (the multi-GPU layout, on two logical CPUs):
    LAMB with active clipping gives the single-process weights and metrics."""
    path = tmp_path / "local.py"
    path.write_text(textwrap.dedent(_LOCAL_REPLICAS))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "LOCAL_REPLICAS_OK" in proc.stdout, proc.stderr[-4000:]


# ------------------------------------------------------------------------ failures
_FAILING = """
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from albertkit.config import DistributedConfig
from albertkit.distributed import build_distributor

dist = build_distributor(DistributedConfig(backend=sys.argv[1]))
step = tf.function(lambda x: dist.reduce_mean([x])[0])
dist.local_value(dist.run(step, tf.constant([1.0])))   # both ranks are up and talking
if dist.rank == 1:
    raise RuntimeError("rank 1 fails on purpose")
while True:                                             # rank 0 waits in a collective
    dist.local_value(dist.run(step, tf.constant([1.0])))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_rank_ends_the_job(backend, tmp_path):
    start = time.monotonic()
    code, log = _launch(_FAILING, [backend], backend, tmp_path, timeout=200, grace=3.0)
    elapsed = time.monotonic() - start
    assert code not in (0, 124), (code, log[-3000:])  # an error, not a success or a timeout
    assert "rank 1 fails on purpose" in log
    assert elapsed < 150, elapsed


# ------------------------------------------------------------------------ trainer end to end
def _trainer_config(run_dir: Path) -> dict:
    """Tiny ALBERT on synthetic data. AdamW with a large epsilon makes the update linear in
    the gradient (m / (sqrt(v) + eps) ~ m / eps), so a mis-scaled or mis-sharded all-reduce
    changes the weights; (LAMB and plain Adam would hide a wrong gradient scale)."""
    return {
        "run_dir": str(run_dir),
        "model": {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 32, "hidden_dropout_prob": 0.0,
                  "attention_probs_dropout_prob": 0.0, "classifier_dropout_prob": 0.0},
        "data": {"kind": "synthetic", "seq_length": 24, "max_predictions_per_seq": 4,
                 "num_examples": 256, "eval_examples": 32},
        "optimizer": {"kind": "adamw", "learning_rate": 0.05, "epsilon": 1.0,
                      "clip_norm": None, "schedule": {"warmup_steps": 0}},
        "runtime": {"micro_batch_size": 4, "global_batch_size": 16, "max_steps": 3,
                    "eval_every_steps": 0, "eval_steps": 100, "xla": True, "seed": 3},
        "checkpoint": {"every_steps": 1000},
        "logging": {"log_every_steps": 1, "progress_bar": False, "tensorboard": True},
    }


def _checkpoints(run_dir: Path) -> list[Path]:
    return sorted(p for p in (run_dir / "checkpoints").iterdir())


def _written_files(run_dir: Path) -> list[str]:
    """Every file in the run directory, with per-run names (event files) generalised."""
    names = []
    for p in sorted(run_dir.rglob("*")):
        if p.is_file():
            rel = p.relative_to(run_dir).as_posix()
            names.append(rel.split(".tfevents.")[0] + ".tfevents" if ".tfevents." in rel else rel)
    return sorted(names)


# what `albertkit pretrain --config C --distributed B` does in each process
_TRAIN = """
import logging, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from albertkit.config import TrainerConfig
from albertkit.training.run_logger import setup_console_logging
from albertkit.training.trainer import AlbertTrainer

setup_console_logging()
cfg = TrainerConfig.from_yaml(sys.argv[1], [f"distributed.backend={sys.argv[2]}"])
AlbertTrainer(cfg).fit()
"""


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> Path:
    """The reference: one process, global batch 16 as 4 micro-batches of 4."""
    from albertkit.config import TrainerConfig
    from albertkit.training.trainer import AlbertTrainer

    run_dir = tmp_path_factory.mktemp("single") / "run"
    AlbertTrainer(TrainerConfig.from_dict(_trainer_config(run_dir))).fit()
    return run_dir


@pytest.mark.parametrize("backend", BACKENDS)
def test_trainer_two_processes_equal_single_process(backend, single_run, tmp_path):
    import yaml
    from safetensors.numpy import load_file

    run_dir = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(_trainer_config(run_dir)))
    code, log = _launch(_TRAIN, [str(config), backend], backend, tmp_path, timeout=300)
    assert code == 0, log[-4000:]

    # exactly one checkpoint, and the same files as a single-process run (nothing per rank)
    (ckpt,) = _checkpoints(run_dir)
    (ref_ckpt,) = _checkpoints(single_run)
    assert ckpt.name == ref_ckpt.name
    assert _written_files(run_dir) == _written_files(single_run)

    # the same weights after 3 steps of global batch 16 (2 ranks x 2 micro-batches x 4)
    got, want = load_file(str(ckpt / "model.safetensors")), load_file(str(ref_ckpt / "model.safetensors"))
    assert sorted(got) == sorted(want)
    initial_moved = 0
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)
    opt_got = load_file(str(ckpt / "optimizer.safetensors"))
    opt_want = load_file(str(ref_ckpt / "optimizer.safetensors"))
    for name in opt_want:
        np.testing.assert_allclose(opt_got[name], opt_want[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)
        initial_moved += int(np.any(opt_want[name] != 0))
    assert initial_moved > 0  # the optimizer really stepped

    # metrics are global: the same numbers as the single process saw on the whole batch
    summary = json.loads((run_dir / "summary.json").read_text())
    ref = json.loads((single_run / "summary.json").read_text())
    assert (summary["replicas"], summary["accumulation_steps"]) == (2, 2)
    assert (ref["replicas"], ref["accumulation_steps"]) == (1, 4)
    for section in ("train", "eval"):
        for k, v in ref[section].items():
            if k == "seq_per_s" or not isinstance(v, float):
                continue
            assert summary[section][k] == pytest.approx(v, rel=1e-4, abs=1e-5), (section, k)

    # the time breakdown holds every rank's figures, gathered to the chief each window
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    times = [r for r in records if r["kind"] == "time"]
    assert [r["step"] for r in times] == [1, 2, 3]
    for r in times:
        assert 0 < r["rank0_cpu_util"] <= 1 and 0 < r["rank1_cpu_util"] <= 1, r
        assert 0 <= r["rank1_input_share"] <= 1, r
    assert "compute_s" in times[-1] and times[-1]["compute_s"] > 0  # from the split at step 3

    # one log stream: only rank 0 prints the metric lines (3 steps + the final eval)
    lines = [ln for ln in log.splitlines() if "albertkit step=" in ln or "albertkit eval" in ln]
    assert len(lines) == 4, lines
    assert all(ln.replace("[hvd] ", "").startswith("[0]") for ln in lines), lines
    metrics = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == len((single_run / "metrics.jsonl").read_text().splitlines())


@pytest.mark.parametrize("backend", BACKENDS)
def test_sifting_and_profile_two_processes(backend, tmp_path):
    """One 2-process run with two features that only differ across ranks (one run, since
    each costs a minute of process start-up and tracing on two cores):
    - runtime.sifting: each rank keeps the hardest half of its own 8 examples per step after
      a 1-step warm-up; the counters are summed over the ranks;
    - runtime.profile with ranks [1]: only rank 1 writes a trace (under tensorboard/rank1),
      and the profile plugin lists it; rank 0 writes none.
    Without XLA: neither feature depends on it (sifting under XLA is test_sifting's), and its
    compilation costs each process about 6 s of the test's minute."""
    import argparse

    import yaml
    from tensorboard.plugins import base_plugin
    from xprof.profile_plugin import ProfilePlugin

    run_dir = tmp_path / "run"
    raw = _trainer_config(run_dir)
    raw["runtime"]["xla"] = False
    raw["runtime"]["sifting"] = {"beta": 0.5, "warmup_steps": 1}
    raw["runtime"]["profile"] = {"start_step": 2, "num_steps": 1, "ranks": [1]}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    code, log = _launch(_TRAIN, [str(config), backend], backend, tmp_path, timeout=300)
    assert code == 0, log[-4000:]

    # sifting: 3 steps of 16: the first trains on all 16, the next two on 2 ranks x 4
    summary = json.loads((run_dir / "summary.json").read_text())
    s = summary["sifting"]
    assert (s["sift_examples_seen"], s["sift_examples_kept"], s["sift_examples_scored"]) \
        == (48, 16 + 2 * 8, 2 * 16)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["sift_kept_share"] for r in train] == [1.0, 0.5, 0.5]
    assert [r["skipped_steps"] for r in train] == [0.0, 0.0, 0.0]
    assert all(np.isfinite(r["loss"]) for r in train)

    # profile: rank 1 only
    logdir = run_dir / "tensorboard"
    assert not list(logdir.glob("plugins/profile/*/*.xplane.pb"))  # rank 0 was not asked
    assert len(list(logdir.glob("rank1/plugins/profile/*/*.xplane.pb"))) == 1
    ctx = base_plugin.TBContext(logdir=str(logdir), data_provider=None,
                                flags=argparse.Namespace(master_tpu_unsecure_channel=""))
    runs = ProfilePlugin(ctx).runs_imp()
    assert len(runs) == 1 and runs[0].startswith("rank1/"), runs
