"""Benchmark of the pretraining data pipeline (not a test).

Builds a >= 10 MB corpus by repeating and perturbing the demo prose (one document per line),
trains a tokenizer, then measures:

* preparation: examples/s for seq 512 and seq 128 with 1 and 2 processes (static masking);
* reading: tf.data sequences/s for static and dynamic masking, with tf.data's default thread
  pool and with a private pool of one thread (the per-core figure).

Usage::

    python benchmarks/bench_data.py --work /tmp/albertkit-bench [--mb 10] [--dupe-factor 5]

Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np


def build_corpus(path: Path, megabytes: float, seed: int = 0) -> int:
    from albertkit.data.demo import stdlib_documents

    docs = [" ".join(d) for d in stdlib_documents()]
    rng = np.random.default_rng(seed)
    size = 0
    with open(path, "w", encoding="utf-8") as fh:
        while size < megabytes * 1e6:
            # an "article": ~20 documents, perturbed (drop ~5% of words, swap a few neighbours)
            parts = []
            for d in rng.choice(len(docs), 20, replace=False):
                keep = [w for w in docs[d].split() if rng.random() > 0.05]
                for _ in range(len(keep) // 20):
                    i = int(rng.integers(0, max(1, len(keep) - 1)))
                    keep[i : i + 2] = keep[i : i + 2][::-1]
                parts.append(" ".join(keep))
            line = " ".join(parts) + "\n"
            fh.write(line)
            size += len(line.encode())
    return size


def emit(record: dict) -> None:
    """One measurement, one JSON line."""
    print(json.dumps(record), flush=True)


def bench_prepare(corpus: Path, tok_dir: Path, work: Path, seq: int, workers: int,
                  dupe: int) -> dict:
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data

    out = work / f"prep-{seq}-{workers}"
    shutil.rmtree(out, ignore_errors=True)
    cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=seq, max_predictions_per_seq=20,
                                dupe_factor=dupe, num_shards=8, seed=1, chunk_bytes=2 << 20)
    t0 = time.time()
    m = prepare_pretraining_data(cfg, tok_dir, out, num_workers=workers, progress=False)
    dt = time.time() - t0
    n = m["examples"]["train"]
    return {"what": "prepare", "seq_length": seq, "processes": workers, "dupe_factor": dupe,
            "examples": n, "seconds": round(dt, 2), "examples_per_s": round(n / dt),
            "examples_per_s_per_process": round(n / dt / workers)}


def bench_read(files: list[str], seq: int, masking: str, threads: int | None, batches: int) -> dict:
    import tensorflow as tf

    from albertkit.data.pretraining_dataset import build_pretraining_dataset

    ds = build_pretraining_dataset(files, seq_length=seq, max_predictions_per_seq=20,
                                   batch_size=64, masking=masking, shuffle_buffer=10000, seed=0)
    if threads:
        opts = tf.data.Options()
        opts.threading.private_threadpool_size = threads
        ds = ds.with_options(opts)
    it = iter(ds)
    for _ in range(20):  # warm up: fill the shuffle buffer, trace
        next(it)
    t0 = time.time()
    for _ in range(batches):
        next(it)
    dt = time.time() - t0
    return {"what": "read", "masking": masking, "seq_length": seq,
            "threads": threads or "default", "sequences_per_s": round(batches * 64 / dt)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/albertkit-bench")
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--dupe-factor", type=int, default=5)
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--read-batches", type=int, default=200)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.txt"
    if not corpus.is_file() or corpus.stat().st_size < args.mb * 1e6:
        build_corpus(corpus, args.mb)
    emit({"what": "corpus", "bytes": corpus.stat().st_size, "cpus": os.cpu_count(),
          "load_avg": os.getloadavg()})
    from albertkit.data.tokenizer import Tokenizer, TokenizerConfig, train_tokenizer

    tok_dir = work / "tok"
    if not (tok_dir / "tokenizer.json").is_file():
        t0 = time.time()
        train_tokenizer([corpus], tok_dir,
                        TokenizerConfig(vocab_size=args.vocab_size, input_sentence_size=300_000))
        emit({"what": "train_tokenizer", "seconds": round(time.time() - t0, 1)})
    tok = Tokenizer.load(tok_dir)
    lines = corpus.read_text(encoding="utf-8").splitlines()[:2000]
    t0 = time.time()
    n_tok = sum(len(x) for x in tok.encode_batch(lines))
    emit({"what": "tokenize", "tokens_per_s": round(n_tok / (time.time() - t0))})
    for seq in (512, 128):
        for workers in (1, 2):
            emit(bench_prepare(corpus, tok_dir, work, seq, workers, args.dupe_factor))
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data, shard_files

    dyn = work / "dyn-128"
    prepare_pretraining_data(
        PretrainingDataConfig(inputs=[str(corpus)], seq_length=128, max_predictions_per_seq=20,
                              dupe_factor=1, num_shards=8, masking="dynamic"),
        tok_dir, dyn, progress=False)
    for masking, files in (("static", shard_files(work / "prep-128-2")),
                           ("dynamic", shard_files(dyn))):
        for threads in (None, 1):
            emit(bench_read(files, 128, masking, threads, args.read_batches))
    emit(bench_read(shard_files(work / "prep-512-2"), 512, "static", 1, args.read_batches // 2))


if __name__ == "__main__":
    main()
