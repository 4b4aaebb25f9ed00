"""Resume latency: time from process start to the first trained step after restoring a
checkpoint at step N (not a test).

For static and dynamic masking at seq 512 it prepares TFRecords from the demo prose, trains
one step of a small ALBERT to get a real checkpoint, and copies it as checkpoints at steps
N = 0 (a fresh run), 10k and 100k, with the data position those steps imply (the global
batch of the reference recipe scaled to one process: 4096 / 64 GPUs = 64 sequences per step,
as micro-batches of 8). Then, for each N, it starts ``albertkit pretrain`` and measures the
time until the first training step is logged. The model is small on purpose: its build and
compile time is the same for every N, and the difference between N values is the cost of
finding the data position. ``--v01-steps`` also times a checkpoint without a data position
(written by albertkit 0.1), resumed by re-reading and skipping the consumed batches.

Usage::

    python benchmarks/bench_resume.py --work /tmp/albertkit-resume [--mb 4] [--repeats 1]

Prints one JSON line per measurement, the load average, and a table. Each measurement is a
fresh process (a TensorFlow import and a model build): on a loaded 2-core machine run it when
the load average is low; the figures are differences between N values.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SEQ = 512
MICRO, GLOBAL = 8, 64  # 4096 sequences per step over 64 GPUs, on one process


def prepare(work: Path, megabytes: float) -> dict[str, list[str]]:
    """Static and dynamic TFRecords at seq 512 (8 shards each) and their tokenizer."""
    from albertkit.data.demo import stdlib_documents
    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data, shard_files

    corpus = work / "corpus.txt"
    if not corpus.is_file():
        docs = [" ".join(d) for d in stdlib_documents()]
        size, lines = 0, []
        while size < megabytes * 1e6:  # repeat the prose; documents rotate so shards differ
            for i, d in enumerate(docs):
                line = " ".join(docs[(i + len(lines)) % len(docs)].split()[: 400]) + " " + d
                lines.append(line)
                size += len(line) + 1
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = work / "tok"
    if not (tok / "spiece.model").is_file():
        train_tokenizer([corpus], tok, TokenizerConfig(vocab_size=3000, num_threads=2))
    files = {}
    for masking in ("static", "dynamic"):
        out = work / masking
        cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=SEQ, dupe_factor=2,
                                    num_shards=8, masking=masking, seed=1)
        prepare_pretraining_data(cfg, tok, out, num_workers=1, progress=False)
        files[masking] = shard_files(out)
    return files


def config(run_dir: Path, files: list[str], masking: str, max_steps: int) -> dict:
    return {
        "run_dir": str(run_dir),
        "model": {"size": "tiny", "vocab_size": 3000, "hidden_size": 64, "embedding_size": 32,
                  "num_attention_heads": 2, "intermediate_size": 128, "num_hidden_layers": 2,
                  "max_position_embeddings": SEQ},
        "data": {"kind": "tfrecord", "train_files": files, "seq_length": SEQ,
                 "max_predictions_per_seq": 77, "masking": masking},
        "optimizer": {"kind": "lamb", "learning_rate": 1e-3},
        "runtime": {"micro_batch_size": MICRO, "global_batch_size": GLOBAL,
                    "max_steps": max_steps, "eval_every_steps": 0, "xla": False},
        "checkpoint": {"every_steps": 10**9},
        "logging": {"log_every_steps": 1, "progress_bar": False, "tensorboard": False},
    }


def template_checkpoint(work: Path, files: list[str], masking: str) -> Path:
    """A real one-step checkpoint of the benchmark model (run in this process)."""
    from albertkit.config import TrainerConfig
    from albertkit.training.checkpoint import CheckpointManager
    from albertkit.training.trainer import AlbertTrainer

    run = work / f"template-{masking}"
    if not CheckpointManager(run / "checkpoints").list():
        AlbertTrainer(TrainerConfig.from_dict(config(run, files, masking, 2))).fit(until_step=1)
    return CheckpointManager(run / "checkpoints").list()[-1]


def place_checkpoint(template: Path, run: Path, step: int, v01: bool) -> None:
    """Copy ``template`` as the checkpoint of step ``step`` with that step's data position."""
    accum = GLOBAL // MICRO
    shutil.rmtree(run, ignore_errors=True)
    if step == 0:
        return
    dst = run / "checkpoints" / f"ckpt-{step:08d}"
    shutil.copytree(template, dst)
    state = json.loads((dst / "state.json").read_text())
    state["step"] = step
    state["consumed_micro_batches"] = step * accum
    if v01:
        state.pop("data_position", None)
        state.pop("shuffle_buffer", None)
    else:
        state["data_position"] = {"format": 2, "consumed_micro_batches": step * accum}
    (dst / "state.json").write_text(json.dumps(state, indent=2))
    manifest = json.loads((dst / "MANIFEST.json").read_text())
    data = (dst / "state.json").read_bytes()
    manifest["step"] = step
    manifest["files"]["state.json"] = {"sha256": hashlib.sha256(data).hexdigest(),
                                       "bytes": len(data)}
    (dst / "MANIFEST.json").write_text(json.dumps(manifest, indent=2))


