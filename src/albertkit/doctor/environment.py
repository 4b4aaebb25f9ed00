"""What this machine offers a training process: one :class:`Check` per fact.

Python and the platform, TensorFlow with the CUDA/cuDNN it was built for and the GPUs it
sees, NCCL, Horovod and what it was built with, the NVIDIA driver (read by
:mod:`albertkit.sagemaker.gpu_driver`, and checked against the CUDA code when a minimum is
known), the EFA provider of libfabric, the launch environment (Slurm, SageMaker, a launcher)
and the run directory (writable, free space). Only a run directory that cannot be written
and a driver older than the CUDA code fail; the rest is reported.

TensorFlow is started quietly (:func:`albertkit.tfstart.start_tensorflow`), so a CPU
machine does not print CUDA's start-up noise.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

from albertkit.distributed.cluster import ClusterInfo
from albertkit.doctor.report import Check
from albertkit.errors import GpuDriverError
from albertkit.fileio import atomic_write_bytes

LOW_DISK_BYTES = 5 * 1024**3  # a run directory with less free space is reported as a warning
FI_INFO_TIMEOUT_SECONDS = 20
SAGEMAKER_VARIABLES = ("SM_HOSTS", "SM_CURRENT_HOST", "SM_TRAINING_ENV")


def python_check() -> Check:
    version = platform.python_version()
    return Check("python", "ok", f"{version} ({sys.executable})",
                 {"version": version, "executable": sys.executable})


def platform_check() -> Check:
    return Check("platform", "info", platform.platform(),
                 {"system": platform.system(), "machine": platform.machine(),
                  "release": platform.release(), "cpus": os.cpu_count()})


def tensorflow_checks() -> list[Check]:
    """TensorFlow's version and CUDA/cuDNN build, and the GPUs it sees."""
    from albertkit.tfstart import start_tensorflow

    try:
        start_tensorflow(quiet=True)
        import tensorflow as tf
    except Exception as e:  # noqa: BLE001 - a broken installation is the finding
        return [Check("tensorflow", "fail", f"import failed: {e}")]
    build = dict(tf.sysconfig.get_build_info())
    cuda, cudnn = build.get("cuda_version"), build.get("cudnn_version")
    built = f"CUDA {cuda}, cuDNN {cudnn}" if build.get("is_cuda_build") else "without CUDA"
    gpus = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        gpus.append(details.get("device_name") or gpu.name)
    gpu_text = f"{len(gpus)}: {', '.join(gpus)}" if gpus else "none (CPU only)"
    return [Check("tensorflow", "ok", f"{tf.__version__}, built {built}",
                  {"version": tf.__version__, "cuda_version": cuda, "cudnn_version": cudnn,
                   "cuda_build": bool(build.get("is_cuda_build"))}),
            Check("gpus", "info", gpu_text, {"count": len(gpus), "names": gpus})]


def nccl_check() -> Check:
    """NCCL as the ``nvidia-nccl-cu*`` wheel that TensorFlow's CUDA build brings."""
    for name in ("nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu11"):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return Check("nccl", "info", f"{version} ({name})", {"version": version, "package": name})
    return Check("nccl", "info", "not found (no nvidia-nccl wheel)", {"version": None})


def horovod_check() -> Check:
    """Horovod's version and build flags (MPI, Gloo, NCCL), if it is installed."""
    if importlib.util.find_spec("horovod") is None:
        return Check("horovod", "info", "not installed", {"version": None})
    try:
        import horovod
        import horovod.tensorflow as hvd
    except Exception as e:  # noqa: BLE001 - a Horovod built against another TF is the finding
        return Check("horovod", "warn", f"installed but not importable: {e}", {"version": None})
    nccl = hvd.nccl_built()
    flags = {"mpi": bool(hvd.mpi_built()), "gloo": bool(hvd.gloo_built()),
             "nccl": bool(nccl), "nccl_version": nccl or None}
    built = ", ".join(k for k in ("mpi", "gloo", "nccl") if flags[k]) or "nothing"
    return Check("horovod", "ok", f"{horovod.__version__}, built with {built}",
                 {"version": horovod.__version__, **flags})


