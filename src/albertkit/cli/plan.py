"""``albertkit plan``: per SageMaker fleet, whether the micro-batch fits, the step time, the
hours to ``runtime.max_steps`` and the cost on demand and on spot (``albertkit.perf.fleet``).

``albertkit launch --dry-run`` prints the same estimate for the job's own fleet (the options
below are shared).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from albertkit.config import TrainerConfig
from albertkit.hardware import DEFAULT_MFU

if TYPE_CHECKING:  # imported when a plan is made, not for `albertkit --help`
    from albertkit.perf.prices import PriceTable


def add_estimate_options(p: argparse.ArgumentParser) -> None:
    """The options that feed an estimate: measurements, prices, MFU."""
    p.add_argument(
        "--measured", action="append", default=[], metavar="INSTANCE[:COUNT]=RATE|FILE",
        help="a rate measured on the target instance type: ml.p3dn.24xlarge:8=1.72it/s "
        "(steps/s of this config's global batch on 8 instances) or ...=7045seq/s; "
        "ml.p4d.24xlarge=RESULT.json (an `albertkit benchmark --json` result, 1 GPU); "
        "ml.g5.48xlarge:2=RUN_DIR (a run's metrics); or a YAML/JSON file mapping "
        "INSTANCE[:COUNT] to such values. Repeatable. Instance types without one are "
        "estimated from their GPU's peak FLOP/s")
    p.add_argument("--prices", metavar="FILE",
                   help="YAML/JSON price file over the packaged, dated table (on_demand, spot, "
                        "spot_discount, spot_hours_between_interruptions, spot_restart_minutes, "
                        "as_of, source)")
    p.add_argument("--mfu", type=float, default=DEFAULT_MFU,
                   help="model FLOPs utilisation assumed where nothing was measured "
                        f"(default {DEFAULT_MFU}; the range shown is /1.5 to x1.5)")


def prices_from_args(args: argparse.Namespace) -> PriceTable:
    """The packaged price table, with ``--prices FILE`` over it."""
    from albertkit.perf.prices import PriceTable

    table = PriceTable.packaged()
    return table.with_file(args.prices) if args.prices else table


def add_plan_parser(subparsers: Any,
                    env_defaults: Mapping[str, Any] | None = None) -> argparse.ArgumentParser:
    """Register ``albertkit plan``. ``env_defaults`` is ``sagemaker_defaults_from_env(
    os.environ)`` (read by cli.py): without ``--fleet`` the plan is of the fleet that
    ``albertkit launch`` would start."""
    p = subparsers.add_parser(
        "plan", help="hours and cost of a config on SageMaker fleets (fits, step time, spot)",
        description="For each fleet: whether the config's micro-batch fits each GPU (the "
        "largest that does, the accumulation it implies), the step time from a measured rate "
        "scaled by the communication model (or a first-principles estimate, printed as such "
        "with its range), the hours to runtime.max_steps, and the cost on demand and on spot "
        "(with the restarts the checkpoint cadence implies). Prices come from a dated table "
        "in the package (--prices overrides it); nothing is fetched.")
    p.add_argument("--config", required=True, help="the training config (YAML)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. runtime.micro_batch_size=16")
    p.add_argument("--fleet", action="append", default=[], metavar="TYPE[:COUNT],...",
                   help="fleets to plan, e.g. ml.p4d.24xlarge:8,ml.g5.48xlarge:4 (repeatable; "
                        "default: the fleet `albertkit launch` would start, sagemaker."
                        "instance_type x instance_count)")
    add_estimate_options(p)
    p.add_argument("--json", action="store_true", help="print JSON for scripts, not the table")
    p.set_defaults(func=run_plan, sagemaker_env_defaults=dict(env_defaults or {}))
    return p


def default_fleet(cfg: TrainerConfig, env_defaults: Mapping[str, Any]) -> str:
    """The fleet ``albertkit launch`` would start for ``cfg``: its SageMaker settings resolved
    as for a launch (the ``sagemaker:`` section over the environment's defaults)."""
    from albertkit.sagemaker.defaults import resolve_sagemaker_config

    sm = resolve_sagemaker_config(cfg, env_defaults=env_defaults)
    return f"{sm.instance_type}:{sm.instance_count}"


def run_plan(args: argparse.Namespace) -> int:
    """The ``albertkit plan`` command."""
    cfg = TrainerConfig.from_yaml(args.config, args.overrides)
    fleets = (",".join(args.fleet) if args.fleet
              else default_fleet(cfg, getattr(args, "sagemaker_env_defaults", {})))
    from albertkit.perf.fleet import plan_fleets

    plan = plan_fleets(cfg, fleets, args.measured, prices_from_args(args), args.mfu)
    print(plan.to_json() if args.json else plan.format_table())
    return 0
