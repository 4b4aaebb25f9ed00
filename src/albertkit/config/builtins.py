"""albertkit's own tasks, data kinds, optimizers, model sizes, sentence splitters and word
segmenters, registered through the same ``register_*`` calls a plugin makes
(:mod:`albertkit.config.registration`).

The task classes and the optimizer builders are named by path (``LambConfig.builder``):
registering them imports no TensorFlow. So are the sentence splitters and the word
segmenters' config classes (they live with the data code, a layer above this one); each
segmenter imports its library (an optional extra) only when it builds a segmenter.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel

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
from albertkit.config.optimizer import AdamWConfig, LambConfig
from albertkit.config.registration import (
    register_optimizer,
    register_sentence_splitter,
    register_size,
    register_task,
    register_word_segmenter,
)
from albertkit.config.sizes import SIZES

BUILTIN_TASKS: Mapping[str, tuple[str, tuple[type[BaseModel], ...]]] = MappingProxyType({
    "pretraining": ("albertkit.tasks.pretraining:PretrainingTask",
                    (SyntheticData, TFRecordData, DemoData, UserPretrainingData)),
    "squad": ("albertkit.tasks.squad:SquadTask", (SquadData,)),
    "classification": ("albertkit.tasks.classification:ClassificationTask",
                       (ClassificationData, UserClassificationData)),
    "multiple_choice": ("albertkit.tasks.multiple_choice:MultipleChoiceTask",
                        (MultipleChoiceData,)),
})
"""albertkit's own tasks, the one list of them: name -> (the task class's path, the data
kinds it reads). :data:`TaskName` and ``albertkit.tasks.TASK_NAMES`` are made from it."""

# The built-in tasks' names; plugins may register more (`albertkit.config.registry`).
TaskName = Literal[tuple(BUILTIN_TASKS)]  # type: ignore[valid-type]  # made from the table
"""What a config trains (``TrainerConfig.task``): albertkit's own tasks, the keys of
:data:`BUILTIN_TASKS`."""

# pysbd 0.3.4 has rules for these (pysbd.languages.LANGUAGE_CODES); English keeps albertkit's
PYSBD_LANGUAGES = ("am", "ar", "bg", "da", "de", "el", "es", "fa", "fr", "hi", "hy", "it",
                   "ja", "mr", "my", "nl", "pl", "ru", "ur", "zh")


def register_builtins() -> None:
    """Register the built-in parts (the registry calls this once, before any plugin)."""
    for name, (path, data) in BUILTIN_TASKS.items():
        register_task(name, path, data=list(data))
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
    segmenters = "albertkit.data.segmenters"
    register_word_segmenter("fugashi", f"{segmenters}:FugashiSegmenter", languages=["ja"])
    register_word_segmenter("jieba", f"{segmenters}:JiebaSegmenter", languages=["zh"])
    register_word_segmenter("pythainlp", f"{segmenters}:PyThaiNLPSegmenter", languages=["th"])
