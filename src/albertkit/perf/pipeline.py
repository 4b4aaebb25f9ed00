"""Sequences/s of albertkit's pretraining input pipelines for the benchmark's shapes."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from albertkit.perf.settings import BenchmarkSettings

SHARDS = 4


def measure_pipeline(settings: BenchmarkSettings) -> dict[str, Any]:
    """Sequences/s of albertkit's pretraining input pipelines for the benchmark's shapes.

    ``tfrecord``: ``max(4096, 8 x step)`` random examples written as TFRecords in Google
    ALBERT's feature format (4 shards), read as the trainer reads them (interleave, shuffle,
    parse, batch), static masking. ``synthetic``: the generated source with masking done in
    TF ops on every batch (the cost of dynamic masking). Both are then batched by the
    accumulation steps and prefetched, exactly as the trainer does.
    """
    import numpy as np

    s = settings
    try:
        from albertkit.data import pretraining_dataset as pd
    except ImportError as e:
        return {"pipeline_source": f"unavailable ({e})"}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="albertkit-bench-") as tmp:
        files = write_pretraining_records(Path(tmp), s, max(4096, 8 * s.sequences_per_step),
                                          np.random.default_rng(s.seed))
        static = pd.build_pretraining_dataset(
            files, seq_length=s.seq_length, max_predictions_per_seq=s.predictions,
            batch_size=s.micro_batch, masking="static", shuffle_buffer=1000, seed=s.seed,
            deterministic=True, repeat=True, training=True)
        out["pipeline_tfrecord_sequences_per_s"] = _pipeline_rate(static, s)
    dynamic = pd.build_synthetic_dataset(
        vocab_size=s.spec.vocab_size, seq_length=s.seq_length,
        max_predictions_per_seq=s.predictions, batch_size=s.micro_batch,
        num_examples=64 * s.micro_batch, seed=s.seed, repeat=True)
    out["pipeline_synthetic_sequences_per_s"] = _pipeline_rate(dynamic, s)
    out["pipeline_source"] = "tfrecord (static masking)"
    out["pipeline_sequences_per_s"] = out["pipeline_tfrecord_sequences_per_s"]
    return out


def _pipeline_rate(ds: Any, s: BenchmarkSettings) -> float:
    import tensorflow as tf

    ds = ds.batch(s.accumulation, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    it = iter(ds)
    for _ in range(5):
        next(it)
    t0 = time.perf_counter()
    steps = 0
    while steps < s.pipeline_batches or time.perf_counter() - t0 < 2.0:
        next(it)
        steps += 1
    return steps * s.sequences_per_step / (time.perf_counter() - t0)


def write_pretraining_records(folder: Path, s: BenchmarkSettings, n: int, rng) -> list[str]:
    """``n`` random, statically masked examples in Google ALBERT's pretraining feature
    format, dealt round-robin into :data:`SHARDS` TFRecord files (albertkit's own writer,
    the one ``albertkit prepare-data`` uses)."""
    import numpy as np

    from albertkit.data.tfrecord import RecordWriter, encode_examples

    t, p, vocab = s.seq_length, s.predictions, s.spec.vocab_size
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, t), p, replace=False) for _ in range(n)]), axis=1
    )
    records = encode_examples({
        "input_ids": rng.integers(5, vocab, (n, t)),
        "input_mask": np.ones((n, t), np.int64),
        "segment_ids": np.broadcast_to(np.arange(t) >= t // 2, (n, t)).astype(np.int64),
        "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(5, vocab, (n, p)),
        "masked_lm_weights": np.ones((n, p), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (n, 1)),
    })
    files = [folder / f"part-{i}.tfrecord" for i in range(SHARDS)]
    for i, path in enumerate(files):
        with RecordWriter(path) as writer:
            for record in records[i::SHARDS]:
                writer.write(record)
    return [str(f) for f in files]
