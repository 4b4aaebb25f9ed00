"""Fleet plans: for a training config on each of several SageMaker fleets, whether its
micro-batch fits, the step time, the hours to ``runtime.max_steps`` and the cost on demand
and on spot, with the checkpoint interval that makes spot cheapest (``albertkit plan``;
docs/howto/plan.md works an example). Several configs, the phases of one recipe, are
planned together by :mod:`albertkit.plan.recipe`.

Per fleet (``count`` instances of one type, ``R`` GPUs in all, global batch ``G``):

* **Memory.** The memory planner (:mod:`albertkit.perf.memory`) on the instance's GPU: does
  the config's ``micro_batch_size`` fit, and which is the largest micro-batch that divides
  ``G / R`` and fits? The plan computes with the config's micro-batch when it fits, else
  with that largest one (and its accumulation).
* **Step time** = compute + all-reduce. The all-reduce is the communication model of
  :mod:`albertkit.plan.cost` (a ring over the instances' network links,
  :data:`albertkit.hardware.NETWORK_GBPS`, at ``link_efficiency``; traffic inside an
  instance is not counted). The compute of one step is ``G / R`` sequences at one GPU's
  rate, which comes from

  - a **measurement** on the same instance type (:mod:`albertkit.plan.measured`): a
    1-process benchmark gives the GPU's rate directly; a fleet's measured rate gives it
    after the model's all-reduce time at that fleet's size is taken out (so a fleet
    measured is predicted exactly as measured, and another size of it is scaled by the
    model); or
  - a **first-principles estimate** when the type has no measurement: the GPU's published
    peak FLOP/s at the config's precision (:data:`albertkit.hardware.DEVICES`) times an
    assumed MFU (``mfu``, default :data:`DEFAULT_MFU`), with a range of MFU ``/ MFU_BAND``
    to ``x MFU_BAND``. Printed as an estimate with that range; the reference system's
    V100s ran at 27% MFU (:func:`albertkit.plan.cost.calibrated_flops_per_gpu`).
* **Hours** = ``max_steps x step time`` (training steps only). **Cost on demand** =
  instances x price x hours.
* **Cost on spot**: the spot price x instances x the expected wall time of
  :mod:`albertkit.plan.spot`: with ``H`` hours between interruptions of one instance (the
  price table's assumption) the job is interrupted every ``H / count`` hours, and each
  interruption loses the steps since the last checkpoint plus a restart; each checkpoint
  write (``checkpoint_s``, by default estimated from the checkpoint's size) costs its time.
  Priced at the config's ``checkpoint.every_steps``, and at the interval that minimises the
  expected cost (``spot_best_every_steps``). Time waiting for spot capacity is not billed
  and not counted.

Example (the reference's p3dn fleet from its measured 1.72 it/s):
    >>> from albertkit import TrainerConfig
    >>> cfg = TrainerConfig.model_validate({
    ...     "data": {"kind": "synthetic", "seq_length": 512, "max_predictions_per_seq": 20},
    ...     "runtime": {"global_batch_size": 4096, "micro_batch_size": 32,
    ...                 "max_steps": 125000, "precision": "mixed_float16"}})
    >>> plan = plan_fleets(cfg, "ml.p3dn.24xlarge:8", measured=["ml.p3dn.24xlarge:8=1.72it/s"])
    >>> row, = plan.estimates
    >>> row.config_micro_batch_fits, row.micro_batch, row.accumulation, round(row.hours, 1)
    (True, 32, 2, 20.2)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from albertkit.config import TrainerConfig
from albertkit.errors import ConfigError
from albertkit.hardware import DEFAULT_MFU, DEVICES, INSTANCE_TYPES, NETWORK_GBPS, GiB, resolve_xla
from albertkit.models.footprint import default_predictions
from albertkit.perf.memory import (
    estimate_memory,
    plan_batch,
    sequences_per_example,
    training_flops,
)
from albertkit.plan.cost import allreduce_seconds
from albertkit.plan.measured import Measurement, config_shape, parse_measured, split_fleet
from albertkit.plan.prices import PriceTable
from albertkit.plan.spot import best_every_steps, checkpoint_seconds, expected_hours

MFU_BAND = 1.5  # the estimate's range: MFU / 1.5 to MFU x 1.5
LINK_EFFICIENCY = 0.7
PLAN_SCHEMA = 1  # version of the JSON layout (FleetPlan.as_dict)


@dataclass(frozen=True)
class Fleet:
    """``count`` instances of ``instance_type``."""

    instance_type: str
    count: int = 1

    @property
    def gpus_per_instance(self) -> int:
        return INSTANCE_TYPES[self.instance_type].gpus

    @property
    def gpus(self) -> int:
        return self.count * self.gpus_per_instance

    @property
    def label(self) -> str:
        """As typed on the command line: ``ml.p4d.24xlarge:8``."""
        return f"{self.instance_type}:{self.count}"


def parse_fleets(text: str | Iterable[str]) -> list[Fleet]:
    """``"ml.p4d.24xlarge:8,ml.g5.48xlarge:4"`` (or a list of such items) -> fleets; a
    missing count is 1. Errors name the item."""
    items = text.split(",") if isinstance(text, str) else list(text)
    fleets = []
    for item in items:
        if not item.strip():
            raise ConfigError(f"--fleet: empty item in {text!r}")
        instance_type, count = split_fleet(item)
        fleets.append(Fleet(instance_type, count or 1))
    return fleets


@dataclass(frozen=True)
class FleetEstimate:
    """One fleet's plan. Times in seconds and hours, money in the price table's USD.

    ``basis`` is ``"measured"`` or ``"estimated"`` (first principles, with ``*_low`` /
    ``*_high`` the MFU range); a row that cannot be planned has ``hours None`` and says why
    in ``problems``.
    """

    fleet: str
    instance_type: str
    instances: int
    gpu: str | None
    gpus: int
    config_micro_batch: int
    config_micro_batch_fits: bool
    largest_micro_batch: int  # 0: not even 1 fits
    micro_batch: int  # the one planned with (the config's if it fits)
    accumulation: int
    predicted_peak_gib: float | None
    usable_gib: float | None
    basis: str | None = None
    source: str | None = None
    step_s: float | None = None
    step_s_low: float | None = None
    step_s_high: float | None = None
    compute_s: float | None = None
    allreduce_s: float | None = None
    scaling_efficiency: float | None = None
    hours: float | None = None
    hours_low: float | None = None
    hours_high: float | None = None
    on_demand_usd_per_hour: float | None = None
    spot_usd_per_hour: float | None = None
    cost_on_demand: float | None = None
    cost_on_demand_low: float | None = None
    cost_on_demand_high: float | None = None
    spot_hours: float | None = None
    spot_interruptions: float | None = None
    cost_spot: float | None = None
    spot_best_every_steps: int | None = None  # the interval that minimises the spot cost
    spot_hours_best: float | None = None
    cost_spot_best: float | None = None
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Ranking:
    """The fastest and cheapest of a plan's rows (fleets, or a recipe's totals per fleet):
    ``fastest``, ``cheapest_on_demand``, ``cheapest_spot`` (``None`` when no row has the
    figure), and :meth:`ranking` for JSON."""

    def _rows(self) -> list[Any]:
        raise NotImplementedError

    def _best(self, key: str) -> Any:
        rows = [e for e in self._rows() if getattr(e, key) is not None]
        return min(rows, key=lambda e: getattr(e, key)) if rows else None

    @property
    def fastest(self) -> Any:
        return self._best("hours")

    @property
    def cheapest_on_demand(self) -> Any:
        return self._best("cost_on_demand")

    @property
    def cheapest_spot(self) -> Any:
        return self._best("cost_spot")

    def ranking(self) -> dict[str, str | None]:
        """Each ranking's fleet label (``ml.p4d.24xlarge:8``)."""
        return {name: (row.fleet if row else None) for name, row in (
            ("fastest", self.fastest), ("cheapest_on_demand", self.cheapest_on_demand),
            ("cheapest_spot", self.cheapest_spot))}


