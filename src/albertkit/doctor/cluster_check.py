"""The doctor's cluster check: every process of a job proves it can work with the others.

Run by every process of the job (``srun``, ``--nproc``, ``mpirun``); each takes part in the
same three all-reduces over the backend a training run would use, so all of them end with the
same gathered facts:

1. **all_reduce**: a sum in which each rank fills its own slot (with its host name and, on
   rank 0, a random token for this run) must come back with every slot filled: the ranks
   reach each other. It doubles as the barrier before the clocks are read.
2. **clocks**: each rank reads its wall clock right after that barrier; the second
   all-reduce gathers the readings, and a spread over ``clock_tolerance`` seconds
   (:data:`CLOCK_TOLERANCE_SECONDS` by default) fails, naming the ranks furthest apart.
   The readings include the time the ranks take to leave the barrier (milliseconds on a
   healthy network).
3. **shared_run_dir**: each rank writes ``run_dir/.doctor/<host>-<rank>`` (the run token
   inside) before the second all-reduce and reads every other rank's file after it; the third
   all-reduce gathers who could write and who saw whom. A rank that cannot write, or cannot
   see a peer's file (run_dir not shared between nodes), fails the check with its host and
   rank named.

A process whose peers never answer stops after ``timeout`` seconds, saying which rank it is.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from albertkit.distributed.cluster import ClusterInfo
from albertkit.distributed.shared_dir import (  # shared with training's start-up check
    HOST_BYTES,
    Reduce,
    distributor_sum,
)
from albertkit.distributed.shared_dir import decode_host as _decode_host
from albertkit.distributed.shared_dir import encode_host as _encode_host
from albertkit.distributed.shared_dir import file_name as _file_name
from albertkit.distributed.shared_dir import slot as _slot
from albertkit.doctor.report import CLOCK_TOLERANCE_SECONDS, Check
from albertkit.fileio import atomic_write_json

log = logging.getLogger("albertkit")

DOCTOR_DIR = ".doctor"
# the names environment_checks gives its checks (albertkit.doctor.environment)
ENVIRONMENT_CHECKS = ("python", "platform", "albertkit", "tensorflow", "gpus", "nccl", "horovod",
                      "nvidia_driver", "efa", "launch", "run_dir")


def cluster_checks(reduce: Reduce, rank: int, size: int, host: str, run_dir: Path,
                   clock_tolerance: float = CLOCK_TOLERANCE_SECONDS,
                   local_failures: Sequence[str] = (),
                   clock: Callable[[], float] = time.time) -> list[Check]:
    """The three checks, computed the same on every rank (see the module docstring), and
    ``environment``: which of :data:`ENVIRONMENT_CHECKS` failed on which rank
    (``local_failures`` names this rank's).

    ``reduce`` is the job's sum (:func:`distributor_sum`); ``clock`` is injectable so tests
    can make one rank's clock run ahead.
    """
    # 1. reach each other (and agree on a token for this run's files)
    token = float(random.getrandbits(40)) if rank == 0 else 0.0
    first = np.concatenate([[token], _slot(size, rank, 1.0),
                            np.zeros(size * HOST_BYTES, np.float64)])
    first[1 + size + rank * HOST_BYTES:1 + size + (rank + 1) * HOST_BYTES] = _encode_host(host)
    summed = reduce(first)
    now = clock()
    token = int(summed[0])
    present = summed[1:1 + size]
    hosts = [_decode_host(summed[1 + size + r * HOST_BYTES:1 + size + (r + 1) * HOST_BYTES])
             for r in range(size)]

    def where(r: int) -> str:
        return f"{hosts[r] or '?'} (rank {r})"

    # 3a. write this rank's file before the second all-reduce, which is the barrier
    directory = run_dir / DOCTOR_DIR
    wrote = 1.0
    try:
        atomic_write_json(directory / _file_name(host, rank),
                          {"host": host, "rank": rank, "token": token, "time": now})
    except OSError as e:
        log.error("doctor: rank %d on %s cannot write %s: %s", rank, host, directory, e)
        wrote = 0.0
    # 2. the clocks, read right after the first all-reduce
    second = reduce(np.concatenate([_slot(size, rank, wrote), _slot(size, rank, now)]))
    written, clocks = second[:size], second[size:]
    # 3b. read every other rank's file
    n_env = len(ENVIRONMENT_CHECKS)
    seen = np.zeros((size, size), np.float64)
    failed_here = np.zeros((size, n_env), np.float64)
    for name in local_failures:
        failed_here[rank, ENVIRONMENT_CHECKS.index(name)] = 1.0
    for r in range(size):
        path = directory / _file_name(hosts[r], r)
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
            seen[rank, r] = float(content.get("token") == token and content.get("rank") == r)
        except (OSError, ValueError):
            seen[rank, r] = 0.0
    third = reduce(np.concatenate([seen.ravel(), failed_here.ravel()]))
    seen = third[:size * size].reshape(size, size)
    env_failed = third[size * size:].reshape(size, n_env)

    checks = []
    missing = [r for r in range(size) if round(present[r]) != 1]
    if missing:
        checks.append(Check("all_reduce", "fail",
                            f"the sum over {size} ranks came back without ranks {missing}",
                            {"expected": [1] * size, "got": present.tolist()},
                            where=where(missing[0])))
    else:
        checks.append(Check("all_reduce", "ok", f"{size} ranks summed, as expected",
                            {"ranks": size, "hosts": hosts}))
    skew = float(clocks.max() - clocks.min())
    ahead, behind = int(clocks.argmax()), int(clocks.argmin())
    details = {"max_skew_seconds": skew, "tolerance_seconds": clock_tolerance,
               "clocks": clocks.tolist()}
    if skew > clock_tolerance:
        checks.append(Check("clocks", "fail",
                            f"clock {skew:.3f} s ahead of {where(behind)}'s (more than "
                            f"{clock_tolerance:g} s: synchronise the clocks, e.g. chrony)",
                            details, where=where(ahead)))
    else:
        checks.append(Check("clocks", "ok", f"max skew {skew:.3f} s (tolerance "
                                            f"{clock_tolerance:g} s)", details))
    problems = []
    for r in range(size):
        if written[r] < 0.5:
            problems.append((r, f"cannot write {directory}"))
            continue
        blind = [p for p in range(size) if seen[r, p] < 0.5 and written[p] > 0.5]
        if blind:
            problems.append((r, f"cannot see the files of ranks {blind} in {directory} "
                                "(run_dir not shared between the nodes?)"))
    if problems:
        r, text = problems[0]
        more = f" (and {len(problems) - 1} more rank(s))" if len(problems) > 1 else ""
        checks.append(Check("shared_run_dir", "fail", text + more,
                            {"problems": [{"rank": p, "host": hosts[p], "problem": t}
                                          for p, t in problems]}, where=where(r)))
    else:
        checks.append(Check("shared_run_dir", "ok",
                            f"{run_dir}: every rank wrote its file and read all {size}",
                            {"path": str(run_dir)}))
    bad = [(r, [ENVIRONMENT_CHECKS[i] for i in range(n_env) if env_failed[r, i] > 0.5])
           for r in range(size)]
    bad = [(r, names) for r, names in bad if names]
    if bad:
        checks.append(Check("environment", "fail",
                            f"failed {', '.join(bad[0][1])} (its own output says why)"
                            + (f"; {len(bad) - 1} more rank(s) failed checks" if len(bad) > 1
                               else ""),
                            {"failed": [{"rank": r, "host": hosts[r], "checks": names}
                                        for r, names in bad]}, where=where(bad[0][0])))
    else:
        checks.append(Check("environment", "ok", f"every rank's own checks passed ({size})"))
    return checks


class Watchdog:
    """Ends this process with ``code`` after ``seconds`` unless stopped first, printing
    ``message`` (peers that never answer would otherwise block a collective forever)."""

    def __init__(self, seconds: float, message: str, code: int = 3) -> None:
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(seconds, message, code),
                                        daemon=True)

    def _run(self, seconds: float, message: str, code: int) -> None:
        if not self._done.wait(seconds):
            print(message, flush=True)
            os._exit(code)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()


def run_cluster_check(info: ClusterInfo, backend: str, run_dir: Path, timeout: float,
                      clock_tolerance: float = CLOCK_TOLERANCE_SECONDS,
                      local_failures: Sequence[str] = (),
                      environ: Mapping[str, str] | None = None) -> tuple[int, list[Check]]:
    """Build ``backend``'s distributor and run :func:`cluster_checks`; returns this
    process's rank (the backend's) and the checks. A peer that does not answer within
    ``timeout`` seconds ends the process (exit 3) with a line naming this host and rank; one
    that never starts is named after half of it (the backend's start-up check)."""
    from albertkit.config import DistributedConfig
    from albertkit.distributed import build_distributor

    message = (f"FAILED all_reduce on {info.host} (rank {info.rank}): no answer from the other "
               f"{info.world_size - 1} rank(s) within {timeout:g} s ({backend})")
    with Watchdog(timeout, message):
        # the start-up check gives up first, naming the rank that never came
        cfg = DistributedConfig(backend=backend, startup_timeout_s=max(timeout / 2, 1.0))
        dist = build_distributor(cfg, environ)
        checks = cluster_checks(distributor_sum(dist), dist.rank, dist.size, info.host,
                                run_dir, clock_tolerance, local_failures)
    return dist.rank, checks
