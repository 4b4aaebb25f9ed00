"""tf.data pipelines for pretraining: TFRecord reader (static or dynamic masking) and a
synthetic source with the same structure.

Batches are dicts of ``[batch, ...]`` tensors with Google's ALBERT feature names:
``input_ids``, ``input_mask``, ``segment_ids`` ([B, seq_length] int32),
``masked_lm_positions``, ``masked_lm_ids`` ([B, max_predictions_per_seq] int32),
``masked_lm_weights`` ([B, max_predictions_per_seq] float32) and ``next_sentence_labels``
([B] int32, 1 = segments swapped).

Order and randomness: training streams are addressable by position
(:mod:`albertkit.data.stream`): per epoch a file order seeded by ``(seed, epoch)``, records
permuted within windows of ``shuffle_buffer`` by seeds from ``(seed, epoch, window)``, and
dynamic masks drawn with stateless ops keyed by ``(seed, batch index)``. So every epoch sees
fresh masks, and ``start_batch=k`` produces exactly what the stream from 0 produces from batch
``k`` on, after reading at most one file and one window (not the ``k`` batches before).

Per-worker sharding: with at least as many files as workers (and ``training=True``) each
worker reads ``files[shard_index::num_shards]``; otherwise every worker reads all files and
keeps records ``shard_index, shard_index + num_shards, ...``. Either way the workers' data are
disjoint and together cover everything.

Corrupt shards: when the expected record count of a file is known (``manifest.json`` next to
it, else a quick scan of its record framing), a file whose records fail their CRC or that
ends early raises ``InvalidArgumentError`` naming the file.

Example (a shard of 8 statically masked examples, written here; real shards come from
:func:`albertkit.data.writer.prepare_pretraining_data`):
    >>> import numpy as np
    >>> import tensorflow as tf
    >>> n, L, P = 8, 16, 3
    >>> ids = np.random.default_rng(0).integers(5, 100, (n, L))
    >>> def example(i):  # one record: int64 lists, and masked_lm_weights as floats
    ...     ints = {"input_ids": ids[i], "input_mask": [1] * L, "segment_ids": [0] * L,
    ...             "masked_lm_positions": [1, 2, 3], "masked_lm_ids": ids[i, 1:4],
    ...             "next_sentence_labels": [0]}
    ...     feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    ...                for k, v in ints.items()}
    ...     feature["masked_lm_weights"] = tf.train.Feature(
    ...         float_list=tf.train.FloatList(value=[1.0] * P))
    ...     return tf.train.Example(features=tf.train.Features(feature=feature))
    >>> with tf.io.TFRecordWriter("train-00000-of-00001.tfrecord") as shard:
    ...     for i in range(n):
    ...         shard.write(example(i).SerializeToString())
    >>> ds = build_pretraining_dataset(["train-*.tfrecord"], seq_length=L,
    ...                                max_predictions_per_seq=P, batch_size=4)
    >>> batch = next(iter(ds))
    >>> for name, t in sorted(batch.items()):
    ...     print(f"{name:21} {t.dtype.name:8} {t.shape.as_list()}")
    input_ids             int32    [4, 16]
    input_mask            int32    [4, 16]
    masked_lm_ids         int32    [4, 3]
    masked_lm_positions   int32    [4, 3]
    masked_lm_weights     float32  [4, 3]
    next_sentence_labels  int32    [4]
    segment_ids           int32    [4, 16]
"""

from __future__ import annotations

import glob
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf
from pydantic import ValidationError

from albertkit.config import MaskingConfig
from albertkit.data.manifest import MANIFEST, read_manifest
from albertkit.data.masking import SPECIAL_NAMES, VocabInfo, ngram_cdf
from albertkit.data.stream import RecordLayout, locate, no_autograph, record_stream
from albertkit.data.tfrecord import count_records
from albertkit.errors import DatasetError, RecordError

log = logging.getLogger("albertkit")

ALBERT_SPECIAL_IDS = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
_AUTOTUNE = tf.data.AUTOTUNE


