"""Where this process sits in a distributed job, decided in one place.

A :class:`ClusterInfo` says it: the process's rank, its local rank on its node, the world
size, the nodes in order and the one it runs on, and the address of every
``tf_multiworker`` worker. :func:`cluster_from_environ` reads it from the launch environment,
first match wins:

1. ``TF_CONFIG`` (the local launcher, a hand-started job, the SageMaker entry point);
2. a process started by ``mpirun`` or ``horovodrun`` (:func:`launcher_cluster`);
3. a Slurm job step, i.e. a process started by ``srun`` (``SLURM_STEP_ID`` is set);
4. otherwise one process alone.

Slurm (:func:`slurm_cluster`): ``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID`` place the
task; the step's node list (``SLURM_STEP_NODELIST``, else ``SLURM_JOB_NODELIST``) in Slurm's
host-list syntax (:func:`expand_hostlist`: ``gpu[01-03,7],cpu5``) and its tasks per node
(``SLURM_STEP_TASKS_PER_NODE``, else ``SLURM_TASKS_PER_NODE``; :func:`expand_tasks_per_node`:
``2(x3),1``) give the layout; ``SLURMD_NODENAME`` names this node. A batch script itself is
not a step (Slurm sets no ``SLURM_STEP_ID`` there): a process started in it without ``srun``
is a job of one, even when the allocation holds several tasks.

``tf_multiworker`` under Slurm: one worker per task, ordered node by node (node 0's tasks by
local rank, then node 1's, ...; with Slurm's default block distribution that is
``SLURM_PROCID`` order). Worker ``i`` listens on ``<node>:<base port + i>``, the base port
being ``$ALBERTKIT_PORT`` or :data:`DEFAULT_PORT`. Every task computes every address from
the allocation alone, so no rendezvous is needed; ports differ on every node, so several
Slurm nodes sharing one machine (a test cluster) do not collide. Ports ``base`` to
``base + tasks - 1`` must be free on the nodes; two jobs sharing nodes need different
``ALBERTKIT_PORT`` values.

Horovod under Slurm: with an MPI build started by ``srun --mpi=pmix`` (or ``pmi2``), Horovod
reads its place from MPI and nothing is translated here. Otherwise every task runs Horovod's
Gloo controller with the variables :func:`horovod_gloo_environ` computes from the step
(``HOROVOD_RANK``, ``_SIZE``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``, ``_CROSS_RANK``,
``_CROSS_SIZE``, ``_HOSTNAME``, the rendezvous address and port): the ranks are the
tf_multiworker worker order, and worker 0 (the first node's first task) serves the
rendezvous on the base port (:mod:`albertkit.distributed.slurm_gloo` starts it).

SageMaker's host list is read in the SageMaker package, which builds its
``TF_CONFIG`` with :meth:`ClusterInfo.one_per_host` (one worker per host, one port).

This module imports nothing but the standard library and :mod:`albertkit.errors`: it is read
before TensorFlow starts.

Example:
    >>> expand_hostlist("gpu[01-03,7],cpu5")
    ['gpu01', 'gpu02', 'gpu03', 'gpu7', 'cpu5']
    >>> expand_tasks_per_node("2(x3),1")
    [2, 2, 2, 1]
    >>> env = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
    ...        "SLURM_NODEID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURMD_NODENAME": "n2",
    ...        "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}
    >>> c = cluster_from_environ(env)
    >>> c.rank, c.local_rank, c.world_size, c.hosts, c.host
    (3, 1, 4, ('n1', 'n2'), 'n2')
    >>> c.tf_config()
    {'cluster': {'worker': ['n1:23400', 'n1:23401', 'n2:23402', 'n2:23403']}, 'task': {'type': 'worker', 'index': 3}}
    >>> g = horovod_gloo_environ(c, 23400)
    >>> [g[k] for k in ("HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_CROSS_RANK")]
    ['3', '1', '1']
    >>> g["HOROVOD_GLOO_RENDEZVOUS_ADDR"], g["HOROVOD_CONTROLLER"]
    ('n1', 'gloo')
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from albertkit.errors import ConfigError

PORT_ENV = "ALBERTKIT_PORT"
DEFAULT_PORT = 23400  # the first tf_multiworker port under Slurm (worker i: + i)


# ============================================================================ the value
@dataclass(frozen=True)
class ClusterInfo:
    """One process's place in a job.

    Attributes:
        rank: this process's rank (0 is the chief).
        world_size: number of processes in the job.
        local_rank: this process's index among those on its node.
        hosts: the job's nodes, in the launcher's order (each once).
        host: the node this process runs on.
        workers: ``host:port`` of every ``tf_multiworker`` worker, in worker order (empty for
            a job of one).
        worker_index: this process's place in ``workers``.
        source: who described the job: ``tf_config``, ``mpirun``, ``horovodrun``, ``slurm``,
            ``sagemaker`` or ``local``.
        job_id: the scheduler's job id, when there is one (Slurm's ``SLURM_JOB_ID``).
        tasks_per_node: the number of processes on each of ``hosts`` (known under Slurm;
            empty otherwise).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    hosts: tuple[str, ...] = ()
    host: str = ""
    workers: tuple[str, ...] = ()
    worker_index: int = 0
    source: str = "local"
    job_id: str | None = None
    tasks_per_node: tuple[int, ...] = ()

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    @property
    def node_rank(self) -> int:
        """This node's place in ``hosts`` (0 when the host is not listed)."""
        return self.hosts.index(self.host) if self.host in self.hosts else 0

    def tf_config(self) -> dict[str, Any] | None:
        """TF_CONFIG for MultiWorkerMirroredStrategy (worker 0 is the chief), or None for a
        job of one worker."""
        if len(self.workers) <= 1:
            return None
        return {"cluster": {"worker": list(self.workers)},
                "task": {"type": "worker", "index": self.worker_index}}

    @classmethod
    def one_per_host(cls, hosts: list[str], host: str, port: int,
                     source: str = "local") -> ClusterInfo:
        """One process per host (``hosts`` in the order every host sees), all on ``port``:
        SageMaker's tf_multiworker layout.

        Example:
            >>> ClusterInfo.one_per_host(["algo-1", "algo-2"], "algo-2", 2222).tf_config()
            {'cluster': {'worker': ['algo-1:2222', 'algo-2:2222']}, 'task': {'type': 'worker', 'index': 1}}
        """
        index = hosts.index(host)
        return cls(rank=index, world_size=len(hosts), hosts=tuple(hosts), host=host,
                   workers=tuple(f"{h}:{port}" for h in hosts), worker_index=index,
                   source=source)


