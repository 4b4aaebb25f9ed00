"""Position-addressable training streams: the order of every epoch is a pure function of
``(seed, epoch)``, so a stream can start at any element without reading what came before.

Pretraining records (:func:`record_stream`), for one worker:

1. **Files.** With at least as many files as workers, worker ``r`` of ``n`` owns
   ``files[r::n]`` and reads every record of them; otherwise every worker reads all files and
   keeps the records at positions ``r, r + n, ...`` of each epoch (record-level sharding).
2. **Epoch order.** Each epoch reads the worker's files in a permutation seeded by
   ``(seed, epoch)`` (identity without shuffling). The records so read, one after the other,
   are the worker's *epoch sequence*; its length ``E`` is known from the record counts
   (``manifest.json``, else one scan of each file's framing).
3. **Windows.** The epoch sequence is cut into windows of ``shuffle_buffer`` records (the last
   one shorter); each window is permuted by a stateless permutation seeded by
   ``(seed, epoch, window)``. Element ``j`` of the worker's stream is therefore
   ``epoch = j // E``, ``window = (j % E) // W``, ``offset = (j % E) % W``.

Starting at element ``j`` reads the epoch's files from the one holding the window's first
record, skips that file's earlier records (at most one file is read in part), permutes that
one window and drops ``offset`` elements: the cost is bounded by one file plus one window,
whatever ``j`` is. The uninterrupted stream is the same construction started at 0, so a
restored stream equals it element by element.

Windowed permutation mixes records within ``shuffle_buffer`` consecutive records of the
epoch sequence, where tf.data's shuffle buffer mixes a sliding window; both rely on the
writer having shuffled records across shards and within each shard beforehand.

Fine-tuning (:func:`index_stream`): element ``g`` of the global stream is example
``perm_{seed, g // N}(g % N)`` of the ``N`` in-memory examples; worker ``r`` of ``n`` takes
``g = r, r + n, ...``. Any start is one ``range`` away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import tensorflow as tf

# Salts keep the file order, window permutations and fine-tuning order independent draws
# of the same user seed (and distinct from the dynamic-masking seeds, which use the seed itself).
_FILE_SALT = 0x46494C45  # "FILE"
_WINDOW_SALT = 0x57494E44  # "WIND"
_INDEX_SALT = 0x494E4458  # "INDX"
_FOREVER = tf.int64.max
# albertkit's tf.data functions are traced as written, without AutoGraph (no control flow in
# them depends on a tensor's value): converting them cost about 0.7 s of every training
# process's start. Also used by albertkit.data.pretraining_dataset.
no_autograph = tf.autograph.experimental.do_not_convert


def _seed_pair(seed: int, salt: int, *data) -> tf.Tensor:
    """A stateless ``[2]`` int64 seed from the user seed, a salt and integers (epoch, window)."""
    pair = tf.constant([seed, salt], tf.int64)
    for d in data:
        pair = tf.random.experimental.stateless_fold_in(pair, tf.cast(d, tf.int64))
    return pair


def _permuted(index: tf.Tensor, size: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Position ``index`` of a seeded permutation of ``range(size)`` (no array is built)."""
    return tf.random.experimental.index_shuffle(index, seed, tf.cast(size, tf.int64) - 1)


