"""albertkit's own tasks, data kinds, optimizers, model sizes and word segmenters,
registered through the same calls a plugin makes (:mod:`albertkit.config.registry`).

The task classes are named by path: registering them imports no TensorFlow. So are the word
segmenters' config classes (they live with the data code, a layer above this one); each
imports its library (an optional extra) only when it builds a segmenter.
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
from albertkit.config.registry import (
    register_optimizer,
    register_size,
    register_task,
    register_word_segmenter,
)
from albertkit.config.sections import AdamWConfig, LambConfig
from albertkit.config.sizes import SIZES


def register_builtins() -> None:
    """Register the built-in parts (the registry calls this once, before any plugin)."""
    register_task("pretraining", "albertkit.tasks.pretraining:PretrainingTask",
                  data=[SyntheticData, TFRecordData, DemoData, UserPretrainingData])
    register_task("squad", "albertkit.tasks.squad:SquadTask", data=[SquadData])
    register_task("classification", "albertkit.tasks.classification:ClassificationTask",
                  data=[ClassificationData, UserClassificationData])
    register_optimizer(LambConfig)
    register_optimizer(AdamWConfig)
    for name, fields in SIZES.items():
        register_size(name, fields)
    segmenters = "albertkit.data.segmenters"
    register_word_segmenter("fugashi", f"{segmenters}:FugashiSegmenter", languages=["ja"])
    register_word_segmenter("jieba", f"{segmenters}:JiebaSegmenter", languages=["zh"])
    register_word_segmenter("pythainlp", f"{segmenters}:PyThaiNLPSegmenter", languages=["th"])
