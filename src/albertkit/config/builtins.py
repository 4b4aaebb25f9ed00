"""albertkit's own tasks, data kinds, optimizers, model sizes and sentence splitters, registered through the
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
from albertkit.config.registry import (
    register_optimizer,
    register_sentence_splitter,
    register_size,
    register_task,
)
from albertkit.config.sections import AdamWConfig, LambConfig
from albertkit.config.sizes import SIZES

# pysbd 0.3.4 has rules for these (pysbd.languages.LANGUAGE_CODES); English keeps albertkit's
PYSBD_LANGUAGES = ("am", "ar", "bg", "da", "de", "el", "es", "fa", "fr", "hi", "hy", "it",
                   "ja", "mr", "my", "nl", "pl", "ru", "ur", "zh")


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
    # by path: the data layer sits above config (imported when text is split)
    register_sentence_splitter("rules", "albertkit.data.sentences:RulesSplitter",
                               languages=["en"])
    register_sentence_splitter("pysbd", "albertkit.data.sentences:PysbdSplitter",
                               languages=PYSBD_LANGUAGES)
    register_sentence_splitter("punctuation", "albertkit.data.sentences:PunctuationSplitter",
                               languages=[])