def time_to_first_step(work: Path, files: list[str], masking: str, step: int,
                       template: Path, v01: bool = False) -> float:
    run = work / f"run-{masking}-{step}{'-v01' if v01 else ''}"
    place_checkpoint(template, run, step, v01)
    cfg_path = work / f"{run.name}.json"
    cfg_path.write_text(json.dumps(config(run, files, masking, step + 1)))
    metrics = run / "metrics.jsonl"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "albertkit.cli", "pretrain", "--config",
                             str(cfg_path)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while not (metrics.is_file() and metrics.stat().st_size > 0):
        if proc.poll() is not None:
            raise RuntimeError(f"step {step}: pretrain exited early:\n{proc.stderr.read()[-3000:]}")
        time.sleep(0.02)
    took = time.perf_counter() - t0
    proc.communicate(timeout=600)
    record = json.loads(metrics.read_text().splitlines()[0])
    assert record["step"] == step + 1, record
    return took


def time_to_first_batch(files: list[str], masking: str, step: int, version: int) -> float:
    """In this process: build the training stream at step ``step``'s position and take one
    optimizer step's worth of batches (the data part of the resume latency, without the
    process start and model build)."""
    from albertkit.data.pretraining_dataset import build_pretraining_dataset

    accum = GLOBAL // MICRO
    t0 = time.perf_counter()
    ds = build_pretraining_dataset(files, seq_length=SEQ, max_predictions_per_seq=77,
                                   batch_size=MICRO, masking=masking, seed=0,
                                   start_batch=step * accum, stream_version=version)
    next(iter(ds.batch(accum)))
    return time.perf_counter() - t0


def read_rate(files: list[str], masking: str, version: int, batches: int) -> float:
    """Sequences/s of a training stream in steady state (after its first 20 batches)."""
    from albertkit.data.pretraining_dataset import build_pretraining_dataset

    it = iter(build_pretraining_dataset(files, seq_length=SEQ, max_predictions_per_seq=77,
                                        batch_size=64, masking=masking, seed=0,
                                        stream_version=version))
    for _ in range(20):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * 64 / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/albertkit-resume")
    ap.add_argument("--mb", type=float, default=4.0, help="corpus size to prepare (MB)")
    ap.add_argument("--steps", default="0,10000,100000")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--v01-steps", type=int, default=0,
                    help="also time a 0.1 checkpoint (no data position) at this step")
    ap.add_argument("--read-batches", type=int, default=0,
                    help="also measure the read rate of both stream versions (batches of 64)")
    ap.add_argument("--data-only", action="store_true",
                    help="only the in-process time to the first batch at each position")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    steps = [int(s) for s in args.steps.split(",")]
    files = prepare(work, args.mb)
    load_before = os.getloadavg()
    rows = []
    for masking in ("static", "dynamic"):
        cases = [(s, 2) for s in steps] + ([(args.v01_steps, 1)] if args.v01_steps else [])
        for step, version in cases:
            took = time_to_first_batch(files[masking], masking, step, version)
            print(json.dumps({"what": "data_first_batch", "masking": masking, "step": step,
                              "stream_version": version, "seconds": round(took, 2),
                              "load_average": os.getloadavg()[0]}), flush=True)
    for masking in ("static", "dynamic") if args.read_batches else ():
        for version in (2, 1):
            rate = read_rate(files[masking], masking, version, args.read_batches)
            print(json.dumps({"what": "read_rate", "masking": masking, "stream_version": version,
                              "sequences_per_s": round(rate), "load_average": os.getloadavg()[0]}),
                  flush=True)
    if args.data_only:
        print(f"load average {os.getloadavg()}; {os.cpu_count()} cores")
        return
    for masking in ("static", "dynamic"):
        template = template_checkpoint(work, files[masking], masking)
        cases = [(s, False) for s in steps] + ([(args.v01_steps, True)] if args.v01_steps else [])
        for step, v01 in cases:
            for _ in range(args.repeats):
                took = time_to_first_step(work, files[masking], masking, step, template, v01)
                row = {"what": "resume_latency", "masking": masking, "step": step,
                       "checkpoint": "0.1 (skip)" if v01 else "data_position",
                       "seconds_to_first_step": round(took, 2),
                       "sequences_before": step * GLOBAL, "load_average": os.getloadavg()[0]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    load_after = os.getloadavg()
    print(f"\nload average before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f}; {os.cpu_count()} cores")
    print(f"{'masking':8} {'checkpoint':14} {'step':>7} {'seconds to first step':>22} "
          f"{'vs step 0':>10}")
    for masking in ("static", "dynamic"):
        base = [r["seconds_to_first_step"] for r in rows
                if r["masking"] == masking and r["step"] == 0]
        base_s = min(base) if base else float("nan")
        for r in rows:
            if r["masking"] == masking:
                print(f"{masking:8} {r['checkpoint']:14} {r['step']:>7} "
                      f"{r['seconds_to_first_step']:>22.2f} "
                      f"{r['seconds_to_first_step'] - base_s:>+10.2f}")


if __name__ == "__main__":
    main()
