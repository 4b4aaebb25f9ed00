"""A task's data from its examples: the resumable training stream every albertkit task
uses, for examples a task (or a plugin) makes itself.

:class:`ExampleData` is a complete :class:`~albertkit.tasks.TaskData`: what a task's
``datasets(cfg, distributor)`` returns. The training stream is position-addressable:
element ``g`` of the global stream is example ``perm_{seed, g // N}(g % N)`` of the ``N``
examples (a seeded permutation per epoch, :func:`albertkit.data.stream.index_stream`), and
rank ``r`` of ``n`` takes ``g = r, r + n, ...``. So micro-batch ``k`` of a rank is a pure
function of ``(seed, k, rank, n, N, micro_batch_size)``: a resumed run starts at the
checkpoint's position without reading anything before it and sees exactly the batches of
an uninterrupted one. SQuAD and classification build their data with it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.data.batching import accumulation_batches
from albertkit.errors import DatasetError

Examples = (Mapping[str, Any] | Sequence[Mapping[str, Any]] | Callable[[], Any]
            | Callable[[int], Mapping[str, Any]])
"""What :class:`ExampleData` reads: feature columns, a sequence of examples, a function
that builds either on first use, or a function of the example index (with a count)."""


def _feature(value: Any, where: str) -> np.ndarray:
    """``value`` as an array of the dtype the model gets: int32 for integers and booleans,
    float32 for floats."""
    array = np.asarray(value)
    if array.dtype.kind in "iub":
        return array if array.dtype == np.int32 else array.astype(np.int32)
    if array.dtype.kind == "f":
        return array if array.dtype == np.float32 else array.astype(np.float32)
    raise DatasetError(f"{where} is {array.dtype} ({array.dtype.kind!r}); a feature holds "
                       "integers (token ids, labels, masks) or floats: encode text first")


def _example(value: Any, where: str) -> dict[str, np.ndarray]:
    if not isinstance(value, Mapping) or not value:
        raise DatasetError(f"{where}: an example is a dict of features (name -> array), "
                           f"got {type(value).__name__}")
    return {str(k): _feature(v, f"{where}[{k!r}]") for k, v in value.items()}


def _spec_of(example: Mapping[str, np.ndarray]) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {k: (tuple(v.shape), v.dtype) for k, v in example.items()}


def _check_like(example: Mapping[str, np.ndarray], spec: Mapping[str, Any], where: str,
                first: str) -> None:
    if set(example) != set(spec):
        raise DatasetError(f"{where} has features {sorted(example)}, {first} has "
                           f"{sorted(spec)}")
    for k, (shape, dtype) in spec.items():
        if example[k].shape != shape:
            raise DatasetError(f"{where}[{k!r}] has shape {example[k].shape}, {first} "
                               f"{shape}: every example's feature has one shape (pad them)")
        if example[k].dtype != dtype:
            raise DatasetError(f"{where}[{k!r}] holds {example[k].dtype.name}, {first} "
                               f"{np.dtype(dtype).name}")


class _Columns:
    """Examples as feature arrays ``[N, ...]``."""

    def __init__(self, columns: Mapping[str, Any], what: str) -> None:
        if not columns:
            raise DatasetError(f"{what}: no features")
        self.arrays = {str(k): _feature(v, f"{what}[{k!r}]") for k, v in columns.items()}
        lengths = {k: (len(v) if v.ndim else -1) for k, v in self.arrays.items()}
        if len(set(lengths.values())) != 1 or min(lengths.values()) < 0:
            raise DatasetError(f"{what}: the feature arrays differ in length (their first "
                               f"axis is the example): {lengths}")
        self.size = next(iter(lengths.values()))
        self.spec = {k: (v.shape[1:], v.dtype) for k, v in self.arrays.items()}

    def rows(self, index: np.ndarray) -> dict[str, np.ndarray]:
        return {k: v[index] for k, v in self.arrays.items()}


def _rows_to_columns(rows: Sequence[Any], what: str) -> _Columns:
    if not len(rows):
        raise DatasetError(f"{what}: no examples")
    first = _example(rows[0], f"{what} example 0")
    spec = _spec_of(first)
    columns = {k: np.empty((len(rows), *shape), dtype) for k, (shape, dtype) in spec.items()}
    for i in range(len(rows)):
        example = first if i == 0 else _example(rows[i], f"{what} example {i}")
        _check_like(example, spec, f"{what} example {i}", "example 0")
        for k, v in example.items():
            columns[k][i] = v
    return _Columns(columns, what)


class _Function:
    """Examples made one at a time by ``example(i)``, for ``i`` in ``range(size)``."""

    def __init__(self, example: Callable[[int], Any], size: int, what: str) -> None:
        if int(size) < 1:
            raise DatasetError(f"{what}: the example count is {size}; it must be at least 1")
        self.example, self.size, self.what = example, int(size), what
        self.spec = _spec_of(_example(example(0), f"{what}(0)"))

    def rows(self, index: np.ndarray) -> dict[str, np.ndarray]:
        made = []
        for i in index.tolist():
            example = _example(self.example(i), f"{self.what}({i})")
            _check_like(example, self.spec, f"{self.what}({i})", f"{self.what}(0)")
            made.append(example)
        return {k: np.stack([m[k] for m in made]).astype(dtype, copy=False)
                for k, (_, dtype) in self.spec.items()}

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        return self.rows(np.arange(self.size))


def _takes_an_index(function: Callable[..., Any]) -> bool:
    try:
        inspect.signature(function).bind(0)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): take it at its word below
        return True
    try:
        inspect.signature(function).bind()
    except TypeError:
        return True
    return False


def _source(examples: Any, count: int | None, what: str) -> _Columns | _Function:
    if count is not None:
        if not callable(examples):
            raise TypeError(f"{what}: a count is given for a function example(i), but the "
                            f"examples are a {type(examples).__name__}")
        return _Function(examples, count, what)
    if isinstance(examples, Mapping):
        return _Columns(examples, what)
    if isinstance(examples, Sequence) and not isinstance(examples, str | bytes):
        return _rows_to_columns(examples, what)
    if callable(examples):
        if _takes_an_index(examples):
            raise TypeError(f"{what} is a function of the example index: give the number of "
                            f"examples too (num_{what.split()[0]}=N)")
        return _source(examples(), None, what)
    raise TypeError(f"{what}: expected feature columns (a dict of arrays), a sequence of "
                    f"examples (dicts of arrays) or a function, got {type(examples).__name__}")


class ExampleData:
    """A task's training and evaluation data from its examples (a ``TaskData``).

    The training stream is sharded over the ranks, grouped into the ``[accumulation,
    micro_batch, ...]`` batches of one optimizer step and position-addressable: a run
    resumed from a checkpoint starts at its position directly and continues with exactly
    the batches an uninterrupted run sees (module docstring). A task of your own gets
    albertkit's exact resume by returning one from ``datasets``.

    Examples can be given as

    * feature columns: a dict of arrays ``[N, ...]``, one row per example;
    * a sequence of ``N`` examples, each a dict of arrays (stacked once, on first use);
    * a function ``example(i)`` that returns example ``i`` as a dict of arrays, with the
      count ``num_train`` / ``num_eval``: examples are made when a micro-batch needs them;
    * a function without arguments that returns columns or a sequence, called on first
      use (so that an evaluation alone never builds the training set).

    Every example has the same features, each of one shape (pad sequences to a fixed
    length). Integers and booleans become int32, floats float32.

    Args:
        train: the training examples (None: evaluation only).
        eval: the evaluation examples, or None.
        micro_batch_size: examples per replica per micro-batch (the task's).
        seed: the shuffling seed (``cfg.runtime.seed``).
        distributor: the run's data-parallel backend (what ``datasets`` is given).
        num_train: the number of training examples when ``train`` is ``example(i)``.
        num_eval: the same for ``eval``.
        eval_steps: at most this many evaluation batches (``cfg.runtime.eval_steps``).
        tokenizer_dir: the tokenizer the examples were made with (copied into the run
            directory), or None.

    Example (10 examples of 4 token ids and a label; the trainer asks for step-sized
    batches from any position):
        >>> from itertools import islice
        >>> from albertkit.config import DistributedConfig
        >>> from albertkit.distributed import build_distributor
        >>> rows = [{"input_ids": [i, i, i, i], "labels": i % 2} for i in range(10)]
        >>> data = ExampleData(rows, micro_batch_size=2, seed=0,
        ...                    distributor=build_distributor(DistributedConfig()))
        >>> data.num_train, data.has_eval
        (10, False)
        >>> batches = data.train(skip_micro_batches=0, accum=3)  # [accum, micro_batch, ...]
        >>> first, second = islice(batches, 2)
        >>> tuple(first["input_ids"].shape), first["input_ids"].dtype.name
        ((3, 2, 4), 'int32')
        >>> resumed = next(iter(data.train(skip_micro_batches=3, accum=3)))
        >>> bool((resumed["labels"] == second["labels"]).numpy().all())
        True
    """

    def __init__(self, train: Examples | None, eval: Examples | None = None, *,
                 micro_batch_size: int, seed: int, distributor: Any,
                 num_train: int | None = None, num_eval: int | None = None,
                 eval_steps: int | None = None,
                 tokenizer_dir: str | Path | None = None) -> None:
        if int(micro_batch_size) < 1:
            raise ValueError(f"micro_batch_size={micro_batch_size} must be at least 1")
        self._train_given, self._num_train = train, num_train
        self._train: _Columns | _Function | None = None
        self._eval = _source(eval, num_eval, "eval examples") if eval is not None else None
        self.micro_batch_size = int(micro_batch_size)
        self.seed = int(seed)
        self.distributor = distributor  # a Distributor (data/ sits below distributed/)
        self.eval_steps = eval_steps
        self.tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir is not None else None

    # ------------------------------------------------------------------ the examples
    def _train_source(self) -> _Columns | _Function:
        if self._train is None:
            if self._train_given is None:
                raise ValueError("no training examples (ExampleData(train=None))")
            self._train = _source(self._train_given, self._num_train, "train examples")
        return self._train

    @property
    def num_train(self) -> int:
        """How many training examples there are (builds them if they are built lazily)."""
        return self._train_source().size

    @property
    def train_arrays(self) -> dict[str, np.ndarray]:
        """The training examples as feature columns ``[N, ...]``."""
        return self._train_source().arrays

    @property
    def eval_arrays(self) -> dict[str, np.ndarray] | None:
        """The evaluation examples as feature columns ``[N, ...]``, None without."""
        return self._eval.arrays if self._eval is not None else None

    @property
    def has_eval(self) -> bool:
        """Whether there are evaluation examples."""
        return self._eval is not None and self._eval.size > 0

    # ------------------------------------------------------------------ the pipelines
    def _gather(self, indices: Any, source: _Columns | _Function, rows: int | None) -> Any:
        """``indices`` (a ``[rows]`` int64 dataset element) -> the examples' feature dict."""
        import tensorflow as tf

        names = list(source.spec)

        def rows_of(index: np.ndarray) -> list[np.ndarray]:
            found = source.rows(index)
            return [found[k] for k in names]

        found = tf.numpy_function(rows_of, [indices],
                                  [tf.as_dtype(source.spec[k][1]) for k in names])
        return {k: tf.ensure_shape(v, (rows, *source.spec[k][0]))
                for k, v in zip(names, found, strict=True)}

    def train(self, skip_micro_batches: int = 0, accum: int = 1, stream_version: int = 2):
        """Endless ``[accum, micro_batch, ...]`` batches for this rank, from its micro-batch
        ``skip_micro_batches`` on. Version 2 starts there directly; version 1 is albertkit
        0.1's order (a reshuffling tf.data buffer), kept to resume the checkpoints of 0.1's
        built-in tasks, and skips the consumed micro-batches."""
        import tensorflow as tf

        from albertkit.data.stream import index_stream, no_autograph

        source = self._train_source()
        n, b, d = source.size, self.micro_batch_size, self.distributor
        if n < 1:
            raise DatasetError("no training examples: every feature array is empty")
        if stream_version == 2:
            ds = index_stream(n, seed=self.seed, rank=d.rank, size=d.size, batch_size=b,
                              start_batch=skip_micro_batches)
        elif stream_version == 1:
            ds = tf.data.Dataset.range(n)
            ds = ds.shuffle(n, seed=self.seed, reshuffle_each_iteration=True).repeat()
            ds = d.shard(ds).batch(b, drop_remainder=True)
            if skip_micro_batches:
                ds = ds.skip(skip_micro_batches)
        else:
            raise ValueError(f"stream_version={stream_version} must be 1 or 2")
        ds = ds.map(no_autograph(lambda index: self._gather(index, source, b)),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return accumulation_batches(ds, accum, d)

    def eval(self):
        """This rank's ordered ``[micro_batch, ...]`` evaluation batches (the last one may be
        shorter), at most ``eval_steps``."""
        import tensorflow as tf

        from albertkit.data.stream import no_autograph

        if self._eval is None:
            raise ValueError("no evaluation examples (ExampleData(eval=None))")
        source = self._eval
        ds = self.distributor.shard(tf.data.Dataset.range(source.size))
        ds = ds.batch(self.micro_batch_size)
        ds = ds.map(no_autograph(lambda index: self._gather(index, source, None)))
        if self.eval_steps:
            ds = ds.take(self.eval_steps)
        return ds.prefetch(2)
