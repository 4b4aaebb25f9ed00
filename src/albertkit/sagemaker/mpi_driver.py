"""The launcher SageMaker SDK v3 runs on every host of an albertkit Horovod job.

``ModelTrainer(distributed=...)`` uploads a "distributed driver" next to its own helper
modules (``/opt/ml/input/data/sm_drivers``) and runs it once per host. The SDK's MPI driver
(``distributed_drivers/mpi_driver.py`` in sagemaker-train 1.27) passes the per-host process
count as ``mpirun -np``, which Open MPI reads as the total: on N hosts it would start one
host's worth of ranks, all on the first host. This driver performs the same bootstrap with
the SDK's own helpers (sshd, waiting for every peer, the done-file that releases workers)
and launches ``hosts x processes_per_host`` ranks, mapped by slot and not bound to cores as
Horovod recommends, each running ``python -m mpi4py albertkit_entry.py --key value ...``.

SSH between the hosts uses a key pair made for this one job when albertkit stages it
(``write_job_ssh_key``, next to this driver in the SDK's ``sm_drivers`` channel); the driver
installs it for root on every host before sshd starts, and makes the host keys if the
container has none. The image itself holds no key, so pulling it gives no access to any job;
the job's key is as private as the job's own S3 input prefix (docs/sagemaker.md, "SSH
between hosts").

It is uploaded as ``DRIVER_SCRIPT`` by ``albertkit.sagemaker.plan`` and runs with the
container's Python, outside albertkit's package; the one albertkit module it uses, the host
list reader :mod:`albertkit.sagemaker.cluster`, is staged beside it as ``CLUSTER_MODULE``.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

try:  # the copy staged beside this driver: the job's own version, image or not
    from albertkit_cluster import read_sagemaker_cluster
except ImportError:  # imported as albertkit.sagemaker.mpi_driver
    from albertkit.sagemaker.cluster import read_sagemaker_cluster

DRIVER_SCRIPT = "albertkit_mpi_driver.py"
SSH_KEY_DIR = "albertkit_ssh"  # beside the driver: id_ed25519, id_ed25519.pub
SSH_KEY_NAME = "id_ed25519"
# Horovod's advice for Open MPI: place ranks slot by slot, let the OS schedule threads.
HOROVOD_MPI_OPTIONS = ["--bind-to", "none", "--map-by", "slot"]


def layout(environ: Mapping[str, str]) -> tuple[list[str], int]:
    """(sorted hosts, processes per host) from SM_HOSTS and the distributed config."""
    hosts = read_sagemaker_cluster(environ).hosts
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


def write_job_ssh_key(directory: str | os.PathLike) -> Path:
    """Make a fresh Ed25519 key pair for one job in ``directory`` (run where the job is
    staged; needs the ``cryptography`` package, which the SageMaker SDK brings)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / SSH_KEY_NAME
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    (directory / f"{SSH_KEY_NAME}.pub").write_bytes(public + b" albertkit-job\n")
    return target


def install_job_ssh_key(key_dir: str | os.PathLike, ssh_dir: str | os.PathLike = "/root/.ssh"
                        ) -> bool:
    """Let this host log in to, and be logged in by, the job's other hosts: the job's key
    becomes root's identity and is authorised. False when the job carries no key."""
    key_dir, ssh_dir = Path(key_dir), Path(ssh_dir)
    private, public = key_dir / SSH_KEY_NAME, key_dir / f"{SSH_KEY_NAME}.pub"
    if not (private.is_file() and public.is_file()):
        return False
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(ssh_dir, 0o700)
    identity = ssh_dir / SSH_KEY_NAME
    fd = os.open(identity, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private.read_bytes())
    os.chmod(identity, 0o600)
    (ssh_dir / f"{SSH_KEY_NAME}.pub").write_bytes(public.read_bytes())
    authorized = ssh_dir / "authorized_keys"
    line = public.read_text().strip()
    existing = authorized.read_text().splitlines() if authorized.is_file() else []
    if line not in existing:
        with open(authorized, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    os.chmod(authorized, 0o600)
    return True


def ensure_host_keys() -> None:
    """sshd needs host keys; the image ships none (each container makes its own)."""
    if not glob.glob("/etc/ssh/ssh_host_*_key"):
        subprocess.run(["ssh-keygen", "-A"], check=True, stdout=subprocess.DEVNULL)


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
    # the SDK's mpirun command exports LD_LIBRARY_PATH by name (-x); images that do not set
    # it (this one loads CUDA through ld.so.conf) would make Open MPI complain
    environ.setdefault("LD_LIBRARY_PATH", "")
    cluster = read_sagemaker_cluster(environ)
    hosts, master, current = cluster.hosts, environ["SM_MASTER_ADDR"], cluster.current_host
    # every host: its SM_* variables into /etc/environment (ranks started over ssh read them)
    write_env_vars_to_file()
    if not install_job_ssh_key(Path(__file__).resolve().parent / SSH_KEY_DIR):
        print("albertkit: this job carries no SSH key; relying on the image's", flush=True)
    ensure_host_keys()
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
