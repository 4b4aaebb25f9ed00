"""Typed, validated configuration for every albertkit job.

* :mod:`albertkit.config.sections` -- the sections (model, runtime, distributed, ...);
  :mod:`albertkit.config.data` and :mod:`albertkit.config.optimizer` -- the data and
  optimizer sections, chosen by ``kind``;
* :mod:`albertkit.config.registry` -- the registries of pluggable parts and the plugins;
* :mod:`albertkit.config.root` -- ``TrainerConfig``, YAML/JSON in and out, extension sections;
* :mod:`albertkit.config.overrides` -- dotted ``--set key.path=value`` overrides;
* :mod:`albertkit.config.validation` -- validation errors that name the field;
* :mod:`albertkit.config.reference` -- the JSON Schema and the Markdown reference;
* :mod:`albertkit.config.sizes` -- the ALBERT architecture description and size presets.

The public names (``__all__``) are importable from here: ``from albertkit.config import
TrainerConfig, ModelConfig``. A model size's architecture is ``ModelConfig(size="base").spec``
(an :class:`AlbertSpec`).

Example:
    >>> cfg = TrainerConfig.model_validate({"data": {"kind": "synthetic"}})
    >>> cfg.runtime.accumulation_steps(replicas=1)
    1
"""

from albertkit._lazy import lazy_exports
from albertkit.config.builtins import TaskName
from albertkit.config.data import (
    ClassificationData,
    DataConfig,
    DemoData,
    GlueTaskName,
    MaskingConfig,
    SquadData,
    SyntheticData,
    TFRecordData,
    UserClassificationData,
    UserPretrainingData,
)
from albertkit.config.multiple_choice import MultipleChoiceData
from albertkit.config.overrides import apply_overrides
from albertkit.config.registry import (
    ENTRY_POINT_GROUP,
    TASK_OF_KIND,
    register_data,
    register_optimizer,
    register_sentence_splitter,
    register_size,
    register_task,
    register_word_segmenter,
)
from albertkit.config.root import EXTENSION_SECTIONS, PLUGIN_SECTIONS, TrainerConfig
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

__all__ = [
    "ENTRY_POINT_GROUP",
    "EXTENSION_SECTIONS",
    "PLUGIN_SECTIONS",
    "TASK_OF_KIND",
    "AdamWConfig",
    "AlbertSpec",
    "CheckpointConfig",
    "ClassificationData",
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
    "register_sentence_splitter",
    "register_size",
    "register_task",
    "register_word_segmenter",
]

# a name of albertkit 0.2, deprecated in 0.3 (docs/api-policy.md): its home is albertkit.errors
__getattr__, __dir__ = lazy_exports(__name__, {}, deprecated={
    "ConfigError": ("albertkit.errors:ConfigError", "0.4"),
})