# ----------------------------------------------------------------------------- pretraining
@dataclass(frozen=True)
class RecordLayout:
    """What one worker reads: its files (with record counts), and which epoch positions."""

    files: tuple[str, ...]
    counts: tuple[int, ...]
    stride: int  # keep every `stride`-th record of the epoch sequence ...
    offset: int  # ... starting at this one (record-level sharding); 1 and 0 otherwise

    @staticmethod
    def for_worker(files: Sequence[str], counts: Sequence[int], shard_index: int,
                   num_shards: int) -> RecordLayout:
        if len(files) >= num_shards:
            return RecordLayout(tuple(files[shard_index::num_shards]),
                                tuple(int(c) for c in counts[shard_index::num_shards]), 1, 0)
        return RecordLayout(tuple(files), tuple(int(c) for c in counts), num_shards,
                            shard_index)

    @property
    def epoch_length(self) -> int:
        """Records this worker reads per epoch."""
        total = sum(self.counts)
        return max(0, -(-(total - self.offset) // self.stride))


@dataclass(frozen=True)
class Position:
    """Where element ``element`` of a worker's stream comes from (for logs and docs)."""

    element: int
    epoch: int
    window: int
    offset: int  # within the window
    file: str  # the file holding the window's first record
    record: int  # that record's index in the file


def locate(layout: RecordLayout, element: int, window: int, seed: int,
           shuffle: bool = True) -> Position:
    """The stream position of ``element`` (the arithmetic :func:`record_stream` does)."""
    e_len = layout.epoch_length
    epoch, i = divmod(element, e_len)
    w = window if window > 0 else 1
    win, off = divmod(i, w)
    order = _file_order(layout, epoch, seed, shuffle).numpy().tolist()
    q = layout.offset + layout.stride * win * w  # epoch position of the window's first record
    for k in order:
        if q < layout.counts[k]:
            return Position(element, epoch, win, off, layout.files[k], q)
        q -= layout.counts[k]
    raise AssertionError("position past the end of the epoch")  # excluded by divmod above


def _file_order(layout: RecordLayout, epoch, seed: int, shuffle: bool) -> tf.Tensor:
    n = len(layout.files)
    idx = tf.range(n, dtype=tf.int64)
    if not shuffle or n == 1:
        return idx
    return _permuted(idx, n, _seed_pair(seed, _FILE_SALT, epoch))


def record_stream(layout: RecordLayout, read_file, *, seed: int, window: int,
                  start: int = 0, shuffle: bool = True, repeat: bool = True) -> tf.data.Dataset:
    """Serialized records of one worker's stream from element ``start`` on (module docstring).

    Args:
        layout: this worker's files, counts and record-level sharding.
        read_file: ``(path, expected_count) -> Dataset`` of a file's records (checked).
        seed: the run seed.
        window: records per shuffle window (0 = no record shuffling).
        start: index of the first element to produce.
        shuffle: permute the file order per epoch and the records within windows.
        repeat: all epochs (training) or only the first.
    """
    e_len = layout.epoch_length
    if e_len < 1:
        raise ValueError(f"no records for this worker (offset {layout.offset} of stride "
                         f"{layout.stride} over {sum(layout.counts)} records)")
    window = window if shuffle else 0
    first_epoch, i0 = divmod(int(start), e_len)
    w0 = i0 // window if window else 0
    skip_in_window = i0 - w0 * window if window else 0
    first_record = w0 * window if window else i0  # rank position where reading starts
    paths = tf.constant(layout.files)
    counts = tf.constant(layout.counts, tf.int64)
    stride, offset = layout.stride, layout.offset

    def epoch_records(epoch, begin):
        order = _file_order(layout, epoch, seed, shuffle)
        ordered = tf.gather(counts, order)
        before = tf.cumsum(ordered, exclusive=True)
        q = offset + stride * begin  # epoch position of the first record to read
        skip = tf.maximum(q - before, 0)
        files = tf.data.Dataset.from_tensor_slices((tf.gather(paths, order), ordered, skip))
        files = files.filter(no_autograph(lambda p, c, s: s < c))
        recs = files.flat_map(no_autograph(lambda p, c, s: read_file(p, c).skip(s)))
        return recs.shard(stride, 0) if stride > 1 else recs

    def epoch_elements(epoch, begin, first_window):
        recs = epoch_records(epoch, begin)
        if not window:
            return recs

        @no_autograph
        def permute(w, batch):
            n = tf.shape(batch, out_type=tf.int64)[0]
            idx = _permuted(tf.range(n), n, _seed_pair(seed, _WINDOW_SALT, epoch, w))
            return tf.gather(batch, idx)

        wins = recs.batch(window).enumerate(start=first_window).map(permute)
        # read the next window while this one is consumed
        return wins.prefetch(1).unbatch()

    first = tf.data.Dataset.from_tensors(
        (tf.constant(first_epoch, tf.int64), tf.constant(first_record, tf.int64),
         tf.constant(w0, tf.int64)))
    if repeat:
        rest = tf.data.Dataset.range(first_epoch + 1, _FOREVER).map(
            no_autograph(lambda e: (e, tf.constant(0, tf.int64), tf.constant(0, tf.int64))))
        epochs = first.concatenate(rest)
    elif first_epoch == 0:
        epochs = first
    else:
        epochs = first.take(0)
    ds = epochs.flat_map(no_autograph(epoch_elements))
    return ds.skip(skip_in_window) if skip_in_window else ds


# ----------------------------------------------------------------------------- fine-tuning
def index_stream(num_examples: int, *, seed: int, rank: int, size: int, batch_size: int,
                 start_batch: int = 0) -> tf.data.Dataset:
    """Endless ``[batch_size]`` int64 example indices for worker ``rank`` of ``size``,
    from its micro-batch ``start_batch`` on (module docstring)."""
    n = int(num_examples)
    first = (int(start_batch) * batch_size) * size + rank  # global element index

    @no_autograph
    def lookup(g):
        return _permuted(g % n, n, _seed_pair(seed, _INDEX_SALT, g // n))

    ds = tf.data.Dataset.range(first, _FOREVER, size)
    ds = ds.map(lookup, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.batch(batch_size, drop_remainder=True)


__all__ = ["Position", "RecordLayout", "index_stream", "locate", "record_stream"]