# ------------------------------------------------------------------ dynamic masking (TF)
def mask_batch(
    input_ids: tf.Tensor,
    input_mask: tf.Tensor,
    token_boundary: tf.Tensor,
    seed: tf.Tensor,
    *,
    info: VocabInfo,
    rules: MaskingConfig,
    max_predictions: int,
) -> dict[str, tf.Tensor]:
    """N-gram whole-word masking of a batch, in TF ops; the same procedure as
    :func:`albertkit.data.masking.mask_sequence` (see that module for the rules).

    Args:
        input_ids, input_mask, token_boundary: [B, L] int tensors (unmasked ids).
        seed: int64 [2] stateless seed; the same seed gives the same masks.
    """
    ids = tf.cast(input_ids, tf.int32)
    shape = tf.shape(ids)
    b, seq = shape[0], shape[1]
    s_span, s_order, s_kind, s_rand = tf.unstack(tf.random.experimental.stateless_split(seed, 4))
    specials = tf.constant(info.sorted_special, tf.int32)
    is_special = tf.reduce_any(tf.equal(ids[..., None], specials), axis=-1)
    cand = tf.logical_and(input_mask > 0, tf.logical_not(is_special))
    prev = tf.pad(cand[:, :-1], [[0, 0], [1, 0]])
    starts = tf.logical_and(cand, tf.logical_or(token_boundary > 0, tf.logical_not(prev)))
    n_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    word_of = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # word index per position
    word_safe = tf.maximum(word_of, 0)
    rows = tf.range(b)[:, None] * seq
    seg = tf.where(cand, word_safe + rows, b * seq)  # non-candidates go to a dump segment
    word_tokens = tf.math.unsorted_segment_sum(
        tf.ones([b * seq], tf.int32), tf.reshape(seg, [-1]), b * seq + 1
    )[:-1]
    word_tokens = tf.reshape(word_tokens, [b, seq])
    word_cum = tf.pad(tf.cumsum(word_tokens, axis=1), [[0, 0], [1, 0]])  # [B, L+1]

    # 1. spans of 1..max_ngram words, P(n) ∝ 1/n
    cdf = tf.constant(ngram_cdf(rules.max_ngram)[:-1], tf.float32)
    u = tf.random.stateless_uniform([b, seq], s_span)
    span_len = 1 + tf.reduce_sum(tf.cast(u[..., None] >= cdf, tf.int32), axis=-1)
    span_start = tf.cumsum(span_len, axis=1, exclusive=True)
    valid = span_start < n_words[:, None]
    span_end = tf.minimum(span_start + span_len, n_words[:, None])
    start_c = tf.minimum(span_start, seq)
    end_c = tf.maximum(span_end, start_c)
    start_cum = tf.gather(word_cum, start_c, batch_dims=1)
    big = seq + 1
    span_tokens = tf.where(valid, tf.gather(word_cum, end_c, batch_dims=1) - start_cum, big)
    span_words = tf.where(valid, end_c - start_c, 0)

    # 2. random order, longest prefix within the budget
    n_real = tf.reduce_sum(tf.cast(input_mask > 0, tf.float32), axis=1)
    budget = tf.cast(tf.round(n_real * rules.masked_lm_prob), tf.int32)  # half to even
    budget = tf.minimum(max_predictions, tf.maximum(1, budget))[:, None]
    keys = tf.where(valid, tf.random.stateless_uniform([b, seq], s_order), 2.0)
    order = tf.argsort(keys, axis=1, stable=True)
    inverse = tf.argsort(order, axis=1, stable=True)
    cum = tf.cumsum(tf.gather(span_tokens, order, batch_dims=1), axis=1)
    full_o = cum <= budget
    words_o = tf.gather(span_words, order, batch_dims=1)
    taken_o = tf.where(full_o, words_o, 0)
    left = budget - tf.reduce_max(tf.where(full_o, cum, 0), axis=1, keepdims=True)
    # 3. shorter n-grams: first m words of the spans not taken, m = max_ngram-1 .. 1
    for m in range(rules.max_ngram - 1, 0, -1):
        tok_m = tf.gather(word_cum, tf.minimum(start_c + m, end_c), batch_dims=1) - start_cum
        tok_m_o = tf.gather(tf.where(valid, tok_m, big), order, batch_dims=1)
        eligible = tf.logical_and(tf.equal(taken_o, 0), tok_m_o <= left)
        cum_m = tf.cumsum(tf.where(eligible, tok_m_o, 0), axis=1)
        pick = tf.logical_and(eligible, cum_m <= left)
        taken_o = tf.where(pick, tf.minimum(m, words_o), taken_o)
        left = left - tf.reduce_sum(tf.where(pick, tok_m_o, 0), axis=1, keepdims=True)
    taken = tf.gather(taken_o, inverse, batch_dims=1)

    positions_l = tf.broadcast_to(tf.range(seq)[None, :], [b, seq])
    span_of_word = tf.searchsorted(span_start, positions_l, side="right") - 1
    span_of_word = tf.clip_by_value(span_of_word, 0, seq - 1)
    offset = positions_l - tf.gather(span_start, span_of_word, batch_dims=1)
    word_chosen = offset < tf.gather(taken, span_of_word, batch_dims=1)
    chosen = tf.logical_and(cand, tf.gather(word_chosen, word_safe, batch_dims=1))

    # 80 / 10 / 10 per token
    u2 = tf.random.stateless_uniform([b, seq], s_kind)
    to_mask = tf.logical_and(chosen, u2 < rules.mask_token_prob)
    to_rand = tf.logical_and(
        tf.logical_and(chosen, tf.logical_not(to_mask)),
        u2 < rules.mask_token_prob + rules.random_token_prob,
    )
    n_special = len(info.sorted_special)
    r = tf.random.stateless_uniform(
        [b, seq], s_rand, minval=0, maxval=info.vocab_size - n_special, dtype=tf.int32
    )
    for s in info.sorted_special:  # ascending: skip over each special id
        r = r + tf.cast(r >= s, tf.int32)
    new_ids = tf.where(to_mask, info.mask_id, tf.where(to_rand, r, ids))

    sort_keys = tf.where(chosen, positions_l, positions_l + seq)
    picked = tf.sort(sort_keys, axis=1)[:, :max_predictions]
    ok = picked < seq
    positions = tf.where(ok, picked, 0)
    labels = tf.where(ok, tf.gather(ids, positions, batch_dims=1), 0)
    return {
        "input_ids": new_ids,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": tf.cast(ok, tf.float32),
    }


