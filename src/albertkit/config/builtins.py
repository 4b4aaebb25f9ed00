"""albertkit's own tasks, data kinds, optimizers and model sizes, registered through the
same calls a plugin makes (:mod:`albertkit.config.registry`).

The task classes are named by path: registering them imports no TensorFlow.
"""

from __future__ import annotations

from albertkit.config.data import (
    ClassificationData,
    DemoData,
    SquadData,
    SyntheticData,
    TFRecordData,
    UserClassificationData,
    UserPretrainingData,
)
from albertkit.config.multiple_choice import MultipleChoiceData
from albertkit.config.registry import register_optimizer, register_size, register_task
from albertkit.config.sections import AdamWConfig, LambConfig
from albertkit.config.sizes import SIZES


def register_builtins() -> None:
    """Register the built-in parts (the registry calls this once, before any plugin)."""
    register_task("pretraining", "albertkit.tasks.pretraining:PretrainingTask",
                  data=[SyntheticData, TFRecordData, DemoData, UserPretrainingData])
    register_task("squad", "albertkit.tasks.squad:SquadTask", data=[SquadData])
    register_task("classification", "albertkit.tasks.classification:ClassificationTask",
                  data=[ClassificationData, UserClassificationData])
    register_task("multiple_choice", "albertkit.tasks.multiple_choice:MultipleChoiceTask",
                  data=[MultipleChoiceData])
    register_optimizer(LambConfig)
    register_optimizer(AdamWConfig)
    for name, fields in SIZES.items():
        register_size(name, fields)