@dataclass(frozen=True)
class FleetPlan(Ranking):
    """The plans of several fleets for one config, with the prices and assumptions used;
    ``fastest``, ``cheapest_on_demand`` and ``cheapest_spot`` name the best rows."""

    estimates: list[FleetEstimate]
    prices: PriceTable
    config: dict[str, Any]
    assumptions: dict[str, Any]

    def _rows(self) -> list[FleetEstimate]:
        return self.estimates

    def as_dict(self) -> dict[str, Any]:
        """The JSON layout ``albertkit plan --json`` prints (``schema`` names its version)."""
        return {"schema": PLAN_SCHEMA, "config": self.config, "assumptions": self.assumptions,
                "prices": self.prices.as_dict(),
                "fleets": [e.as_dict() for e in self.estimates], **self.ranking()}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def format_table(self) -> str:
        """A Markdown table with the ranking and the assumptions under it."""
        return format_fleet_plan(self)


# --------------------------------------------------------------------------- planning
def _usable_micro_batch(cfg: TrainerConfig, fleet: Fleet) -> dict[str, Any]:
    """Memory: does the config's micro-batch fit on the fleet's GPU, which fits at most."""
    rt = cfg.runtime
    spec = cfg.model.spec
    _, seq, precision = config_shape(cfg)
    predictions = getattr(cfg.data, "max_predictions_per_seq", None)
    gpu = INSTANCE_TYPES[fleet.instance_type].gpu
    out: dict[str, Any] = {"gpu": gpu, "gpus": fleet.gpus, "config_micro_batch": rt.micro_batch_size,
                           "config_micro_batch_fits": False, "largest_micro_batch": 0,
                           "micro_batch": 0, "accumulation": 0, "predicted_peak_gib": None,
                           "usable_gib": None, "problems": []}
    if gpu is None:
        out["problems"].append(f"{fleet.instance_type} has no GPU")
        return out
    if rt.global_batch_size % fleet.gpus:
        out["problems"].append(f"runtime.global_batch_size={rt.global_batch_size} does not "
                               f"divide over {fleet.gpus} GPUs")
        return out
    per_gpu = rt.global_batch_size // fleet.gpus
    k = sequences_per_example(cfg.data)  # multiple choice: one sequence per choice
    best = plan_batch(spec, seq, precision, gpu, rt.global_batch_size, fleet.gpus, predictions,
                      rt.remat, rt.xla, sequences_per_example=k)
    out["largest_micro_batch"] = best.micro_batch
    out["usable_gib"] = round(best.usable_bytes / GiB, 2)
    micro = rt.micro_batch_size
    if per_gpu % micro == 0:
        compiled = resolve_xla(rt.xla, "gpu", precision).compute
        peak = estimate_memory(spec, seq, micro * k, precision, predictions,
                               accumulation=per_gpu // micro, remat=rt.remat, xla=compiled,
                               device="gpu").peak_bytes
        out["config_micro_batch_fits"] = peak <= best.usable_bytes
        if out["config_micro_batch_fits"]:
            out.update(micro_batch=micro, accumulation=per_gpu // micro,
                       predicted_peak_gib=round(peak / GiB, 2))
            return out
    if best.fits:
        out.update(micro_batch=best.micro_batch, accumulation=best.accumulation,
                   predicted_peak_gib=round(best.predicted_peak_bytes / GiB, 2))
    else:
        out["problems"].append(f"not even a micro-batch of 1 fits a {gpu} "
                               f"({best.predicted_peak_bytes / GiB:.1f} GiB predicted, "
                               f"{best.usable_bytes / GiB:.1f} usable)")
    return out


