"""``albertkit jobs status|logs|stop NAME``: follow a SageMaker training job by name.

The job's region is ``ALBERTKIT_SM_REGION`` (the same environment default ``albertkit launch``
reads), else the AWS default (``AWS_REGION``/``AWS_DEFAULT_REGION``, the profile's region);
credentials come from the usual AWS chain (``AWS_PROFILE``, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from albertkit.sagemaker.joblogs import TERMINAL_STATUSES


def add_jobs_parser(
    subparsers, env_defaults: Mapping[str, Any] | None = None
) -> argparse.ArgumentParser:
    """Add ``albertkit jobs`` to an argparse ``subparsers`` object. ``env_defaults`` is
    ``sagemaker_defaults_from_env(os.environ)`` (read by cli.py, not here)."""
    p = subparsers.add_parser(
        "jobs",
        help="status, logs or stop of a SageMaker training job",
        description="Follow a SageMaker training job by name (as `albertkit launch` prints it).",
    )
    p.set_defaults(func=run_jobs, sagemaker_env_defaults=dict(env_defaults or {}))
    actions = p.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")

    status = actions.add_parser(
        "status", help="status, times, failure reason and model artifacts of a job"
    )
    status.add_argument("name", help="training job name")
    status.add_argument(
        "--json", action="store_true", help="print SageMaker's whole description as JSON"
    )
    logs = actions.add_parser("logs", help="print the job's CloudWatch logs")
    logs.add_argument("name", help="training job name")
    logs.add_argument(
        "--no-follow",
        action="store_true",
        help="print the lines that exist and return (default: keep printing until the job ends)",
    )
    logs.add_argument(
        "--poll", type=float, default=5.0, metavar="SECONDS", help="seconds between reads (5)"
    )
    stop = actions.add_parser("stop", help="stop a running job")
    stop.add_argument("name", help="training job name")
    return p


def run_jobs(args: argparse.Namespace) -> int:
    """``albertkit jobs ACTION NAME``. AWS errors become one ``error: ...`` line, exit 2."""
    try:
        import boto3
        from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError
    except ImportError:
        print(
            "error: `albertkit jobs` needs boto3: install albertkit with its sagemaker extra "
            "(from a clone of this repository: pip install -e '.[sagemaker]')",
            file=sys.stderr,
        )
        return 2
    from albertkit.sagemaker.submit import attach

    region = args.sagemaker_env_defaults.get("region")
    try:
        handle = attach(args.name, boto3.Session(region_name=region))
        if args.jobs_command == "status":
            return _status(handle, as_json=args.json)
        if args.jobs_command == "logs":
            return _logs(handle, follow=not args.no_follow, poll=args.poll)
        return _stop(handle)
    except NoCredentialsError:
        print(
            "error: no AWS credentials found: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or run `aws configure`",
            file=sys.stderr,
        )
    except NoRegionError:
        print(
            "error: no AWS region: set ALBERTKIT_SM_REGION or AWS_DEFAULT_REGION",
            file=sys.stderr,
        )
    except ClientError as e:
        print(f"error: {_client_error_text(e, args.name)}", file=sys.stderr)
    return 2


def _client_error_text(e, name: str) -> str:
    error = e.response.get("Error", {})
    code, message = error.get("Code", ""), error.get("Message", str(e))
    if code in ("ValidationException", "ResourceNotFound") and (
        "not found" in message.lower() or "could not find" in message.lower()
    ):
        return f"no SageMaker training job named {name!r} in this region ({message})"
    return f"training job {name!r}: {code}: {message}"


def _status(handle, as_json: bool) -> int:
    desc = handle.describe()
    desc.pop("ResponseMetadata", None)
    if as_json:
        print(json.dumps(desc, indent=2, sort_keys=True, default=_json_default))
        return 0
    rows = [
        ("name", desc.get("TrainingJobName", handle.job_name)),
        ("status", desc.get("TrainingJobStatus")),
        ("secondary status", desc.get("SecondaryStatus")),
        ("failure reason", desc.get("FailureReason")),
        ("instances", _instances(desc.get("ResourceConfig") or {})),
        ("created", _time(desc.get("CreationTime"))),
        ("started", _time(desc.get("TrainingStartTime"))),
        ("ended", _time(desc.get("TrainingEndTime"))),
        ("training time", _seconds(desc.get("TrainingTimeInSeconds"))),
        ("billable time", _seconds(desc.get("BillableTimeInSeconds"))),
        ("model artifacts", (desc.get("ModelArtifacts") or {}).get("S3ModelArtifacts")),
    ]
    rows = [(k, v) for k, v in rows if v not in (None, "")]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _logs(handle, follow: bool, poll: float) -> int:
    # Describing first names an unknown job (its logs would just be empty).
    hosts = (handle.describe().get("ResourceConfig") or {}).get("InstanceCount", 1)
    printed = False
    for stream, message in handle.logs(follow=follow, poll=poll):
        # one host: the lines as written; several: each line names its host (algo-N-...)
        host = stream.split("/", 1)[-1]
        print(f"[{host}] {message}" if hosts > 1 else message, flush=True)
        printed = True
    if not printed:
        print(f"no log events yet for training job {handle.job_name}", file=sys.stderr)
    if follow:
        print(f"training job {handle.job_name}: {handle.status()}", file=sys.stderr)
    return 0


def _stop(handle) -> int:
    # Describing first names an unknown job, and a job that has already ended.
    status = handle.status()
    if status in TERMINAL_STATUSES:
        print(f"training job {handle.job_name} has already ended ({status}): nothing to stop")
        return 0
    handle.stop()
    print(f"stopping training job {handle.job_name} (status: {handle.status()})")
    return 0


def _instances(resource: Mapping[str, Any]) -> str | None:
    if not resource.get("InstanceType"):
        return None
    return f"{resource.get('InstanceCount', 1)} x {resource['InstanceType']}"


def _time(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return None if value is None else str(value)


def _seconds(value: Any) -> str | None:
    if value is None:
        return None
    value = int(value)
    hours, rest = divmod(value, 3600)
    return f"{value} s ({hours}:{rest // 60:02d}:{rest % 60:02d})"


def _json_default(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)
