"""Typed, validated configuration for every albertkit job.

* :mod:`albertkit.config.sections` -- the sections (model, data, optimizer, runtime, ...);
* :mod:`albertkit.config.root` -- ``TrainerConfig``, YAML/JSON in and out, plugin sections;
* :mod:`albertkit.config.overrides` -- dotted ``--set key.path=value`` overrides;
* :mod:`albertkit.config.validation` -- validation errors that name the field;
* :mod:`albertkit.config.reference` -- the JSON Schema and the Markdown reference;
* :mod:`albertkit.config.sizes` -- the ALBERT architecture description and size presets.

The public names (``__all__``) are importable from here: ``from albertkit.config import
TrainerConfig, ConfigError``. A model size's architecture is ``ModelConfig(size="base").spec``
(an :class:`AlbertSpec`).

Example:
    >>> cfg = TrainerConfig.model_validate({"data": {"kind": "synthetic"}})
    >>> cfg.runtime.accumulation_steps(replicas=1)
    1
"""

from albertkit.config.data import (
    TASK_OF_KIND,
    ClassificationData,
    DataConfig,
    DemoData,
    GlueTaskName,
    MaskingConfig,
    SquadData,
    SyntheticData,
    TaskName,
    TFRecordData,
    UserClassificationData,
    UserPretrainingData,
)
from albertkit.config.multiple_choice import MultipleChoiceData
from albertkit.config.overrides import apply_overrides
from albertkit.config.registry import (
    ENTRY_POINT_GROUP,
    register_data,
    register_optimizer,
    register_size,
    register_task,
)
from albertkit.config.root import PLUGIN_SECTIONS, TrainerConfig
from albertkit.config.sections import (
    AdamWConfig,
    CheckpointConfig,
    DistributedConfig,
    LambConfig,
    LoggingConfig,
    MlflowConfig,
    ModelConfig,
    OptimizerConfig,
    OptimizerSection,
    ProfileConfig,
    RuntimeConfig,
    ScheduleConfig,
    SiftingConfig,
)
from albertkit.config.sizes import AlbertSpec
from albertkit.config.validation import format_validation_errors, invalid_configuration
from albertkit.errors import ConfigError

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGIN_SECTIONS",
    "TASK_OF_KIND",
    "AdamWConfig",
    "AlbertSpec",
    "CheckpointConfig",
    "ClassificationData",
    "ConfigError",
    "DataConfig",
    "DemoData",
    "DistributedConfig",
    "GlueTaskName",
    "LambConfig",
    "LoggingConfig",
    "MaskingConfig",
    "MlflowConfig",
    "ModelConfig",
    "MultipleChoiceData",
    "OptimizerConfig",
    "OptimizerSection",
    "ProfileConfig",
    "SiftingConfig",
    "RuntimeConfig",
    "ScheduleConfig",
    "SquadData",
    "SyntheticData",
    "TFRecordData",
    "TaskName",
    "TrainerConfig",
    "UserClassificationData",
    "UserPretrainingData",
    "apply_overrides",
    "format_validation_errors",
    "invalid_configuration",
    "register_data",
    "register_optimizer",
    "register_size",
    "register_task",
]