# ------------------------------------------------------------------ manifest lookup
def expand_files(files: Sequence[str]) -> list[str]:
    """Files and globs (sorted matches) in the given order; errors name what is missing."""
    out: list[str] = []
    for f in files:
        f = str(f)
        if glob.has_magic(f):
            matches = sorted(glob.glob(f))
            if not matches:
                raise DatasetError(f"pattern {f!r} matched no files")
            out.extend(matches)
        else:
            if not tf.io.gfile.exists(f):
                raise DatasetError(f"pretraining file {f!r} does not exist")
            out.append(f)
    if not out:
        raise DatasetError("build_pretraining_dataset needs at least one file")
    return out


def read_manifests(files: Sequence[str]) -> tuple[dict[str, Any] | None, dict[str, dict]]:
    """The manifest shared by ``files`` (None if there is none) and each file's shard entry."""
    manifests: dict[str, dict] = {}
    entries: dict[str, dict] = {}
    for f in files:
        parent = str(Path(f).parent)
        if parent not in manifests:
            path = Path(parent) / MANIFEST
            manifests[parent] = read_manifest(path, DatasetError) if path.is_file() else {}
        m = manifests[parent]
        for s in m.get("shards", []):
            if s["file"] == Path(f).name:
                entries[f] = s
    found = [m for m in manifests.values() if m]
    if not found:
        return None, entries
    keys = ("masking", "seq_length", "max_predictions_per_seq")
    first = found[0]
    for m in found[1:]:
        for k in keys:
            if m.get(k) != first.get(k):
                raise DatasetError(
                    f"files come from manifests that disagree on {k}: "
                    f"{first.get(k)!r} vs {m.get(k)!r}"
                )
        if m["tokenizer"]["sha256"] != first["tokenizer"]["sha256"]:
            raise DatasetError("files were prepared with different tokenizers")
    return first, entries


