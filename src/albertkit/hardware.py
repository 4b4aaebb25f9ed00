"""The one table of hardware facts: accelerators, and the SageMaker instance types that carry them.

Two tables, one fed by the other:

* :data:`DEVICES` -- GPU model -> memory, native bfloat16, published dense peak TFLOP/s per
  precision (the memory planner and the MFU figures of the benchmark read it);
* :data:`INSTANCE_TYPES` -- SageMaker ``ml.*`` instance type -> GPU count, GPU model, vCPUs
  (Horovod processes per host, bfloat16 checks, replica counts). Each GPU instance's
  memory and bfloat16 support are looked up in :data:`DEVICES`, so the two cannot disagree;
* :data:`NETWORK_GBPS` -- each instance type's network bandwidth (the communication model of
  :mod:`albertkit.plan.cost` and the fleet plans of :mod:`albertkit.plan.fleet` read it).

Instance figures are the published per-instance accelerator counts and vCPUs of the Amazon
EC2 instance families behind the SageMaker ``ml.*`` types
(https://aws.amazon.com/ec2/instance-types/ and https://aws.amazon.com/sagemaker/pricing/).
An instance type missing here can still be used: only options that need its GPU count
(Horovod without an explicit ``processes_per_host``) refuse it, with a message that says so.

This module imports nothing from albertkit: every layer may read it.

Example:
    >>> spec = instance_spec("ml.p4d.24xlarge")
    >>> spec.gpus, spec.gpu, spec.bf16, DEVICES[spec.gpu].memory_gib
    (8, 'A100', True, 40)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

GiB = 1024**3
# Memory a training process cannot plan for on a GPU: a fixed reserve for the CUDA context,
# cuBLAS/cuDNN workspaces and XLA temporaries, then a fraction of the rest kept free for
# allocator fragmentation.
GPU_RESERVED_GIB = 1.5
FRAGMENTATION_MARGIN = 0.10


# --------------------------------------------------------------------------- devices
@dataclass(frozen=True)
class Device:
    """One accelerator: memory and published dense peak FLOP/s per precision.

    ``peak_tflops`` maps a precision to dense (non-sparse) TFLOP/s from NVIDIA's datasheets
    (SXM variants). ``float32`` on Ampere and newer is TF32 on tensor cores, which
    TensorFlow enables by default for float32 matmuls. ``None`` = not published/known.
    """

    name: str
    memory_gib: float
    bf16: bool
    peak_tflops: dict[str, float | None] = field(default_factory=dict)

    def usable_bytes(self) -> int:
        """Memory a training step may plan for: total minus reserve, minus the margin."""
        return int((self.memory_gib - GPU_RESERVED_GIB) * GiB * (1.0 - FRAGMENTATION_MARGIN))


# albertkit's one table of accelerators; the instance table below names GPUs by these keys.
# Sources: NVIDIA V100, A100, H100/H200, T4, L4 and L40S datasheets.
DEVICES: dict[str, Device] = {
    "V100": Device(
        "NVIDIA V100 SXM2 16 GB",
        16,
        False,
        {"float32": 15.7, "mixed_float16": 125.0, "mixed_bfloat16": None},
    ),
    "V100-32GB": Device(
        "NVIDIA V100 SXM2 32 GB",
        32,
        False,
        {"float32": 15.7, "mixed_float16": 125.0, "mixed_bfloat16": None},
    ),
    "T4": Device(
        "NVIDIA T4 16 GB",
        16,
        False,
        {"float32": 8.1, "mixed_float16": 65.0, "mixed_bfloat16": None},
    ),
    "A10G": Device(
        "NVIDIA A10G 24 GB",
        24,
        True,
        {"float32": None, "mixed_float16": None, "mixed_bfloat16": None},
    ),
    "L4": Device(
        "NVIDIA L4 24 GB",
        24,
        True,
        {"float32": 60.0, "mixed_float16": 121.0, "mixed_bfloat16": 121.0},
    ),
    "L40S": Device(
        "NVIDIA L40S 48 GB",
        48,
        True,
        {"float32": 183.0, "mixed_float16": 362.0, "mixed_bfloat16": 362.0},
    ),
    "A100": Device(
        "NVIDIA A100 SXM 40 GB",
        40,
        True,
        {"float32": 156.0, "mixed_float16": 312.0, "mixed_bfloat16": 312.0},
    ),
    "A100-80GB": Device(
        "NVIDIA A100 SXM 80 GB",
        80,
        True,
        {"float32": 156.0, "mixed_float16": 312.0, "mixed_bfloat16": 312.0},
    ),
    "H100": Device(
        "NVIDIA H100 SXM 80 GB",
        80,
        True,
        {"float32": 494.7, "mixed_float16": 989.4, "mixed_bfloat16": 989.4},
    ),
    "H200": Device(
        "NVIDIA H200 SXM 141 GB",
        141,
        True,
        {"float32": 494.7, "mixed_float16": 989.4, "mixed_bfloat16": 989.4},
    ),
}

def get_device(name: str) -> Device:
    """Look a device up by its key (case-insensitive); the error lists the known keys."""
    for key, device in DEVICES.items():
        if key.lower() == name.lower():
            return device
    raise ValueError(f"unknown device {name!r}; known devices: {', '.join(DEVICES)}")


# --------------------------------------------------------------------------- instances
class InstanceSpec(NamedTuple):
    """Hardware of one SageMaker training instance type.

    ``gpus`` is the number of NVIDIA GPUs (0 for CPU instances); ``gpu`` the GPU model;
    ``gpu_memory_gib`` memory per GPU; ``bf16`` whether the GPU computes bfloat16 natively.
    """

    gpus: int
    gpu: str | None
    gpu_memory_gib: float
    vcpus: int
    bf16: bool


def _gpu(count: int, model: str, vcpus: int) -> InstanceSpec:
    device = DEVICES[model]  # GPU facts come from the device table, never restated here
    return InstanceSpec(gpus=count, gpu=model, gpu_memory_gib=device.memory_gib, vcpus=vcpus,
                        bf16=device.bf16)


def _cpu(vcpus: int) -> InstanceSpec:
    return InstanceSpec(gpus=0, gpu=None, gpu_memory_gib=0, vcpus=vcpus, bf16=False)


INSTANCE_TYPES: dict[str, InstanceSpec] = {
    # P3 / P3dn: NVIDIA V100 (the reference system ran on 8 x ml.p3dn.24xlarge)
    "ml.p3.2xlarge": _gpu(1, "V100", 8),
    "ml.p3.8xlarge": _gpu(4, "V100", 32),
    "ml.p3.16xlarge": _gpu(8, "V100", 64),
    "ml.p3dn.24xlarge": _gpu(8, "V100-32GB", 96),
    # P4d / P4de: NVIDIA A100
    "ml.p4d.24xlarge": _gpu(8, "A100", 96),
    "ml.p4de.24xlarge": _gpu(8, "A100-80GB", 96),
    # P5 family: NVIDIA H100 / H200
    "ml.p5.48xlarge": _gpu(8, "H100", 192),
    "ml.p5e.48xlarge": _gpu(8, "H200", 192),
    "ml.p5en.48xlarge": _gpu(8, "H200", 192),
    # G4dn: NVIDIA T4
    "ml.g4dn.xlarge": _gpu(1, "T4", 4),
    "ml.g4dn.2xlarge": _gpu(1, "T4", 8),
    "ml.g4dn.4xlarge": _gpu(1, "T4", 16),
    "ml.g4dn.8xlarge": _gpu(1, "T4", 32),
    "ml.g4dn.16xlarge": _gpu(1, "T4", 64),
    "ml.g4dn.12xlarge": _gpu(4, "T4", 48),
    # G5: NVIDIA A10G
    "ml.g5.xlarge": _gpu(1, "A10G", 4),
    "ml.g5.2xlarge": _gpu(1, "A10G", 8),
    "ml.g5.4xlarge": _gpu(1, "A10G", 16),
    "ml.g5.8xlarge": _gpu(1, "A10G", 32),
    "ml.g5.16xlarge": _gpu(1, "A10G", 64),
    "ml.g5.12xlarge": _gpu(4, "A10G", 48),
    "ml.g5.24xlarge": _gpu(4, "A10G", 96),
    "ml.g5.48xlarge": _gpu(8, "A10G", 192),
    # G6: NVIDIA L4
    "ml.g6.xlarge": _gpu(1, "L4", 4),
    "ml.g6.2xlarge": _gpu(1, "L4", 8),
    "ml.g6.4xlarge": _gpu(1, "L4", 16),
    "ml.g6.8xlarge": _gpu(1, "L4", 32),
    "ml.g6.16xlarge": _gpu(1, "L4", 64),
    "ml.g6.12xlarge": _gpu(4, "L4", 48),
    "ml.g6.24xlarge": _gpu(4, "L4", 96),
    "ml.g6.48xlarge": _gpu(8, "L4", 192),
    # G6e: NVIDIA L40S
    "ml.g6e.xlarge": _gpu(1, "L40S", 4),
    "ml.g6e.2xlarge": _gpu(1, "L40S", 8),
    "ml.g6e.4xlarge": _gpu(1, "L40S", 16),
    "ml.g6e.8xlarge": _gpu(1, "L40S", 32),
    "ml.g6e.16xlarge": _gpu(1, "L40S", 64),
    "ml.g6e.12xlarge": _gpu(4, "L40S", 48),
    "ml.g6e.24xlarge": _gpu(4, "L40S", 96),
    "ml.g6e.48xlarge": _gpu(8, "L40S", 192),
    # CPU instances (data preparation, smoke tests)
    "ml.m5.large": _cpu(2),
    "ml.m5.xlarge": _cpu(4),
    "ml.m5.2xlarge": _cpu(8),
    "ml.m5.4xlarge": _cpu(16),
    "ml.m5.12xlarge": _cpu(48),
    "ml.m5.24xlarge": _cpu(96),
    "ml.c5.xlarge": _cpu(4),
    "ml.c5.2xlarge": _cpu(8),
    "ml.c5.4xlarge": _cpu(16),
    "ml.c5.9xlarge": _cpu(36),
    "ml.c5.18xlarge": _cpu(72),
}


# Each instance's network bandwidth in Gbit/s (the published figure; "up to" figures, for
# the smaller types, taken at that ceiling), which the communication model of
# albertkit.plan.cost divides the all-reduce by. p4d/p4de/p5* figures are their EFA bandwidth.
NETWORK_GBPS: dict[str, float] = {
    "ml.p3.2xlarge": 10, "ml.p3.8xlarge": 10, "ml.p3.16xlarge": 25, "ml.p3dn.24xlarge": 100,
    "ml.p4d.24xlarge": 400, "ml.p4de.24xlarge": 400,
    "ml.p5.48xlarge": 3200, "ml.p5e.48xlarge": 3200, "ml.p5en.48xlarge": 3200,
    "ml.g4dn.xlarge": 25, "ml.g4dn.2xlarge": 25, "ml.g4dn.4xlarge": 25, "ml.g4dn.8xlarge": 50,
    "ml.g4dn.16xlarge": 50, "ml.g4dn.12xlarge": 50,
    "ml.g5.xlarge": 10, "ml.g5.2xlarge": 10, "ml.g5.4xlarge": 25, "ml.g5.8xlarge": 25,
    "ml.g5.16xlarge": 25, "ml.g5.12xlarge": 40, "ml.g5.24xlarge": 50, "ml.g5.48xlarge": 100,
    "ml.g6.xlarge": 10, "ml.g6.2xlarge": 10, "ml.g6.4xlarge": 25, "ml.g6.8xlarge": 25,
    "ml.g6.16xlarge": 25, "ml.g6.12xlarge": 40, "ml.g6.24xlarge": 50, "ml.g6.48xlarge": 100,
    "ml.g6e.xlarge": 20, "ml.g6e.2xlarge": 20, "ml.g6e.4xlarge": 20, "ml.g6e.8xlarge": 25,
    "ml.g6e.16xlarge": 35, "ml.g6e.12xlarge": 100, "ml.g6e.24xlarge": 200,
    "ml.g6e.48xlarge": 400,
}


def instance_spec(instance_type: str) -> InstanceSpec | None:
    """The hardware of ``instance_type``, or ``None`` when the table does not know it."""
    return INSTANCE_TYPES.get(instance_type)


def gpus_per_instance(instance_type: str) -> int:
    """GPUs of ``instance_type``; raises ``KeyError`` naming the known types if unknown."""
    spec = INSTANCE_TYPES.get(instance_type)
    if spec is None:
        raise KeyError(
            f"instance type {instance_type!r} is not in albertkit's instance table "
            f"(albertkit/hardware.py); known types: {', '.join(sorted(INSTANCE_TYPES))}"
        )
    return spec.gpus


# --------------------------------------------------------------------------- XLA plan
XlaSetting = Literal["auto"] | bool
DeviceKind = Literal["cpu", "gpu"]
_PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


class XlaPlan(NamedTuple):
    """Which parts of the training step are XLA-compiled (``jit_compile``), and why.

    ``compute`` is the forward + backward over the micro-batches, ``eval`` the evaluation
    and prediction functions. The step's ``apply`` part (cross-replica reduction, optimizer
    update) is never compiled: XLA cannot compile collectives on CPU and Horovod's all-reduce
    has no XLA kernel.
    """

    compute: bool
    eval: bool
    reason: str

    def describe(self, setting: XlaSetting) -> str:
        """One line for logs, e.g. ``auto -> compute off, eval off (cpu + ...: ...)``."""
        asked = setting if setting == "auto" else str(setting).lower()
        return (
            f"{asked} -> compute {'on' if self.compute else 'off'}, "
            f"eval {'on' if self.eval else 'off'} ({self.reason})"
        )


def resolve_xla(
    setting: XlaSetting, device: DeviceKind, precision: str, eager: bool = False
) -> XlaPlan:
    """The XLA plan of ``runtime.xla`` on ``device`` ("cpu"/"gpu") at ``precision``.

    ``true``/``false`` are obeyed as given for both parts. ``auto`` decides per device and
    precision from measurements of ALBERT-base, seq 128, micro-batch 8 (docs/performance.md,
    "How `runtime.xla: auto` chooses"):

    ======= ============== ======= ==== ================================================
    device  precision      compute eval why
    ======= ============== ======= ==== ================================================
    (any)   (eager run)    off     off  an eager step is not compiled at all
    gpu     (any)          on      on   XLA fuses the elementwise ops around the matmuls
    cpu     float32        off     off  with the GELU fused (the one elementwise chain
                                        XLA gained most on) the graph executor keeps
                                        less memory and was faster in 3 of 3 (noisy)
                                        alternating runs
    cpu     mixed_bfloat16 off     off  XLA's CPU backend does not use AVX-512 BF16 or
                                        AMX (oneDNN does): half as fast (2.86 vs 5.81)
    cpu     mixed_float16  off     off  XLA's CPU backend computes float16 slower than
                                        oneDNN (2.64 vs 3.28 seq/s)
    ======= ============== ======= ==== ================================================

    Whatever the plan, the GELU activations run as small XLA-compiled kernels
    (:func:`albertkit.models.kernels.fused_activation`).

    The function is pure: the caller names the device (:func:`local_device_kind` detects
    the one TensorFlow sees).

    Example:
        >>> resolve_xla("auto", "cpu", "mixed_bfloat16").compute
        False
        >>> resolve_xla("auto", "gpu", "mixed_bfloat16")[:2]
        (True, True)
    """
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device={device!r}; expected 'cpu' or 'gpu'")
    if precision not in _PRECISIONS:
        raise ValueError(f"precision={precision!r}; expected one of {', '.join(_PRECISIONS)}")
    if setting is True or setting is False:
        if setting and eager:
            raise ValueError("runtime.xla=true and runtime.eager=true exclude each other")
        why = "runtime.xla=true" if setting else "runtime.xla=false"
        return XlaPlan(setting, setting, why)
    if setting != "auto":
        raise ValueError(f"runtime.xla={setting!r}; expected auto, true or false")
    if eager:
        return XlaPlan(False, False, "runtime.eager=true: the step is not compiled")
    if device == "gpu":
        return XlaPlan(True, True, f"gpu + {precision}: XLA fuses the elementwise ops")
    if precision == "float32":
        return XlaPlan(False, False, "cpu + float32: with its GELU fused, the graph executor "
                       "is faster than XLA and keeps less memory")
    if precision == "mixed_bfloat16":
        return XlaPlan(False, False, "cpu + mixed_bfloat16: XLA's CPU backend does not use "
                       "AVX-512 BF16 or AMX; oneDNN does")
    return XlaPlan(False, False, "cpu + mixed_float16: XLA's CPU backend computes float16 "
                   "slower than oneDNN")


# CPU flags (Linux /proc/cpuinfo names) of instructions that compute with bfloat16 operands:
# AVX-512 BF16 and AMX-BF16 dot products (Intel Cooper Lake / Sapphire Rapids on, AMD Zen 4
# on for AVX-512 BF16), and AVX-NE-CONVERT, which oneDNN's AVX2 bfloat16 kernels need.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "avx_ne_convert")


def cpu_bfloat16_flags(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, ...] | None:
    """The bfloat16 instruction flags of this CPU (:data:`CPU_BF16_FLAGS`), in that order;
    ``()`` when it has none, ``None`` when ``cpuinfo`` cannot be read (not Linux).

    Without them oneDNN emulates bfloat16 (converting to float32 around float32
    arithmetic): mixed_bfloat16 then runs slower than float32 (docs/performance.md).
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == "flags":
                    have = set(value.split())
                    return tuple(flag for flag in CPU_BF16_FLAGS if flag in have)
    except OSError:
        return None
    return None


def bfloat16_warning(
    device: DeviceKind, precision: str, cpuinfo: str = "/proc/cpuinfo"
) -> str | None:
    """A warning for mixed_bfloat16 on a CPU without bfloat16 instructions, else ``None``."""
    if device != "cpu" or precision != "mixed_bfloat16":
        return None
    if cpu_bfloat16_flags(cpuinfo) != ():
        return None
    return (
        "runtime.precision=mixed_bfloat16 on a CPU without bfloat16 instructions (none of "
        f"{', '.join(CPU_BF16_FLAGS)} in {cpuinfo}): TensorFlow emulates bfloat16 here, "
        "which is slower than float32 (docs/performance.md); use runtime.precision=float32 "
        "on this machine"
    )


def local_device_kind() -> DeviceKind:
    """``"gpu"`` when TensorFlow sees a GPU in this process, else ``"cpu"``."""
    import tensorflow as tf

    return "gpu" if tf.config.list_physical_devices("GPU") else "cpu"


DEFAULT_MFU = 0.30
"""The model FLOPs utilisation ``albertkit plan`` assumes where nothing was measured."""
