"""``TrainerConfig``: the root of every albertkit job, and its YAML/JSON input and output.

One ``TrainerConfig`` tree describes a whole run. Nothing here reads the environment: the
command line and the SageMaker entry point do that.

Extension sections: a config file may also hold a top-level section that belongs to a
package built on top of training (``sagemaker:``, the SageMaker job settings). The root does
not know its schema: it accepts the mapping (``--set sagemaker.x=...`` overrides included),
keeps it raw and hands it out through :meth:`TrainerConfig.extension_section`; the owning
package validates it, when a command uses it. ``to_dict``/``to_yaml``/``model_dump`` never
write extension sections, so they never reach a run directory or an export.

Example:
    >>> cfg = TrainerConfig.from_dict({"data": {"kind": "synthetic"},
    ...                                "sagemaker": {"instance_count": 2}})
    >>> cfg.extension_section("sagemaker"), "sagemaker" in cfg.to_dict()
    ({'instance_count': 2}, False)

Registered parts: the ``data`` and ``optimizer`` sections accept every kind in the registry
(:mod:`albertkit.config.registry`), validated in two steps (:mod:`albertkit.config.kinds`).
Parsing a config first loads the plugins (those its ``plugins:`` names, or all), so that
their kinds are part of the typed config: their errors name their fields and the schema
lists them.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from albertkit.config import registry
from albertkit.config.base import Section
from albertkit.config.kinds import RegisteredKind, RegisteredSection
from albertkit.config.optimizer import LambConfig
from albertkit.config.overrides import apply_overrides
from albertkit.config.sections import (
    CheckpointConfig,
    DistributedConfig,
    LoggingConfig,
    ModelConfig,
    RuntimeConfig,
)
from albertkit.config.validation import invalid_configuration
from albertkit.fileio import atomic_write_text, load_yaml

EXTENSION_SECTIONS: tuple[str, ...] = ("sagemaker",)
"""Top-level config sections owned by packages above the config (they validate them
themselves)."""
PLUGIN_SECTIONS = EXTENSION_SECTIONS
"""Deprecated name of ``EXTENSION_SECTIONS`` (removed in 0.4)."""

# The JSON Schema form of a cross-check below (editors see it too): fine-tuning data without
# model.load_from (absent or null) must name its tokenizer. The kinds are the registry's at the
# time the schema is made (plugins included).
def _tokenizer_required_schema(schema: dict[str, Any], cls: type) -> None:
    finetune_kinds = sorted(
        kind for kind, config in registry.data_kinds().items()
        if registry.task_of_kind(kind) != "pretraining" and "tokenizer" in config.model_fields)
    schema["if"] = {
        "required": ["data"],
        "properties": {
            "data": {"required": ["kind"], "properties": {"kind": {"enum": finetune_kinds}}},
            "model": {"not": {"required": ["load_from"],
                              "properties": {"load_from": {"type": "string"}}}},
        },
    }
    schema["then"] = {"properties": {"data": {"required": ["tokenizer"],
                                              "properties": {"tokenizer": {"type": "string"}}}}}


class TrainerConfig(Section):
    """The root of every albertkit job.

    Example:
        >>> cfg = TrainerConfig.model_validate(
        ...     {"model": {"size": "tiny"}, "data": {"kind": "synthetic"},
        ...      "runtime": {"max_steps": 10}})
        >>> cfg.model.spec.num_hidden_layers
        2
    """

    model_config = ConfigDict(json_schema_extra=_tokenizer_required_schema)

    run_dir: Path = Field(
        Path("runs/albertkit"),
        description="Run directory: config.yaml, checkpoints, metrics.jsonl, TensorBoard logs, "
        "summary.",
    )
    model: ModelConfig = Field(
        ModelConfig(),
        description="Model architecture (size preset + overrides) and starting checkpoint.",
    )
    data: Annotated[RegisteredSection, RegisteredKind("data kind")] = Field(
        description="Training/evaluation data; its kind selects the task.")
    optimizer: Annotated[RegisteredSection, RegisteredKind("optimizer")] = Field(
        LambConfig(),
        description="Optimizer, chosen by its kind (a built-in one or a plugin's), with its "
        "learning-rate schedule.",
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
    plugins: list[str] | None = Field(
        None,
        description="The plugins this config may take parts from (entry-point or distribution "
        "names, as `albertkit plugins` shows them): only these are loaded (null = every "
        "installed plugin, [] = albertkit's own parts only).",
    )
    # Extension sections (see EXTENSION_SECTIONS), raw as read; never written back out.
    _extension_sections: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _load_plugins_and_keep_extensions(
            cls, raw: Any, handler: ModelWrapValidatorHandler[TrainerConfig]) -> TrainerConfig:
        if not isinstance(raw, dict):
            return handler(raw)
        # The plugins first (those the config names, or all), so that their kinds validate.
        wanted = raw.get("plugins")
        if wanted is None or (isinstance(wanted, list)
                              and all(isinstance(n, str) for n in wanted)):
            registry.load_plugins(only=wanted)
        # An extension section is set aside before the typed sections are validated (they
        # would refuse the unknown key) and attached, raw, to the validated config.
        if not any(name in raw for name in EXTENSION_SECTIONS):
            return handler(raw)
        sections: dict[str, dict[str, Any]] = {}
        for name in EXTENSION_SECTIONS:
            value = raw.get(name)
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ValidationError.from_exception_data(
                    cls.__name__, [{"type": "dict_type", "loc": (name,), "input": value}])
            sections[name] = copy.deepcopy(value)
        cfg = handler({k: v for k, v in raw.items() if k not in EXTENSION_SECTIONS})
        cfg._extension_sections = sections
        return cfg

    def extension_section(self, name: str) -> dict[str, Any] | None:
        """The raw mapping of extension section ``name`` (a copy), or None when the config
        has none. The package that owns the section validates it."""
        if name not in EXTENSION_SECTIONS:
            raise KeyError(f"{name!r} is not an extension section; known: "
                           f"{list(EXTENSION_SECTIONS)}")
        section = self._extension_sections.get(name)
        return copy.deepcopy(section) if section is not None else None

    def plugin_section(self, name: str) -> dict[str, Any] | None:
        """Deprecated name of :meth:`extension_section` (removed in 0.4)."""
        warnings.warn("TrainerConfig.plugin_section is deprecated and goes away in 0.4: use "
                      "extension_section", DeprecationWarning, stacklevel=2)
        return self.extension_section(name)

    @field_validator("plugins")
    @classmethod
    def _installed(cls, names: list[str] | None) -> list[str] | None:
        if names:
            known = registry.installed_plugin_names()
            missing = [n for n in names if not registry.plugin_named(n, known)]
            if missing:
                raise ValueError(f"{missing} {'is' if len(missing) == 1 else 'are'} not an "
                                 f"installed albertkit plugin; installed: {sorted(known)}")
        return names

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
    def task(self) -> str:
        """The task the data kind trains (``pretraining``, ``squad``, ``classification`` or a
        plugin's)."""
        return registry.task_of_kind(self.data.kind)

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
        if self.task != "pretraining" and getattr(self.data, "tokenizer", "") is None \
                and self.model.load_from is None:
            raise ValueError(
                "data.tokenizer is not set and there is no model.load_from to take it from: "
                "set data.tokenizer, or start from an export that carries its tokenizer"
            )
        if self.plugins is not None:
            for part in registry.plugin_parts(self.data.kind, self.optimizer.kind,
                                              self.model.size):
                ep = part.source.entry_point
                if ep is not None and not registry.plugin_named(
                        [ep, part.source.distribution or ""], self.plugins):
                    raise ValueError(f"{part.category} {part.name!r} comes from {part.source}, "
                                     f"which plugins={self.plugins} does not name")
        return self

    # ------------------------------------------------------------------ I/O
    @classmethod
    def from_dict(cls, raw: dict[str, Any], overrides: list[str] | None = None,
                  source: str = "<dict>", values: dict[str, Any] | None = None) -> TrainerConfig:
        """Validate a raw mapping after ``key.path=value`` overrides (extension sections too)
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
        """The typed sections as plain data (extension sections are not included)."""
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
