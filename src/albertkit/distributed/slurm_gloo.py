"""Horovod in a Slurm step without MPI: every ``srun`` task joins through Horovod's Gloo.

``horovodrun --gloo`` starts a rendezvous server (an HTTP key-value store in which the ranks
exchange their Gloo addresses) and gives every process its slot in variables. Under
``srun`` no launcher runs, so each task does it for itself before ``hvd.init()``
(:func:`prepare_slurm_horovod`, called by ``build_distributor``):

1. the variables come from the step (:func:`albertkit.distributed.cluster.horovod_gloo_environ`),
   with the rendezvous address resolved to an IP and the interface the other nodes are
   reached through (``HOROVOD_GLOO_IFACE``, unless set already: the route to the first node,
   or on the first node the route to the second);
2. worker 0 (the first node's first task) serves the rendezvous on the base port
   (``$ALBERTKIT_PORT``, default 23400: the same port tf_multiworker's worker 0 uses) for the
   life of the process;
3. the other tasks wait until that port answers (Horovod's own client gives up after a few
   retries), at most ``distributed.startup_timeout_s`` seconds (:data:`RENDEZVOUS_WAIT` when
   called without a timeout). By then every task has passed the start-up check
   (:mod:`albertkit.distributed.startup`, on the same port just before), so worker 0 is alive.

Which controller (:func:`controller_for`): MPI when Horovod is built with MPI and the task
was started by ``srun --mpi=pmix``/``pmi2`` (PMIx or PMI variables present) or
``HOROVOD_CONTROLLER=mpi`` is set; otherwise Gloo when Horovod is built with it.

Example:
    >>> controller_for({"PMIX_RANK": "0"}, mpi_built=True, gloo_built=True)
    'mpi'
    >>> controller_for({"PMIX_RANK": "0"}, mpi_built=False, gloo_built=True)
    'gloo'
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

from albertkit.distributed.cluster import (
    ClusterInfo,
    base_port,
    horovod_gloo_environ,
    horovod_gloo_slots,
)
from albertkit.errors import ConfigError

log = logging.getLogger("albertkit")

PMI_VARIABLES = ("PMIX_RANK", "PMI_RANK", "PMI_FD")  # set by srun --mpi=pmix / pmi2
RENDEZVOUS_WAIT = 300.0  # seconds a task waits for worker 0's rendezvous server
_servers: list[Any] = []  # the rendezvous server of this process, kept alive


def controller_for(environ: Mapping[str, str], mpi_built: bool, gloo_built: bool) -> str:
    """``mpi`` or ``gloo``: how Horovod should join a Slurm step of several tasks."""
    if (environ.get("HOROVOD_CONTROLLER") or "").lower() == "mpi":
        return "mpi"
    if mpi_built and any(environ.get(v) for v in PMI_VARIABLES):
        return "mpi"
    return "gloo" if gloo_built else "mpi"


def interface_for(ip: str) -> str | None:
    """The network interface this machine reaches ``ip`` through (None if unknown)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((ip, 9))  # no packet is sent: this only picks the route
            local = s.getsockname()[0]
        import psutil  # a dependency of Horovod
    except (OSError, ImportError):
        return None
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local for a in addresses):
            return name
    return None


def _peer_interface(info: ClusterInfo, first_node_ip: str) -> str | None:
    """The interface towards the other nodes: the route to the first node, or on the first
    node the route to the second (its own name may resolve to a loopback address there)."""
    if info.host != info.hosts[0] or len(info.hosts) == 1:
        return interface_for(first_node_ip)
    try:
        return interface_for(socket.gethostbyname(info.hosts[1]))
    except OSError:
        return None


def start_rendezvous(info: ClusterInfo, port: int) -> Any:
    """Serve Horovod's Gloo rendezvous for the step of ``info`` on ``port`` (all interfaces)
    in a daemon thread; the server lives as long as the process."""
    from horovod.runner.common.util.hosts import SlotInfo
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    try:
        server = RendezvousHTTPServer(("", port), RendezvousHandler, 0)
    except OSError as e:
        raise ConfigError(f"cannot serve Horovod's Gloo rendezvous on port {port} of "
                          f"{info.host}: {e}; choose another ALBERTKIT_PORT") from None
    server.init([SlotInfo(**slot) for slot in horovod_gloo_slots(info)])
    threading.Thread(target=server.serve_forever, name="horovod-rendezvous",
                     daemon=True).start()
    _servers.append(server)
    return server


def wait_for_port(host: str, port: int, timeout: float) -> None:
    """Return once ``host:port`` accepts a connection; a ConfigError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=5):
                return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"Horovod's Gloo rendezvous at {host}:{port} (served by the first task "
                    f"of the step) did not answer within {timeout:.0f} s ({e}); did that "
                    "task fail?") from None
            time.sleep(0.2)


def prepare_slurm_horovod(info: ClusterInfo, environ: Mapping[str, str], hvd: Any,
                          target: MutableMapping[str, str] | None = None,
                          timeout: float = RENDEZVOUS_WAIT) -> dict[str, str] | None:
    """Make ``hvd.init()`` join the Slurm step of ``info`` through Gloo: set the variables
    in ``target`` (default ``os.environ``, which Horovod reads), start or wait for the
    rendezvous. Returns the variables set, or None when nothing is done: not a step of
    several tasks, or the MPI controller applies (:func:`controller_for`)."""
    if info.source != "slurm" or info.world_size <= 1:
        return None
    if controller_for(environ, hvd.mpi_built(), hvd.gloo_built()) == "mpi":
        return None
    target = os.environ if target is None else target
    port = base_port(environ)
    host = info.hosts[0]
    try:
        address = socket.gethostbyname(host)
    except OSError as e:
        raise ConfigError(f"cannot resolve {host}, the node of the step's first task "
                          f"(Horovod's Gloo rendezvous): {e}") from None
    iface = environ.get("HOROVOD_GLOO_IFACE") or _peer_interface(info, address)
    env = horovod_gloo_environ(info, port, address, iface)
    target.update(env)
    if info.worker_index == 0:
        start_rendezvous(info, port)
        log.info("Horovod on Slurm: Gloo rendezvous for %d ranks on %s:%d", info.world_size,
                 host, port)
    else:
        wait_for_port(address, port, timeout)
    return env
