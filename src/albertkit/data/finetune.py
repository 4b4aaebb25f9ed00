"""Fine-tuning data shared by SQuAD and classification: the Hugging Face tokenizer, and
tf.data pipelines over in-memory features (SQuAD windows, GLUE sentences).

Fine-tuning sets are small (SQuAD v2.0 train: ~130k windows x 384 int32 x 3 = 0.6 GB at
most), so the features live in NumPy arrays and ``tf.data`` slices them. The trainer calls
``train(skip_micro_batches, accum)`` for ``[accum, micro_batch, ...]`` batches, ``eval()``
for ``[micro_batch, ...]`` batches, and reads ``has_eval`` and ``tokenizer_dir``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.data.batching import accumulation_batches


# --------------------------------------------------------------------------- tokenizer
def load_hf_tokenizer(path: str | Path, do_lower_case: bool | None = None):
    """The Hugging Face ``AlbertTokenizer`` in directory ``path`` (fast, with char offsets).

    Fine-tuning needs character offsets, which the ``tokenizers`` backend of transformers v5
    gives and SentencePiece's own API does not give for normalised text; so this loads the
    directory's ``tokenizer.json`` (written by :func:`albertkit.data.tokenizer.train_tokenizer`
    and by every Hub ALBERT checkpoint). ``do_lower_case=None`` keeps the directory's setting.
    """
    from transformers import AlbertTokenizer

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"tokenizer directory not found: {path}")
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"{path}: no tokenizer.json (fine-tuning needs the fast tokenizer's character "
            "offsets; write it with albertkit.data.tokenizer.export_hf_directory)"
        )
    kwargs = {} if do_lower_case is None else {"do_lower_case": do_lower_case}
    try:
        return AlbertTokenizer.from_pretrained(str(path), **kwargs)
    except Exception as e:  # transformers raises many kinds; name the directory
        raise ValueError(f"{path}: cannot load an ALBERT tokenizer: {e}") from e


def load_task_tokenizer(data, vocab_size: int):
    """``load_hf_tokenizer(data.tokenizer, data.do_lower_case)``, refused if it has more tokens
    than the model's ``vocab_size`` (ids past the embedding table would be garbage)."""
    tokenizer = load_hf_tokenizer(data.tokenizer, data.do_lower_case)
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"data.tokenizer={data.tokenizer} has {len(tokenizer)} tokens but "
            f"model.vocab_size={vocab_size}"
        )
    return tokenizer