def _read_file_checked(path: tf.Tensor, expected: tf.Tensor) -> tf.data.Dataset:
    """Records of one file; fails naming the file if fewer than ``expected`` are readable."""
    records = tf.data.TFRecordDataset(path, buffer_size=1 << 20).ignore_errors()
    end = tf.data.Dataset.from_tensors(tf.constant(b""))  # our records are never empty

    def step(count, rec):
        is_end = tf.equal(tf.strings.length(rec), 0)
        ok = tf.logical_or(tf.logical_not(is_end), tf.equal(count, expected))
        check = tf.debugging.Assert(
            ok,
            [
                "corrupt or truncated TFRecord shard",
                path,
                "records read:",
                count,
                "expected:",
                expected,
            ],
            summarize=1,
        )
        with tf.control_dependencies([check]):
            return count + 1, (rec, is_end)

    return (
        records.concatenate(end)
        .scan(tf.constant(0, tf.int64), no_autograph(step))
        .filter(no_autograph(lambda rec, is_end: tf.logical_not(is_end)))
        .map(no_autograph(lambda rec, is_end: rec))
    )


def _resolve(
    files,
    manifest,
    masking,
    seq_length,
    max_predictions_per_seq,
    masking_rules,
    vocab_size,
    special_ids,
) -> tuple[MaskingConfig, VocabInfo | None]:
    if manifest is not None:
        if manifest.get("masking") != masking:
            raise DatasetError(
                f"masking={masking!r} but {files[0]} holds {manifest.get('masking')!r}-masking "
                "data (see its manifest.json)"
            )
        if manifest.get("seq_length") != seq_length:
            raise DatasetError(
                f"seq_length={seq_length} but the files were prepared with seq_length="
                f"{manifest.get('seq_length')} (manifest.json next to {files[0]})"
            )
        if (
            masking == "static"
            and manifest.get("max_predictions_per_seq") != max_predictions_per_seq
        ):
            raise DatasetError(
                f"max_predictions_per_seq={max_predictions_per_seq} but the files were prepared "
                f"with {manifest.get('max_predictions_per_seq')}; use dynamic masking to change it"
            )
        tok = manifest["tokenizer"]
        if vocab_size is not None and vocab_size != tok["vocab_size"]:
            raise DatasetError(
                f"vocab_size={vocab_size} but the files' tokenizer has {tok['vocab_size']}"
            )
        if special_ids is not None and dict(special_ids) != tok["special_ids"]:
            raise DatasetError(
                f"special_ids={special_ids} but the files' tokenizer has {tok['special_ids']}"
            )
        vocab_size, special_ids = tok["vocab_size"], tok["special_ids"]
        if masking_rules is None:
            try:
                masking_rules = MaskingConfig.model_validate(manifest["masking_rules"])
            except ValidationError as e:
                where = Path(files[0]).parent / MANIFEST
                raise DatasetError(f"{where}: masking_rules: {e.errors()[0]['msg']}") from None
    rules = masking_rules or MaskingConfig()
    if masking != "dynamic":
        return rules, None
    if vocab_size is None:
        raise DatasetError("dynamic masking needs vocab_size (no manifest.json next to the files)")
    return rules, VocabInfo(int(vocab_size), dict(special_ids or ALBERT_SPECIAL_IDS))