def step_time(sequences_per_replica: float, replica_sequences_per_s: float,
              allreduce_s: float) -> tuple[float, float]:
    """(step seconds, its compute seconds): each replica computes its sequences at its
    measured or estimated rate, then the all-reduce (which does not overlap) is added."""
    compute = sequences_per_replica / replica_sequences_per_s
    return compute + allreduce_s, compute


def _gpu_rate(cfg: TrainerConfig, m: Measurement, link_efficiency: float) -> float:
    """Sequences/s of one GPU's compute, from a measurement (see the module docstring)."""
    if m.instances is None:
        return m.sequences_per_s
    g = INSTANCE_TYPES[m.instance_type].gpus
    step = cfg.runtime.global_batch_size / m.sequences_per_s
    comm = allreduce_seconds(cfg.model.spec, m.instances, NETWORK_GBPS[m.instance_type],
                             fp16_compression=cfg.distributed.fp16_compression,
                             link_efficiency=link_efficiency)
    if step <= comm:
        raise ConfigError(f"{m.source} on {m.instance_type}:{m.instances}: a step of {step:.3g} s "
                          f"is shorter than the model's all-reduce alone ({comm:.3g} s)")
    return cfg.runtime.global_batch_size / (m.instances * g) / (step - comm)


def _pick(measured: Sequence[Measurement], fleet: Fleet) -> Measurement | None:
    same = [m for m in measured if m.instance_type == fleet.instance_type]
    exact = [m for m in same if m.instances == fleet.count]
    return (exact or same or [None])[0]


