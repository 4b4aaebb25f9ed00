"""Start-up failures of a multi-process job, bounded: a rank that never joins is named by
every other rank within ``distributed.startup_timeout_s``, and a Horovod asked for a
controller it was built without stops in one line instead of crashing.

Both were found on a two-node Slurm cluster: with ``SLURM_PROCID`` unset on rank 1 only,
tf_multiworker's rank 0 still waited after 400 s and Horovod's Gloo aborted with a C++
``terminate``; ``HOROVOD_CONTROLLER=mpi`` on a Horovod built without MPI segfaulted inside
``hvd.init()``. The fast tests run the start-up check in threads; the slow ones start the CLI
as the tasks of a simulated two-node step (two names of this machine, as in
tests/test_distributed_cluster.py), with a small timeout and a wall-clock bound.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from albertkit.config import ConfigError, DistributedConfig
from albertkit.distributed.cluster import ClusterInfo, slurm_cluster
from albertkit.distributed.startup import REPLY_GRACE, wait_for_all_ranks
from conftest import tiny_raw_config

NODES = ("localhost", "127.0.0.1", "127.0.0.2")  # three names of this machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _step_env(procid: int, port: int, size: int = 2, job: str = "42") -> dict[str, str]:
    """What srun gives task ``procid`` of a step with one task on each of ``size`` nodes."""
    nodes = ",".join(NODES[:size])
    return {"SLURM_JOB_ID": job, "SLURM_STEP_ID": "0", "SLURM_PROCID": str(procid),
            "SLURM_LOCALID": "0", "SLURM_NODEID": str(procid), "SLURMD_NODENAME": NODES[procid],
            "SLURM_STEP_NODELIST": nodes, "SLURM_JOB_NODELIST": nodes,
            "SLURM_STEP_TASKS_PER_NODE": f"1(x{size})", "SLURM_TASKS_PER_NODE": f"1(x{size})",
            "SLURM_STEP_NUM_TASKS": str(size), "SLURM_NTASKS": str(size),
            "ALBERTKIT_PORT": str(port)}


def _run_ranks(ranks, port: int, timeout: float, size: int = 3, delays=None, job="42"
               ) -> dict[int, tuple[str, float]]:
    """Run the check of each rank in ``ranks`` in a thread (after its delay): rank ->
    ("ok" or the error text, seconds from its own start)."""
    results: dict[int, tuple[str, float]] = {}

    def one(rank: int) -> None:
        time.sleep((delays or {}).get(rank, 0.0))
        start = time.monotonic()
        try:
            wait_for_all_ranks(slurm_cluster(_step_env(rank, port, size, job)), timeout)
            results[rank] = ("ok", time.monotonic() - start)
        except ConfigError as e:
            results[rank] = (str(e), time.monotonic() - start)

    threads = [threading.Thread(target=one, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + REPLY_GRACE + 30)
    assert not any(t.is_alive() for t in threads), "a rank still waits"
    return results


# ------------------------------------------------------------------------ the check itself
def test_all_ranks_join_and_the_port_is_free_again_at_once():
    port = _free_port()
    # the others start first and keep trying until rank 0 listens
    got = _run_ranks([1, 2, 0], port, timeout=20, delays={0: 1.0, 2: 0.3})
    assert {r: text for r, (text, _) in got.items()} == {0: "ok", 1: "ok", 2: "ok"}
    assert got[0][1] < 3.0  # rank 0 waited for the next retry of the others, not more
    # the backend binds the same port next (TensorFlow's worker 0, Horovod's rendezvous):
    # the ranks closed first, so no connection of rank 0 lingers on it (no SO_REUSEADDR here)
    with socket.socket() as s:
        s.bind(("", port))


def test_a_rank_that_never_comes_is_named_by_every_rank_within_the_timeout():
    port = _free_port()
    got = _run_ranks([0, 1], port, timeout=3)  # rank 2 (on 127.0.0.2) never starts
    line = ("start-up: rank 2 (127.0.0.2) of 3 did not join within 3 s "
            "(distributed.startup_timeout_s); its own output says why it stopped or never "
            "started")
    assert got[0][0] == got[1][0] == line
    assert 2.9 < got[0][1] < 6 and got[1][1] < 6


def test_without_rank_0_every_rank_gives_up_naming_it():
    port = _free_port()
    got = _run_ranks([1, 2], port, timeout=2)
    for rank in (1, 2):
        text, seconds = got[rank]
        assert text.startswith(f"start-up: rank 0 (localhost:{port}) did not answer rank "
                               f"{rank} within 2 s (distributed.startup_timeout_s; "), text
        assert seconds < 4
    assert "\n" not in got[1][0]


def test_a_rank_of_another_job_is_turned_away():
    port = _free_port()
    got: dict[int, tuple[str, float]] = {}
    t0 = threading.Thread(target=lambda: got.update(_run_ranks([0], port, 4, size=2)))
    t0.start()
    stray = _run_ranks([1], port, 4, size=2, delays={1: 0.5}, job="43")  # same port, job 43
    t0.join(30)
    assert stray[1][0].startswith(f"start-up: rank 0 at localhost:{port} turned rank 1 away: "
                                  "rank 1 describes another job than rank 0 (job 42, 2 ranks")
    assert stray[1][1] < 3  # at once, not after the timeout
    assert got[0][0].startswith("start-up: rank 1 (127.0.0.1) of 2 did not join within 4 s")


def test_a_stranger_on_the_port_does_not_stop_the_job():
    port = _free_port()

    def stranger() -> None:
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            s.recv(100)

    t = threading.Thread(target=stranger)
    t.start()
    got = _run_ranks([0, 1], port, timeout=10, size=2, delays={1: 1.5})
    t.join(10)
    assert {r: text for r, (text, _) in got.items()} == {0: "ok", 1: "ok"}


def test_nothing_is_checked_for_a_job_of_one_or_a_launcher_job():
    assert wait_for_all_ranks(ClusterInfo(), 1) == 0.0
    # mpirun / horovodrun watch their processes themselves: no worker addresses
    launched = ClusterInfo(rank=1, world_size=2, hosts=("h",), host="h", source="horovodrun")
    assert wait_for_all_ranks(launched, 1) == 0.0


def test_the_config_field():
    assert DistributedConfig().startup_timeout_s == 120.0
    assert DistributedConfig(startup_timeout_s=7.5).startup_timeout_s == 7.5
    with pytest.raises(ValueError, match="startup_timeout_s"):
        DistributedConfig(startup_timeout_s=0)


def test_the_doctor_names_a_rank_that_never_starts_before_its_watchdog(tmp_path):
    from albertkit.doctor import run_cluster_check

    env = _step_env(0, _free_port())
    start = time.monotonic()
    # the start-up check speaks at 8 s; the doctor's watchdog would end this process after
    # 16 s (exit 3: the test run fails)
    with pytest.raises(ConfigError, match=r"^start-up: rank 1 \(127\.0\.0\.1\) of 2 did not "
                                          r"join within 8 s"):
        run_cluster_check(slurm_cluster(env), "tf_multiworker", tmp_path, 16, environ=env)
    assert time.monotonic() - start < 14


# ------------------------------------------------------------------------ Horovod's build
class _Build:
    def __init__(self, mpi: bool, gloo: bool):
        self.mpi, self.gloo = mpi, gloo

    def mpi_built(self) -> bool:
        return self.mpi

    def gloo_built(self) -> bool:
        return self.gloo


@pytest.mark.parametrize(("environ", "mpi", "gloo", "match"), [
    ({"HOROVOD_CONTROLLER": "mpi"}, False, True,
     r"^HOROVOD_CONTROLLER=mpi but this Horovod was built without MPI \(horovod\.tensorflow"
     r"\.mpi_built\(\) is False\): unset HOROVOD_CONTROLLER \(or set it to gloo\) to use "
     r"Gloo, or rebuild Horovod with MPI \(`scripts/build_horovod.sh --mpi`"),
    ({"HOROVOD_CONTROLLER": "GLOO"}, True, False,
     r"^HOROVOD_CONTROLLER=gloo but this Horovod was built without Gloo .* set it to mpi\) "
     r"to use MPI, or rebuild Horovod with Gloo"),
    ({"HOROVOD_CONTROLLER": "mpi"}, False, False,
     r"built without MPI \(horovod.tensorflow.mpi_built\(\) is False\): rebuild Horovod with"),
])
def test_a_controller_the_build_lacks_is_named(environ, mpi, gloo, match):
    from albertkit.distributed.horovod import check_horovod_build

    with pytest.raises(ConfigError, match=match):
        check_horovod_build(environ, _Build(mpi, gloo))


@pytest.mark.parametrize("environ", [{}, {"HOROVOD_CONTROLLER": "gloo"},
                                     {"HOROVOD_CONTROLLER": "anything-else"}])
def test_a_controller_the_build_has_passes(environ):
    from albertkit.distributed.horovod import check_horovod_build

    check_horovod_build(environ, _Build(mpi=False, gloo=True))


def test_the_gloo_only_horovod_here_asked_for_mpi_stops_before_init():
    """This venv's Horovod is built with Gloo only (scripts/build_horovod.sh's default)."""
    import horovod.tensorflow as hvd

    from albertkit.distributed import build_distributor
    from albertkit.distributed.horovod import HorovodDistributor

    assert (hvd.mpi_built(), hvd.gloo_built()) == (False, True)
    with pytest.raises(ConfigError, match=r"^HOROVOD_CONTROLLER=mpi but this Horovod was "
                                          r"built without MPI"):
        build_distributor(DistributedConfig(backend="horovod"), {"HOROVOD_CONTROLLER": "mpi"})
    # the backend itself checks what hvd.init() reads
    os.environ["HOROVOD_CONTROLLER"] = "mpi"
    try:
        with pytest.raises(ConfigError, match="^HOROVOD_CONTROLLER=mpi but"):
            HorovodDistributor(pin_gpus=False)
    finally:
        del os.environ["HOROVOD_CONTROLLER"]


# ------------------------------------------------------------------------ the CLI, for real
def _clean_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM", "HOROVOD_", "OMPI_", "PMI", "ALBERTKIT_"))
            and k != "TF_CONFIG"}


def _pretrain(tmp_path, name: str, env: dict[str, str], *sets: str) -> subprocess.Popen:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(json.dumps(tiny_raw_config(tmp_path / f"run-{name}")))
    argv = [sys.executable, "-m", "albertkit.cli", "pretrain", "--config", str(cfg)]
    for s in sets:
        argv += ["--set", s]
    return subprocess.Popen(argv, env={**_clean_environ(), **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("backend", ["tf_multiworker", "horovod"])
def test_a_task_without_slurm_procid_stops_both_tasks_with_one_line(backend, tmp_path):
    """The cluster's failure: ``SLURM_PROCID`` unset on rank 1 only. Rank 1 stops at once
    (its own line); rank 0 stops after the 8 s start-up timeout, naming rank 1, instead of
    waiting in MultiWorkerMirroredStrategy or aborting in Gloo."""
    port = _free_port()
    sets = (f"distributed.backend={backend}", "distributed.startup_timeout_s=8")
    broken = {k: v for k, v in _step_env(1, port).items() if k != "SLURM_PROCID"}
    procs = [_pretrain(tmp_path, "rank0", _step_env(0, port), *sets),
             _pretrain(tmp_path, "rank1", broken, *sets)]
    # both import TensorFlow on a shared machine first: the bound leaves room for that, but
    # is far below a wait without end
    outs = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [2, 2], outs
    assert _errors(outs[0]) == [
        "error: start-up: rank 1 (127.0.0.1) of 2 did not join within 8 s "
        "(distributed.startup_timeout_s); its own output says why it stopped or never "
        "started"], outs[0]
    assert _errors(outs[1]) == [
        "error: SLURM_STEP_ID=0 says this is a task of an srun step, but SLURM_PROCID is not "
        "set: the task's rank is unknown (was the environment cleared, e.g. by `env -i` or a "
        "container?)"], outs[1]
    assert "terminate" not in outs[0]


@pytest.mark.slow
@pytest.mark.distributed
def test_horovod_without_mpi_asked_for_mpi_is_one_line_not_a_segfault(tmp_path):
    proc = _pretrain(tmp_path, "mpi", {"HOROVOD_CONTROLLER": "mpi"},
                     "distributed.backend=horovod")
    err = proc.communicate(timeout=240)[1]
    assert proc.returncode == 2, (proc.returncode, err)  # a segfault is -11
    assert _errors(err) == [
        "error: HOROVOD_CONTROLLER=mpi but this Horovod was built without MPI "
        "(horovod.tensorflow.mpi_built() is False): unset HOROVOD_CONTROLLER (or set it to "
        "gloo) to use Gloo, or rebuild Horovod with MPI (`scripts/build_horovod.sh --mpi` with "
        "Open MPI's mpicc on PATH)"], err


_MULTIWORKER_TASK = """
import json, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from albertkit.config import DistributedConfig
from albertkit.distributed import build_distributor

dist = build_distributor(DistributedConfig(backend="tf_multiworker"))
total = dist.local_value(dist.run(lambda x: dist.reduce_sum({"x": x}),
                                  tf.constant(float(dist.rank + 1))))["x"]
print(json.dumps({"rank": dist.rank, "size": dist.size, "sum": float(total)}), flush=True)
"""


@pytest.mark.slow
@pytest.mark.distributed
def test_two_srun_tasks_pass_the_check_and_form_a_multiworker_job(tmp_path):
    """A normal start: both tasks pass the check, then worker 0's TensorFlow server takes
    the port the check ran on."""
    port = _free_port()
    script = tmp_path / "task.py"
    script.write_text(_MULTIWORKER_TASK)
    procs = [subprocess.Popen([sys.executable, str(script)],
                              env={**_clean_environ(), **_step_env(r, port)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in (1, 0)]  # the second task starts first and waits for the first
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    results = sorted((json.loads(o.strip().splitlines()[-1]) for o in outs),
                     key=lambda r: r["rank"])
    assert results == [{"rank": 0, "size": 2, "sum": 3.0}, {"rank": 1, "size": 2, "sum": 3.0}]
