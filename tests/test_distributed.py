"""Distributed backends, unit level: cluster configs, factory, launcher, compression.

Multi-process runs (2 Horovod ranks, 2 multi-worker processes, the trainer against a
single-process reference) are in test_distributed_multiprocess.py.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albertkit.config import ConfigError, DistributedConfig
from albertkit.distributed import build_distributor
from albertkit.distributed.compression import compress_for_mean, decompress_mean
from albertkit.distributed.launch import (
    LAUNCHED_ENV,
    cli_command,
    free_ports,
    horovodrun_command,
    launch_if_requested,
    launch_local,
    local_tf_configs,
)
from albertkit.distributed.multiworker import (
    MultiWorkerDistributor,
    cluster_position,
    tf_config_from_environ,
    validate_tf_config,
)
from albertkit.distributed.single import SingleProcess


# ------------------------------------------------------------------------ TF_CONFIG
def test_tf_config_from_environment_wins_over_sagemaker():
    cfg = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    env = {"TF_CONFIG": json.dumps(cfg), "SM_HOSTS": '["x", "y"]', "SM_CURRENT_HOST": "x"}
    assert tf_config_from_environ(env) == cfg
    assert cluster_position(cfg) == (1, 2)


def test_sagemaker_variables_are_not_read_here():
    # SageMaker's host list is the entry point's business (albertkit.sagemaker.entrypoint
    # writes TF_CONFIG from it); the distributed layer reads TF_CONFIG only
    env = {"SM_HOSTS": '["algo-2", "algo-1", "algo-3"]', "SM_CURRENT_HOST": "algo-2"}
    assert tf_config_from_environ(env) is None


@pytest.mark.parametrize("env", [{}, {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1"},
                                 {"TF_CONFIG": "{}"}, {"TF_CONFIG": "  "}])
def test_no_cluster_means_a_single_machine(env):
    assert tf_config_from_environ(env) is None
    assert cluster_position(None) == (0, 1)


def test_chief_is_rank_zero_and_workers_follow():
    cluster = {"chief": ["c:1"], "worker": ["w0:1", "w1:1"]}
    assert cluster_position({"cluster": cluster, "task": {"type": "chief", "index": 0}}) == (0, 3)
    assert cluster_position({"cluster": cluster, "task": {"type": "worker", "index": 1}}) == (2, 3)


@pytest.mark.parametrize("env, match", [
    ({"TF_CONFIG": "{not json"}, "TF_CONFIG: malformed JSON at line 1"),
    ({"TF_CONFIG": json.dumps({"cluster": {"ps": ["a:1"], "worker": ["b:1"]},
                               "task": {"type": "worker", "index": 0}})}, r"\['ps'\]"),
    ({"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]},
                               "task": {"type": "worker", "index": 3}})}, "task.index=3"),
    ({"TF_CONFIG": json.dumps({"cluster": {"worker": ["a"]},
                               "task": {"type": "worker", "index": 0}})}, "host:port"),
    ({"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]}})}, "task.type"),
])
def test_bad_cluster_descriptions_name_the_variable(env, match):
    with pytest.raises(ConfigError, match=match):
        tf_config_from_environ(env)


def test_validate_rejects_two_chiefs():
    with pytest.raises(ConfigError, match="at most one chief"):
        validate_tf_config({"cluster": {"chief": ["a:1", "b:1"]},
                            "task": {"type": "chief", "index": 0}})


# ------------------------------------------------------------------------ factory
def test_build_distributor_single():
    dist = build_distributor(DistributedConfig())
    assert isinstance(dist, SingleProcess) and dist.is_chief and dist.replicas == 1


def test_build_distributor_multiworker_without_cluster_is_one_local_worker():
    dist = build_distributor(DistributedConfig(backend="tf_multiworker"), environ={})
    assert isinstance(dist, MultiWorkerDistributor)
    assert (dist.rank, dist.size, dist.replicas, dist.is_chief) == (0, 1, 1, True)
    ds = tf.data.Dataset.range(6)
    assert list(dist.shard(ds).as_numpy_iterator()) == list(range(6))
    # reductions are replica-context collectives: they refuse to run outside `run`
    with pytest.raises(RuntimeError, match="inside distributor.run"):
        dist.reduce_sum({"a": tf.constant(1.0)})
    out = dist.local_value(dist.run(lambda x: dist.reduce_sum({"a": x}), tf.constant(2.0)))
    assert float(out["a"]) == 2.0


def test_horovod_missing_gives_the_build_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "horovod.tensorflow", None)  # import now fails
    with pytest.raises(ImportError, match="scripts/build_horovod.sh"):
        build_distributor(DistributedConfig(backend="horovod"))


# ------------------------------------------------------------------------ compression
def test_fp16_compression_round_trip_matches_numpy_mean():
    rng = np.random.default_rng(0)
    size = 4
    per_rank = [rng.normal(scale=100.0, size=(5, 3)).astype(np.float32) for _ in range(size)]
    packed = [compress_for_mean([tf.constant(x), tf.constant([7], tf.int64)], size)
              for x in per_rank]
    assert packed[0][0].dtype == tf.float16 and packed[0][1].dtype == tf.int64
    summed = [tf.add_n([p[i] for p in packed]) for i in range(2)]  # what the all-reduce does
    mean, ints = decompress_mean(summed, [tf.constant(per_rank[0]), tf.constant([7], tf.int64)],
                                 size)
    assert mean.dtype == tf.float32
    np.testing.assert_allclose(mean.numpy(), np.mean(per_rank, axis=0), rtol=2e-3, atol=0.05)
    assert ints.numpy().tolist() == [7]


def test_fp16_compression_averages_before_summing():
    # 4 ranks x 30000 overflows float16 (max 65504) if summed first; pre-divided it does not
    size = 4
    packed = compress_for_mean([tf.fill([3], 30000.0)], size)[0]
    total = tf.add_n([packed] * size)
    (mean,) = decompress_mean([total], [tf.fill([3], 30000.0)], size)
    np.testing.assert_allclose(mean.numpy(), 30000.0, rtol=1e-3)


# ------------------------------------------------------------------------ launcher helpers
def test_free_ports_and_local_tf_configs():
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(p > 0 for p in ports)
    configs = local_tf_configs(ports)
    assert [c["task"]["index"] for c in configs] == [0, 1, 2]
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)
    assert [cluster_position(validate_tf_config(c)) for c in configs] == [(0, 3), (1, 3), (2, 3)]


def test_horovodrun_command():
    cmd = horovodrun_command(["python", "x.py", "--a"], 4, horovodrun="/bin/horovodrun")
    assert cmd == ["/bin/horovodrun", "-np", "4", "-H", "localhost:4", "--gloo",
                   "python", "x.py", "--a"]
    cmd = horovodrun_command(["x"], 16, hosts="h1:8,h2:8", use_mpi=True, horovodrun="hr")
    assert cmd == ["hr", "-np", "16", "-H", "h1:8,h2:8", "--mpi", "x"]
    with pytest.raises(ConfigError, match=">= 1"):
        horovodrun_command(["x"], 0, horovodrun="hr")


def test_launch_if_requested_decides_where_to_run(monkeypatch):
    monkeypatch.delenv(LAUNCHED_ENV, raising=False)
    assert launch_if_requested(None, "tf_multiworker", []) is None
    assert launch_if_requested(1, "single", []) is None
    with pytest.raises(ConfigError, match="--nproc 2 needs --distributed"):
        launch_if_requested(2, "single", [])
    monkeypatch.setenv(LAUNCHED_ENV, "1")  # inside a launched process: train here
    assert launch_if_requested(2, "tf_multiworker", []) is None
    assert cli_command(["pretrain"])[-3:] == ["-m", "albertkit.cli", "pretrain"]


_RANK_SCRIPT = """
import json, os, signal, sys, time
rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
print(f"hello from {rank} launched={os.environ.get('ALBERTKIT_LAUNCHED')}", flush=True)
mode = sys.argv[1]
if mode == "ok":
    sys.exit(0)
