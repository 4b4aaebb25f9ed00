"""``albertkit launch``: submit a config as a SageMaker training job (or print its request)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from albertkit.cli.plan import add_estimate_options, prices_from_args
from albertkit.config import TrainerConfig
from albertkit.errors import AlbertkitError, ConfigError
from albertkit.sagemaker.submit import to_sagemaker


def add_launch_parser(
    subparsers, env_defaults: Mapping[str, Any] | None = None
) -> argparse.ArgumentParser:
    """Add ``albertkit launch`` to an argparse ``subparsers`` object. ``env_defaults`` is
    ``sagemaker_defaults_from_env(os.environ)`` (read by cli.py, not here)."""
    p = subparsers.add_parser(
        "launch",
        help="run a config as a SageMaker training job",
        description="Submit a training config as a SageMaker training job (SDK v3).",
    )
    p.add_argument("--config", required=True, help="YAML config with a sagemaker: section")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, e.g. sagemaker.instance_count=2 or optimizer.learning_rate=1e-3",
    )
    p.add_argument("--dry-run", action="store_true",
                   help="print the request (and, on stderr, the fleet's hours and cost as "
                        "`albertkit plan` estimates them), submit nothing")
    add_estimate_options(p)
    p.add_argument("--no-wait", action="store_true", help="return once the job is created")
    p.set_defaults(func=run_launch, sagemaker_env_defaults=dict(env_defaults or {}))
    return p


def run_launch(args: argparse.Namespace) -> int:
    """``albertkit launch``: dry run prints ``plan()`` as JSON; otherwise submit. The job's
    settings are resolved as in Python (``to_sagemaker``): ``--set sagemaker.X`` (it lands
    in the config's section) over the file's section over ``ALBERTKIT_SM_*``."""
    try:
        cfg = TrainerConfig.from_yaml(args.config, args.overrides)
        job = to_sagemaker(cfg, env_defaults=args.sagemaker_env_defaults)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(json.dumps(job.plan(), indent=2))
        prices = prices_from_args(args)
        try:
            estimate = job.estimate(args.measured, prices, args.mfu, args.checkpoint_seconds)
        except AlbertkitError as e:
            if args.measured:  # asked for: its errors are the user's to fix
                raise
            print(f"estimate: none: {e}", file=sys.stderr)  # it does not stop a dry run
        else:
            print(estimate.format_table(), file=sys.stderr)
        return 0
    try:
        job.fit(wait=not args.no_wait)
    except ConfigError as e:  # a sagemaker.plugins directory that does not build
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"training job: {job.job_name}")
    if args.no_wait:
        print(f"status: {job.status()}")
        return 0
    status = job.status()
    print(f"status: {status}")
    return 0 if status == "Completed" else 1
