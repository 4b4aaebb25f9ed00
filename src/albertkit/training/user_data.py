"""Training on examples and with an optimizer given in Python (``AlbertTrainer(cfg, train_data=
..., eval_data=..., optimizer=...)``).

Examples. The config's ``data`` section is then ``kind: user_pretraining`` or ``kind:
user_classification`` (:class:`~albertkit.config.UserPretrainingData`,
:class:`~albertkit.config.UserClassificationData`): it names the task and the shapes, and
reads no file. Every element of the user's ``tf.data.Dataset`` is ONE example, a dict of the
task's features (:func:`expected_features`, the task's ``dummy_batch`` without its batch
axis); albertkit batches them by ``runtime.micro_batch_size`` and groups the accumulation
steps. For classification a Keras-style ``(features, label)`` pair is accepted too. Keys the
task does not read are dropped; integer features are cast to int32 and float ones to float32.
The first element is checked, and a missing key, a wrong shape or a wrong kind of number is
refused in one line that names the key.

The position. A checkpoint records the examples consumed, ``position = step x
runtime.global_batch_size`` (one process: micro-batch x accumulation steps). Resuming:

* ``train_data`` a callable ``factory(position) -> tf.data.Dataset``: the trainer asks for
  the stream that starts at example ``position`` (0 for a fresh run). If the dataset ends, the
  trainer calls the factory again at the example that follows the last one read (an
  optimizer step may take its examples from two datasets), so a factory may return the rest
  of one epoch. A resumed run trains on exactly the examples of an uninterrupted one when
  ``factory(p)`` yields the run's examples ``p, p+1, ...`` (it may stop anywhere).
* ``train_data`` a ``tf.data.Dataset``: it is repeated (epochs follow each other) and a
  resumed run reads it again from its start and drops the ``position`` consumed examples,
  with a warning: O(position) reading, and exact only when the dataset yields the same
  sequence every time it is iterated (a seeded shuffle does; an unseeded one does not).

Only the single-process backend takes user data or a user optimizer: with several processes
(Horovod, tf_multiworker) each would need its own shard and the position would be per
process; :func:`check_backend` refuses them.

Example (the features one example of a task needs):
    >>> from albertkit.config import AlbertSpec
    >>> from albertkit.tasks import task_class
    >>> spec = AlbertSpec(vocab_size=101, embedding_size=16, hidden_size=32,
    ...                   num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
    ...                   max_position_embeddings=64)
    >>> task = task_class("pretraining")(spec, seq_length=16, max_predictions_per_seq=3,
    ...                                  micro_batch_size=4)
    >>> describe(expected_features(task))
    'input_ids (16,) int, input_mask (16,) int, segment_ids (16,) int, masked_lm_positions (3,) int, masked_lm_ids (3,) int, masked_lm_weights (3,) float, next_sentence_labels () int'
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from albertkit.config import TrainerConfig, UserClassificationData, UserPretrainingData
from albertkit.errors import ConfigError, DatasetError, TrainingError

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from albertkit.distributed import Distributor
    from albertkit.tasks.base import Task

log = logging.getLogger("albertkit")

USER_DATA_KINDS = (UserPretrainingData, UserClassificationData)

# feature name -> (shape of one example, "int" or "float")
Features = dict[str, tuple[tuple[int, ...], str]]


def expected_features(task: Task) -> Features:
    """The features one example of ``task`` has: its ``dummy_batch`` without the batch axis."""
    out = {}
    for name, value in task.dummy_batch(1).items():
        kind = "float" if value.dtype.is_floating else "int"
        out[name] = (tuple(int(d) for d in value.shape[1:]), kind)
    return out


def describe(features: Features) -> str:
    return ", ".join(f"{k} {shape} {kind}" for k, (shape, kind) in features.items())


def check_inputs(cfg: TrainerConfig, train_data: Any, eval_data: Any,
                 optimizer: Any = None) -> None:
    """Refuse a config and user data that disagree on where the examples come from, and
    arguments of the wrong type."""
    user_kind = isinstance(cfg.data, USER_DATA_KINDS)
    given = [name for name, value in (("train_data", train_data), ("eval_data", eval_data))
             if value is not None]
    if given and not user_kind:
        raise ConfigError(
            f"{' and '.join(given)} given but data.kind={cfg.data.kind} reads its own data: "
            "for examples given in Python set data.kind to user_pretraining or "
            "user_classification (docs/howto/embed.md)")
    for name, value in (("train_data", train_data), ("eval_data", eval_data)):
        if value is not None and not callable(value) and not _is_dataset(value):
            raise TypeError(f"{name} must be a tf.data.Dataset or a factory(position) -> "
                            f"tf.data.Dataset, got {type(value).__name__}")
    if optimizer is not None:
        _check_optimizer(optimizer)


def check_train_data(cfg: TrainerConfig, train_data: Any) -> None:
    """Refuse ``fit()`` of a ``user_*`` data kind without ``train_data`` (before the run
    directory is touched)."""
    if isinstance(cfg.data, USER_DATA_KINDS) and train_data is None:
        raise ConfigError(f"data.kind={cfg.data.kind}: the examples come from Python; pass "
                          "train_data= to AlbertTrainer")


def check_backend(distributor: Distributor, train_data: Any, eval_data: Any,
                  optimizer: Any) -> None:
    """Refuse user data or a user optimizer with more than one process."""
    given = [name for name, value in (("train_data", train_data), ("eval_data", eval_data),
                                      ("optimizer", optimizer)) if value is not None]
    if given and distributor.size > 1:
        raise ConfigError(
            f"{', '.join(given)}: supported with distributed.backend=single only (this job has "
            f"{distributor.size} processes); with Horovod or tf_multiworker use albertkit's "
            "own data kinds and the config's optimizer")


def user_optimizer(optimizer: Any, fresh: bool) -> keras.optimizers.Optimizer | None:
    """The optimizer a run uses instead of the config's: ``optimizer`` itself while it is
    unbuilt (the trainer builds it on the model's variables, so its ``iterations`` and slots
    are the run's), else (``fresh``, or already built by an earlier run of the trainer) a new
    one from its ``get_config()``, whose state then comes from the checkpoint."""
    if optimizer is None:
        return None
    _check_optimizer(optimizer)
    if fresh or optimizer.built:
        return type(optimizer).from_config(optimizer.get_config())
    return optimizer


def _check_optimizer(optimizer: Any) -> None:
    import keras

    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"optimizer must be a keras.optimizers.Optimizer, got "
                        f"{type(optimizer).__name__}")
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        raise ConfigError("optimizer: pass the inner optimizer; loss scaling is albertkit's "
                          "(runtime.precision=mixed_float16)")


def _is_dataset(value: Any) -> bool:
    import tensorflow as tf

    return isinstance(value, tf.data.Dataset)


class UserData:
    """A :class:`~albertkit.tasks.TaskData` over the user's datasets.

    Args:
        task: the run's task (its features and micro-batch size).
        train: a ``tf.data.Dataset`` of examples or ``factory(position)`` (None: none).
        eval: a ``tf.data.Dataset`` of examples, or a factory called with position 0.
        distributor: the (single-process) backend.
        eval_steps: at most this many evaluation micro-batches (pretraining).
    """

    tokenizer_dir = None  # the examples are token ids already: no tokenizer to copy

    def __init__(self, task: Task, train: Any, eval: Any, distributor: Distributor,
                 eval_steps: int | None = None) -> None:
        self.task = task
        self.features = expected_features(task)
        self.micro_batch_size = task.micro_batch_size
        self._train = train
        self._eval = eval
        self.distributor = distributor
        self.eval_steps = eval_steps
        self._eval_arrays: dict[str, np.ndarray] | None = None

    @property
    def has_eval(self) -> bool:
        return self._eval is not None

    # ------------------------------------------------------------------ examples
    def examples(self, source: Any, position: int, what: str) -> tf.data.Dataset:
        """The checked, normalised examples of ``source`` from ``position`` on (training data
        may be empty there: the stream then says where it ended)."""
        empty_ok = what == "train_data"
        if _is_dataset(source):
            base = source
            check_element(base, self.features, what, empty_ok)
            ds = base.repeat().skip(position) if what == "train_data" else base
        else:
            ds = source(position)
            if not _is_dataset(ds):
                raise TypeError(f"{what} factory({position}) returned {type(ds).__name__}, "
                                "expected a tf.data.Dataset")
            check_element(ds, self.features, f"{what} factory({position})", empty_ok)
        import tensorflow as tf

        return ds.map(tf.autograph.experimental.do_not_convert(self._normalise))

    def _normalise(self, *element: Any) -> dict[str, tf.Tensor]:
        import tensorflow as tf

        example = _as_dict(element)
        out = {}
        for name, (shape, kind) in self.features.items():
            value = tf.cast(example[name], tf.float32 if kind == "float" else tf.int32)
            out[name] = tf.ensure_shape(value, shape)
        return out

    # ------------------------------------------------------------------ TaskData
    def train(self, skip_micro_batches: int = 0, accum: int = 1,
              stream_version: int = 2) -> Iterator[Any]:
        """Endless ``[accum, micro_batch, ...]`` batches, starting after ``skip_micro_batches``
        micro-batches (the position in examples is that times the micro-batch size)."""
        if self._train is None:
            raise ConfigError("no training data: pass train_data= to AlbertTrainer")
        position = skip_micro_batches * self.micro_batch_size
        if position and _is_dataset(self._train):
            log.warning("train_data is a tf.data.Dataset, not a factory(position): resuming "
                        "at example %d by reading it again from its start and dropping the "
                        "%d examples already trained on (exact only if it yields the same "
                        "order each time); pass a factory(position) to start there directly",
                        position, position)
        return self._stream(position, accum)

    def _stream(self, position: int, accum: int) -> Iterator[dict[str, Any]]:
        """Groups of ``accum x micro_batch`` examples from ``position`` on. When a factory's
        dataset ends, the examples that do not fill a group are kept and the factory is
        asked for what follows them, so the groups never depend on where datasets end."""
        import tensorflow as tf

        group = accum * self.micro_batch_size
        carried: dict[str, np.ndarray] | None = None  # < group examples of ended datasets

        def shaped(batch: dict[str, Any]) -> dict[str, tf.Tensor]:
            return {k: tf.reshape(v, (accum, self.micro_batch_size, *v.shape[1:]))
                    for k, v in batch.items()}

        while True:
            held = _rows(carried)
            ds = self.examples(self._train, position + held, "train_data")
            read = 0
            if carried is not None:  # complete the carried group first
                head = next(iter(ds.batch(group - held)), None)
                if head is not None:
                    read = _rows(head)
                    carried = {k: np.concatenate([carried[k], np.asarray(head[k])])
                               for k in carried}
                    ds = ds.skip(read)
                if _rows(carried) == group:
                    yield shaped({k: tf.constant(v) for k, v in carried.items()})
                    position, carried = position + group, None
            if carried is None:
                for batch in ds.batch(group).prefetch(2):
                    rows = _rows(batch)
                    read += rows
                    if rows < group:
                        carried = {k: np.asarray(v) for k, v in batch.items()}
                        break
                    yield shaped(batch)
                    position += group
            if read == 0:
                raise TrainingError(
                    f"train_data ended at example {position + held}: one optimizer step needs "
                    f"{group} (runtime.micro_batch_size={self.micro_batch_size} x {accum} "
                    "accumulation steps)")

    def eval(self) -> tf.data.Dataset:
        """Ordered full ``[micro_batch, ...]`` evaluation batches, at most ``eval_steps``."""
        if self._eval is None:
            raise ConfigError("no evaluation data: pass eval_data= to AlbertTrainer")
        ds = self.examples(self._eval, 0, "eval_data")
        ds = ds.batch(self.micro_batch_size, drop_remainder=True)
        if self.eval_steps:
            ds = ds.take(self.eval_steps)
        return ds.prefetch(2)

    @property
    def eval_arrays(self) -> dict[str, np.ndarray] | None:
        """The whole evaluation set as arrays (what classification scores), None without."""
        if self._eval is None:
            return None
        if self._eval_arrays is None:
            parts: dict[str, list[np.ndarray]] = {k: [] for k in self.features}
            for batch in self.examples(self._eval, 0, "eval_data").batch(1024):
                for k, v in batch.items():
                    parts[k].append(np.asarray(v))
            if not parts or not parts[next(iter(parts))]:
                raise DatasetError("eval_data holds no example")
            self._eval_arrays = {k: np.concatenate(v) for k, v in parts.items()}
        return self._eval_arrays


def _rows(batch: dict[str, Any] | None) -> int:
    return 0 if batch is None else int(next(iter(batch.values())).shape[0])


def _as_dict(element: tuple) -> dict[str, Any]:
    """An element as a feature dict: ``(features,)`` or Keras's ``(features, label)``."""
    if len(element) == 1 and isinstance(element[0], dict):
        return element[0]
    if len(element) == 2 and isinstance(element[0], dict):
        return {**element[0], "labels": element[1]}
    raise DatasetError(f"an element must be a dict of features (or a (features, label) pair), "
                       f"got {len(element)} parts")


def check_element(ds: tf.data.Dataset, features: Features, what: str,
                  empty_ok: bool = False) -> None:
    """Check the first element of ``ds`` against ``features``; one-line errors name the key.

    Raises:
        DatasetError: ``ds`` is empty (unless ``empty_ok``), or its first element misses a key, has a wrong shape
            or a float where token ids (ints) belong.
    """
    import tensorflow as tf

    spec = ds.element_spec
    parts = spec if isinstance(spec, tuple) else (spec,)
    if not parts or not isinstance(parts[0], dict) or len(parts) > 2:
        raise DatasetError(
            f"{what}: an element must be a dict of features (or a (features, label) pair), "
            f"got {spec!r}")
    if len(parts) == 2 and "labels" not in features:
        raise DatasetError(f"{what}: (features, label) pairs are for classification; "
                           f"a {describe(features)} example is one dict")
    names = set(parts[0]) | ({"labels"} if len(parts) == 2 else set())
    missing = [k for k in features if k not in names]
    if missing:
        raise DatasetError(f"{what}: an example misses {', '.join(map(repr, missing))} "
                           f"(one example is {describe(features)})")
    first = None
    for element in ds.take(1):
        first = _as_dict(element if isinstance(element, tuple) else (element,))
    if first is None:
        if empty_ok:
            return
        raise DatasetError(f"{what}: the dataset is empty")
    for name, (shape, kind) in features.items():
        value = tf.convert_to_tensor(first[name])
        got = tuple(value.shape)
        if got != shape:
            hint = (" (it looks batched: give single examples, albertkit batches them by "
                    "runtime.micro_batch_size; .unbatch() them)" if got[1:] == shape else "")
            raise DatasetError(f"{what}: {name!r} has shape {got}, expected {shape}{hint}")
        if kind == "int" and not (value.dtype.is_integer or value.dtype == tf.bool):
            raise DatasetError(f"{what}: {name!r} is {value.dtype.name}, expected integers")
        if kind == "float" and not (value.dtype.is_floating or value.dtype.is_integer):
            raise DatasetError(f"{what}: {name!r} is {value.dtype.name}, expected numbers")