if rank == 1:
    while not os.path.exists(sys.argv[2]):        # (until rank 0 says it is deaf)
        time.sleep(0.01)
    sys.exit(3)                                   # a rank fails ...
signal.signal(signal.SIGTERM, signal.SIG_IGN)     # ... while its peer is stuck and deaf
open(sys.argv[2] + ".tmp", "w").write(str(os.getpid()))
os.replace(sys.argv[2] + ".tmp", sys.argv[2])
time.sleep(300)
"""


def test_local_launcher_prefixes_output_and_succeeds():
    out = io.StringIO()
    code = launch_local([sys.executable, "-c", _RANK_SCRIPT, "ok"], 2, "tf_multiworker",
                        output=out, timeout=60)
    assert code == 0
    lines = sorted(out.getvalue().splitlines())
    assert lines == ["[0] hello from 0 launched=1", "[1] hello from 1 launched=1"]


def test_local_launcher_stops_everything_when_one_rank_fails(tmp_path):
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    code = launch_local([sys.executable, "-c", _RANK_SCRIPT, "fail", str(pid_file)], 2,
                        "tf_multiworker", output=io.StringIO(), grace_seconds=1.0, timeout=120)
    elapsed = time.monotonic() - start
    assert code == 3
    assert elapsed < 30, elapsed
    stuck = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(stuck, 0)  # the deaf peer was killed (SIGKILL after the grace period)


def test_local_launcher_timeout():
    script = "import time; time.sleep(300)"
    start = time.monotonic()
    code = launch_local([sys.executable, "-c", script], 2, "tf_multiworker",
                        output=io.StringIO(), timeout=1.0, grace_seconds=1.0)
    assert code == 124 and time.monotonic() - start < 20


def test_local_launcher_rejects_single_backend():
    with pytest.raises(ConfigError, match="local launch needs"):
        launch_local(["true"], 2, "single")


# ------------------------------------------------------------------------ data shards
@pytest.mark.parametrize("repeat", [False, True])
def test_synthetic_shards_are_disjoint_covering_and_match_the_single_stream(repeat):
    from albertkit.data.pretraining_dataset import build_synthetic_dataset

    def batches(shard_index=0, num_shards=1, n=None):
        ds = build_synthetic_dataset(vocab_size=50, seq_length=16, max_predictions_per_seq=3,
                                     batch_size=2, num_examples=14, seed=5, repeat=repeat,
                                     shard_index=shard_index, num_shards=num_shards)
        return list((ds.take(n) if n else ds).as_numpy_iterator())

    n = 10 if repeat else None              # 7 batches per epoch; 10 = across an epoch end
    single = batches(n=2 * n if repeat else None)
    shards = [batches(r, 2, n) for r in range(2)]
    if not repeat:                           # 7 batches cut to 6: 3 per worker, none dropped twice
        assert [len(s) for s in shards] == [3, 3]
    for r, shard in enumerate(shards):
        for j, got in enumerate(shard):      # worker r's j-th batch = position r + 2j
            want = single[r + 2 * j]
            for k in want:
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"{r}/{j}/{k}")
    positions = sorted(r + 2 * j for r in range(2) for j in range(len(shards[r])))
    assert positions == list(range(len(positions)))  # disjoint and covering


# ------------------------------------------------------------------------ cost model
def test_communication_cost_model_by_hand():
    from albertkit.config.sizes import SIZES, AlbertSpec
    from albertkit.models.footprint import parameter_count
    from albertkit.plan.cost import (
        REFERENCE_GPUS_PER_NODE,
        REFERENCE_SEQ_PER_S_PER_NODE,
        gradient_bytes,
        predict,
        ring_bytes_per_link,
    )

    assert gradient_bytes(10) == 40 and gradient_bytes(10, fp16_compression=True) == 20
    assert ring_bytes_per_link(100.0, 1) == 0.0
    assert ring_bytes_per_link(100.0, 2) == 100.0
    assert ring_bytes_per_link(100.0, 8) == 175.0

    base = AlbertSpec(**SIZES["base"])
    params = parameter_count(base)
    assert params == 11_813_810  # counted from the built Keras model
    p = predict(base, nodes=8, link_gbps=100.0, link_efficiency=0.7)
    assert p.bytes_per_step == 4 * params
    assert p.link_bytes_per_step == pytest.approx(2 * 7 / 8 * 4 * params)
    assert p.comm_seconds == pytest.approx(p.link_bytes_per_step / (100e9 / 8 * 0.7))
    # calibration: 64 sequences per GPU take as long as the reference's 116.4 seq/s says
    per_gpu_rate = REFERENCE_SEQ_PER_S_PER_NODE / REFERENCE_GPUS_PER_NODE
    assert p.compute_seconds == pytest.approx(64 / per_gpu_rate)
    assert p.efficiency == pytest.approx(p.compute_seconds / (p.compute_seconds + p.comm_seconds))
    assert 0.98 < p.efficiency < 0.99
    # all-reducing every micro-batch (accumulation 4) moves 4x the bytes; fp16 halves them
    every = predict(base, nodes=8, reduce_every_micro_batch=True)
    assert every.bytes_per_step == 4 * p.bytes_per_step and every.efficiency < p.efficiency
    assert predict(base, nodes=8, fp16_compression=True).comm_seconds == pytest.approx(
        p.comm_seconds / 2)
    assert predict(base, nodes=1).efficiency == 1.0
    with pytest.raises(ValueError, match="not a multiple of micro_batch=48"):
        predict(base, nodes=8, micro_batch=48)