# ------------------------------------------------------------------ the reader
def build_pretraining_dataset(
    files: list[str],
    *,
    seq_length: int,
    max_predictions_per_seq: int,
    batch_size: int,
    masking: str = "static",
    masking_rules: MaskingConfig | None = None,
    vocab_size: int | None = None,
    special_ids: dict | None = None,
    shuffle_buffer: int = 10000,
    seed: int = 0,
    deterministic: bool = True,
    shard_index: int = 0,
    num_shards: int = 1,
    repeat: bool = True,
    training: bool = True,
    start_batch: int = 0,
    stream_version: int = 2,
) -> tf.data.Dataset:
    """Batches of pretraining examples from TFRecord shards (see the module docstring).

    Args:
        files: shard files or globs (order kept; shuffled per epoch when training).
        seq_length: tokens per example (a feature shape).
        max_predictions_per_seq: masked positions per example (a feature shape).
        batch_size: examples per batch (``drop_remainder=True``).
        masking: ``"static"`` (masks in the files) or ``"dynamic"`` (masked here).
        masking_rules: dynamic masking rules; default: the manifest's, else ALBERT's.
        vocab_size: for dynamic masking without a manifest (else read from it).
        special_ids: the special tokens' ids, likewise.
        shuffle_buffer: examples in the shuffle buffer (training only; 0 = none).
        seed: seeds file order, shuffling and dynamic masks.
        deterministic: fixed order (required for exact resume) vs. a little more speed.
        shard_index: this worker's index among ``num_shards`` (the shares are disjoint
            and cover the data).
        num_shards: the number of workers sharing the files.
        repeat: repeat forever (training) or stop after one pass (evaluation).
        training: shuffle files and records; ``False`` keeps the files' order.
        start_batch: index of the first batch to produce: the resume position, in batches of
            this worker's stream. Version 2 computes where that batch comes from and reads
            at most one file and one shuffle window to get there; version 1 reads and drops
            every earlier batch.
        stream_version: 2 = the position-addressable training stream of
            :mod:`albertkit.data.stream`; 1 = the stream of albertkit 0.1 (tf.data shuffle
            buffers, interleaved files), kept to resume checkpoints written by 0.1.
            Evaluation (``training=False``) reads the same way in both.
    """
    if masking not in ("static", "dynamic"):
        raise DatasetError(f"masking={masking!r} must be 'static' or 'dynamic'")
    if not 0 <= shard_index < num_shards:
        raise DatasetError(f"shard_index={shard_index} must be in [0, num_shards={num_shards})")
    if max_predictions_per_seq > seq_length:
        raise DatasetError(
            f"max_predictions_per_seq={max_predictions_per_seq} exceeds seq_length={seq_length}"
        )
    files = expand_files(files)
    manifest, entries = read_manifests(files)
    rules, info = _resolve(
        files,
        manifest,
        masking,
        seq_length,
        max_predictions_per_seq,
        masking_rules,
        vocab_size,
        special_ids,
    )
    expected = []
    for f in files:
        entry = entries.get(f)
        if entry is not None:
            size = Path(f).stat().st_size
            if size != entry["bytes"]:
                raise DatasetError(
                    f"corrupt shard {f}: {size} bytes, manifest says {entry['bytes']}"
                )
            expected.append(int(entry["examples"]))
        else:
            try:
                expected.append(count_records(f))
            except RecordError as e:
                raise DatasetError(f"corrupt shard: {e}") from None

    if stream_version not in (1, 2):
        raise DatasetError(f"stream_version={stream_version} must be 1 or 2")
    if start_batch < 0:
        raise DatasetError(f"start_batch={start_batch} must be >= 0")
    addressable = training and stream_version == 2
    if addressable:
        layout = RecordLayout.for_worker(files, expected, shard_index, num_shards)
        if layout.epoch_length < 1:
            raise DatasetError(
                f"{len(files)} file(s) with {sum(expected)} records give worker {shard_index} "
                f"of {num_shards} no records")
        ds = record_stream(layout, _read_file_checked, seed=seed, window=shuffle_buffer,
                           start=start_batch * batch_size, repeat=repeat)
        if start_batch:
            at = locate(layout, start_batch * batch_size, shuffle_buffer, seed)
            log.info("worker %d data stream starts at batch %d: epoch %d, shuffle window %d "
                     "+ %d, reading from %s record %d", shard_index, start_batch, at.epoch,
                     at.window, at.offset, Path(at.file).name, at.record)
    else:
        ds = _v1_records(files, expected, training, shuffle_buffer, seed, deterministic,
                         shard_index, num_shards, repeat)
    ds = ds.batch(batch_size, drop_remainder=True)
    L, P = seq_length, max_predictions_per_seq
    if masking == "static":
        spec = {
            "input_ids": tf.io.FixedLenFeature([L], tf.int64),
            "input_mask": tf.io.FixedLenFeature([L], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([L], tf.int64),
            "masked_lm_positions": tf.io.FixedLenFeature([P], tf.int64),
            "masked_lm_ids": tf.io.FixedLenFeature([P], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([P], tf.float32),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
        }

        @no_autograph
        def parse(serialized):
            ex = tf.io.parse_example(serialized, spec)
            out = {k: tf.cast(v, tf.int32) for k, v in ex.items() if k != "masked_lm_weights"}
            out["next_sentence_labels"] = out["next_sentence_labels"][:, 0]
            out["masked_lm_weights"] = ex["masked_lm_weights"]
            return out

        ds = ds.map(parse, num_parallel_calls=_AUTOTUNE, deterministic=deterministic)
    else:
        spec = {
            "input_ids": tf.io.FixedLenFeature([L], tf.int64),
            "input_mask": tf.io.FixedLenFeature([L], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([L], tf.int64),
            "token_boundary": tf.io.FixedLenFeature([L], tf.int64),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
        }
        assert info is not None

        @no_autograph
        def parse_and_mask(index, serialized):
            ex = {k: tf.cast(v, tf.int32) for k, v in tf.io.parse_example(serialized, spec).items()}
            ex["next_sentence_labels"] = ex["next_sentence_labels"][:, 0]
            return _mask_pairs(ex, tf.stack([tf.cast(seed, tf.int64), index]), info, rules, P)

        # masks are keyed by the batch's index in this worker's stream, so a stream started
        # at `start_batch` draws the masks the uninterrupted stream drew there
        ds = ds.enumerate(start=start_batch if addressable else 0).map(
            parse_and_mask, num_parallel_calls=_AUTOTUNE, deterministic=deterministic
        )
    if start_batch and not addressable:
        ds = ds.skip(start_batch)  # version 1: re-read and drop the consumed batches
    options = tf.data.Options()
    options.deterministic = deterministic
    return ds.prefetch(_AUTOTUNE).with_options(options)


def _v1_records(files, expected, training, shuffle_buffer, seed, deterministic, shard_index,
                num_shards, repeat) -> tf.data.Dataset:
    """Records as albertkit 0.1 read them: tf.data file shuffle, 16-way interleave, a sliding
    shuffle buffer. Evaluation still reads this way (one pass, files interleaved, no shuffle);
    training reads it only to resume a 0.1 checkpoint, whose position means "batches of this
    stream"."""
    by_file = training and len(files) >= num_shards
    if by_file and num_shards > 1:
        files, expected = files[shard_index::num_shards], expected[shard_index::num_shards]
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(files), tf.constant(expected, tf.int64)))
    if training and len(files) > 1:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    ds = ds.interleave(
        no_autograph(_read_file_checked),
        cycle_length=min(len(files), 16),
        block_length=1,
        num_parallel_calls=_AUTOTUNE,
        deterministic=deterministic,
    )
    if not by_file and num_shards > 1:
        ds = ds.shard(num_shards, shard_index)
    if training and shuffle_buffer > 0:
        ds = ds.shuffle(shuffle_buffer, seed=seed + 1, reshuffle_each_iteration=True)
    return ds


def _mask_pairs(ex, seed_pair, info, rules, max_predictions):
    """Mask a batch of unmasked pairs (dynamic masking) into the pretraining features."""
    masked = mask_batch(
        ex["input_ids"],
        ex["input_mask"],
        ex["token_boundary"],
        seed_pair,
        info=info,
        rules=rules,
        max_predictions=max_predictions,
    )
    return {
        "input_ids": masked["input_ids"],
        "input_mask": ex["input_mask"],
        "segment_ids": ex["segment_ids"],
        "masked_lm_positions": masked["masked_lm_positions"],
        "masked_lm_ids": masked["masked_lm_ids"],
        "masked_lm_weights": masked["masked_lm_weights"],
        "next_sentence_labels": ex["next_sentence_labels"],
    }


# ------------------------------------------------------------------ synthetic source
def build_synthetic_dataset(
    *,
    vocab_size: int,
    seq_length: int,
    max_predictions_per_seq: int,
    batch_size: int,
    num_examples: int,
    seed: int,
    repeat: bool = True,
    shard_index: int = 0,
    num_shards: int = 1,
    start_batch: int = 0,
) -> tf.data.Dataset:
    """Random but valid pretraining batches (same structure as the reader's), for smoke
    tests and benchmarks: ``[CLS] A [SEP] B [SEP]`` of random ordinary tokens and random
    lengths, ALBERT special ids 0..4, random SOP labels, masked by :func:`mask_batch`.
    ``num_examples`` examples (rounded down to whole batches) form one epoch.

    Sharding is by batch: worker ``shard_index`` gets batches ``shard_index,
    shard_index + num_shards, ...`` of the single-worker stream (the same contents and
    masks), so N workers with k micro-batches each see what one worker sees with N*k. A
    finite (``repeat=False``) stream is cut to a multiple of ``num_shards`` batches so that
    every worker runs the same number of evaluation steps (collectives must match).

    ``start_batch`` (endless streams only) starts at this worker's batch ``start_batch``: batch
    contents and masks are functions of the position, so nothing earlier is generated."""
    if vocab_size <= len(ALBERT_SPECIAL_IDS) + 1:
        raise DatasetError(f"vocab_size={vocab_size} is too small for a synthetic vocabulary")
    if max_predictions_per_seq > seq_length:
        raise DatasetError(
            f"max_predictions_per_seq={max_predictions_per_seq} exceeds seq_length={seq_length}"
        )
    num_batches = num_examples // batch_size
    if num_batches < 1:
        raise DatasetError(f"num_examples={num_examples} is less than one batch of {batch_size}")
    if not 0 <= shard_index < num_shards:
        raise DatasetError(f"shard_index={shard_index} must be in [0, num_shards={num_shards})")
    if start_batch and not repeat:
        raise DatasetError("start_batch needs an endless (repeat=True) synthetic stream")
    if not repeat:
        num_batches -= num_batches % num_shards
        if num_batches < 1:
            raise DatasetError(
                f"num_examples={num_examples} gives fewer batches of {batch_size} "
                f"than num_shards={num_shards}"
            )
    info = VocabInfo(vocab_size, dict(ALBERT_SPECIAL_IDS))
    rules = MaskingConfig()
    L, B = seq_length, batch_size
    n_sp = len(ALBERT_SPECIAL_IDS)

    def make(index):
        s = tf.random.experimental.stateless_split(tf.stack([tf.cast(seed, tf.int64), index]), 4)
        lengths = tf.random.stateless_uniform(
            [B], s[0], minval=L // 2, maxval=L + 1, dtype=tf.int32
        )
        frac = tf.random.stateless_uniform([B], s[1])
        len_a = 1 + tf.cast(frac * tf.cast(lengths - 4, tf.float32), tf.int32)  # 1..len-4
        ids = tf.random.stateless_uniform(
            [B, L], s[2], minval=n_sp, maxval=vocab_size, dtype=tf.int32
        )
        pos = tf.range(L)[None, :]
        sep_a = len_a[:, None] + 1
        last = lengths[:, None] - 1
        ids = tf.where(tf.equal(pos, 0), ALBERT_SPECIAL_IDS["cls"], ids)
        ids = tf.where(
            tf.logical_or(tf.equal(pos, sep_a), tf.equal(pos, last)), ALBERT_SPECIAL_IDS["sep"], ids
        )
        mask = tf.cast(pos <= last, tf.int32)
        ids = ids * mask
        segment = tf.cast(tf.logical_and(pos > sep_a, pos <= last), tf.int32)
        labels = tf.random.stateless_uniform([B], s[3], minval=0, maxval=2, dtype=tf.int32)
        return {
            "input_ids": ids,
            "input_mask": mask,
            "segment_ids": segment,
            "token_boundary": mask,
            "next_sentence_labels": labels,
        }

    if repeat:
        # (position in the single-worker stream, batch index): masks are seeded by the
        # position. Worker r's batch k is position k * num_shards + r, so a resumed stream
        # starts right at its position instead of generating and dropping earlier batches.
        first = start_batch * num_shards + shard_index
        ds = tf.data.Dataset.range(first, tf.int64.max, num_shards).map(
            no_autograph(lambda position: (position, position % num_batches)))
    else:
        ds = tf.data.Dataset.range(num_batches).enumerate()
        if num_shards > 1:
            ds = ds.shard(num_shards, shard_index)
    ds = ds.map(
        no_autograph(lambda position, i: (position, make(i))), num_parallel_calls=_AUTOTUNE,
        deterministic=True
    )

    @no_autograph
    def add_masks(index, ex):
        pair_seed = tf.stack([tf.cast(seed, tf.int64) + 1, index])
        return _mask_pairs(ex, pair_seed, info, rules, max_predictions_per_seq)

    ds = ds.map(add_masks, num_parallel_calls=_AUTOTUNE, deterministic=True)
    return ds.prefetch(_AUTOTUNE)


__all__ = [
    "ALBERT_SPECIAL_IDS",
    "DatasetError",
    "SPECIAL_NAMES",
    "build_pretraining_dataset",
    "build_synthetic_dataset",
    "expand_files",
    "mask_batch",
    "read_manifests",
]
