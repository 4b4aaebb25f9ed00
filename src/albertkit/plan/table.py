"""The plans as Markdown tables for people (``albertkit plan`` without ``--json``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from albertkit.plan.fleet import FleetEstimate, FleetPlan
    from albertkit.plan.recipe import RecipePlan


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
