"""``TrainerConfig``: the root of every albertkit job, and its YAML/JSON input and output.

One ``TrainerConfig`` tree describes a whole run. Nothing here reads the environment: the
command line and the SageMaker entry point do that.

Plugin sections: a config file may also hold a top-level section that belongs to a package
built on top of training (``sagemaker:``, the SageMaker job settings). The root does not
know its schema: it accepts the mapping (``--set sagemaker.x=...`` overrides included),
keeps it raw and hands it out through :meth:`TrainerConfig.plugin_section`; the owning
package validates it. ``to_dict``/``to_yaml``/``model_dump`` never write plugin sections, so
they never reach a run directory or an export.

Example:
    >>> cfg = TrainerConfig.from_dict({"data": {"kind": "synthetic"},
    ...                                "sagemaker": {"instance_count": 2}})
    >>> cfg.plugin_section("sagemaker"), "sagemaker" in cfg.to_dict()
    ({'instance_count': 2}, False)
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from albertkit.config.base import Section
from albertkit.config.data import (
    TASK_OF_KIND,
    DataConfig,
    TaskName,
)
from albertkit.config.overrides import apply_overrides
from albertkit.config.sections import (
    CheckpointConfig,
    DistributedConfig,
    LambConfig,
    LoggingConfig,
    ModelConfig,
    OptimizerConfig,
    RuntimeConfig,
)
from albertkit.config.validation import invalid_configuration
from albertkit.fileio import atomic_write_text, load_yaml

# Top-level sections owned by packages above the config (they validate them themselves).
PLUGIN_SECTIONS: tuple[str, ...] = ("sagemaker",)

# The JSON Schema form of a cross-check below (editors see it too): fine-tuning data without
# model.load_from (absent or null) must name its tokenizer.
_TOKENIZER_REQUIRED_SCHEMA: dict[str, Any] = {
    "if": {
        "required": ["data"],
        "properties": {
            "data": {"required": ["kind"], "properties": {"kind": {"enum": sorted(
                kind for kind, task in TASK_OF_KIND.items() if task != "pretraining")}}},
            "model": {"not": {"required": ["load_from"],
                              "properties": {"load_from": {"type": "string"}}}},
        },
    },
    "then": {"properties": {"data": {"required": ["tokenizer"],
                                     "properties": {"tokenizer": {"type": "string"}}}}},
}


class TrainerConfig(Section):
    """The root of every albertkit job.

    Example:
        >>> cfg = TrainerConfig.model_validate(
        ...     {"model": {"size": "tiny"}, "data": {"kind": "synthetic"},
        ...      "runtime": {"max_steps": 10}})
        >>> cfg.model.spec.num_hidden_layers
        2
    """

    model_config = ConfigDict(json_schema_extra=_TOKENIZER_REQUIRED_SCHEMA)

    run_dir: Path = Field(
        Path("runs/albertkit"),
        description="Run directory: config.yaml, checkpoints, metrics.jsonl, TensorBoard logs, "
        "summary.",
    )
    model: ModelConfig = Field(
        ModelConfig(),
        description="Model architecture (size preset + overrides) and starting checkpoint.",
    )
    data: DataConfig = Field(description="Training/evaluation data; its kind selects the task.")
    optimizer: OptimizerConfig = Field(
        LambConfig(), description="Optimizer (lamb or adamw) with its learning-rate schedule."
    )
    runtime: RuntimeConfig = Field(
        RuntimeConfig(),
        description="Precision, XLA, batch sizes, steps, evaluation cadence and seed.",
    )
    distributed: DistributedConfig = Field(
        DistributedConfig(), description="Data-parallel backend."
    )
    checkpoint: CheckpointConfig = Field(
        CheckpointConfig(), description="Checkpoint cadence, retention and resume."
    )
    logging: LoggingConfig = Field(
        LoggingConfig(), description="Log cadence, progress bar and TensorBoard."
    )
    # Plugin sections (see PLUGIN_SECTIONS), raw as read; never written back out.
    _plugin_sections: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_plugin_sections(cls, raw: Any, handler: ModelWrapValidatorHandler[TrainerConfig]
                              ) -> TrainerConfig:
        # A plugin section is set aside before the typed sections are validated (they would
        # refuse the unknown key) and attached, raw, to the validated config.
        if not isinstance(raw, dict) or not any(name in raw for name in PLUGIN_SECTIONS):
            return handler(raw)
        sections: dict[str, dict[str, Any]] = {}
        for name in PLUGIN_SECTIONS:
            value = raw.get(name)
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ValidationError.from_exception_data(
                    cls.__name__, [{"type": "dict_type", "loc": (name,), "input": value}])
            sections[name] = copy.deepcopy(value)
        cfg = handler({k: v for k, v in raw.items() if k not in PLUGIN_SECTIONS})
        cfg._plugin_sections = sections
        return cfg

    def plugin_section(self, name: str) -> dict[str, Any] | None:
        """The raw mapping of plugin section ``name`` (a copy), or None when the config has
        none. The package that owns the section validates it."""
        if name not in PLUGIN_SECTIONS:
            raise KeyError(f"{name!r} is not a plugin section; known: {list(PLUGIN_SECTIONS)}")
        section = self._plugin_sections.get(name)
        return copy.deepcopy(section) if section is not None else None

    @model_validator(mode="before")
    @classmethod
    def _default_optimizer_kind(cls, raw: Any) -> Any:
        # `--set optimizer.learning_rate=...` on a config without an optimizer section
        # means "the default optimizer (LAMB) with this rate".
        if isinstance(raw, dict) and isinstance(raw.get("optimizer"), dict) \
                and "kind" not in raw["optimizer"]:
            raw = {**raw, "optimizer": {"kind": "lamb", **raw["optimizer"]}}
        return raw

    @property
    def task(self) -> TaskName:
        return TASK_OF_KIND[self.data.kind]

    @model_validator(mode="after")
    def _cross_checks(self) -> TrainerConfig:
        spec = self.model.spec
        seq = getattr(self.data, "seq_length", None) or getattr(self.data, "max_seq_length", None)
        if seq is not None and seq > spec.max_position_embeddings:
            raise ValueError(
                f"data sequence length {seq} exceeds model.max_position_embeddings="
                f"{spec.max_position_embeddings}"
            )
        warmup = self.optimizer.schedule.resolved_warmup(self.runtime.max_steps)
        if warmup > self.runtime.max_steps:
            raise ValueError(
                f"optimizer.schedule.warmup_steps={warmup} exceeds "
                f"runtime.max_steps={self.runtime.max_steps}"
            )
        if self.runtime.eval_every_steps and self.data.kind == "tfrecord" and not self.data.eval_files:
            pass  # evaluation then uses nothing; the trainer says so once
        if self.task != "pretraining" and getattr(self.data, "tokenizer", "") is None \
                and self.model.load_from is None:
            raise ValueError(
                "data.tokenizer is not set and there is no model.load_from to take it from: "
                "set data.tokenizer, or start from an export that carries its tokenizer"
            )
        return self

    # ------------------------------------------------------------------ I/O
    @classmethod
    def from_dict(cls, raw: dict[str, Any], overrides: list[str] | None = None,
                  source: str = "<dict>", values: dict[str, Any] | None = None) -> TrainerConfig:
        """Validate a raw mapping after ``key.path=value`` overrides (plugin sections too)
        and then the typed ``values`` (``{"run_dir": "runs/x #1"}``, set as given, never
        parsed)."""
        raw = apply_overrides(raw, overrides or [], values)
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            raise invalid_configuration(source, e) from None

    @classmethod
    def from_yaml(cls, path: str | os.PathLike, overrides: list[str] | None = None,
                  values: dict[str, Any] | None = None) -> TrainerConfig:
        """Load a YAML (or JSON) file, apply ``key.path=value`` overrides and the typed
        ``values`` (see :meth:`from_dict`), validate."""
        raw = load_yaml(path)
        return cls.from_dict(raw, overrides, source=str(path), values=values)

    from_json = from_yaml  # JSON is YAML

    def to_dict(self) -> dict[str, Any]:
        """The typed sections as plain data (plugin sections are not included)."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_yaml(self, path: str | os.PathLike | None = None) -> str:
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            atomic_write_text(Path(path), text)
        return text

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            atomic_write_text(Path(path), text)
        return text
