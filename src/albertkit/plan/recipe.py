"""A recipe of several phases priced as one (``albertkit plan --config p1.yaml --config
p2.yaml``): each phase is planned on every fleet as :func:`~albertkit.plan.fleet.plan_fleets`
plans one config (its own sequence length, micro-batch, steps, checkpoint interval, and its
own measured or modelled rate), then each fleet's hours and costs are summed over the phases.

* A phase whose ``model.load_from`` is set continues the phase before it (two-phase
  pretraining, docs/howto/two-phase.md): it is planned with that phase's architecture, which
  is what it will load.
* ``--measured`` values are matched to phases by what they measured: a benchmark result or a
  run is used for every phase of its model, sequence length and precision (and refused when
  it fits none); a bare rate (``1.72it/s``, ``7045seq/s``) says nothing of its shape, so with
  several phases it names its phase: ``2:ml.p3dn.24xlarge:8=1.72it/s`` (1-based).
* A fleet's total is planned only when every phase is planned on it; its basis is
  ``measured`` when every phase was, ``estimated`` otherwise.

Example (90% of the steps at seq 128, the rest at 512, estimated on one fleet):
    >>> from albertkit import TrainerConfig
    >>> def phase(seq, micro, steps, **model):
    ...     return TrainerConfig.model_validate({"model": model,
    ...         "data": {"kind": "synthetic", "seq_length": seq},
    ...         "runtime": {"global_batch_size": 4096, "micro_batch_size": micro,
    ...                     "max_steps": steps, "precision": "mixed_float16"}})
    >>> recipe = plan_recipe([phase(128, 64, 112_500), phase(512, 32, 12_500,
    ...                                                      load_from="runs/phase1")],
    ...                      "ml.p4d.24xlarge:8")
    >>> total, = recipe.totals
    >>> p1, p2 = (plan.estimates[0] for plan in recipe.phases)
    >>> (p1.micro_batch, p2.micro_batch), total.hours == p1.hours + p2.hours
    ((64, 32), True)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from albertkit.config import TrainerConfig
from albertkit.errors import AlbertkitError, ConfigError
from albertkit.hardware import DEFAULT_MFU
from albertkit.plan.fleet import (
    LINK_EFFICIENCY,
    Fleet,
    FleetEstimate,
    FleetPlan,
    Ranking,
    _num,
    _ranged,
    format_fleet_plan,
    plan_fleets,
)
from albertkit.plan.measured import Measurement, parse_measured
from albertkit.plan.prices import PriceTable


@dataclass(frozen=True)
class RecipeTotal:
    """One fleet's sums over the phases (``None`` where a phase is not planned)."""

    fleet: str
    instance_type: str
    instances: int
    gpus: int
    basis: str | None
    hours: float | None
    hours_low: float | None
    hours_high: float | None
    cost_on_demand: float | None
    cost_on_demand_low: float | None
    cost_on_demand_high: float | None
    spot_hours: float | None
    cost_spot: float | None
    cost_spot_best: float | None  # every phase at its own best checkpoint interval
    problems: list[str] = field(default_factory=list)


def _sum(rows: Sequence[FleetEstimate], key: str) -> float | None:
    values = [getattr(r, key) for r in rows]
    return None if any(v is None for v in values) else sum(values)


def _total(rows: Sequence[FleetEstimate]) -> RecipeTotal:
    first = rows[0]
    problems = [f"phase {i}: {p}" for i, r in enumerate(rows, 1) for p in r.problems]
    bases = {r.basis for r in rows}
    basis = None if None in bases else ("measured" if bases == {"measured"} else "estimated")
    sums = {key: _sum(rows, key) for key in (
        "hours", "hours_low", "hours_high", "cost_on_demand", "cost_on_demand_low",
        "cost_on_demand_high", "spot_hours", "cost_spot", "cost_spot_best")}
    return RecipeTotal(first.fleet, first.instance_type, first.instances, first.gpus, basis,
                       **sums, problems=problems)


@dataclass(frozen=True)
class RecipePlan(Ranking):
    """The plans of a recipe's phases on the same fleets, and each fleet's total;
    ``fastest``, ``cheapest_on_demand`` and ``cheapest_spot`` rank the totals."""

    phases: list[FleetPlan]
    totals: list[RecipeTotal]
    sources: list[str]  # where each phase's config came from

    def _rows(self) -> list[RecipeTotal]:
        return self.totals

    def as_dict(self) -> dict[str, Any]:
        """The JSON layout ``albertkit plan --json`` prints for several configs: each
        phase's plan (the one-config layout), the totals and the ranking of the totals."""
        return {"schema": 1, "phases": [p.as_dict() for p in self.phases],
                "sources": self.sources, "totals": [asdict(t) for t in self.totals],
                **self.ranking()}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def format_table(self) -> str:
        """Each phase's table, then the totals per fleet."""
        return format_recipe_plan(self)


