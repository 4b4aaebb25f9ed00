"""The contract between a task (pretraining, SQuAD, classification) and the trainer.

A task is everything that differs between what albertkit can learn: the Keras model, the
loss, the data, the evaluation and the names of the numbers it reports. The trainer (the
loop, the shared step, checkpoints) calls the members of :class:`Task` and nothing else, so
a new task is one new class.

A task turns one micro-batch into a scalar loss (for the gradient) plus a dict of *sums*
(``stats``). Sums, not means, so that accumulation over micro-batches and all-reduce over
replicas are exact; ``metrics(stats)`` turns totals into the numbers we log (loss,
accuracies).

This module imports no TensorFlow: the SageMaker request builder and the report read the
tasks' metric names (:class:`LogKeys`) without paying for it.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from albertkit.config import TrainerConfig
    from albertkit.config.sizes import AlbertSpec
    from albertkit.distributed import Distributor
    from albertkit.models.options import RematMode

    Batch = Mapping[str, tf.Tensor]
    Stats = dict[str, tf.Tensor]
else:
    Batch = Mapping[str, Any]
    Stats = dict[str, Any]

# Every training log line also carries these, whatever the task: the shared step and the
# loop compute them (gradient norm before clipping, the scheduled rate, throughput).
STEP_LOG_KEYS = ("grad_norm", "learning_rate", "seq_per_s")
# ... of which the progress bar shows these two after the task's own.
STEP_PROGRESS_KEYS = ("learning_rate", "seq_per_s")


@dataclass(frozen=True)
class LogKeys:
    """The names of the numbers a task reports, in the order they are shown.

    Attributes:
        train: the task's metrics in a training log line (each one a SageMaker metric
            ``train:<name>``, next to :data:`STEP_LOG_KEYS`).
        eval: the evaluation keys worth a SageMaker metric ``eval:<name>``.
        progress: the few training metrics the progress bar shows (those present).
    """

    train: tuple[str, ...]
    eval: tuple[str, ...]
    progress: tuple[str, ...]

    @property
    def train_lines(self) -> tuple[str, ...]:
        """Every key a training log line is searched for: the task's, then the step's."""
        return self.train + STEP_LOG_KEYS

    @property
    def progress_bar(self) -> tuple[str, ...]:
        return self.progress + STEP_PROGRESS_KEYS


class TaskData(Protocol):
    """A task's train and eval pipelines for this process (see ``Task.datasets``)."""

    @property
    def has_eval(self) -> bool:
        """Whether evaluation data is configured."""

    @property
    def tokenizer_dir(self) -> Path | None:
        """The tokenizer the data was made with (copied into the run directory), if known."""

    def train(self, skip_micro_batches: int = 0, accum: int = 1,
              stream_version: int = 2) -> Iterable[Batch]:
        """Endless ``[accum, micro_batch, ...]`` batches for this rank, starting after
        ``skip_micro_batches`` micro-batches of the seeded stream (the resume position).
        ``stream_version`` 2 starts there without reading the consumed data; 1 is the
        stream of albertkit 0.1 (resumed by skipping), for checkpoints written by 0.1."""

    def eval(self) -> Iterable[Batch]:
        """This rank's ``[micro_batch, ...]`` evaluation batches, in order."""


class Task(abc.ABC):
    """What a model learns and how it is scored; the trainer calls only these members.

    ``loss_and_stats``, ``example_losses`` and the model's ``call`` are traced into the
    training step's graph without AutoGraph (``tf.function(..., autograph=False)``, the rule
    Keras 3's own ``Model.fit`` applies): a branch or loop on a tensor's value is written
    with ``tf.cond`` / ``tf.where`` / ``tf.while_loop``, while Python ``if`` and ``for`` on
    shapes, configs and lists are fine.

    Attributes:
        name: the task's name (``cfg.task``): ``pretraining``, ``squad``, ``classification``.
        log_keys: the names of the metrics it reports (progress bar, SageMaker metrics).
        micro_batch_size: examples per replica per micro-batch of its data and evaluation.
    """

    name: ClassVar[str]
    log_keys: ClassVar[LogKeys]
    micro_batch_size: int

    @classmethod
    def for_data(cls, data: Any, spec: AlbertSpec, *, micro_batch_size: int,
                 dtype: str | None = None, remat: RematMode | bool = "none") -> Task:
        """The task for the config's ``data`` section (what ``build_task`` calls)."""
        return cls(spec, data, micro_batch_size=micro_batch_size, dtype=dtype, remat=remat)

    @property
    @abc.abstractmethod
    def best_metric(self) -> tuple[str, bool]:
        """(evaluation metric key, higher is better) for keeping the best checkpoint."""

    @abc.abstractmethod
    def build_model(self) -> keras.Model:
        """The task's model, built (variables created) for the configured shapes."""

    @abc.abstractmethod
    def dummy_batch(self, batch_size: int) -> Batch:
        """A batch of zeros with the task's features and shapes (for building and tests)."""

    @abc.abstractmethod
    def loss_and_stats(self, model: keras.Model, batch: Batch, training: bool
                       ) -> tuple[tf.Tensor, Stats]:
        """Mean loss of this micro-batch (float32 scalar) and float32 scalar sums."""

    @abc.abstractmethod
    def example_losses(self, model: keras.Model, batch: Batch) -> tf.Tensor:
        """Each example's loss (float32 ``[micro_batch]``, inference mode): what smart
        sifting (``runtime.sifting``) ranks examples by; the training loss of a batch is
        the same terms averaged (over examples, or over masked tokens for the MLM)."""

    @abc.abstractmethod
    def metrics(self, stats: Mapping[str, float]) -> dict[str, float]:
        """Human-facing metrics from summed stats (works on floats or tensors)."""

    @abc.abstractmethod
    def datasets(self, cfg: TrainerConfig, distributor: Distributor) -> TaskData:
        """This process's train/eval pipelines, sharded by ``distributor``."""

    @abc.abstractmethod
    def evaluate(self, model: keras.Model, step: Any, data: TaskData, cfg: TrainerConfig,
                 run_dir: str | Path | None) -> dict[str, float]:
        """The task's evaluation of ``model`` on ``data``'s eval set.

        Every rank calls it (a task whose evaluation all-reduces relies on that); ``step``
        is the shared training step (its compiled forward pass and distributor) or None.
        """


def forward_fn(model: keras.Model, step: Any):
    """The step's compiled forward pass if there is a step, else a plain call of the model."""
    if step is not None:
        return step.predict
    return lambda batch: model(batch, training=False)