def _spot(step_s: float, fleet: Fleet, cfg: TrainerConfig, prices: PriceTable,
          checkpoint_s: float) -> dict[str, Any]:
    """Spot hours and interruptions at the config's checkpoint interval and at the best one
    (:mod:`albertkit.plan.spot`), and a problem when the config's cannot finish."""
    between = prices.spot_hours_between_interruptions / fleet.count
    restart, write, step = prices.spot_restart_minutes / 60, checkpoint_s / 3600, step_s / 3600
    work = cfg.runtime.max_steps * step
    every = min(cfg.checkpoint.every_steps, cfg.runtime.max_steps)
    out: dict[str, Any] = {"spot_hours": expected_hours(work, every * step, write, restart,
                                                        between)}
    if out["spot_hours"] is None:
        out["problem"] = (f"spot: an interruption every {between:.2g} h, each losing "
                          f"{restart + every * step / 2:.2g} h: checkpoint.every_steps="
                          f"{cfg.checkpoint.every_steps} is too rare to finish on spot")
    else:
        out["spot_interruptions"] = out["spot_hours"] / between
    best = best_every_steps(step, cfg.runtime.max_steps, write, restart, between)
    if best is not None:
        out.update(spot_best_every_steps=best,
                   spot_hours_best=expected_hours(work, best * step, write, restart, between))
    return out


def plan_fleet(cfg: TrainerConfig, fleet: Fleet, measured: Sequence[Measurement] = (),
               prices: PriceTable | None = None, mfu: float = DEFAULT_MFU,
               link_efficiency: float = LINK_EFFICIENCY,
               checkpoint_s: float | None = None) -> FleetEstimate:
    """One fleet's :class:`FleetEstimate` (see the module docstring for the model)."""
    prices = prices or PriceTable.packaged()
    if checkpoint_s is None:
        checkpoint_s = checkpoint_seconds(cfg.model.spec)
    memory = _usable_micro_batch(cfg, fleet)
    problems = memory.pop("problems")
    row: dict[str, Any] = {"fleet": fleet.label, "instance_type": fleet.instance_type,
                           "instances": fleet.count, **memory,
                           "on_demand_usd_per_hour": prices.on_demand(fleet.instance_type),
                           "spot_usd_per_hour": prices.spot(fleet.instance_type)}
    if problems:
        return FleetEstimate(**row, problems=problems)
    per_gpu = cfg.runtime.global_batch_size / fleet.gpus
    comm = allreduce_seconds(cfg.model.spec, fleet.count, NETWORK_GBPS[fleet.instance_type],
                             fp16_compression=cfg.distributed.fp16_compression,
                             link_efficiency=link_efficiency)
    m = _pick(measured, fleet)
    if m is not None:
        _, compute = step_time(per_gpu, _gpu_rate(cfg, m, link_efficiency), comm)
        low = high = compute
        row.update(basis="measured", source=m.source if m.instances in (None, fleet.count)
                   else f"{m.source} on {m.instance_type}:{m.instances}, scaled")
    else:
        gpu = memory["gpu"]
        peak = DEVICES[gpu].peak_tflops.get(cfg.runtime.precision)
        if not peak:
            problems.append(f"no measurement for {fleet.instance_type} and no published peak "
                            f"FLOP/s of {gpu} in {cfg.runtime.precision}: measure it "
                            f"(--measured {fleet.instance_type}=RESULT.json)")
            return FleetEstimate(**row, problems=problems)
        _, seq, _ = config_shape(cfg)
        predictions = (getattr(cfg.data, "max_predictions_per_seq", None)
                       or default_predictions(seq))
        flops = (per_gpu * sequences_per_example(cfg.data)
                 * training_flops(cfg.model.spec, seq, predictions).training)
        compute = flops / (peak * 1e12 * mfu)
        low, high = flops / (peak * 1e12 * mfu * MFU_BAND), flops / (peak * 1e12 * mfu / MFU_BAND)
        row.update(basis="estimated",
                   source=f"estimate: {gpu} peak {peak:g} TFLOP/s ({cfg.runtime.precision}) at "
                          f"MFU {mfu:.0%} (range {mfu / MFU_BAND:.0%}-{mfu * MFU_BAND:.0%})")
    steps = cfg.runtime.max_steps
    step = compute + comm
    hours = steps * step / 3600
    row.update(step_s=step, step_s_low=low + comm, step_s_high=high + comm, compute_s=compute,
               allreduce_s=comm, scaling_efficiency=compute / step, hours=hours,
               hours_low=steps * (low + comm) / 3600, hours_high=steps * (high + comm) / 3600)
    price = row["on_demand_usd_per_hour"]
    if price is None:
        problems.append(f"no price for {fleet.instance_type}: give it with --prices FILE")
    else:
        row.update(cost_on_demand=price * fleet.count * hours,
                   cost_on_demand_low=price * fleet.count * row["hours_low"],
                   cost_on_demand_high=price * fleet.count * row["hours_high"])
    spot = _spot(step, fleet, cfg, prices, checkpoint_s)
    if "problem" in spot:
        problems.append(spot.pop("problem"))
    row.update(spot)
    if row["spot_usd_per_hour"] is not None:
        for hours_key, cost_key in (("spot_hours", "cost_spot"),
                                    ("spot_hours_best", "cost_spot_best")):
            if row.get(hours_key) is not None:
                row[cost_key] = row["spot_usd_per_hour"] * fleet.count * row[hours_key]
    return FleetEstimate(**row, problems=problems)


