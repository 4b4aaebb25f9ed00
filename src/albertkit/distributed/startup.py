"""The start-up check: every process of a job reports to rank 0 before the backend starts,
or all of them stop within ``distributed.startup_timeout_s``, naming the ranks that never came.

Without it, a task that stops before it joins (a Slurm task without ``SLURM_PROCID``, an
import that fails on one node) leaves its peers waiting inside the backend's own start-up:
MultiWorkerMirroredStrategy's workers wait for the missing worker with no bound albertkit
can set, and Horovod's Gloo ends each process after 30 s with a C++ ``terminate`` that names
nobody.

:func:`wait_for_all_ranks` (called by ``build_distributor`` before the backend starts):

* Rank 0 listens on worker 0's address (``ClusterInfo.workers[0]``), the port it serves next
  anyway (TensorFlow's gRPC server, or Horovod's Gloo rendezvous under Slurm), so a job
  needs no port of its own for this. It waits until every other rank has said who it is,
  answers each one ``go`` and hands the port on to the backend.
* Every other rank connects (again every :data:`RETRY_SECONDS` while rank 0 is not
  listening yet), sends one JSON line ``{"job": ..., "rank": r, "size": n}`` and waits for
  the answer.
* When ``timeout`` seconds pass before all have come, rank 0 tells the ranks that came which
  ones did not, and every process raises a ConfigError of one line naming the missing ranks
  and their hosts; a rank that cannot reach rank 0 names rank 0 and its address.

Bounds: rank 0 gives up ``timeout`` seconds after it starts waiting. Another rank gives up
``timeout`` seconds after it starts trying when rank 0 never listens, and otherwise when rank
0 answers (at most ``timeout`` + :data:`REPLY_GRACE` seconds after it connected). A normal
start costs one connection and two short messages per rank.

"rank" here is the place in ``ClusterInfo.workers``: the backend's rank (Slurm tasks are
numbered node by node; with Slurm's default block distribution that is ``SLURM_PROCID``).
The job key every rank sends is a digest of the job id and the worker list, so a rank of
another job on the same port, or a task whose variables describe another layout, is turned
away instead of counted.

This module imports only the standard library and albertkit's errors and cluster helpers:
it runs before TensorFlow or Horovod start.

Example (rank 0's address, and the line every rank prints when rank 1 never came):
    >>> info = ClusterInfo(rank=0, world_size=2, hosts=("n1", "n2"), host="n1",
    ...                    workers=("n1:23400", "n2:23401"), source="slurm")
    >>> coordinator(info)
    ('n1', 23400)
    >>> missing_text(info, [1], 10)
    'start-up: rank 1 (n2) of 2 did not join within 10 s (distributed.startup_timeout_s); its own output says why it stopped or never started'
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import selectors
import socket
import time
from collections.abc import Sequence

from albertkit.distributed.cluster import ClusterInfo
from albertkit.errors import ConfigError

log = logging.getLogger("albertkit")

FIELD = "distributed.startup_timeout_s"
RETRY_SECONDS = 0.2  # how often a rank tries again while rank 0 is not listening yet
REPLY_GRACE = 5.0  # beyond the timeout, how long a connected rank waits for rank 0's verdict
CLOSE_WAIT = 2.0  # how long rank 0 waits for the ranks to close after "go" (see _release)
MAX_HELLO = 4096  # bytes: longer first lines are not albertkit's
MAX_PENDING = 256  # connections that have not said who they are yet, at one time


def needs_startup_check(info: ClusterInfo) -> bool:
    """Whether ``info`` describes a job of several processes with known addresses (a Slurm
    step, or a ``TF_CONFIG``): the jobs whose backends would wait for a missing rank."""
    return len(info.workers) > 1 and info.world_size > 1


def job_key(info: ClusterInfo) -> str:
    """A digest of the job id and the worker addresses: equal on every rank of one job."""
    text = json.dumps([info.job_id, list(info.workers)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def coordinator(info: ClusterInfo) -> tuple[str, int]:
    """Rank 0's host and port: worker 0's address."""
    host, _, port = info.workers[0].rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise ConfigError(f"worker 0's address {info.workers[0]!r} has no port") from None


def _host_of(info: ClusterInfo, rank: int) -> str:
    return info.workers[rank].rpartition(":")[0] or "?"


def missing_text(info: ClusterInfo, missing: Sequence[int], timeout: float) -> str:
    """``rank 1 (node2) did not join within 10 s ...``: the line every rank prints."""
    ranks = ", ".join(f"{r} ({_host_of(info, r)})" for r in missing)
    if len(missing) == 1:
        who, why = f"rank {ranks}", "its own output says why it stopped or never started"
    else:
        who, why = f"ranks {ranks}", "their own output says why they stopped or never started"
    return (f"start-up: {who} of {info.world_size} did not join within {timeout:g} s "
            f"({FIELD}); {why}")


def wait_for_all_ranks(info: ClusterInfo, timeout: float) -> float:
    """Return once every rank of ``info``'s job has reached this point; a one-line
    ConfigError on every rank otherwise (see the module docstring). Returns the seconds
    waited. Nothing is done (0.0) for a job of one process or without worker addresses."""
    if not needs_startup_check(info):
        return 0.0
    if timeout <= 0:
        raise ConfigError(f"{FIELD}={timeout!r} must be greater than 0")
    start = time.monotonic()
    if info.worker_index == 0:
        _gather(info, timeout)
    else:
        _report(info, timeout)
    waited = time.monotonic() - start
    log.debug("start-up: all %d ranks joined (%.2f s here)", info.world_size, waited)
    return waited


# ============================================================================ rank 0
def _listen(port: int) -> socket.socket:
    """A listening socket on ``port`` of every interface (IPv6 too when the host has it)."""
    try:
        if socket.has_dualstack_ipv6():
            return socket.create_server(("", port), family=socket.AF_INET6,
                                        dualstack_ipv6=True)
        return socket.create_server(("", port))
    except OSError as e:
        raise ConfigError(f"start-up: rank 0 cannot listen on port {port}: "
                          f"{e.strerror or e}; another job may be using it: choose another "
                          "ALBERTKIT_PORT (Slurm) or worker port (TF_CONFIG)") from None


def _send(conn: socket.socket, message: dict) -> None:
    with contextlib.suppress(OSError):
        conn.setblocking(True)
        conn.settimeout(CLOSE_WAIT)
        conn.sendall(json.dumps(message).encode() + b"\n")


def _check_hello(info: ClusterInfo, key: str, line: bytes, joined: dict[int, socket.socket]
                 ) -> tuple[int | None, str]:
    """(rank, "") for a valid first line of a new rank, else (None, the reason)."""
    try:
        hello = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        hello = None
    if not isinstance(hello, dict) or "job" not in hello:
        return None, "not an albertkit start-up message"
    rank = hello.get("rank")
    if hello["job"] != key or hello.get("size") != info.world_size:
        return None, (f"rank {rank} describes another job than rank 0 (job "
                      f"{info.job_id or '-'}, {info.world_size} ranks, workers "
                      f"{','.join(info.workers)}): another job on this port, or tasks whose "
                      "environments disagree")
    if not isinstance(rank, int) or not 0 < rank < info.world_size:
        return None, f"rank {rank!r} is not one of 1..{info.world_size - 1}"
    if rank in joined:
        return None, f"rank {rank} has joined already: two processes claim that rank"
    return rank, ""


def _gather(info: ClusterInfo, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    _, port = coordinator(info)
    key = job_key(info)
    server = _listen(port)
    joined: dict[int, socket.socket] = {}
    pending: dict[socket.socket, bytearray] = {}
    with server, selectors.DefaultSelector() as sel:
        server.setblocking(False)
        sel.register(server, selectors.EVENT_READ)
        try:
            while len(joined) < info.world_size - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                for event, _ in sel.select(min(left, 1.0)):
                    if event.fileobj is server:
                        with contextlib.suppress(OSError):
                            conn, _ = server.accept()
                            if len(pending) >= MAX_PENDING:  # a flood, not a job's ranks
                                conn.close()
                                continue
                            conn.setblocking(False)
                            sel.register(conn, selectors.EVENT_READ)
                            pending[conn] = bytearray()
                        continue
                    conn = event.fileobj
                    _read_hello(info, key, conn, sel, pending, joined)
            # stop listening first: a rank that goes on at once and knocks on the port for
            # the backend (Horovod's rendezvous) must be refused, not queued here
            sel.unregister(server)
            server.close()
            missing = [r for r in range(1, info.world_size) if r not in joined]
            verdict = {"missing": missing} if missing else {"go": True}
            for conn in joined.values():
                _send(conn, verdict)
            if missing:
                raise ConfigError(missing_text(info, missing, timeout))
            _release(list(joined.values()))
        finally:
            for conn in [*joined.values(), *pending]:
                conn.close()


def _read_hello(info: ClusterInfo, key: str, conn, sel: selectors.BaseSelector,
                pending: dict[socket.socket, bytearray],
                joined: dict[int, socket.socket]) -> None:
    """Read what ``conn`` sent; a complete first line joins its rank or turns it away. A
    joined rank that closes its connection counts as missing again."""
    try:
        data = conn.recv(MAX_HELLO)
    except (BlockingIOError, InterruptedError):
        return
    except OSError:
        data = b""
    if conn not in pending:  # a joined rank: it only ever closes
        if not data:
            rank = next(r for r, c in joined.items() if c is conn)
            log.warning("start-up: rank %d (%s) left before every rank had joined", rank,
                        _host_of(info, rank))
            del joined[rank]
            sel.unregister(conn)
            conn.close()
        return
    buffer = pending[conn]
    buffer += data
    if data and b"\n" not in buffer and len(buffer) < MAX_HELLO:
        return
    del pending[conn]
    sel.unregister(conn)
    rank, reason = _check_hello(info, key, bytes(buffer).split(b"\n", 1)[0], joined) \
        if data or b"\n" in buffer else (None, "")
    if rank is None:
        if reason:
            log.warning("start-up: turned away a connection to rank 0: %s", reason)
            _send(conn, {"refused": reason})
        conn.close()
        return
    joined[rank] = conn
    sel.register(conn, selectors.EVENT_READ)


def _release(conns: list[socket.socket]) -> None:
    """Wait (at most CLOSE_WAIT s) until every rank has closed its side: the side that
    closes first keeps the connection's TIME_WAIT, and rank 0's port goes to its backend."""
    end = time.monotonic() + CLOSE_WAIT
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.settimeout(max(0.01, end - time.monotonic()))
            while conn.recv(64):
                pass


# ============================================================================ other ranks
def _connect(info: ClusterInfo, timeout: float) -> socket.socket:
    host, port = coordinator(info)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            conn = socket.create_connection((host, port), timeout=max(0.1, min(left, 5.0)))
            if conn.getsockname() != conn.getpeername():
                return conn
            # a connection to a free port of this machine can meet itself (TCP simultaneous
            # open, when the port is in the ephemeral range): not rank 0
            conn.close()
            raise ConnectionRefusedError(111, "connection refused")
        except OSError as e:
            if time.monotonic() + RETRY_SECONDS >= deadline:
                raise ConfigError(
                    f"start-up: rank 0 ({host}:{port}) did not answer rank "
                    f"{info.worker_index} within {timeout:g} s ({FIELD}; last try: "
                    f"{e.strerror or e}); its own output says why it stopped or never "
                    "started") from None
            time.sleep(RETRY_SECONDS)


def _report(info: ClusterInfo, timeout: float) -> None:
    host, port = coordinator(info)
    hello = {"job": job_key(info), "rank": info.worker_index, "size": info.world_size}
    with _connect(info, timeout) as conn:
        # rank 0 was listening when we connected, so it answers within its timeout from now
        conn.settimeout(timeout + REPLY_GRACE)
        line = b""
        try:
            conn.sendall(json.dumps(hello).encode() + b"\n")
            with conn.makefile("rb") as stream:
                line = stream.readline(MAX_HELLO)
        except OSError:
            pass
    try:
        answer = json.loads(line) if line else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        answer = None
    if isinstance(answer, dict) and answer.get("go") is True:
        return
    if isinstance(answer, dict) and isinstance(answer.get("missing"), list):
        raise ConfigError(missing_text(info, answer["missing"], timeout))
    if isinstance(answer, dict) and "refused" in answer:
        raise ConfigError(f"start-up: rank 0 at {host}:{port} turned rank "
                          f"{info.worker_index} away: {answer['refused']}")
    raise ConfigError(f"start-up: rank 0 at {host}:{port} ended the start-up check of rank "
                      f"{info.worker_index} without an answer (did rank 0 stop? its own "
                      "output says why; or another program uses that port)")