def continued(phases: Sequence[TrainerConfig]) -> list[TrainerConfig]:
    """The phases with each ``model.load_from`` phase given the architecture of the phase
    before it (the run it continues)."""
    out = list(phases)
    for i in range(1, len(out)):
        if out[i].model.load_from is not None:
            model = out[i - 1].model.model_copy(update={"load_from": out[i].model.load_from})
            out[i] = out[i].model_copy(update={"model": model})
    return out


def phase_measurements(values: Iterable[str], phases: Sequence[TrainerConfig]
                       ) -> list[list[Measurement]]:
    """Each phase's measurements from ``--measured`` values (module docstring: matching)."""
    out: list[list[Measurement]] = [[] for _ in phases]
    for value in values:
        number, colon, rest = value.partition(":")
        if colon and number.isdigit():
            if not 1 <= int(number) <= len(phases):
                raise ConfigError(f"--measured {value}: phase {number} is not one of the "
                                  f"{len(phases)} configs")
            out[int(number) - 1] += parse_measured(rest, phases[int(number) - 1])
            continue
        found, refused = {}, []
        for i, cfg in enumerate(phases):
            try:
                found[i] = parse_measured(value, cfg)
            except AlbertkitError as e:  # another phase's shape: tried on the next one
                refused.append(f"phase {i + 1}: {e}")
        if not found:
            raise ConfigError(f"--measured {value}: fits no phase ({'; '.join(refused)})")
        if len(phases) > 1 and any(not m.shape_checked for ms in found.values() for m in ms):
            raise ConfigError(f"--measured {value}: a rate does not say which phase it was "
                              f"measured in: name it, e.g. --measured 2:{value}")
        for i, ms in found.items():
            out[i] += ms
    return out


def plan_recipe(phases: Sequence[TrainerConfig], fleets: str | Iterable[str | Fleet],
                measured: Iterable[str] = (), prices: PriceTable | None = None,
                mfu: float = DEFAULT_MFU, link_efficiency: float = LINK_EFFICIENCY,
                checkpoint_s: float | None = None,
                sources: Sequence[str] | None = None) -> RecipePlan:
    """Plan the recipe whose phases are ``phases`` (in order) on each fleet, and sum.

    The arguments are :func:`~albertkit.plan.fleet.plan_fleets`'s, for every phase;
    ``measured`` holds ``--measured`` strings, optionally prefixed with their phase
    (``"2:ml.p3dn.24xlarge:8=1.72it/s"``). ``sources`` names the phases in the table
    (default ``phase 1``, ...).
    """
    if not phases:
        raise ConfigError("plan: no config given")
    phases = continued(phases)
    fleets = fleets if isinstance(fleets, str) else list(fleets)
    per_phase = phase_measurements(measured, phases)
    plans = [plan_fleets(cfg, fleets, ms, prices, mfu, link_efficiency, checkpoint_s)
             for cfg, ms in zip(phases, per_phase, strict=True)]
    totals = [_total(rows) for rows in zip(*(p.estimates for p in plans), strict=True)]
    names = list(sources) if sources else [f"phase {i}" for i in range(1, len(phases) + 1)]
    return RecipePlan(plans, totals, names)


def format_recipe_plan(recipe: RecipePlan) -> str:
    """:meth:`RecipePlan.format_table`: each phase's table, then the recipe's total per
    fleet."""
    lines = []
    for i, plan in enumerate(recipe.phases, 1):
        lines += [f"## Phase {i}: {recipe.sources[i - 1]}", "", format_fleet_plan(plan), ""]
    lines += [
        f"## The recipe: {len(recipe.phases)} phases", "",
        "| fleet | GPUs | hours | on demand USD | spot USD (hours) | spot at the best "
        "intervals | basis |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for t in recipe.totals:
        spot = "-" if t.cost_spot is None else f"{_num(t.cost_spot)} ({_num(t.spot_hours, 1)} h)"
        lines.append(
            f"| {t.instance_type} x {t.instances} | {t.gpus} | "
            f"{_ranged(t.hours, t.hours_low, t.hours_high, 1)} | "
            f"{_ranged(t.cost_on_demand, t.cost_on_demand_low, t.cost_on_demand_high, 0)} | "
            f"{spot} | {_num(t.cost_spot_best)} | {t.basis or 'not planned'} |")
    lines.append("")
    for name, best in (("fastest", recipe.fastest), ("cheapest on demand",
                                                     recipe.cheapest_on_demand),
                       ("cheapest on spot", recipe.cheapest_spot)):
        if best is not None:
            lines.append(f"{name}: {best.instance_type} x {best.instances}")
    for t in recipe.totals:
        lines += [f"{t.fleet}: {p}" for p in t.problems]
    return "\n".join(lines)
