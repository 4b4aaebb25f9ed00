"""``albertkit plan``: per SageMaker fleet, whether the micro-batch fits, the step time, the
hours to ``runtime.max_steps`` and the cost on demand and on spot, with the checkpoint
interval that makes spot cheapest (:mod:`albertkit.plan`); several ``--config`` are the
phases of one recipe, priced as one.

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
    from albertkit.plan.prices import PriceTable


def add_estimate_options(p: argparse.ArgumentParser) -> None:
    """The options that feed an estimate: measurements, prices, MFU."""
    p.add_argument(
        "--measured", action="append", default=[], metavar="INSTANCE[:COUNT]=RATE|FILE",
        help="a rate measured on the target instance type: ml.p3dn.24xlarge:8=1.72it/s "
        "(steps/s of this config's global batch on 8 instances) or ...=7045seq/s; "
        "ml.p4d.24xlarge=RESULT.json (an `albertkit benchmark --json` result, 1 GPU); "
        "ml.g5.48xlarge:2=RUN_DIR (a run's metrics); or a YAML/JSON file mapping "
        "INSTANCE[:COUNT] to such values. Repeatable. Instance types without one are "
        "estimated from their GPU's peak FLOP/s. With several --config, a rate names its "
        "phase: 2:ml.p3dn.24xlarge:8=1.72it/s")
    p.add_argument("--prices", metavar="FILE",
                   help="YAML/JSON price file over the packaged, dated table (on_demand, spot, "
                        "spot_discount, spot_hours_between_interruptions, spot_restart_minutes, "
                        "as_of, source)")
    p.add_argument("--mfu", type=float, default=DEFAULT_MFU,
                   help="model FLOPs utilisation assumed where nothing was measured "
                        f"(default {DEFAULT_MFU}; the range shown is /1.5 to x1.5)")
    p.add_argument("--checkpoint-seconds", type=float, default=None, metavar="S",
                   help="seconds one checkpoint write stops training, for the spot cost and "
                        "its best interval (default: estimated from the checkpoint's size at "
                        "100 MB/s)")


def prices_from_args(args: argparse.Namespace) -> PriceTable:
    """The packaged price table, with ``--prices FILE`` over it."""
    from albertkit.plan.prices import PriceTable

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
        "(with the restarts the checkpoint cadence implies, and the checkpoint interval that "
        "minimises it). Several --config are the phases of one recipe (e.g. seq 128, then "
        "512): each is planned at its own shape and rate, and each fleet gets a total. Prices "
        "come from a dated table in the package (--prices overrides it); nothing is fetched.")
    p.add_argument("--config", action="append", required=True, metavar="FILE",
                   help="the training config (YAML); repeat for the phases of a recipe, in "
                        "order")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override of every config, e.g. runtime.micro_batch_size=16")
    p.add_argument("--fleet", action="append", default=[], metavar="TYPE[:COUNT],...",
                   help="fleets to plan, e.g. ml.p4d.24xlarge:8,ml.g5.48xlarge:4 (repeatable; "
                        "default: the fleet `albertkit launch` would start for the first "
                        "config, sagemaker.instance_type x instance_count)")
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
    cfgs = [TrainerConfig.from_yaml(path, args.overrides) for path in args.config]
    fleets = (",".join(args.fleet) if args.fleet
              else default_fleet(cfgs[0], getattr(args, "sagemaker_env_defaults", {})))
    from albertkit.plan import plan_fleets, plan_recipe

    estimate = dict(prices=prices_from_args(args), mfu=args.mfu,
                    checkpoint_s=args.checkpoint_seconds)
    if len(cfgs) == 1:
        plan: Any = plan_fleets(cfgs[0], fleets, args.measured, **estimate)
    else:
        plan = plan_recipe(cfgs, fleets, args.measured, sources=args.config, **estimate)
    print(plan.to_json() if args.json else plan.format_table())
    return 0