def plan_fleets(cfg: TrainerConfig, fleets: str | Iterable[str | Fleet],
                measured: Iterable[str | Measurement] = (), prices: PriceTable | None = None,
                mfu: float = DEFAULT_MFU, link_efficiency: float = LINK_EFFICIENCY,
                checkpoint_s: float | None = None) -> FleetPlan:
    """Plan ``cfg`` on each fleet (``"ml.p4d.24xlarge:8,ml.g5.48xlarge:4"`` or a list).

    ``measured``: ``--measured`` values (``"ml.p3dn.24xlarge:8=1.72it/s"``,
    ``"ml.p4d.24xlarge=base512.json"``, a rates file) or :class:`Measurement` objects;
    fleets of an instance type without one are estimated from first principles at ``mfu``.
    ``prices``: default the packaged table (:meth:`PriceTable.packaged`).
    ``checkpoint_s``: seconds one checkpoint write stops training (default: estimated from
    the checkpoint's size, :func:`albertkit.plan.spot.checkpoint_seconds`).
    """
    if not 0.0 < mfu <= 1.0:
        raise ConfigError(f"--mfu {mfu:g}: must be in (0, 1]")
    if checkpoint_s is not None and checkpoint_s < 0:
        raise ConfigError(f"--checkpoint-seconds {checkpoint_s:g}: must be 0 or more")
    if config_shape(cfg)[1] is None:  # a plugin's data kind may name its length otherwise
        raise ConfigError(f"data: kind '{cfg.data.kind}' gives no seq_length or "
                          "max_seq_length, which the plan needs to size the step")
    if isinstance(fleets, str):
        fleet_list = parse_fleets(fleets)
    else:
        fleet_list = []
        for f in fleets:
            fleet_list += [f] if isinstance(f, Fleet) else parse_fleets(f)
    measurements: list[Measurement] = []
    for m in measured:
        measurements += [m] if isinstance(m, Measurement) else parse_measured(m, cfg)
    prices = prices or PriceTable.packaged()
    size, seq, precision = config_shape(cfg)
    spec = cfg.model.spec
    config = {"model_size": size, "hidden_size": spec.hidden_size,
              "num_hidden_layers": spec.num_hidden_layers, "seq_length": seq,
              "precision": precision, "global_batch_size": cfg.runtime.global_batch_size,
              "micro_batch_size": cfg.runtime.micro_batch_size,
              "max_steps": cfg.runtime.max_steps,
              "checkpoint_every_steps": cfg.checkpoint.every_steps}
    if checkpoint_s is None:
        checkpoint_s = checkpoint_seconds(spec)
    assumptions = {"mfu": mfu, "mfu_band": MFU_BAND, "link_efficiency": link_efficiency,
                   "checkpoint_write_s": checkpoint_s,
                   "measurements": [asdict(m) for m in measurements]}
    estimates = [plan_fleet(cfg, f, measurements, prices, mfu, link_efficiency, checkpoint_s)
                 for f in fleet_list]
    return FleetPlan(estimates, prices, config, assumptions)


