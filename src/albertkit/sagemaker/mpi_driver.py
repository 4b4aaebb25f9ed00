"""The launcher SageMaker SDK v3 runs on every host of an albertkit Horovod job.

``ModelTrainer(distributed=...)`` uploads a "distributed driver" next to its own helper
modules (``/opt/ml/input/data/sm_drivers``) and runs it once per host. The SDK's MPI driver
(``distributed_drivers/mpi_driver.py`` in sagemaker-train 1.27) passes the per-host process
count as ``mpirun -np``, which Open MPI reads as the total: on N hosts it would start one
host's worth of ranks, all on the first host. This driver performs the same bootstrap with
the SDK's own helpers (sshd, waiting for every peer, the done-file that releases workers)
and launches ``hosts x processes_per_host`` ranks, mapped by slot and not bound to cores as
Horovod recommends, each running ``python -m mpi4py albertkit_entry.py --key value ...``.

It is uploaded as ``DRIVER_SCRIPT`` by ``albertkit.sagemaker.job`` and runs with the
container's Python, outside albertkit's package; it imports nothing from albertkit.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

DRIVER_SCRIPT = "albertkit_mpi_driver.py"
# Horovod's advice for Open MPI: place ranks slot by slot, let the OS schedule threads.
HOROVOD_MPI_OPTIONS = ["--bind-to", "none", "--map-by", "slot"]


def layout(environ: Mapping[str, str]) -> tuple[list[str], int]:
    """(sorted hosts, processes per host) from SM_HOSTS and the distributed config."""
    hosts = sorted(json.loads(environ["SM_HOSTS"]))
    distributed = json.loads(environ.get("SM_DISTRIBUTED_CONFIG") or "{}")
    per_host = int(distributed.get("process_count_per_node") or environ.get("SM_NUM_GPUS") or 1)
    return hosts, max(per_host, 1)


def mpirun_command(environ: Mapping[str, str], sm_drivers: str | os.PathLike) -> list[str]:
    """The full ``mpirun`` command for the master host, built with the SDK's helper."""
    _use_sdk_helpers(sm_drivers)
    from common.utils import hyperparameters_to_cli_args
    from distributed_drivers.mpi_utils import get_mpirun_command

    hosts, per_host = layout(environ)
    distributed = json.loads(environ.get("SM_DISTRIBUTED_CONFIG") or "{}")
    command = get_mpirun_command(
        host_count=len(hosts),
        host_list=[f"{h}:{per_host}" for h in hosts],
        num_processes=len(hosts) * per_host,
        additional_options=HOROVOD_MPI_OPTIONS
        + list(distributed.get("mpi_additional_options") or []),
        entry_script_path=environ["SM_ENTRY_SCRIPT"],
    )
    return command + hyperparameters_to_cli_args(json.loads(environ.get("SM_HPS") or "{}"))


def _use_sdk_helpers(sm_drivers: str | os.PathLike) -> None:
    root = str(Path(sm_drivers))
    if root not in sys.path:
        sys.path.insert(0, root)


def main() -> int:
    sm_drivers = Path(__file__).resolve().parents[1]
    _use_sdk_helpers(sm_drivers)
    from common.utils import execute_commands, write_failure_file
    from distributed_drivers.mpi_utils import (
        bootstrap_master_node,
        bootstrap_worker_node,
        start_sshd_daemon,
        write_env_vars_to_file,
        write_status_file_to_workers,
    )

    environ = os.environ
    hosts, _ = layout(environ)
    master, current = environ["SM_MASTER_ADDR"], environ["SM_CURRENT_HOST"]
    # every host: its SM_* variables into /etc/environment (ranks started over ssh read them)
    write_env_vars_to_file()
    start_sshd_daemon()
    if current != master:
        bootstrap_worker_node(master)  # returns once the master wrote the done-file
        return 0
    workers = [h for h in hosts if h != master]
    bootstrap_master_node(workers)
    command = mpirun_command(environ, sm_drivers)
    print("albertkit: " + " ".join(command), flush=True)
    exit_code, trace = execute_commands(command)
    write_status_file_to_workers(workers)
    if exit_code != 0:
        write_failure_file(trace)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