# ============================================================================ Slurm syntax
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_PIECE = re.compile(r"([^\[\]]*)(?:\[([^\]]*)\])?")  # text, then an optional [ranges]


def _expand_ranges(body: str, text: str) -> list[str]:
    """``01-03,7`` -> ``['01', '02', '03', '7']`` (each range padded like its first number)."""
    out: list[str] = []
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ConfigError(f"Slurm host list {text!r}: {part!r} is not a number or a range "
                              "like 01-04")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ConfigError(f"Slurm host list {text!r}: range {part!r} runs backwards")
        width = len(low) if low.startswith("0") else 0
        out += [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
    return out


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets: ``a[1,2],b`` -> ``['a[1,2]', 'b']``."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ConfigError(f"Slurm host list {text!r}: nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ConfigError(f"Slurm host list {text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ConfigError(f"Slurm host list {text!r}: '[' without ']'")
    items.append(text[start:])
    return items


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list as names, in order: ``node[1-3,5]`` -> node1, node2,
    node3, node5. Ranges keep the zero padding of their first number (``a[08-10]`` -> a08,
    a09, a10); an item may hold several bracket groups (``r[1-2]n[1-2]`` -> r1n1, r1n2, r2n1,
    r2n2) and a list several prefixes (``a[1-2],b5``). Anything else is a ConfigError that
    quotes the list."""
    text = text.strip()
    if not text:
        raise ConfigError("Slurm host list is empty")
    hosts: list[str] = []
    for item in _split_top_level(text):
        if not item:
            raise ConfigError(f"Slurm host list {text!r}: empty entry")
        names = [""]
        for match in _PIECE.finditer(item):
            literal, body = match.group(1), match.group(2)
            choices = [""] if body is None else _expand_ranges(body, text)
            names = [n + literal + c for n in names for c in choices]
        hosts += names
    return hosts


_TASKS = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_tasks_per_node(text: str) -> list[int]:
    """Slurm's tasks-per-node list: ``2(x3),1`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for part in text.strip().split(","):
        match = _TASKS.match(part.strip())
        if not match:
            raise ConfigError(f"Slurm tasks per node {text!r}: {part!r} is not N or N(xM)")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


# ============================================================================ readers
def _int(environ: Mapping[str, str], *names: str, default: int | None = None) -> int:
    for name in names:
        raw = (environ.get(name) or "").strip()
        if raw:
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if default is None:
        raise ConfigError(f"{names[0]} is not set")
    return default


def base_port(environ: Mapping[str, str]) -> int:
    """The first tf_multiworker port under Slurm: ``$ALBERTKIT_PORT`` or DEFAULT_PORT."""
    port = _int(environ, PORT_ENV, default=DEFAULT_PORT)
    if not 1024 <= port <= 65535:
        raise ConfigError(f"{PORT_ENV}={port} is not a port between 1024 and 65535")
    return port


def in_slurm_step(environ: Mapping[str, str]) -> bool:
    """Whether this process is a task of a Slurm job step (started by ``srun``)."""
    return bool(environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID")) and bool(
        environ.get("SLURM_PROCID"))


def slurm_cluster(environ: Mapping[str, str]) -> ClusterInfo | None:
    """This task's place in its Slurm job step, or None outside a step (see the module
    docstring for the variables). Inconsistent variables are a ConfigError naming them."""
    if not in_slurm_step(environ):
        step_id = environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID")
        if step_id:
            raise ConfigError(f"SLURM_STEP_ID={step_id} says this is a task of an srun step, "
                              "but SLURM_PROCID is not set: the task's rank is unknown (was "
                              "the environment cleared, e.g. by `env -i` or a container?)")
        return None
    for names in (("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"),
                  ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_STEP_TASKS_PER_NODE",
                   "SLURM_TASKS_PER_NODE")):
        if not any((environ.get(n) or "").strip() for n in names):
            raise ConfigError(f"this srun task (SLURM_PROCID={environ['SLURM_PROCID']}) has "
                              f"none of {', '.join(names)}: its job layout is unknown (was the "
                              "environment cleared, e.g. by `env -i` or a container?)")
    nodelist_var = next(n for n in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                     "SLURM_NODELIST") if (environ.get(n) or "").strip())
    tasks_var = "SLURM_STEP_TASKS_PER_NODE" if environ.get("SLURM_STEP_TASKS_PER_NODE") \
        else "SLURM_TASKS_PER_NODE"
    hosts = expand_hostlist(environ.get(nodelist_var) or "")
    if len(set(hosts)) != len(hosts):
        raise ConfigError(f"{nodelist_var}={environ[nodelist_var]!r} names a node twice")
    tasks_text = environ.get(tasks_var) or ""
    per_node = expand_tasks_per_node(tasks_text) if tasks_text else [1] * len(hosts)
    if len(per_node) != len(hosts):
        raise ConfigError(f"{tasks_var}={tasks_text!r} gives {len(per_node)} node(s) but "
                          f"{nodelist_var}={environ[nodelist_var]!r} names {len(hosts)}")
    rank = _int(environ, "SLURM_PROCID")
    world = _int(environ, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", default=sum(per_node))
    local_rank = _int(environ, "SLURM_LOCALID", default=0)
    if world != sum(per_node):
        raise ConfigError(f"{tasks_var}={tasks_text!r} adds up to {sum(per_node)} tasks but "
                          f"the step has {world} (SLURM_STEP_NUM_TASKS / SLURM_NTASKS)")
    if not 0 <= rank < world:
        raise ConfigError(f"SLURM_PROCID={rank} is out of range for {world} task(s)")
    host = (environ.get("SLURMD_NODENAME") or "").strip()
    if host in hosts:
        node = hosts.index(host)
    else:
        node = _int(environ, "SLURM_NODEID", default=0)
        if not 0 <= node < len(hosts):
            raise ConfigError(f"SLURM_NODEID={node} is out of range for {nodelist_var}="
                              f"{environ[nodelist_var]!r}")
        host = hosts[node]
    if not 0 <= local_rank < per_node[node]:
        raise ConfigError(f"SLURM_LOCALID={local_rank} is out of range for the "
                          f"{per_node[node]} task(s) on {host}")
    port = base_port(environ)
    if port + world - 1 > 65535:
        raise ConfigError(f"{world} tf_multiworker ports from {PORT_ENV}={port} run past 65535")
    workers = tuple(f"{h}:{port + i}" for i, h in
                    enumerate(h for h, n in zip(hosts, per_node, strict=True) for _ in range(n)))
    return ClusterInfo(rank=rank, world_size=world, local_rank=local_rank, hosts=tuple(hosts),
                       host=host, workers=workers,
                       worker_index=sum(per_node[:node]) + local_rank, source="slurm",
                       job_id=environ.get("SLURM_JOB_ID") or None,
                       tasks_per_node=tuple(per_node))


# ============================================================================ Horovod's Gloo
def horovod_gloo_slots(info: ClusterInfo) -> list[dict[str, Any]]:
    """Every rank's Horovod slot in the step of ``info``, in rank order (node by node, as
    ``horovodrun`` assigns them): ``hostname``, ``rank``, ``local_rank``, ``cross_rank``
    (this node's place among the nodes that have a task of that local rank), ``size``,
    ``local_size`` and ``cross_size``."""
    counts = info.tasks_per_node
    if not counts or len(counts) != len(info.hosts):
        raise ConfigError("Horovod's Gloo layout needs the tasks of every node (a Slurm step)")
    slots, rank = [], 0
    for node, (host, count) in enumerate(zip(info.hosts, counts, strict=True)):
        for local in range(count):
            cross = [i for i, n in enumerate(counts) if n > local]
            slots.append({"hostname": host, "rank": rank, "local_rank": local,
                          "cross_rank": cross.index(node), "size": sum(counts),
                          "local_size": count, "cross_size": len(cross)})
            rank += 1
    return slots


def horovod_gloo_environ(info: ClusterInfo, port: int, rendezvous_addr: str | None = None,
                         iface: str | None = None) -> dict[str, str]:
    """The variables that make ``hvd.init()`` join the step of ``info`` through Gloo, as
    ``horovodrun --gloo`` would set them: this task's slot (:func:`horovod_gloo_slots`; the
    Horovod rank is the worker index), the rendezvous server (``rendezvous_addr``, default
    the first node, and ``port``), the Gloo controller and CPU operations, and the network
    interface when ``iface`` is given."""
    slot = horovod_gloo_slots(info)[info.worker_index]
    env = {f"HOROVOD_{key.upper()}": str(value) for key, value in slot.items()}
    env.update({"HOROVOD_GLOO_RENDEZVOUS_ADDR": rendezvous_addr or info.hosts[0],
                "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
                "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"})
    if iface:
        env["HOROVOD_GLOO_IFACE"] = iface
    return env


# ============================================================================ TF_CONFIG
def validate_tf_config(tf_config: Any, source: str = "TF_CONFIG") -> dict[str, Any]:
    """Check the TF_CONFIG shape MultiWorkerMirroredStrategy needs; errors name ``source``."""
    if not isinstance(tf_config, dict):
        raise ConfigError(f"{source}: must be a JSON object, got {type(tf_config).__name__}")
    cluster, task = tf_config.get("cluster"), tf_config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError(f"{source}: 'cluster' must map job names to address lists, "
                          f"got {cluster!r}")
    unknown = sorted(set(cluster) - {"chief", "worker"})
    if unknown:
        raise ConfigError(f"{source}: cluster jobs {unknown} are not supported by "
                          "MultiWorkerMirroredStrategy (only 'chief' and 'worker')")
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses or not all(
                isinstance(a, str) and ":" in a for a in addresses):
            raise ConfigError(f"{source}: cluster.{job} must be a non-empty list of "
                              f"'host:port' strings, got {addresses!r}")
    if len(cluster.get("chief", [])) > 1:
        raise ConfigError(f"{source}: at most one chief, got {cluster['chief']!r}")
    if not isinstance(task, dict) or task.get("type") not in cluster:
        raise ConfigError(f"{source}: 'task.type' must be one of {sorted(cluster)}, "
                          f"got {task!r}")
    index = task.get("index", 0)
    if not isinstance(index, int) or not 0 <= index < len(cluster[task["type"]]):
        raise ConfigError(f"{source}: task.index={index!r} is out of range for "
                          f"{len(cluster[task['type']])} {task['type']} task(s)")
    return {"cluster": cluster, "task": {"type": task["type"], "index": index}}


def tf_config_variable(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The validated ``TF_CONFIG`` variable, or None when it is unset, empty, ``{}`` or
    names no cluster members."""
    raw = environ.get("TF_CONFIG", "").strip()
    if not raw:
        return None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"TF_CONFIG: malformed JSON at line {e.lineno} column {e.colno}: "
                          f"{e.msg}") from None
    if parsed == {} or (isinstance(parsed, dict) and parsed.get("cluster") in (None, {})):
        return None
    return validate_tf_config(parsed)


def tf_config_from_environ(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The multi-worker cluster this process belongs to, or None for one machine.

    ``TF_CONFIG`` when it is set (``albertkit.distributed.launch`` locally,
    ``albertkit.sagemaker.entrypoint`` from SageMaker's host list, or by hand); otherwise,
    in a Slurm job step (not under ``mpirun``/``horovodrun``), the one built from the
    allocation (:func:`slurm_cluster`).
    """
    explicit = tf_config_variable(environ)
    if explicit is not None:
        return explicit
    return cluster_from_environ(environ).tf_config()


def cluster_position(tf_config: dict[str, Any] | None) -> tuple[int, int]:
    """``(rank, size)`` of this worker: the chief (or worker 0 without a chief) is rank 0."""
    if tf_config is None:
        return 0, 1
    info = tf_config_cluster(tf_config)
    return info.rank, info.world_size


def tf_config_cluster(tf_config: Mapping[str, Any]) -> ClusterInfo:
    """The ClusterInfo of a validated TF_CONFIG: ranks count the chief first, then the
    workers; hosts are the distinct host names of the addresses, in order."""
    cluster, task = tf_config["cluster"], tf_config["task"]
    addresses = list(cluster.get("chief", [])) + list(cluster.get("worker", []))
    chiefs = len(cluster.get("chief", []))
    rank = 0 if task["type"] == "chief" else chiefs + int(task.get("index", 0))
    host_of = [a.rsplit(":", 1)[0] for a in addresses]
    host = host_of[rank]
    return ClusterInfo(rank=rank, world_size=len(addresses),
                       local_rank=host_of[:rank].count(host),
                       hosts=tuple(dict.fromkeys(host_of)), host=host,
                       workers=tuple(addresses), worker_index=rank, source="tf_config")


# ============================================================================ launchers
def launcher_cluster(environ: Mapping[str, str]) -> ClusterInfo | None:
    """The place ``mpirun`` (Open MPI: ``OMPI_COMM_WORLD_*``) or ``horovodrun`` (Gloo:
    ``HOROVOD_RANK``, ``HOROVOD_SIZE``, ``HOROVOD_LOCAL_RANK``) gave this process, or None.

    These launchers place processes themselves and name no host list, so the result has
    no tf_multiworker workers. ``mpirun`` inside a Slurm allocation starts its daemons with
    ``srun``: its processes carry Slurm step variables that describe the daemons, not them;
    this reader is consulted first for that reason.
    """
    for prefix, source in (("OMPI_COMM_WORLD_", "mpirun"), ("HOROVOD_", "horovodrun")):
        if not environ.get(prefix + "SIZE") or not environ.get(prefix + "RANK"):
            continue
        rank = _int(environ, prefix + "RANK")
        world = _int(environ, prefix + "SIZE")
        if not 0 <= rank < world:
            raise ConfigError(f"{prefix}RANK={rank} is out of range for {prefix}SIZE={world}")
        host = (environ.get("HOROVOD_HOSTNAME") if source == "horovodrun" else None) \
            or socket.gethostname()
        return ClusterInfo(rank=rank, world_size=world,
                           local_rank=_int(environ, prefix + "LOCAL_RANK", default=0),
                           hosts=(host,), host=host, source=source)
    return None


# ============================================================================ the decision
def cluster_from_environ(environ: Mapping[str, str]) -> ClusterInfo:
    """This process's place in its job; the first that applies wins: ``TF_CONFIG``, a
    process started by ``mpirun``/``horovodrun``, a Slurm job step, else a job of one on
    this machine (see the module docstring)."""
    explicit = tf_config_variable(environ)
    if explicit is not None:
        return tf_config_cluster(explicit)
    for reader in (launcher_cluster, slurm_cluster):
        found = reader(environ)
        if found is not None:
            return found
    host = socket.gethostname()
    return ClusterInfo(hosts=(host,), host=host)