# ------------------------------------------------------------------ the table for people
def _num(x: float | None, digits: int = 0) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:,.{digits}f}"


def _ranged(mid: float | None, low: float | None, high: float | None, digits: int) -> str:
    if mid is None:
        return "-"
    if low is None or high is None or abs(high - low) < 1e-9 * max(abs(mid), 1.0):
        return _num(mid, digits)
    return f"{_num(mid, digits)} ({_num(low, digits)}-{_num(high, digits)})"


def _batch_cell(e: FleetEstimate, global_batch: int) -> str:
    if not e.largest_micro_batch:
        return "does not fit" if e.usable_gib is not None else "-"
    if e.config_micro_batch_fits:
        return f"{e.micro_batch} x {e.accumulation} (largest: {e.largest_micro_batch})"
    per_gpu = global_batch // e.gpus
    why = "does not fit" if per_gpu % e.config_micro_batch == 0 else (
        f"does not divide {per_gpu} per GPU")
    return f"{e.micro_batch} x {e.accumulation} ({e.config_micro_batch} {why})"


def format_fleet_plan(plan: FleetPlan) -> str:
    """:meth:`FleetPlan.format_table`: the table for people."""
    c = plan.config
    lines = [
        f"ALBERT-{c['model_size']} (hidden {c['hidden_size']}, {c['num_hidden_layers']} layers), "
        f"seq {c['seq_length']}, {c['precision']}, global batch {c['global_batch_size']}, "
        f"{c['max_steps']:,} steps, checkpoint every {c['checkpoint_every_steps']} steps",
        "",
        "| fleet | GPUs | micro-batch x accumulation | step s | scaling | hours "
        "| on demand USD | spot USD (hours, restarts) | spot at the best interval | basis |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for e in plan.estimates:
        spot = "-"
        if e.cost_spot is not None:
            spot = f"{_num(e.cost_spot)} ({_num(e.spot_hours, 1)} h, {e.spot_interruptions:.1f})"
        best = "-"
        if e.cost_spot_best is not None:
            best = f"{_num(e.cost_spot_best)} (every {e.spot_best_every_steps:,} steps)"
        eff = f"{100 * e.scaling_efficiency:.0f}%" if e.scaling_efficiency is not None else "-"
        lines.append(
            f"| {e.instance_type} x {e.instances} | {e.gpus} x {e.gpu or '-'} | {_batch_cell(e, c['global_batch_size'])} "
            f"| {_ranged(e.step_s, e.step_s_low, e.step_s_high, 3)} | {eff} "
            f"| {_ranged(e.hours, e.hours_low, e.hours_high, 1)} "
            f"| {_ranged(e.cost_on_demand, e.cost_on_demand_low, e.cost_on_demand_high, 0)} "
            f"| {spot} | {best} | {e.basis or 'not planned'} |")
    lines.append("")
    for name, best in (("fastest", plan.fastest), ("cheapest on demand", plan.cheapest_on_demand),
                       ("cheapest on spot", plan.cheapest_spot)):
        if best is not None:
            lines.append(f"{name}: {best.instance_type} x {best.instances}")
    for e in plan.estimates:
        if e.source:
            lines.append(f"{e.fleet}: {e.source}")
        lines += [f"{e.fleet}: {p}" for p in e.problems]
    lines.append(_prices_line(plan))
    if any(e.basis == "estimated" for e in plan.estimates):
        a = plan.assumptions
        lines.append(f"estimated rows are not measurements: peak FLOP/s x MFU {a['mfu']:.0%}, "
                     f"in brackets the range for MFU {a['mfu'] / a['mfu_band']:.0%}-"
                     f"{a['mfu'] * a['mfu_band']:.0%}; measure with --measured for a plan")
    return "\n".join(lines)


def _prices_line(plan: FleetPlan) -> str:
    p = plan.prices
    return (f"prices: {p.source}; as of {p.as_of}; spot {p.spot_discount:.0%} below on demand "
            f"unless given per type; one instance interrupted every "
            f"{p.spot_hours_between_interruptions:g} h, {p.spot_restart_minutes:g} min per "
            f"restart, {plan.assumptions['checkpoint_write_s']:.3g} s per checkpoint write "
            "(assumptions: --prices FILE and --checkpoint-seconds override)")
