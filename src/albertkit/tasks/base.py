"""The contract between a task (pretraining, SQuAD, classification) and the shared step.

A task builds its Keras model and turns one micro-batch into a scalar loss (for the
gradient) plus a dict of *sums* (``stats``). Sums, not means, so that accumulation over
micro-batches and all-reduce over replicas are exact; ``metrics(stats)`` turns totals into
the numbers we log (loss, accuracies).
"""

from __future__ import annotations

from typing import Protocol

import keras
import tensorflow as tf

Batch = dict[str, tf.Tensor]
Stats = dict[str, tf.Tensor]


class Task(Protocol):
    name: str

    def build_model(self) -> keras.Model:
        """The task's model, built (variables created) for the configured shapes."""

    def loss_and_stats(self, model: keras.Model, batch: Batch, training: bool) -> tuple[tf.Tensor, Stats]:
        """Mean loss of this micro-batch (float32 scalar) and float32 scalar sums."""

    def metrics(self, stats: dict[str, float]) -> dict[str, float]:
        """Human-facing metrics from summed stats (works on floats or tensors)."""
