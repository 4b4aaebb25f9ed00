"""The contract between a task (pretraining, SQuAD, classification, a plugin's) and the
trainer.

A task is everything that differs between what albertkit can learn: the Keras model, the
loss, the data, the evaluation and the names of the numbers it reports. The trainer (the
loop, the shared step, checkpoints) calls the members of :class:`Task` and of the
:class:`TaskData` its ``datasets`` returns, and nothing else, so a new task is one new class
(and, with :class:`albertkit.data.ExampleData`, no pipeline of its own).

A task turns one micro-batch (a :data:`Batch`) into a scalar loss (for the gradient) plus a
dict of *sums* (:data:`Stats`). Sums, not means, so that accumulation over micro-batches and
all-reduce over replicas are exact; ``metrics(stats)`` turns totals into the numbers we log
(loss, accuracies).

This module imports no TensorFlow: the SageMaker request builder and the report read the
tasks' metric names (:class:`LogKeys`) without paying for it.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from albertkit.config import TrainerConfig
    from albertkit.config.sizes import AlbertSpec
    from albertkit.distributed import Distributor
    from albertkit.models.options import RematMode

Batch = Mapping[str, "tf.Tensor"]
"""One batch of a task's features: feature name -> tensor whose first axis is the example
(``[micro_batch, ...]`` in ``loss_and_stats``, ``[accumulation, micro_batch, ...]`` from
``TaskData.train``). NumPy arrays are accepted wherever a batch is read."""

Stats = dict[str, "tf.Tensor"]
"""What ``Task.loss_and_stats`` returns beside the loss: float32 scalar *sums* over the
micro-batch (``loss_sum``, ``examples``, ``correct``, ...), added up over micro-batches and
replicas before ``Task.metrics`` turns them into means."""

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


@runtime_checkable
class TaskData(Protocol):
    """A task's training and evaluation pipelines for this process: what ``Task.datasets``
    returns. :class:`albertkit.data.ExampleData` is one, built from examples.

    The trainer calls ``train`` once per run with the position of the checkpoint it resumed
    from, ``eval`` at each evaluation (through the task's ``evaluate``, which is given this
    object), and reads ``has_eval`` and ``tokenizer_dir``.

    Exact resume rests on ``train``: the batches it yields from ``skip_micro_batches=k``
    must be the ones an uninterrupted stream yields after its ``k``-th micro-batch, on every
    rank. ``ExampleData`` guarantees it; a pipeline of your own must too.
    """

    @property
    def has_eval(self) -> bool:
        """Whether evaluation data is configured."""

    @property
    def tokenizer_dir(self) -> Path | None:
        """The tokenizer the data was made with (copied into the run directory), if known."""

    def train(self, skip_micro_batches: int = 0, accum: int = 1,
              stream_version: int = 2) -> Iterable[Batch]:
        """Endless ``[accum, micro_batch, ...]`` batches for this rank (distributed by the
        run's distributor, ``distributor.distribute_dataset``), starting after
        ``skip_micro_batches`` micro-batches of the seeded stream (the resume position:
        ``step * accum``). ``stream_version`` 2 starts there without reading the consumed
        data; 1 is the stream of albertkit 0.1 (resumed by skipping), for checkpoints
        written by 0.1 (a task without such checkpoints may refuse it)."""

    def eval(self) -> Iterable[Batch]:
        """This rank's ``[micro_batch, ...]`` evaluation batches, in order."""


class Task(abc.ABC):
    """What a model learns and how it is scored; the trainer calls only these members.

    **Construction.** The trainer builds a task with the class method :meth:`for_data`,
    ``task_class(cfg.task).for_data(data, spec, micro_batch_size=..., dtype=..., remat=...)``,
    passing:

    * ``data``: the config's ``data`` section, an instance of the data kind registered with
      the task (``register_task(..., data=[...])``). For fine-tuning from ``model.load_from``,
      a section with a ``tokenizer`` field left unset gets the tokenizer that model carries;
    * ``spec``: the model architecture (``cfg.model.spec``, an
      :class:`~albertkit.config.AlbertSpec`, size presets resolved);
    * ``micro_batch_size``: ``cfg.runtime.micro_batch_size``, examples per replica per
      micro-batch, of training and evaluation;
    * ``dtype``: ``cfg.runtime.precision``, a Keras dtype policy name (``float32``,
      ``mixed_float16``, ``mixed_bfloat16``) for the model;
    * ``remat``: ``cfg.runtime.remat`` (``none``, ``selective``, ``full``), what the
      encoder recomputes in the backward pass (``AlbertEncoder(remat=...)``).

    The default ``for_data`` calls ``cls(spec, data, micro_batch_size=..., dtype=...,
    remat=...)``: a task whose constructor takes those arguments needs nothing more; another
    overrides ``for_data`` (as the pretraining task does). Construction must be cheap and
    import no TensorFlow: the data is read when ``datasets`` or ``evaluate`` asks for it.

    **Data.** ``datasets(cfg, distributor)`` returns this process's :class:`TaskData`.
    :class:`albertkit.data.ExampleData` makes one from the task's examples (feature
    columns, a sequence of examples or a function of the index), sharded over
    ``distributor``'s ranks and resumable at any position, so exact resume after a crash
    comes with it::

        def datasets(self, cfg, distributor):
            return ExampleData(self.train_arrays, self.eval_arrays,
                               micro_batch_size=self.micro_batch_size,
                               seed=cfg.runtime.seed, distributor=distributor,
                               eval_steps=cfg.runtime.eval_steps)

    **The step.** ``loss_and_stats``, ``example_losses`` and the model's ``call`` are traced
    into the training step's graph without AutoGraph (``tf.function(..., autograph=False)``,
    the rule Keras 3's own ``Model.fit`` applies): a branch or loop on a tensor's value is
    written with ``tf.cond`` / ``tf.where`` / ``tf.while_loop``, while Python ``if`` and
    ``for`` on shapes, configs and lists are fine.

    docs/howto/extend.md walks through a complete task (the example plugin in
    ``examples/plugins/albertkit-tagging``).

    Attributes:
        name: the task's name (``cfg.task``): ``pretraining``, ``squad``, ``classification``
            or a plugin's.
        log_keys: the names of the metrics it reports (progress bar, SageMaker metrics).
        micro_batch_size: examples per replica per micro-batch of its data and evaluation.
    """

    name: ClassVar[str]
    log_keys: ClassVar[LogKeys]
    micro_batch_size: int

    @classmethod
    def for_data(cls, data: Any, spec: AlbertSpec, *, micro_batch_size: int,
                 dtype: str | None = None, remat: RematMode | bool = "none") -> Task:
        """The task for the config's ``data`` section (what the trainer calls, through
        ``albertkit.tasks.build_task``; the class docstring lists the arguments)."""
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
        """This process's train/eval pipelines, sharded by ``distributor`` (the run's
        data-parallel backend: ``rank``, ``size``, ``shard``, ``distribute_dataset``).
        ``cfg`` is the run's whole config (``runtime.seed``, ``runtime.eval_steps``, ...)."""

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
