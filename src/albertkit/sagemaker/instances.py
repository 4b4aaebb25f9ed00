"""The one table of SageMaker training instance types albertkit knows about.

Everything that depends on the hardware of an instance type (MPI processes per host for
Horovod, whether bfloat16 runs natively, the replica count used to check batch sizes) reads
it from here; nothing else in albertkit hard-codes instance facts.

Figures are the published per-instance accelerator counts and vCPUs of the Amazon EC2
instance families behind the SageMaker ``ml.*`` types (https://aws.amazon.com/ec2/instance-types/
and https://aws.amazon.com/sagemaker/pricing/). An instance type missing here can still be
used: only options that need its GPU count (Horovod without an explicit
``processes_per_host``) refuse it, with a message that says so.

Example:
    >>> spec = instance_spec("ml.p4d.24xlarge")
    >>> spec.gpus, spec.gpu, spec.bf16
    (8, 'A100', True)
"""

from __future__ import annotations

from typing import NamedTuple

# GPU models: memory per GPU (GiB) and native bfloat16 support (compute capability >= 8.0).
_GPUS: dict[str, tuple[int, bool]] = {
    "V100": (16, False),
    "V100-32GB": (32, False),
    "T4": (16, False),
    "A10G": (24, True),
    "L4": (24, True),
    "L40S": (48, True),
    "A100": (40, True),
    "A100-80GB": (80, True),
    "H100": (80, True),
    "H200": (141, True),
}


class InstanceSpec(NamedTuple):
    """Hardware of one SageMaker training instance type.

    ``gpus`` is the number of NVIDIA GPUs (0 for CPU instances); ``gpu`` the GPU model;
    ``gpu_memory_gib`` memory per GPU; ``bf16`` whether the GPU computes bfloat16 natively.
    """

    gpus: int
    gpu: str | None
    gpu_memory_gib: int
    vcpus: int
    bf16: bool


def _gpu(count: int, model: str, vcpus: int) -> InstanceSpec:
    memory, bf16 = _GPUS[model]
    return InstanceSpec(gpus=count, gpu=model, gpu_memory_gib=memory, vcpus=vcpus, bf16=bf16)


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


def instance_spec(instance_type: str) -> InstanceSpec | None:
    """The hardware of ``instance_type``, or ``None`` when the table does not know it."""
    return INSTANCE_TYPES.get(instance_type)


def gpus_per_instance(instance_type: str) -> int:
    """GPUs of ``instance_type``; raises ``KeyError`` naming the known types if unknown."""
    spec = INSTANCE_TYPES.get(instance_type)
    if spec is None:
        raise KeyError(
            f"instance type {instance_type!r} is not in albertkit's instance table "
            f"(albertkit/sagemaker/instances.py); known types: {', '.join(sorted(INSTANCE_TYPES))}"
        )
    return spec.gpus
