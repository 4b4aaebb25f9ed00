"""Where a process sits in its job: Slurm's variables, TF_CONFIG, mpirun/horovodrun.

The Slurm environments below are what Slurm 22.05 gives the tasks of ``srun -N2 -n2`` and
``srun -N2 -n4`` (measured on a two-node test cluster, scripts/slurm_local_cluster.sh), cut to
the variables albertkit reads.
"""

from __future__ import annotations

import json

import pytest

from albertkit.config import ConfigError
from albertkit.distributed.cluster import (
    DEFAULT_PORT,
    ClusterInfo,
    cluster_from_environ,
    expand_hostlist,
    expand_tasks_per_node,
    slurm_cluster,
    tf_config_from_environ,
)
from albertkit.sagemaker.cluster import read_sagemaker_cluster


# ------------------------------------------------------------------------ host lists
@pytest.mark.parametrize(("text", "hosts"), [
    ("node1", ["node1"]),
    ("node[1-3,5]", ["node1", "node2", "node3", "node5"]),
    ("a[01-03,7],b5", ["a01", "a02", "a03", "a7", "b5"]),
    ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
    ("x[098-101]", ["x098", "x099", "x100", "x101"]),
    ("cpu[1-2],gpu[10-11],login", ["cpu1", "cpu2", "gpu10", "gpu11", "login"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("n[3]-ib", ["n3-ib"]),
    ("ip-10-0-[1-2]-7", ["ip-10-0-1-7", "ip-10-0-2-7"]),
])
def test_expand_hostlist(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(("text", "match"), [
    ("", "empty"),
    ("a[1-", r"'\[' without '\]'"),
    ("a]1", r"'\]' without '\['"),
    ("a[3-1]", "backwards"),
    ("a[x]", "'x' is not a number"),
    ("a[]", "'' is not a number"),
    ("a,,b", "empty entry"),
    ("a[[1]]", "nested"),
])
def test_bad_hostlist_is_named(text, match):
    with pytest.raises(ConfigError, match=match):
        expand_hostlist(text)


@pytest.mark.parametrize(("text", "counts"), [
    ("1", [1]), ("2(x3),1", [2, 2, 2, 1]), ("4(x2)", [4, 4]), ("1,3,2", [1, 3, 2]),
])
def test_expand_tasks_per_node(text, counts):
    assert expand_tasks_per_node(text) == counts


@pytest.mark.parametrize("text", ["2(3)", "x", "2(x)", ""])
def test_bad_tasks_per_node_is_named(text):
    with pytest.raises(ConfigError, match="tasks per node"):
        expand_tasks_per_node(text)


# ------------------------------------------------------------------------ Slurm steps
def _srun_env(procid: int, nodes: str = "node[1-2]", tasks_per_node: str = "1(x2)",
              **extra: str) -> dict[str, str]:
    """The variables of task ``procid`` of ``srun`` with block distribution."""
    hosts, counts = expand_hostlist(nodes), expand_tasks_per_node(tasks_per_node)
    node, first = 0, 0
    while procid >= first + counts[node]:
        first += counts[node]
        node += 1
    env = {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(procid),
           "SLURM_LOCALID": str(procid - first), "SLURM_NODEID": str(node),
           "SLURMD_NODENAME": hosts[node], "SLURM_STEP_NODELIST": nodes,
           "SLURM_STEP_TASKS_PER_NODE": tasks_per_node, "SLURM_JOB_NODELIST": nodes,
           "SLURM_TASKS_PER_NODE": tasks_per_node, "SLURM_STEP_NUM_TASKS": str(sum(counts)),
           "SLURM_NTASKS": str(sum(counts))}
    env.update(extra)
    return env


def test_two_nodes_one_task_each():
    configs = [tf_config_from_environ(_srun_env(r)) for r in range(2)]
    p = DEFAULT_PORT
    for rank, cfg in enumerate(configs):
        assert cfg == {"cluster": {"worker": [f"node1:{p}", f"node2:{p + 1}"]},
                       "task": {"type": "worker", "index": rank}}
    info = slurm_cluster(_srun_env(1))
    assert (info.rank, info.world_size, info.local_rank, info.host, info.hosts) == (
        1, 2, 0, "node2", ("node1", "node2"))
    assert (info.source, info.job_id, info.is_chief, info.node_rank) == ("slurm", "42", False, 1)


def test_two_nodes_two_tasks_each():
    infos = [slurm_cluster(_srun_env(r, tasks_per_node="2(x2)")) for r in range(4)]
    p = DEFAULT_PORT
    workers = [f"node1:{p}", f"node1:{p + 1}", f"node2:{p + 2}", f"node2:{p + 3}"]
    assert [(i.rank, i.local_rank, i.host) for i in infos] == [
        (0, 0, "node1"), (1, 1, "node1"), (2, 0, "node2"), (3, 1, "node2")]
    for rank, info in enumerate(infos):
        assert info.world_size == 4
        assert info.tf_config() == {"cluster": {"worker": workers},
                                    "task": {"type": "worker", "index": rank}}
    # every worker listens on its own port: nodes sharing one machine do not collide
    assert len({w.split(":")[1] for w in workers}) == 4


def test_uneven_tasks_per_node_and_a_port_of_ones_own():
    env = _srun_env(3, nodes="gpu[01-02],cpu7", tasks_per_node="2,1(x2)", ALBERTKIT_PORT="30000")
    info = slurm_cluster(env)
    assert info.workers == ("gpu01:30000", "gpu01:30001", "gpu02:30002", "cpu7:30003")
    assert (info.host, info.local_rank, info.worker_index) == ("cpu7", 0, 3)


def test_worker_order_is_node_by_node_whatever_the_distribution():
    # --distribution=cyclic: rank 1 is node2's first task; its worker slot follows node order
    env = _srun_env(0, tasks_per_node="2(x2)")
    env.update(SLURM_PROCID="1", SLURM_NODEID="1", SLURMD_NODENAME="node2", SLURM_LOCALID="0")
    info = slurm_cluster(env)
    assert (info.rank, info.worker_index) == (1, 2)


def test_the_step_layout_wins_over_the_job_allocation():
    # `srun -N1 -n2` inside a two-node allocation: the step runs on node1 only
    env = _srun_env(1, nodes="node1", tasks_per_node="2")
    env.update(SLURM_JOB_NODELIST="node[1-2]", SLURM_TASKS_PER_NODE="2(x2)", SLURM_NTASKS="2")
    info = slurm_cluster(env)
    assert info.hosts == ("node1",) and info.world_size == 2
    assert info.workers == (f"node1:{DEFAULT_PORT}", f"node1:{DEFAULT_PORT + 1}")


def test_job_variables_serve_when_the_step_ones_are_missing():
    env = _srun_env(1)
    for name in ("SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS"):
        del env[name]
    assert slurm_cluster(env).workers == (f"node1:{DEFAULT_PORT}", f"node2:{DEFAULT_PORT + 1}")


def test_a_batch_script_is_not_a_step():
    # sbatch -N2 -n4: the script runs once, with SLURM_PROCID=0 but no step
    env = _srun_env(0, tasks_per_node="2(x2)")
    for name in ("SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
                 "SLURM_STEP_NUM_TASKS"):
        del env[name]
    assert slurm_cluster(env) is None
    assert tf_config_from_environ(env) is None
    info = cluster_from_environ(env)
    assert (info.rank, info.world_size, info.source) == (0, 1, "local")


def test_a_step_of_one_task_is_a_job_of_one():
    env = _srun_env(0, nodes="node1", tasks_per_node="1")
    assert slurm_cluster(env).world_size == 1
    assert tf_config_from_environ(env) is None


@pytest.mark.parametrize(("change", "match"), [
    ({"SLURM_STEP_TASKS_PER_NODE": "1(x3)"}, "gives 3 node"),
    ({"SLURM_STEP_NUM_TASKS": "3"}, "adds up to 2 tasks but the step has 3"),
    ({"SLURM_PROCID": "2"}, "SLURM_PROCID=2 is out of range"),
    ({"SLURM_PROCID": "one"}, "SLURM_PROCID='one' is not a whole number"),
    ({"SLURM_LOCALID": "1"}, "SLURM_LOCALID=1 is out of range"),
    ({"SLURMD_NODENAME": "", "SLURM_NODEID": "5"}, "SLURM_NODEID=5 is out of range"),
    ({"SLURM_STEP_NODELIST": "node[1-1],node1"}, "names a node twice"),
    ({"ALBERTKIT_PORT": "80"}, "ALBERTKIT_PORT=80 is not a port"),
    ({"ALBERTKIT_PORT": "65535"}, "run past 65535"),
])
def test_inconsistent_slurm_variables_are_named(change, match):
    with pytest.raises(ConfigError, match=match):
        slurm_cluster({**_srun_env(0), **change})


# ------------------------------------------------------------------------ the decision
def test_tf_config_wins_over_slurm():
    cfg = {"cluster": {"chief": ["c:1"], "worker": ["w:2", "w:3"]},
           "task": {"type": "worker", "index": 1}}
    env = {**_srun_env(0), "TF_CONFIG": json.dumps(cfg)}
    assert tf_config_from_environ(env) == cfg  # the chief job is kept as given
    info = cluster_from_environ(env)
    assert (info.rank, info.world_size, info.local_rank, info.host, info.source) == (
        2, 3, 1, "w", "tf_config")
    assert info.hosts == ("c", "w")


def test_mpirun_inside_an_allocation_wins_over_slurm():
    # Open MPI's mpirun starts its daemons with srun: its ranks see a step of 2 daemons
    env = {**_srun_env(1), "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1"}
    info = cluster_from_environ(env)
    assert (info.rank, info.world_size, info.local_rank, info.source) == (5, 8, 1, "mpirun")
    assert tf_config_from_environ(env) is None


def test_horovodrun_gloo_variables():
    env = {"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_RANK": "1",
           "HOROVOD_HOSTNAME": "localhost"}
    info = cluster_from_environ(env)
    assert (info.rank, info.world_size, info.local_rank, info.host, info.source) == (
        1, 2, 1, "localhost", "horovodrun")


def test_nothing_set_is_a_job_of_one_on_this_machine():
    info = cluster_from_environ({})
    assert (info.rank, info.world_size, info.local_rank, info.source) == (0, 1, 0, "local")
    assert info.hosts == (info.host,) and info.host
    assert info.tf_config() is None


def test_sagemaker_uses_the_same_cluster_value():
    sm = read_sagemaker_cluster({"SM_HOSTS": '["algo-2", "algo-1"]', "SM_CURRENT_HOST": "algo-2"})
    info = sm.cluster_info(2222)
    assert info == ClusterInfo.one_per_host(["algo-1", "algo-2"], "algo-2", 2222,
                                            source="sagemaker")
    assert sm.tf_config(2222) == info.tf_config() == {
        "cluster": {"worker": ["algo-1:2222", "algo-2:2222"]},
        "task": {"type": "worker", "index": 1}}


# ------------------------------------------------------------------------ Horovod
def test_horovod_in_a_step_without_mpi_stops_with_the_srun_command(monkeypatch):
    import threading

    import horovod.tensorflow as hvd

    from albertkit.config import DistributedConfig
    from albertkit.distributed import build_distributor
    from albertkit.distributed.startup import wait_for_all_ranks

    # an MPI build asked for MPI under plain srun (no PMI): each task initialises Horovod
    # alone, size 1 in a step of 2 (this venv's Horovod has no MPI: it only claims to here;
    # hvd.init() reads os.environ, where no controller is asked for, so it starts alone)
    monkeypatch.setattr(hvd, "mpi_built", lambda: True)
    port = _free_port()
    peer = threading.Thread(  # the step's other task, as far as the start-up check goes
        target=wait_for_all_ranks, args=(slurm_cluster(_local_env(1, port)), 30))
    peer.start()
    with pytest.raises(ConfigError, match=r"2 tasks but Horovod sees 1 .*srun --mpi=pmix"):
        build_distributor(DistributedConfig(backend="horovod", startup_timeout_s=30),
                          _local_env(0, port, HOROVOD_CONTROLLER="mpi"))
    peer.join(30)
    # a step of one task is fine
    dist = build_distributor(DistributedConfig(backend="horovod"),
                             _srun_env(0, nodes="node1", tasks_per_node="1"))
    assert dist.size == 1


def _gloo(env: dict[str, str]) -> dict[str, str]:
    from albertkit.distributed.cluster import horovod_gloo_environ

    info = slurm_cluster(env)
    return horovod_gloo_environ(info, 23400)


def test_horovod_gloo_variables_two_nodes_two_tasks_each():
    keys = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
            "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME")
    got = [tuple(_gloo(_srun_env(r, tasks_per_node="2(x2)"))[k] for k in keys)
           for r in range(4)]
    assert got == [("0", "4", "0", "2", "0", "2", "node1"), ("1", "4", "1", "2", "0", "2", "node1"),
                   ("2", "4", "0", "2", "1", "2", "node2"), ("3", "4", "1", "2", "1", "2", "node2")]
    env = _gloo(_srun_env(3, tasks_per_node="2(x2)"))
    assert {k: env[k] for k in env if k not in keys} == {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "node1", "HOROVOD_GLOO_RENDEZVOUS_PORT": "23400",
        "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"}


def test_horovod_gloo_variables_uneven_nodes_and_cyclic_ranks():
    # node1 runs 2 tasks, node2 one: local rank 1 exists on node1 only (cross size 1)
    env = _srun_env(1, tasks_per_node="2,1")
    assert [_gloo(env)[k] for k in ("HOROVOD_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
                                    "HOROVOD_CROSS_SIZE")] == ["1", "2", "0", "1"]
    node2 = _gloo(_srun_env(2, tasks_per_node="2,1"))
    assert [node2[k] for k in ("HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
                               "HOROVOD_CROSS_SIZE")] == ["1", "1", "2"]
    # cyclic distribution: SLURM_PROCID 1 on node2 is Horovod rank 2 (node by node, as the
    # tf_multiworker workers), so rank 0 is always the first node's first task
    cyclic = {**_srun_env(2, tasks_per_node="2,1"), "SLURM_PROCID": "1"}
    assert _gloo(cyclic)["HOROVOD_RANK"] == "2"


def test_horovod_gloo_needs_the_step_layout():
    from albertkit.distributed.cluster import horovod_gloo_environ

    with pytest.raises(ConfigError, match="needs the tasks of every node"):
        horovod_gloo_environ(ClusterInfo(rank=1, world_size=2, hosts=("a",), host="a"), 1)


@pytest.mark.parametrize(("environ", "mpi", "gloo", "want"), [
    ({}, False, True, "gloo"),
    ({}, True, True, "gloo"),  # plain srun: no PMI, so MPI could not start
    ({"PMIX_RANK": "0"}, True, True, "mpi"),  # srun --mpi=pmix
    ({"PMI_RANK": "1"}, True, False, "mpi"),  # srun --mpi=pmi2
    ({"PMIX_RANK": "0"}, False, True, "gloo"),  # --mpi=pmix but a Gloo-only Horovod
    ({"HOROVOD_CONTROLLER": "mpi"}, False, True, "mpi"),  # asked for
    ({}, True, False, "mpi"),  # no Gloo: the mismatch check explains
])
def test_horovod_controller_under_srun(environ, mpi, gloo, want):
    from albertkit.distributed.slurm_gloo import controller_for

    assert controller_for(environ, mpi_built=mpi, gloo_built=gloo) == want


class _FakeHorovod:
    def __init__(self, mpi: bool = False, gloo: bool = True):
        self.mpi, self.gloo = mpi, gloo

    def mpi_built(self) -> bool:
        return self.mpi

    def gloo_built(self) -> bool:
        return self.gloo


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _local_env(procid: int, port: int, **extra: str) -> dict[str, str]:
    # two "nodes" that are this machine under two names
    return _srun_env(procid, nodes="localhost,127.0.0.1", tasks_per_node="1(x2)",
                     ALBERTKIT_PORT=str(port), **extra)


def test_first_task_serves_the_gloo_rendezvous():
    import urllib.request

    from albertkit.distributed.slurm_gloo import prepare_slurm_horovod

    port = _free_port()
    env = _local_env(0, port)
    target: dict[str, str] = {}
    got = prepare_slurm_horovod(slurm_cluster(env), env, _FakeHorovod(), target=target)
    assert got == target
    assert (target["HOROVOD_RANK"], target["HOROVOD_GLOO_RENDEZVOUS_ADDR"],
            target["HOROVOD_GLOO_RENDEZVOUS_PORT"]) == ("0", "127.0.0.1", str(port))
    assert target["HOROVOD_GLOO_IFACE"] == "lo"  # the interface that reaches 127.0.0.1
    # the server answers Horovod's key-value protocol: PUT then GET of a key in a scope
    url = f"http://127.0.0.1:{port}/global/k"
    urllib.request.urlopen(urllib.request.Request(url, data=b"v1", method="PUT"), timeout=10)
    assert urllib.request.urlopen(url, timeout=10).read() == b"v1"
    # a second server on the same port is a one-line error naming the variable to change
    with pytest.raises(ConfigError, match=f"port {port}.*choose another ALBERTKIT_PORT"):
        prepare_slurm_horovod(slurm_cluster(env), env, _FakeHorovod(), target={})


def test_other_tasks_wait_for_the_rendezvous_and_name_it_when_it_never_comes():
    import socket

    from albertkit.distributed.slurm_gloo import prepare_slurm_horovod

    with socket.socket() as listener:  # worker 0's server, already up
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        env = _local_env(1, listener.getsockname()[1], HOROVOD_GLOO_IFACE="eth7")
        target: dict[str, str] = {}
        prepare_slurm_horovod(slurm_cluster(env), env, _FakeHorovod(), target=target,
                              timeout=5)
    assert (target["HOROVOD_RANK"], target["HOROVOD_HOSTNAME"], target["HOROVOD_CROSS_RANK"],
            target["HOROVOD_GLOO_IFACE"]) == ("1", "127.0.0.1", "1", "eth7")
    env = _local_env(1, _free_port())
    with pytest.raises(ConfigError, match=r"rendezvous at 127\.0\.0\.1:\d+ .*did not answer "
                                          r"within 1 s"):
        prepare_slurm_horovod(slurm_cluster(env), env, _FakeHorovod(), target={}, timeout=1)


def test_nothing_is_prepared_for_mpi_or_a_job_of_one():
    from albertkit.distributed.slurm_gloo import prepare_slurm_horovod

    env = _local_env(1, _free_port(), PMIX_RANK="1")
    assert prepare_slurm_horovod(slurm_cluster(env), env, _FakeHorovod(mpi=True),
                                 target={}) is None
    one = _srun_env(0, nodes="node1", tasks_per_node="1")
    assert prepare_slurm_horovod(slurm_cluster(one), one, _FakeHorovod(), target={}) is None


_GLOO_TASK = """
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from albertkit.config import DistributedConfig
from albertkit.distributed import build_distributor

dist = build_distributor(DistributedConfig(backend="horovod"))
mean = dist.reduce_mean([tf.constant([float(dist.rank + 1)])])[0]
print(json.dumps({"rank": dist.rank, "size": dist.size, "mean": float(mean[0])}), flush=True)
"""


@pytest.mark.slow
@pytest.mark.distributed
def test_two_srun_tasks_join_through_gloo(tmp_path):
    """Two processes with the variables srun gives a 2-node step, no launcher: Horovod
    forms one job of two through the rendezvous the first serves."""
    import os
    import subprocess
    import sys

    port = _free_port()
    script = tmp_path / "task.py"
    script.write_text(_GLOO_TASK)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM", "HOROVOD_", "OMPI_", "PMI")) and k != "TF_CONFIG"}
    procs = [subprocess.Popen([sys.executable, str(script)], env={**base, **_local_env(r, port)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in (1, 0)]  # the second task starts first and waits for the first
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    results = sorted((json.loads(o.strip().splitlines()[-1]) for o in outs),
                     key=lambda r: r["rank"])
    assert results == [{"mean": 1.5, "rank": 0, "size": 2}, {"mean": 1.5, "rank": 1, "size": 2}]


# ------------------------------------------------------------------------ bad input under srun
@pytest.mark.parametrize("drop", [("SLURM_PROCID",), ("SLURM_PROCID", "SLURM_NODEID")])
def test_a_step_task_without_its_rank_is_named(drop):
    env = {k: v for k, v in _srun_env(1).items() if k not in drop}
    with pytest.raises(ConfigError, match=r"^SLURM_STEP_ID=0 says this is a task of an srun "
                                          r"step, but SLURM_PROCID is not set"):
        cluster_from_environ(env)


@pytest.mark.parametrize(("drop", "named"), [
    (("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"), "SLURM_STEP_NODELIST, SLURM_JOB_NODELIST"),
    (("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_STEP_TASKS_PER_NODE",
      "SLURM_TASKS_PER_NODE"), "SLURM_STEP_NUM_TASKS, SLURM_NTASKS"),
])
def test_a_step_task_without_its_layout_is_named(drop, named):
    env = {k: v for k, v in _srun_env(1).items() if k not in drop}
    with pytest.raises(ConfigError, match=rf"^this srun task \(SLURM_PROCID=1\) has none of "
                                          rf"{named}"):
        cluster_from_environ(env)
    # SLURM_NODELIST (the older name) alone is enough
    only_old = {k: v for k, v in _srun_env(1).items()
                if k not in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")}
    assert slurm_cluster({**only_old, "SLURM_NODELIST": "node[1-2]"}).host == "node2"


def test_backend_single_in_a_step_of_several_tasks_is_refused():
    from albertkit.config import DistributedConfig
    from albertkit.distributed import build_distributor

    with pytest.raises(ConfigError, match=r"^this Slurm step has 2 tasks but "
                                          r"distributed.backend=single trains in one process"):
        build_distributor(DistributedConfig(backend="single"), _srun_env(1))
    one = _srun_env(0, nodes="node1", tasks_per_node="1")
    assert build_distributor(DistributedConfig(backend="single"), one).size == 1
