"""``albertkit doctor``: is this machine, and this cluster, ready to train?

:func:`environment_checks` reports what one process finds (Python, TensorFlow and its CUDA
build, GPUs, NCCL, Horovod's build, the NVIDIA driver, EFA, the launch environment, the run
directory); :func:`run_cluster_check` makes every process of a job prove it reaches the others,
shares the run directory and agrees on the time. :class:`DoctorReport` holds the result as a
table for people and JSON for scripts. The command is in :mod:`albertkit.cli.doctor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.doctor.cluster_check import cluster_checks, run_cluster_check
    from albertkit.doctor.environment import environment_checks
    from albertkit.doctor.report import CLOCK_TOLERANCE_SECONDS, Check, DoctorReport

__all__ = ["CLOCK_TOLERANCE_SECONDS", "Check", "DoctorReport", "cluster_checks",
           "environment_checks", "run_cluster_check"]

# imported on first use: the cluster check needs numpy, which `albertkit --help` does not
__getattr__, __dir__ = lazy_exports(__name__, {
    "CLOCK_TOLERANCE_SECONDS": "report",
    "Check": "report",
    "DoctorReport": "report",
    "cluster_checks": "cluster_check",
    "environment_checks": "environment",
    "run_cluster_check": "cluster_check",
})
