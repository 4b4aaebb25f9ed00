"""The SageMaker settings of a job, resolved in one place for the CLI and for Python.

:func:`resolve_sagemaker_config` is the one resolver: ``albertkit launch`` (through
:func:`albertkit.sagemaker.submit.to_sagemaker`), ``albertkit config show`` (through
:func:`load_launch_config`), ``to_sagemaker(cfg, **overrides)`` and
``AlbertTrainer(cfg).to_sagemaker(**overrides)`` all call it. A field's value comes from, in
this order (the first that sets it wins):

1. explicit overrides: ``to_sagemaker(cfg, instance_count=8)`` in Python; on the command
   line ``--set sagemaker.instance_count=8``, which lands in the config's section;
2. the config's ``sagemaker:`` section;
3. the ``ALBERTKIT_SM_*`` environment variables (the infra stack's outputs:
   ``ALBERTKIT_SM_BUCKET``, ``ALBERTKIT_SM_ROLE_ARN``, ...), read by
   :func:`sagemaker_defaults_from_env` at the edges only (the CLI; ``to_sagemaker`` when it
   is not handed ``env_defaults``);
4. the built-in defaults of :class:`~albertkit.sagemaker.config.SageMakerConfig`.

Configs themselves never read the environment.

Example:
    >>> cfg = TrainerConfig.from_dict({"data": {"kind": "synthetic"}, "sagemaker": {
    ...     "instance_type": "ml.g5.xlarge", "checkpoint_s3_uri": "s3://{bucket}/c/run-1"}})
    >>> env = sagemaker_defaults_from_env({"ALBERTKIT_SM_BUCKET": "my-bucket",
    ...                                    "ALBERTKIT_SM_INSTANCE_TYPE": "ml.g5.2xlarge"})
    >>> sm = resolve_sagemaker_config(cfg, {"volume_size_gb": 50}, env)
    >>> sm.instance_type, sm.volume_size_gb, sm.checkpoint_s3_uri
    ('ml.g5.xlarge', 50, 's3://my-bucket/c/run-1')
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from albertkit.config import TrainerConfig
from albertkit.errors import ConfigError
from albertkit.sagemaker.config import SECTION, SageMakerConfig

_ENV_FIELDS: dict[str, tuple[str, str]] = {
    "ALBERTKIT_SM_BUCKET": ("bucket", "str"),
    "ALBERTKIT_SM_ROLE_ARN": ("role_arn", "str"),
    "ALBERTKIT_SM_IMAGE_URI": ("image_uri", "str"),
    "ALBERTKIT_SM_REGION": ("region", "str"),
    "ALBERTKIT_SM_OUTPUT_PATH": ("output_path", "str"),
    "ALBERTKIT_SM_CHECKPOINT_S3_URI": ("checkpoint_s3_uri", "str"),
    "ALBERTKIT_SM_TENSORBOARD_S3_URI": ("tensorboard_s3_uri", "str"),
    "ALBERTKIT_SM_INSTANCE_TYPE": ("instance_type", "str"),
    "ALBERTKIT_SM_INSTANCE_COUNT": ("instance_count", "int"),
    "ALBERTKIT_SM_SUBNETS": ("subnets", "list"),
    "ALBERTKIT_SM_SECURITY_GROUP_IDS": ("security_group_ids", "list"),
}


def sagemaker_defaults_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """SageMakerConfig defaults from ``ALBERTKIT_SM_*`` variables (the CLI passes
    ``os.environ``). Lists are comma-separated. The config file and ``--set`` win."""
    out: dict[str, Any] = {}
    for var, (field, kind) in _ENV_FIELDS.items():
        text = environ.get(var, "").strip()
        if not text:
            continue
        if kind == "list":
            out[field] = [p.strip() for p in text.split(",") if p.strip()]
        elif kind == "int":
            # a bad value is reported by validation, naming the field, when `launch` runs
            out[field] = int(text) if text.isdigit() else text
        else:
            out[field] = text
    return out


def resolve_sagemaker_config(
    config: TrainerConfig,
    overrides: Mapping[str, Any] | None = None,
    env_defaults: Mapping[str, Any] | None = None,
) -> SageMakerConfig:
    """The validated SageMaker settings of ``config``: ``overrides`` over its ``sagemaker:``
    section over ``env_defaults`` (:func:`sagemaker_defaults_from_env`) over the built-in
    defaults, field by field. ``distribution`` defaults to the config's
    ``distributed.backend`` when that is not ``single``.

    Raises ``ConfigError`` naming every field that is wrong, before any AWS call.
    """
    merged = {
        **dict(env_defaults or {}),
        **(config.extension_section(SECTION) or {}),
        **dict(overrides or {}),
    }
    if merged.get("distribution") is None and config.distributed.backend != "single":
        # The training config already names the backend: run it that way on SageMaker too.
        merged["distribution"] = {"kind": config.distributed.backend}
    try:
        return SageMakerConfig.model_validate(merged)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            where = ".".join(str(p) for p in err["loc"]) or "<root>"
            got = err.get("input")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"  sagemaker.{where}: {err['msg'].removeprefix('Value error, ')}{shown}")
        raise ConfigError("invalid SageMaker settings:\n" + "\n".join(lines)) from None


def load_launch_config(
    path: str | Path, overrides: list[str], env_defaults: Mapping[str, Any] | None = None
) -> TrainerConfig:
    """Read a YAML config (``overrides``: ``--set`` items) with its ``sagemaker`` section
    resolved by :func:`resolve_sagemaker_config` (environment defaults filled in), as
    ``albertkit launch`` sees it."""
    cfg = TrainerConfig.from_yaml(path, overrides)
    if cfg.extension_section(SECTION) is None and not env_defaults:
        return cfg
    try:
        sm = resolve_sagemaker_config(cfg, env_defaults=env_defaults)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    raw = {**cfg.to_dict(), SECTION: sm.model_dump(mode="json", exclude_unset=True)}
    return TrainerConfig.from_dict(raw, source=str(path))
