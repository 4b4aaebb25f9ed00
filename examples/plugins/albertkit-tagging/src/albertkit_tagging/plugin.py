"""The entry point albertkit calls (``albertkit.plugins`` group, see pyproject.toml)."""

from __future__ import annotations

from albertkit.config import register_optimizer, register_size, register_task
from albertkit_tagging.config import TAGGER_SMALL, BioTaggingData, LionConfig


def register() -> None:
    """Register the ``tagging`` task with its ``bio_tagging`` data kind, the ``lion``
    optimizer and the ``tagger-small`` size. The task class is named by path: albertkit
    imports it (and TensorFlow) only when a run builds it."""
    register_task("tagging", "albertkit_tagging.task:TaggingTask", data=[BioTaggingData])
    register_optimizer(LionConfig)
    register_size("tagger-small", TAGGER_SMALL)