# --------------------------------------------------------------------------- pipelines
class FinetuneDatasets:
    """Train / eval pipelines over feature arrays, sharded by the distributor.

    Order: epoch ``e`` is a permutation of the example *indices* seeded by ``(seed, e)``
    (identical on every rank); the epochs follow each other; rank ``r`` takes elements
    ``r, r + size, ...`` -> micro-batch -> gather the rows -> group ``accum`` micro-batches.
    Where micro-batch ``k`` of a rank starts is arithmetic, so resuming after ``step * accum``
    micro-batches starts there without reading anything before. Shuffling indices instead of
    rows keeps a single copy of the features (a row shuffle buffer would hold a second one).

    Args:
        train: feature name -> array ``[N, ...]`` (all the same ``N``), or a function that
            builds them on first use (so evaluation alone never converts the training set).
        eval: the same for evaluation, or None.
        micro_batch_size: examples per replica per micro-batch.
        seed: shuffling seed.
        distributor: the data-parallel backend (``shard``, ``distribute_dataset``).
        eval_steps: at most this many eval batches from ``eval()`` (None = all).
        tokenizer_dir: the tokenizer the features were made with (copied into the run).

    Example:
        >>> from albertkit.config import DistributedConfig
        >>> from albertkit.distributed import build_distributor
        >>> ids = np.arange(40, dtype=np.int32).reshape(10, 4)  # 10 examples of 4 tokens
        >>> y = np.arange(10, dtype=np.int32) % 2
        >>> data = FinetuneDatasets({"input_ids": ids, "labels": y}, None, 4, 0,
        ...                         build_distributor(DistributedConfig()))
        >>> data.num_train, data.has_eval
        (10, False)
        >>> batch = next(iter(data.train(skip_micro_batches=0, accum=2)))
        >>> {name: tuple(t.shape) for name, t in batch.items()}  # [accum, micro_batch, ...]
        {'input_ids': (2, 4, 4), 'labels': (2, 4)}
    """

    def __init__(
        self,
        train: Mapping[str, np.ndarray] | Callable[[], Mapping[str, np.ndarray]],
        eval: Mapping[str, np.ndarray] | None,
        micro_batch_size: int,
        seed: int,
        distributor: Any,  # a Distributor (data/ sits below distributed/)
        eval_steps: int | None = None,
        tokenizer_dir: str | Path | None = None,
    ) -> None:
        self._train_source = train
        self._train_arrays: dict[str, np.ndarray] | None = None
        self.eval_arrays = _checked(eval, "evaluation") if eval is not None else None
        self.micro_batch_size = micro_batch_size
        self.seed = seed
        self.distributor = distributor
        self.eval_steps = eval_steps
        self.tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir is not None else None

    @property
    def train_arrays(self) -> dict[str, np.ndarray]:
        if self._train_arrays is None:
            source = self._train_source
            self._train_arrays = _checked(source() if callable(source) else source, "training")
        return self._train_arrays

    @property
    def has_eval(self) -> bool:
        return self.eval_arrays is not None and len(next(iter(self.eval_arrays.values()))) > 0

    @property
    def num_train(self) -> int:
        return len(next(iter(self.train_arrays.values())))

    def train(self, skip_micro_batches: int = 0, accum: int = 1, stream_version: int = 2):
        """Endless ``[accum, micro_batch, ...]`` batches for this rank, from its micro-batch
        ``skip_micro_batches`` on. Version 2 starts there directly (the order of every epoch
        is a seeded permutation, see :func:`albertkit.data.stream.index_stream`); version 1
        is albertkit 0.1's order (a reshuffling tf.data buffer), kept to resume its
        checkpoints, and skips the consumed micro-batches."""
        import tensorflow as tf

        arrays = self.train_arrays
        names = list(arrays)
        n = self.num_train
        if stream_version == 2:
            from albertkit.data.stream import index_stream

            ds = index_stream(n, seed=self.seed, rank=self.distributor.rank,
                              size=self.distributor.size, batch_size=self.micro_batch_size,
                              start_batch=skip_micro_batches)
        elif stream_version == 1:
            ds = tf.data.Dataset.range(n)
            ds = ds.shuffle(n, seed=self.seed, reshuffle_each_iteration=True).repeat()
            ds = self.distributor.shard(ds)
            ds = ds.batch(self.micro_batch_size, drop_remainder=True)
            if skip_micro_batches:
                ds = ds.skip(skip_micro_batches)
        else:
            raise ValueError(f"stream_version={stream_version} must be 1 or 2")

        def gather(index):
            return [arrays[k][index] for k in names]

        @tf.autograph.experimental.do_not_convert  # traced as written
        def lookup(index):
            rows = tf.numpy_function(gather, [index], [tf.as_dtype(arrays[k].dtype) for k in names])
            return {
                k: tf.ensure_shape(r, (self.micro_batch_size, *arrays[k].shape[1:]))
                for k, r in zip(names, rows, strict=True)
            }

        ds = ds.map(lookup, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return accumulation_batches(ds, accum, self.distributor)

    def eval(self):
        """Ordered ``[micro_batch, ...]`` eval batches (this rank's share), at most eval_steps."""
        import tensorflow as tf

        if self.eval_arrays is None:
            raise ValueError("no evaluation data configured (data.eval_file)")
        ds = tf.data.Dataset.from_tensor_slices(self.eval_arrays)
        ds = self.distributor.shard(ds).batch(self.micro_batch_size)
        if self.eval_steps:
            ds = ds.take(self.eval_steps)
        return ds.prefetch(2)


def padded_batches(
    arrays: Mapping[str, np.ndarray], batch_size: int
) -> list[tuple[dict[str, np.ndarray], int]]:
    """Ordered full-size batches (the last one zero-padded) and the count of real rows.

    Padding keeps every batch the same shape, so a compiled predict function is traced once.
    """
    n = len(next(iter(arrays.values())))
    out = []
    for i in range(0, n, batch_size):
        rows = min(batch_size, n - i)
        batch = {}
        for k, v in arrays.items():
            part = v[i : i + rows]
            if rows < batch_size:
                pad = np.zeros((batch_size - rows, *v.shape[1:]), v.dtype)
                part = np.concatenate([part, pad])
            batch[k] = part
        out.append((batch, rows))
    return out


def _checked(arrays: Mapping[str, np.ndarray], what: str) -> dict[str, np.ndarray]:
    n = {k: len(v) for k, v in arrays.items()}
    if not n or len(set(n.values())) != 1:
        raise ValueError(f"{what} feature arrays differ in length: {n}")
    if what == "training" and not next(iter(n.values())):
        raise ValueError("no training features")
    return dict(arrays)
