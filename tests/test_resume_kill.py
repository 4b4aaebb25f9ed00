"""kill -9 in the second epoch of TFRecord data with dynamic masking, then the same command
again: the final weights are bit-identical to an uninterrupted run's. One process, and two
processes (Horovod and multi-worker), whose streams are sharded by file over the ranks."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from albertkit.data.stream import RecordLayout
from albertkit.data.tfrecord import count_records
from albertkit.training.checkpoint import CheckpointManager

pytestmark = pytest.mark.slow

SEQ, PREDS, MICRO = 32, 5, 4


@pytest.fixture(scope="module")
def dynamic_shards(tmp_path_factory) -> list[str]:
    from pydoc_data import topics

    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data, shard_files

    root = tmp_path_factory.mktemp("kill")
    corpus = root / "c.txt"
    names = sorted(topics.topics)[:6]
    corpus.write_text("\n".join(" ".join(topics.topics[n].split()) for n in names) + "\n")
    tok = train_tokenizer([corpus], root / "tok", TokenizerConfig(vocab_size=400, num_threads=1))
    cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=SEQ, max_predictions_per_seq=PREDS,
                                dupe_factor=1, num_shards=3, masking="dynamic", seed=1)
    prepare_pretraining_data(cfg, tok, root / "data", num_workers=1, progress=False)
    return shard_files(root / "data")


def raw_config(run_dir: Path, files: list[str], max_steps: int) -> dict:
    return {
        "run_dir": str(run_dir),
        "model": {"size": "tiny", "vocab_size": 400, "hidden_size": 32, "embedding_size": 16,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 64, "hidden_dropout_prob": 0.1},
        "data": {"kind": "tfrecord", "train_files": files, "seq_length": SEQ,
                 "max_predictions_per_seq": PREDS, "masking": "dynamic", "shuffle_buffer": 16},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3, "schedule": {"warmup_steps": 5}},
        "runtime": {"micro_batch_size": MICRO, "global_batch_size": 8, "max_steps": max_steps,
                    "eval_every_steps": 0, "xla": False, "seed": 5},
        "checkpoint": {"every_steps": 5, "keep_last": 3},
        "logging": {"log_every_steps": 5, "progress_bar": False, "tensorboard": False},
    }


def steps_per_epoch(files: list[str], rank: int, ranks: int, accum: int) -> int:
    counts = [count_records(f) for f in files]
    return RecordLayout.for_worker(files, counts, rank, ranks).epoch_length // (MICRO * accum)


def latest_step(run_dir: Path) -> int:
    ckpts = CheckpointManager(run_dir / "checkpoints").list()
    return int(ckpts[-1].name.split("-")[1]) if ckpts else 0


def final_weights(run_dir: Path) -> dict[str, np.ndarray]:
    ckpt = CheckpointManager(run_dir / "checkpoints").latest()
    return load_file(str(ckpt.path / "model.safetensors"))


def command(config: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "albertkit.cli", "pretrain", "--config", str(config), *extra]


def processes_of(marker: str, exclude: int) -> list[int]:
    """Pids of this user's processes whose command line names ``marker`` (a unique path)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (exclude, os.getpid()):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            pids.append(int(entry.name))
    return pids


def kill9_and_resume(tmp_path: Path, files: list[str], max_steps: int, kill_after: int,
                     extra: list[str]) -> Path:
    """Start the command, SIGKILL every process of it once checkpoint ``kill_after`` exists,
    run the same command again to the end; returns the run directory."""
    run = tmp_path / "killed"
    config = tmp_path / "killed.yaml"
    config.write_text(json.dumps(raw_config(run, files, max_steps)))
    proc = subprocess.Popen(command(config, extra), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 400
    while latest_step(run) < kill_after and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training finished before it could be killed"
    # every rank dies at once, as on a reclaimed spot instance; then the launcher
    for pid in processes_of(str(config), exclude=proc.pid):
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.kill(pid, signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    killed_at = latest_step(run)
    assert kill_after <= killed_at < max_steps

    done = subprocess.run(command(config, extra), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from_step"] >= killed_at - 5 and summary["step"] == max_steps
    return run


def assert_bit_identical(a: Path, b: Path) -> None:
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)


def test_kill9_in_second_epoch_dynamic_masking_resumes_bit_identical(dynamic_shards, tmp_path):
    from albertkit.config import TrainerConfig
    from albertkit.training.trainer import AlbertTrainer

    epoch = steps_per_epoch(dynamic_shards, 0, 1, accum=2)
    max_steps, kill_after = 3 * epoch, epoch + 5  # killed in the second epoch
    reference = tmp_path / "reference"
    AlbertTrainer(TrainerConfig.model_validate(
        raw_config(reference, dynamic_shards, max_steps))).fit()
    run = kill9_and_resume(tmp_path, dynamic_shards, max_steps, kill_after, [])
    assert latest_step(run) == max_steps
    assert_bit_identical(reference, run)


@pytest.mark.distributed
@pytest.mark.parametrize("backend", ["horovod", "tf_multiworker"])
def test_kill9_two_processes_second_epoch_resumes_bit_identical(dynamic_shards, tmp_path,
                                                                backend):
    from albertkit.distributed.launch import launch_local

    # 3 files over 2 ranks: rank 0 reads 2 files, rank 1 one; both pass an epoch boundary
    epochs = [steps_per_epoch(dynamic_shards, r, 2, accum=1) for r in range(2)]
    max_steps, kill_after = 2 * max(epochs) + 5, max(epochs) + 5
    reference = tmp_path / "reference"
    ref_config = tmp_path / "reference.yaml"
    ref_config.write_text(json.dumps(raw_config(reference, dynamic_shards, max_steps)))
    out = io.StringIO()
    code = launch_local(command(ref_config, ["--distributed", backend]), 2, backend,
                        output=out, timeout=600)
    assert code == 0, out.getvalue()[-3000:]
    run = kill9_and_resume(tmp_path, dynamic_shards, max_steps, kill_after,
                           ["--distributed", backend, "--nproc", "2"])
    assert_bit_identical(reference, run)