def driver_check(environ: Mapping[str, str]) -> Check:
    """The NVIDIA driver, checked against the CUDA code when a minimum is known."""
    from albertkit.sagemaker.gpu_driver import check_driver, installed_driver

    installed = installed_driver(environ)
    try:
        outcome = check_driver(environ, horovod=importlib.util.find_spec("horovod") is not None)
    except GpuDriverError as e:
        return Check("nvidia_driver", "fail", str(e), {"version": installed})
    return Check("nvidia_driver", "info" if installed is None else "ok", outcome,
                 {"version": installed})


def efa_check(environ: Mapping[str, str]) -> Check:
    """Whether libfabric offers the EFA provider (``fi_info -p efa``)."""
    fi_info = shutil.which("fi_info", path=environ.get("PATH", os.defpath))
    if fi_info is None:
        return Check("efa", "info", "not found (no fi_info on PATH)", {"provider": None})
    try:
        done = subprocess.run([fi_info, "-p", "efa"], capture_output=True, text=True,
                              errors="replace", timeout=FI_INFO_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("efa", "warn", f"fi_info -p efa failed: {e}", {"provider": None})
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[0]
        return Check("efa", "info", f"not found (fi_info -p efa: {said[:120]})",
                     {"provider": None})
    fabrics = sorted({line.split(":", 1)[1].strip() for line in done.stdout.splitlines()
                      if line.strip().startswith("fabric:")})
    return Check("efa", "ok", f"efa provider ({', '.join(fabrics) or 'fabric unnamed'})",
                 {"provider": "efa", "fabrics": fabrics})


def launch_check(info: ClusterInfo, environ: Mapping[str, str]) -> Check:
    """How this process was started: its rank, the job's size and hosts, the scheduler."""
    sagemaker = [v for v in SAGEMAKER_VARIABLES if environ.get(v)]
    text = (f"{info.source}: rank {info.rank} of {info.world_size} on {info.host}"
            + (f", {len(info.hosts)} host(s)" if len(info.hosts) > 1 else ""))
    if info.job_id:
        text += f", job {info.job_id}"
    if sagemaker:
        text += ", SageMaker environment (" + ", ".join(sagemaker) + ")"
    slurm = {k: v for k, v in sorted(environ.items()) if k.startswith(("SLURM_", "SLURMD_"))}
    return Check("launch", "info", text,
                 {"source": info.source, "rank": info.rank, "world_size": info.world_size,
                  "local_rank": info.local_rank, "host": info.host, "hosts": list(info.hosts),
                  "job_id": info.job_id, "sagemaker": sagemaker,
                  "slurm": {k: slurm[k] for k in list(slurm)[:40]}})


def run_dir_check(run_dir: Path) -> Check:
    """The run directory exists (it is created), can be written, and has room."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".doctor-probe-{uuid.uuid4().hex}"
        atomic_write_bytes(probe, b"albertkit doctor\n")
        probe.unlink()
    except OSError as e:
        return Check("run_dir", "fail", f"{run_dir} is not writable: {e.strerror or e}",
                     {"path": str(run_dir), "writable": False})
    usage = shutil.disk_usage(run_dir)
    free_gib = usage.free / 1024**3
    status = "warn" if usage.free < LOW_DISK_BYTES else "ok"
    return Check("run_dir", status, f"{run_dir}: writable, {free_gib:.1f} GiB free",
                 {"path": str(run_dir), "writable": True, "free_bytes": usage.free,
                  "total_bytes": usage.total})


def environment_checks(run_dir: Path, info: ClusterInfo,
                       environ: Mapping[str, str] | None = None) -> list[Check]:
    """Every environment check, in the order the report shows them."""
    from albertkit import __version__

    environ = os.environ if environ is None else environ
    return [python_check(), platform_check(),
            Check("albertkit", "ok", __version__, {"version": __version__}),
            *tensorflow_checks(), nccl_check(), horovod_check(), driver_check(environ),
            efa_check(environ), launch_check(info, environ), run_dir_check(run_dir)]
