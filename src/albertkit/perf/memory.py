"""FLOPs and memory of an ALBERT training step, from the architecture alone (pure functions).

Three things live here, all without TensorFlow:

* :func:`training_flops` -- matmul FLOPs per training sequence (the numerator of MFU; it
  lives in :mod:`albertkit.models.footprint`, which training uses to count sifting's savings);
* :func:`estimate_memory` -- the predicted peak training memory of one replica;
* :func:`plan_batch` -- micro-batch and accumulation for a target global batch on a device,
  using the accelerator table of :mod:`albertkit.hardware` (memory, peak FLOP/s).

A micro-batch counts examples; an example of a multiple-choice task is one encoder sequence
per choice (a micro-batch of 8 RACE examples runs 32 sequences), so the planner sizes the
step for ``micro_batch * sequences_per_example`` sequences (:func:`sequences_per_example`).

The FLOP count (what is counted, the formulas) is documented at :func:`training_flops`.

The memory model (what :func:`~albertkit.models.footprint.estimate_memory` counts) is
documented in :mod:`albertkit.models.footprint`, where the estimate lives: training refuses
architectures that cannot fit before allocating them and may not depend on this planner.
"""

from __future__ import annotations

from dataclasses import dataclass

from albertkit.config.sizes import AlbertSpec
from albertkit.errors import ConfigError
from albertkit.hardware import Device, GiB, XlaSetting, get_device, resolve_xla

# The memory estimate is arithmetic of the architecture that training needs too (it refuses
# a model that cannot fit before allocating it), so it lives below training, in models/.
from albertkit.models.footprint import (  # noqa: F401 - FlopCount, training_flops re-exported
    FlopCount,
    Precision,
    estimate_memory,
    training_flops,
)
from albertkit.models.options import RematMode


def sequences_per_example(data: object) -> int:
    """Encoder sequences one example of the ``data`` section costs: its
    ``sequences_per_example`` (multiple choice: ``num_choices``), else 1.

    Raises:
        ConfigError: the data kind has the notion but no number (``num_choices`` unset).
    """
    if not hasattr(data, "sequences_per_example"):
        return 1
    value = data.sequences_per_example
    if value is None:
        raise ConfigError(f"data.kind={getattr(data, 'kind', '?')}: set data.num_choices "
                          "(the choices per example, e.g. 4 for RACE): the memory plan "
                          "counts one sequence per choice")
    return int(value)


# --------------------------------------------------------------------------- devices
# The devices the planner documents (docs/memory.md) and the CLI table shows by default.
PLANNED_DEVICES = ("V100", "V100-32GB", "A100", "A100-80GB", "H100", "H200")


@dataclass(frozen=True)
class BatchPlan:
    """A micro-batch / accumulation proposal for one device."""

    device: str
    global_batch: int
    replicas: int
    micro_batch: int
    accumulation: int
    predicted_peak_bytes: float
    usable_bytes: int

    @property
    def fits(self) -> bool:
        return self.micro_batch > 0

    def as_dict(self) -> dict[str, object]:
        return {
            "device": self.device,
            "global_batch": self.global_batch,
            "replicas": self.replicas,
            "micro_batch": self.micro_batch,
            "accumulation": self.accumulation,
            "predicted_peak_gib": round(self.predicted_peak_bytes / GiB, 2),
            "usable_gib": round(self.usable_bytes / GiB, 2),
        }


def plan_batch(
    spec: AlbertSpec,
    seq_length: int,
    precision: Precision,
    device: str | Device,
    global_batch: int,
    replicas: int = 1,
    max_predictions: int | None = None,
    remat: RematMode | bool = "selective",
    xla: XlaSetting = "auto",
    sequences_per_example: int = 1,
) -> BatchPlan:
    """The largest micro-batch that divides the per-replica batch and fits the device.

    ``accumulation = global_batch / (replicas * micro_batch)``. When not even a micro-batch
    of 1 fits, the plan has ``micro_batch == 0`` (``fits`` is False). ``xla`` is
    ``runtime.xla``: the estimate is that of the path it resolves to on a GPU
    (:func:`albertkit.hardware.resolve_xla`; the devices planned for are GPUs). Batches
    count examples of ``sequences_per_example`` sequences each (multiple choice: N).
    """
    k = sequences_per_example
    if k < 1:
        raise ValueError(f"sequences_per_example={k} must be at least 1")
    compiled = resolve_xla(xla, "gpu", precision).compute
    dev = get_device(device) if isinstance(device, str) else device
    if global_batch <= 0 or replicas <= 0 or global_batch % replicas:
        raise ValueError(
            f"global_batch={global_batch} must be a positive multiple of replicas={replicas}"
        )
    per_replica = global_batch // replicas
    usable = dev.usable_bytes()
    one = estimate_memory(spec, seq_length, k, precision, max_predictions, accumulation=2,
                          remat=remat, xla=compiled, device="gpu").peak_bytes
    best = BatchPlan(dev.name, global_batch, replicas, 0, 0, one, usable)
    for micro in sorted(d for d in range(1, per_replica + 1) if per_replica % d == 0):
        accum = per_replica // micro
        peak = estimate_memory(
            spec, seq_length, micro * k, precision, max_predictions, accumulation=accum,
            remat=remat,
            xla=compiled, device="gpu",
        ).peak_bytes
        if peak > usable:
            break
        best = BatchPlan(dev.name, global_batch, replicas, micro, accum, peak, usable)
    return best


def plan_table(
    spec: AlbertSpec,
    seq_length: int,
    precision: Precision,
    global_batch: int,
    replicas: int = 1,
    devices: tuple[str, ...] = PLANNED_DEVICES,
    max_predictions: int | None = None,
    remat: RematMode | bool = "selective",
) -> list[BatchPlan]:
    """:func:`plan_batch` on each device, for a job of ``replicas`` such devices."""
    return [plan_batch(spec, seq_length, precision, d, global_batch, replicas, max_predictions,
                       remat) for d in devices]


def format_plan_table(plans: list[BatchPlan]) -> str:
    """A Markdown table of plans (used by the benchmark CLI and docs/memory.md)."""
    lines = ["| device | usable GiB | micro-batch | accumulation | predicted peak GiB |",
             "|---|---:|---:|---:|---:|"]
    for p in plans:
        if p.fits:
            lines.append(f"| {p.device} | {p.usable_bytes / GiB:.1f} | {p.micro_batch} | "
                         f"{p.accumulation} | {p.predicted_peak_bytes / GiB:.2f} |")
        else:
            lines.append(f"| {p.device} | {p.usable_bytes / GiB:.1f} | does not fit | - | "
                         f"{p.predicted_peak_bytes / GiB:.2f} (batch 1) |")
    return "\n".join(lines)
