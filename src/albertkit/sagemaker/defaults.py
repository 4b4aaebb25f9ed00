"""Defaults for the ``sagemaker:`` section from the environment, and loading a launch config.

``albertkit launch`` (and ``albertkit config show``) pass ``os.environ`` to
:func:`sagemaker_defaults_from_env`: the infra stack's outputs (``ALBERTKIT_SM_BUCKET``,
``ALBERTKIT_SM_ROLE_ARN``, ...) become defaults under the config's ``sagemaker:`` section,
which the config file and ``--set`` override. Configs themselves never read the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from albertkit.config import ConfigError, TrainerConfig, apply_overrides
from albertkit.fileio import load_yaml

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


def load_launch_config(
    path: str | Path, overrides: list[str], env_defaults: Mapping[str, Any] | None = None
) -> TrainerConfig:
    """Read a YAML config with environment defaults under its ``sagemaker`` section."""
    path = Path(path)
    raw = load_yaml(path)
    section = raw.get("sagemaker") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: sagemaker must be a mapping")
    raw["sagemaker"] = {**dict(env_defaults or {}), **section}
    return TrainerConfig.from_dict(apply_overrides(raw, overrides), source=str(path))
