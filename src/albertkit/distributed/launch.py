"""Starting distributed jobs: a local N-process launcher and horovodrun commands.

On a cluster the processes are started by ``horovodrun``/``mpirun`` (Horovod) or by one
command per machine with ``TF_CONFIG`` set (multi-worker), or by SageMaker. For debugging
on one machine, :func:`launch_local` starts N copies of a command on localhost:

* ``tf_multiworker``: N processes, each with its own ``TF_CONFIG`` (free localhost ports);
* ``horovod``: ``horovodrun -np N -H localhost:N --gloo <command>``.

Either way, the first process that fails stops the others (SIGTERM to its process group,
SIGKILL after a grace period) and its exit code becomes the job's: a dead rank never leaves
its peers blocked in a collective.

Network exposure: the ``TF_CONFIG`` addresses are ``127.0.0.1``, but TensorFlow's gRPC
server (which ``MultiWorkerMirroredStrategy`` starts in every worker) listens on
``0.0.0.0:<port>`` whatever host the cluster names: the bind address is fixed in
TensorFlow's C++ server and no option or environment variable changes it. The server has
no authentication, so while a ``tf_multiworker`` job runs, anyone who can reach this
machine on those ports can talk to it. The launcher cannot prevent that; it logs a warning
naming the ports. Use ``--nproc`` with ``tf_multiworker`` only where a firewall keeps
other hosts away from them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from albertkit.errors import ConfigError

log = logging.getLogger("albertkit")

LAUNCHED_ENV = "ALBERTKIT_LAUNCHED"  # set in every process the launcher starts
BACKENDS = ("horovod", "tf_multiworker")


# ============================================================================ pure helpers
def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports that were free a moment ago on ``host``."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def local_tf_configs(ports: Sequence[int], host: str = "127.0.0.1") -> list[dict[str, Any]]:
    """One TF_CONFIG per local worker: the same cluster, a different ``task.index``."""
    cluster = {"worker": [f"{host}:{p}" for p in ports]}
    return [{"cluster": cluster, "task": {"type": "worker", "index": i}}
            for i in range(len(ports))]


def horovodrun_command(command: Sequence[str], nproc: int, hosts: str | None = None,
                       use_mpi: bool = False, horovodrun: str | None = None) -> list[str]:
    """``horovodrun -np N -H hosts --gloo|--mpi <command>`` (hosts default: localhost:N).

    Example:
        >>> horovodrun_command(["python", "train.py"], 2, horovodrun="horovodrun")
        ['horovodrun', '-np', '2', '-H', 'localhost:2', '--gloo', 'python', 'train.py']
    """
    if nproc < 1:
        raise ConfigError(f"number of processes must be >= 1, got {nproc}")
    exe = horovodrun or _find_horovodrun()
    return [exe, "-np", str(nproc), "-H", hosts or f"localhost:{nproc}",
            "--mpi" if use_mpi else "--gloo", *command]


def _find_horovodrun() -> str:
    beside = Path(sys.executable).with_name("horovodrun")
    if beside.is_file():
        return str(beside)
    found = shutil.which("horovodrun")
    if found:
        return found
    from albertkit.distributed.horovod import INSTALL_HINT

    raise ConfigError(f"horovodrun not found next to {sys.executable} or on PATH. {INSTALL_HINT}")


def cli_command(argv: Sequence[str]) -> list[str]:
    """The albertkit CLI with ``argv`` in a fresh interpreter (what launched processes run)."""
    return [sys.executable, "-m", "albertkit.cli", *argv]


# ============================================================================ launcher
def launch_local(command: Sequence[str], nproc: int, backend: str,
                 env: Mapping[str, str] | None = None, timeout: float | None = None,
                 grace_seconds: float = 10.0, output: IO[str] | None = None) -> int:
    """Run ``command`` as ``nproc`` cooperating processes on this machine; returns the exit code.

    Args:
        command: argv of one process (e.g. :func:`cli_command` of the user's arguments).
        nproc: number of processes (ranks).
        backend: ``tf_multiworker`` (one TF_CONFIG per process) or ``horovod``
            (``horovodrun --gloo``).
        env: base environment (default: this process's).
        timeout: stop everything after this many seconds (exit code 124).
        grace_seconds: time between SIGTERM and SIGKILL when stopping processes.
        output: where the processes' output goes, each line prefixed with its rank
            (default: this process's stdout).
    """
    if backend not in BACKENDS:
        raise ConfigError(f"local launch needs distributed.backend in {list(BACKENDS)}, "
                          f"got {backend!r}")
    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, got {nproc}")
    base = dict(os.environ if env is None else env)
    base[LAUNCHED_ENV] = "1"
    base.setdefault("PYTHONUNBUFFERED", "1")
    if backend == "horovod":
        # Gloo's rendezvous waits 30 s by default: too short while N processes import
        # TensorFlow on a busy machine.
        base.setdefault("HOROVOD_GLOO_TIMEOUT_SECONDS", "180")
        argvs = [horovodrun_command(command, nproc)]
        envs = [base]
        labels = ["hvd"]
    else:
        ports = free_ports(nproc)
        log.warning(
            "tf_multiworker: TensorFlow's gRPC server of each worker listens on all network "
            "interfaces (ports %s), without authentication; TensorFlow cannot bind it to "
            "127.0.0.1. Run this only where a firewall keeps other hosts from these ports",
            ", ".join(map(str, ports)))
        configs = local_tf_configs(ports)
        argvs = [list(command)] * nproc
        envs = [{**base, "TF_CONFIG": json.dumps(c)} for c in configs]
        labels = [str(i) for i in range(nproc)]
    return _supervise(argvs, envs, labels, timeout, grace_seconds, output or sys.stdout)


def _supervise(argvs: list[list[str]], envs: list[dict[str, str]], labels: list[str],
               timeout: float | None, grace: float, output: IO[str]) -> int:
    procs: list[subprocess.Popen] = []
    pumps: list[threading.Thread] = []
    lock = threading.Lock()
    try:
        for argv, env, label in zip(argvs, envs, labels, strict=True):
            p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, text=True,
                                 errors="replace")
            procs.append(p)
            t = threading.Thread(target=_pump, args=(p.stdout, f"[{label}] ", output, lock),
                                 daemon=True)
            t.start()
            pumps.append(t)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in procs]
            failed = [(label, c) for label, c in zip(labels, codes, strict=True)
                      if c not in (None, 0)]
            if failed:
                label, code = failed[0]
                alive = sum(c is None for c in codes)
                log.error("process [%s] exited with code %s; stopping the other %d", label,
                          code, alive)
                _stop(procs, grace)
                return _exit_code(code)
            if all(c == 0 for c in codes):
                return 0
            if deadline is not None and time.monotonic() > deadline:
                log.error("distributed job exceeded its %.0f s timeout; stopping it", timeout)
                _stop(procs, grace)
                return 124
            time.sleep(0.2)
    except BaseException:
        _stop(procs, grace)
        raise
    finally:
        for t in pumps:
            t.join(timeout=5)


def _pump(stream: IO[str], prefix: str, output: IO[str], lock: threading.Lock) -> None:
    for line in stream:
        with lock:
            output.write(prefix + line)
            output.flush()
    stream.close()


def _stop(procs: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM each live process group, SIGKILL what is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [p for p in procs if p.poll() is None]
        for p in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, sig)  # the child leads its own session: pgid == pid
        end = time.monotonic() + (grace if sig == signal.SIGTERM else 10.0)
        while any(p.poll() is None for p in live) and time.monotonic() < end:
            time.sleep(0.1)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=1)


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code  # killed by signal N -> 128 + N, as shells do


# ============================================================================ CLI entry
def launch_if_requested(nproc: int | None, backend: str, argv: Sequence[str]) -> int | None:
    """Re-run this CLI invocation as ``nproc`` local processes, or None to run it here.

    Call it after the config is loaded (``backend`` = ``cfg.distributed.backend``) with the
    CLI's own ``argv``. Processes started by the launcher (``ALBERTKIT_LAUNCHED`` set) and
    runs without ``--nproc`` return None and train in this process.
    """
    if nproc is None or os.environ.get(LAUNCHED_ENV):
        return None
    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, got {nproc}")
    if backend not in BACKENDS:
        if nproc == 1:
            return None
        raise ConfigError(f"--nproc {nproc} needs --distributed horovod or tf_multiworker "
                          f"(distributed.backend is {backend!r})")
    log.info("starting %d local %s processes", nproc, backend)
    return launch_local(cli_command(argv), nproc, backend)
