"""``albertkit doctor``: the environment report, and under several processes the cluster check.

Alone it reports this machine (:mod:`albertkit.doctor.environment`). Started as several
processes (``srun -n N``, ``--nproc N`` on this machine, ``mpirun``/``horovodrun``) every
process also runs the cluster check (:mod:`albertkit.doctor.cluster_check`) and rank 0
prints the report for all of them. Exit status 0 when every check passed, 1 when one failed
(the report names the check, the host and the rank), 3 when peers never answered.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from albertkit.doctor.report import CLOCK_TOLERANCE_SECONDS

DEFAULT_TIMEOUT_SECONDS = 300.0


def add_doctor_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``albertkit doctor``."""
    p = subparsers.add_parser(
        "doctor", help="report the environment; under srun/--nproc, check the cluster",
        description="Report Python, TensorFlow (CUDA/cuDNN build, GPUs), NCCL, Horovod's "
                    "build, the NVIDIA driver, EFA, the launch environment (Slurm, "
                    "SageMaker) and the run directory. Run as several processes (srun -n N, "
                    "--nproc N, mpirun) it also checks that every rank writes and reads the "
                    "same run directory, that the ranks reach each other through an "
                    "all-reduce, and that their clocks agree. Exit 1 names the failed check, "
                    "host and rank.")
    p.add_argument("--run-dir", type=Path, default=Path("."), metavar="DIR",
                   help="the run directory to check (created if missing; default: .)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--backend", choices=["tf_multiworker", "horovod"], default=None,
                   help="backend of the cluster check's all-reduce (default: horovod under "
                        "mpirun/horovodrun, else tf_multiworker)")
    p.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="run the check as N processes on this machine (the local launcher)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, metavar="S",
                   help="give up on peers that do not answer within S seconds (default: "
                        f"{DEFAULT_TIMEOUT_SECONDS:g})")
    p.add_argument("--clock-tolerance", type=float, default=CLOCK_TOLERANCE_SECONDS,
                   metavar="S", help="largest clock difference between ranks that passes "
                                     f"(default: {CLOCK_TOLERANCE_SECONDS:g} s)")
    p.set_defaults(func=run_doctor)
    return p


def run_doctor(args: argparse.Namespace) -> int:
    """The ``albertkit doctor`` command."""
    from albertkit.distributed.cluster import cluster_from_environ
    from albertkit.distributed.launch import launch_if_requested
    from albertkit.doctor import Check, DoctorReport, environment_checks, run_cluster_check

    info = cluster_from_environ(os.environ)
    backend = args.backend or ("horovod" if info.source in ("mpirun", "horovodrun")
                               else "tf_multiworker")
    launched = launch_if_requested(args.nproc, backend, args.argv)
    if launched is not None:
        return launched
    checks = environment_checks(args.run_dir, info, os.environ)
    mine = DoctorReport(host=info.host, rank=info.rank, world_size=info.world_size,
                        checks=list(checks))
    rank, broken = info.rank, False
    if info.world_size > 1:
        try:
            rank, cluster = run_cluster_check(info, backend, args.run_dir, args.timeout,
                                              args.clock_tolerance,
                                              [c.name for c in mine.failures], os.environ)
        except Exception as e:  # noqa: BLE001 - the backend could not start: the finding
            broken = True
            cluster = [Check("all_reduce", "fail", f"{backend}: {e}",
                             where=f"{info.host} (rank {rank})")]
        checks += cluster
    report = DoctorReport(host=info.host, rank=rank, world_size=info.world_size, checks=checks)
    if broken:  # nothing was gathered: every rank speaks for itself
        if rank == 0:
            print(json.dumps(report.to_json(), indent=2) if args.json else report.table())
        for line in report.failure_lines():
            print(line, file=sys.stderr)
        return 1
    if rank != 0:
        # Rank 0 reports for the whole job (the cluster checks gathered every rank's
        # results, this one's failed environment checks included) and its exit status
        # speaks for it; this rank says here why its own checks failed.
        for line in mine.failure_lines():
            print(f"[{info.host} rank {rank}] {line}", file=sys.stderr)
        return 0
    print(json.dumps(report.to_json(), indent=2) if args.json else report.table())
    for line in report.failure_lines():
        print(line, file=sys.stderr)
    return 0 if report.ok else 1
