"""``albertkit benchmark``: the training step's speed and memory, side by side with HF PyTorch.

Each framework runs in its own worker process (``python -m albertkit.benchmark worker``)
that the parent drives over JSON lines on stdin/stdout, so that

* every framework's peak memory is its own process's (Linux ``VmHWM``, reset with
  ``/proc/self/clear_refs`` after warm-up; a psutil RSS sampler where that is unavailable;
  ``tf.config.experimental.get_memory_info`` on a GPU);
* the runs are interleaved: round r runs ``steps`` timed steps of albertkit, then of
  Hugging Face (order alternating between rounds), so drifting machine load hits both;
* only one framework computes at a time (the other waits on its pipe).

Per framework the worker reports step times (median and spread over all timed steps),
sequences/s, peak memory, a matmul peak of the same device measured in the same run, and
the MFU = model FLOPs/s (``albertkit.memory.training_flops``) / matmul peak. The albertkit
worker also measures the input pipeline (TFRecords written in Google's feature format, read
through ``albertkit.data.pretraining_dataset``) for the same shapes, and the memory
planner's prediction is set against the measured peak.

Example:
    >>> result = run_benchmark(BenchmarkSettings(size="tiny", seq_length=32, micro_batch=2,
    ...                                          steps=2, warmup=1, rounds=1))
    >>> print(format_table(result))  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from albertkit.memory import (
    default_predictions,
    estimate_memory,
    training_flops,
)
from albertkit.models.sizes import SIZES, AlbertSpec, SizeName

MARKER = "@@albertkit-benchmark "
Framework = Literal["albertkit", "hf-pytorch"]


class BenchmarkError(RuntimeError):
    """A benchmark that cannot run as asked (message names the option and the reason)."""


class BenchmarkSettings(BaseModel):
    """What to benchmark. ``model`` holds per-field overrides of the size preset."""

    model_config = ConfigDict(extra="forbid")

    size: SizeName = "base"
    model: dict[str, Any] = {}
    seq_length: int = Field(128, gt=8)
    max_predictions: int | None = Field(None, gt=0)
    micro_batch: int = Field(8, gt=0)
    accumulation: int = Field(1, gt=0)
    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = "float32"
    xla: bool = True
    optimizer: Literal["adamw", "lamb"] = "adamw"
    steps: int = Field(5, gt=0, description="timed steps per round and framework")
    warmup: int = Field(2, ge=1, description="untimed steps (compilation) before timing")
    rounds: int = Field(3, gt=0)
    compare: list[Framework] = []
    processes: list[int] = [1]
    pipeline: bool = True
    pipeline_batches: int = Field(200, gt=0)
    hf_threads: int | None = Field(None, gt=0, description="torch threads (None: its default)")
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> BenchmarkSettings:
        spec = self.spec  # validates the overrides
        if self.seq_length > spec.max_position_embeddings:
            raise ValueError(f"seq_length={self.seq_length} exceeds model "
                             f"max_position_embeddings={spec.max_position_embeddings}")
        if self.predictions > self.seq_length:
            raise ValueError(f"max_predictions={self.predictions} exceeds "
                             f"seq_length={self.seq_length}")
        if "hf-pytorch" in self.compare and spec.pre_layer_norm:
            raise ValueError("--compare hf-pytorch: Hugging Face ALBERT has no pre_layer_norm")
        if "hf-pytorch" in self.compare and self.precision == "mixed_float16":
            raise ValueError("--compare hf-pytorch runs CPU PyTorch: use float32 or "
                             "mixed_bfloat16 (autocast), not mixed_float16")
        if any(p < 1 for p in self.processes):
            raise ValueError(f"processes={self.processes}: every entry must be >= 1")
        return self

    @property
    def spec(self) -> AlbertSpec:
        # Dropout off on both sides (issue 9): v2 presets have none except the classifier.
        fields = {**SIZES[self.size], "hidden_dropout_prob": 0.0,
                  "attention_probs_dropout_prob": 0.0, "classifier_dropout_prob": 0.0,
                  **self.model}
        return AlbertSpec(**fields)

    @property
    def predictions(self) -> int:
        return self.max_predictions or default_predictions(self.seq_length)


# =========================================================================== measurement
class PeakMemory:
    """Peak resident memory of this process since the last :meth:`reset` (bytes).

    Linux keeps the exact high-water mark (``VmHWM``) and resets it when "5" is written to
    ``/proc/self/clear_refs``; that catches peaks a sampler would miss. Where that fails, a
    psutil thread samples RSS every 2 ms. On a GPU, TensorFlow's allocator peak is used.
    """

    def __init__(self) -> None:
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()
        self._peak = 0
        self.method = "VmHWM"
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self._hwm()
        except OSError:
            self.method = "psutil-sampling"

    @staticmethod
    def _hwm() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise OSError("no VmHWM in /proc/self/status")

    @staticmethod
    def rss() -> int:
        import psutil

        return int(psutil.Process().memory_info().rss)

    def reset(self) -> None:
        if self.method == "VmHWM":
            Path("/proc/self/clear_refs").write_text("5")
            return
        self.stop()
        self._peak = self.rss()
        self._stop.clear()

        def sample() -> None:
            while not self._stop.wait(0.002):
                self._peak = max(self._peak, self.rss())

        self._sampler = threading.Thread(target=sample, daemon=True)
        self._sampler.start()

    def stop(self) -> None:
        if self._sampler is not None:
            self._stop.set()
            self._sampler.join()
            self._sampler = None

    def peak(self) -> int:
        if self.method == "VmHWM":
            return self._hwm()
        return max(self._peak, self.rss())


def _timed(fn, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _random_batch(settings: BenchmarkSettings, rng) -> dict[str, Any]:
    """One optimizer step of pretraining inputs, ``[accumulation, micro_batch, ...]``."""
    import numpy as np

    a, b, t, p = settings.accumulation, settings.micro_batch, settings.seq_length, \
        settings.predictions
    vocab = settings.spec.vocab_size
    positions = np.sort(np.stack([rng.choice(np.arange(1, t), p, replace=False)
                                  for _ in range(a * b)]), axis=1).reshape(a, b, p)
    return {
        "input_ids": rng.integers(5, vocab, (a, b, t)).astype(np.int32),
        "input_mask": np.ones((a, b, t), np.int32),
        "segment_ids": (np.arange(t)[None, None, :] >= t // 2).astype(np.int32)
        .repeat(a, 0).repeat(b, 1),
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.integers(5, vocab, (a, b, p)).astype(np.int32),
        "masked_lm_weights": np.ones((a, b, p), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (a, b)).astype(np.int32),
    }


# =========================================================================== workers
class _AlbertkitWorker:
    """The albertkit side: the trainer's own TrainStep (single process) on a fixed batch."""

    def __init__(self, settings: BenchmarkSettings) -> None:
        self.s = settings
        self.memory = PeakMemory()

    def setup(self) -> dict[str, Any]:
        import numpy as np
        import tensorflow as tf

        from albertkit.config import TrainerConfig
        from albertkit.distributed.single import SingleProcess
        from albertkit.step import TrainStep
        from albertkit.tasks import build_task

        s = self.s
        self.gpu = bool(tf.config.list_physical_devices("GPU"))
        baseline = self.memory.rss()
        cfg = TrainerConfig.from_dict({
            "model": {"size": s.size, **s.spec.model_dump()},
            "data": {"kind": "synthetic", "seq_length": s.seq_length,
                     "max_predictions_per_seq": s.predictions},
            "optimizer": {"kind": s.optimizer},
            "runtime": {"precision": s.precision, "xla": s.xla, "seed": s.seed,
                        "micro_batch_size": s.micro_batch,
                        "global_batch_size": s.micro_batch * s.accumulation,
                        "max_steps": 1_000_000},
        }, source="benchmark")
        import keras

        keras.utils.set_random_seed(s.seed)
        t0 = time.perf_counter()
        task = build_task(cfg, s.spec)
        model = task.build_model()
        optimizer = cfg.optimizer.build(total_steps=cfg.runtime.max_steps)
        self.step = TrainStep(task, model, optimizer, SingleProcess(), cfg.runtime,
                              s.accumulation, cfg.optimizer.clip_norm)
        self.batch = {k: tf.constant(v)
                      for k, v in _random_batch(s, np.random.default_rng(s.seed)).items()}
        build_s = time.perf_counter() - t0
        warm = _timed(self._run_step, s.warmup)
        return {
            "framework": "albertkit", "params": int(model.count_params()),
            "baseline_rss": baseline, "build_s": build_s, "first_step_s": warm[0],
            "threads": {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                        "inter_op": tf.config.threading.get_inter_op_parallelism_threads()},
            "device": "GPU" if self.gpu else "CPU", "memory_method": self.memory.method,
            "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
        }

    def _run_step(self) -> None:
        metrics = self.step(self.batch)
        float(metrics["grad_norm"])  # wait for the step (and its update) to finish

    def steps(self, n: int) -> dict[str, Any]:
        import tensorflow as tf

        # TensorFlow's allocator statistics (GPU, and CPU since TF 2.x) count exactly the
        # tensors of the step (XLA's buffers included): the quantity the planner predicts.
        device = "GPU:0" if self.gpu else "CPU:0"
        tf.config.experimental.reset_memory_stats(device)
        self.memory.reset()
        times = _timed(self._run_step, n)
        tensors = tf.config.experimental.get_memory_info(device)
        return {"times": times, "peak_bytes": int(self.memory.peak()),
                "tensor_peak_bytes": int(tensors["peak"]),
                "tensor_current_bytes": int(tensors["current"])}

    def matmul(self) -> dict[str, Any]:
        import tensorflow as tf

        n = 1536 if not self.gpu else 8192
        dtype = tf.float32 if self.s.precision == "float32" else (
            tf.bfloat16 if self.s.precision == "mixed_bfloat16" else tf.float16)
        a = tf.random.normal((n, n), dtype=tf.float32)
        a = tf.cast(a, dtype)
        best = 0.0
        for jit in (False, True):
            fn = tf.function(lambda x: tf.reduce_sum(tf.cast(tf.matmul(x, x), tf.float32)),
                             jit_compile=jit)
            fn(a).numpy()
            t = min(_timed(lambda fn=fn: fn(a).numpy(), 5))
            best = max(best, 2.0 * n**3 / t)
        return {"matmul_flops_per_s": best, "matmul_n": n, "matmul_dtype": dtype.name}

    def pipeline(self) -> dict[str, Any]:
        return measure_pipeline(self.s)

    def breakdown(self) -> dict[str, Any]:
        return {"breakdown_s": step_breakdown(self.step, self.batch, self.s)}


class _HFWorker:
    """Hugging Face transformers v5 ``AlbertForPreTraining`` on CPU PyTorch, AdamW."""

    def __init__(self, settings: BenchmarkSettings) -> None:
        self.s = settings
        self.memory = PeakMemory()

    def setup(self) -> dict[str, Any]:
        import numpy as np
        import torch
        import transformers
        from transformers import AlbertConfig, AlbertForPreTraining

        s = self.s
        baseline = self.memory.rss()
        if s.hf_threads:
            torch.set_num_threads(s.hf_threads)
        torch.manual_seed(s.seed)
        spec = s.spec.model_dump()
        spec.pop("pre_layer_norm")
        t0 = time.perf_counter()
        self.model = AlbertForPreTraining(AlbertConfig(**spec))
        self.model.train()
        # Same hyper-parameters as albertkit's AdamW (BERT's: eps 1e-6, decay 0.01); torch's
        # AdamW decays every parameter and bias-corrects: the cost is the same.
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, eps=1e-6,
                                     weight_decay=0.01)
        batch = _random_batch(s, np.random.default_rng(s.seed))
        a, b, t = s.accumulation, s.micro_batch, s.seq_length
        labels = np.full((a, b, t), -100, np.int64)
        np.put_along_axis(labels, batch["masked_lm_positions"].astype(np.int64),
                          batch["masked_lm_ids"].astype(np.int64), axis=2)
        self.micro = [{
            "input_ids": torch.tensor(batch["input_ids"][i], dtype=torch.long),
            "attention_mask": torch.tensor(batch["input_mask"][i], dtype=torch.long),
            "token_type_ids": torch.tensor(batch["segment_ids"][i], dtype=torch.long),
            "labels": torch.tensor(labels[i]),
            "sentence_order_label": torch.tensor(batch["next_sentence_labels"][i],
                                                 dtype=torch.long),
        } for i in range(a)]
        self.autocast = (torch.autocast("cpu", dtype=torch.bfloat16)
                         if s.precision == "mixed_bfloat16" else contextlib.nullcontext())
        build_s = time.perf_counter() - t0
        warm = _timed(self._run_step, s.warmup)
        return {
            "framework": "hf-pytorch",
            "params": int(sum(p.numel() for p in self.model.parameters())),
            "baseline_rss": baseline, "build_s": build_s, "first_step_s": warm[0],
            "threads": {"intra_op": torch.get_num_threads(),
                        "inter_op": torch.get_num_interop_threads()},
            "attention": self.model.config._attn_implementation,
            "device": "CPU", "memory_method": self.memory.method,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        }

    def _run_step(self) -> None:
        import torch

        for inputs in self.micro:  # HF's usual Python-loop accumulation
            with self.autocast:
                loss = self.model(**inputs).loss / len(self.micro)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def steps(self, n: int) -> dict[str, Any]:
        self.memory.reset()
        times = _timed(self._run_step, n)
        return {"times": times, "peak_bytes": int(self.memory.peak())}

    def matmul(self) -> dict[str, Any]:
        import torch

        n = 1536
        dtype = torch.bfloat16 if self.s.precision == "mixed_bfloat16" else torch.float32
        a = torch.randn(n, n, dtype=dtype)
        (a @ a).sum().item()
        t = min(_timed(lambda: (a @ a).sum().item(), 5))
        return {"matmul_flops_per_s": 2.0 * n**3 / t, "matmul_n": n, "matmul_dtype": str(dtype)}

    def pipeline(self) -> dict[str, Any]:
        return {}


def step_breakdown(step: Any, batch: dict[str, Any], s: BenchmarkSettings,
                   repeats: int = 3) -> dict[str, float]:
    """Median seconds of the pieces of one training step, each compiled on its own.

    XLA fuses a whole step into one program, so a profiler shows one op; timing the pieces
    (with the step's XLA setting, forward + backward where marked) shows where time goes:
    ``compute`` (all micro-batches, forward + backward) and ``apply`` (reduce, clip,
    optimizer) are the step's own two functions; the rest are the model's parts.
    """
    import tensorflow as tf

    model, task = step.model, step.task
    encoder = model.albert
    layer = encoder.albert_layer_groups[0].albert_layers[0]
    micro = {k: v[0] for k, v in batch.items()}
    b, t, h = s.micro_batch, s.seq_length, s.spec.hidden_size
    hidden = tf.random.normal((b, t, h))
    bias = tf.zeros((b, 1, 1, t))
    masked = tf.random.normal((b, s.predictions, h))
    jit = s.xla

    def fwd_bwd(fn, x):
        # gradients for the weights and, for a hidden-state input, for the input too (as
        # inside the network)
        def run(x):
            sources = [v.value for v in model.trainable_variables]
            with tf.GradientTape() as tape:
                if isinstance(x, tf.Tensor):
                    tape.watch(x)
                    sources.append(x)
                out = tf.reduce_sum(tf.cast(fn(x), tf.float32))
            grads = tape.gradient(out, sources)
            return out, [g for g in grads if g is not None]
        return tf.function(run, jit_compile=jit), (x,)

    def loss_only(m):
        return task.loss_and_stats(model, m, training=True)[0]

    def mlm(x):
        logits = model.predictions(x, encoder.embeddings.word_embeddings.embeddings)
        return tf.reduce_logsumexp(tf.cast(logits, tf.float32), -1)

    def embed(m):
        e = encoder.embeddings(m["input_ids"], m["segment_ids"], training=True)
        return encoder.embedding_hidden_mapping_in(e)

    pieces = {
        "forward (loss)": (tf.function(loss_only, jit_compile=jit), (micro,)),
        "forward+backward": fwd_bwd(loss_only, micro),
        "embeddings+projection fwd+bwd": fwd_bwd(embed, micro),
        "one transformer layer fwd+bwd": fwd_bwd(lambda x: layer(x, bias, training=True),
                                                 hidden),
        "attention block fwd+bwd": fwd_bwd(lambda x: layer.attention(x, bias, training=True),
                                           hidden),
        "MLM head (gathered) fwd+bwd": fwd_bwd(mlm, masked),
    }
    scale = tf.constant(1.0)
    grads, stats = step._compute(batch, scale)
    pieces["step: compute (XLA part)"] = (step._compute, (batch, scale))
    pieces["step: apply (reduce, clip, optimizer)"] = (lambda: step._apply(grads, stats), ())
    pieces["step: total"] = (step._train, (batch,))

    def sync(out):
        for x in tf.nest.flatten(out):
            if hasattr(x, "numpy"):
                x.numpy()
                break

    result = {}
    for name, (fn, args) in pieces.items():
        sync(fn(*args))  # compile
        result[name] = statistics.median(_timed(lambda fn=fn, args=args: sync(fn(*args)),
                                                repeats))
    result["layers x num_hidden_layers (fwd+bwd)"] = (
        result["one transformer layer fwd+bwd"] * s.spec.num_hidden_layers
        * s.spec.inner_group_num)
    return result


def measure_pipeline(settings: BenchmarkSettings) -> dict[str, Any]:
    """Sequences/s of albertkit's pretraining input pipeline for the benchmark's shapes.

    Writes ``max(4096, 8 x step)`` random examples as TFRecords in Google ALBERT's feature
    format (4 files) and reads them as the trainer does (interleave, shuffle, parse, batch,
    accumulation batch, prefetch), with static masking. Falls back to the synthetic source
    when the TFRecord reader is not available.
    """
    import numpy as np
    import tensorflow as tf

    s = settings
    per_step = s.micro_batch * s.accumulation
    try:
        from albertkit.data import pretraining_dataset
    except ImportError as e:
        return {"pipeline_source": f"unavailable ({e})"}
    build_pretraining_dataset = getattr(pretraining_dataset, "build_pretraining_dataset", None)
    with tempfile.TemporaryDirectory(prefix="albertkit-bench-") as tmp:
        if build_pretraining_dataset is not None:
            n = max(4096, 8 * per_step)
            files = _write_pretraining_records(Path(tmp), s, n, np.random.default_rng(s.seed))
            ds = build_pretraining_dataset(
                files, seq_length=s.seq_length, max_predictions_per_seq=s.predictions,
                batch_size=s.micro_batch, masking="static", masking_rules=None,
                shuffle_buffer=1000, seed=s.seed, deterministic=False, shard_index=0,
                num_shards=1, repeat=True, training=True)
            source = "tfrecord (static masking)"
        else:
            ds = pretraining_dataset.build_synthetic_dataset(
                vocab_size=s.spec.vocab_size, seq_length=s.seq_length,
                max_predictions_per_seq=s.predictions, batch_size=s.micro_batch,
                num_examples=4096, seed=s.seed, repeat=True, shard_index=0, num_shards=1)
            source = "synthetic"
        ds = ds.batch(s.accumulation, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        it = iter(ds)
        for _ in range(5):
            next(it)
        t0 = time.perf_counter()
        batches = 0
        while batches < s.pipeline_batches or time.perf_counter() - t0 < 2.0:
            next(it)
            batches += 1
        elapsed = time.perf_counter() - t0
    return {"pipeline_source": source, "pipeline_steps": batches,
            "pipeline_sequences_per_s": batches * per_step / elapsed}


def _write_pretraining_records(folder: Path, s: BenchmarkSettings, n: int, rng) -> list[str]:
    import numpy as np
    import tensorflow as tf

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))

    t, p, vocab = s.seq_length, s.predictions, s.spec.vocab_size
    files = [str(folder / f"part-{i}.tfrecord") for i in range(4)]
    writers = [tf.io.TFRecordWriter(f) for f in files]
    for i in range(n):
        positions = np.sort(rng.choice(np.arange(1, t), p, replace=False))
        feats = {
            "input_ids": ints(rng.integers(5, vocab, t)),
            "input_mask": ints(np.ones(t)),
            "segment_ids": ints(np.arange(t) >= t // 2),
            "masked_lm_positions": ints(positions),
            "masked_lm_ids": ints(rng.integers(5, vocab, p)),
            "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * p)),
            "next_sentence_labels": ints([rng.integers(0, 2)]),
        }
        ex = tf.train.Example(features=tf.train.Features(feature=feats))
        writers[i % 4].write(ex.SerializeToString())
    for w in writers:
        w.close()
    return files


def worker_main(framework: str, settings_json: str) -> int:
    """Serve commands from the parent: one JSON object per line in, one per line out."""
    settings = BenchmarkSettings.model_validate_json(settings_json)
    worker = _AlbertkitWorker(settings) if framework == "albertkit" else _HFWorker(settings)
    out = sys.stdout
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "exit":
                break
            if cmd["cmd"] == "steps":
                reply = worker.steps(int(cmd["n"]))
            else:
                reply = getattr(worker, cmd["cmd"])()
            reply = {"ok": True, **reply}
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(MARKER + json.dumps(reply) + "\n")
        out.flush()
    return 0


class _WorkerProcess:
    """The parent's handle on one worker process."""

    def __init__(self, framework: str, settings: BenchmarkSettings) -> None:
        self.framework = framework
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "albertkit.benchmark", "worker", framework,
             settings.model_dump_json()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            env=env)

    def call(self, cmd: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(MARKER):
                reply = json.loads(line[len(MARKER):])
                if not reply.pop("ok"):
                    raise BenchmarkError(f"{self.framework} worker, {cmd}: {reply['error']}")
                return reply
        self.stderr.seek(0)
        tail = "".join(self.stderr.readlines()[-15:])
        raise BenchmarkError(f"{self.framework} worker died during {cmd!r} "
                             f"(exit code {self.proc.wait()}):\n{tail}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.poll() is None:
                assert self.proc.stdin
                self.proc.stdin.write(json.dumps({"cmd": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


# =========================================================================== parent
def _summary(times: list[float], sequences_per_step: int) -> dict[str, float]:
    ordered = sorted(times)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    median = statistics.median(ordered)
    return {
        "step_s_median": median, "step_s_min": ordered[0], "step_s_max": ordered[-1],
        "step_s_q1": q[0], "step_s_q3": q[2],
        "spread_iqr_pct": 100.0 * (q[2] - q[0]) / median,
        "sequences_per_s": sequences_per_step / median,
        "sequences_per_s_min": sequences_per_step / ordered[-1],
        "sequences_per_s_max": sequences_per_step / ordered[0],
    }


def run_benchmark(settings: BenchmarkSettings, progress: bool = True) -> dict[str, Any]:
    """Run the benchmark described by ``settings``; returns a JSON-serialisable dict."""
    if any(p > 1 for p in settings.processes):
        # TODO(issue 9): data-parallel runs need the launcher of the distributed backends
        # (albertkit.distributed); wire it here once it exists.
        raise BenchmarkError(
            f"--processes {','.join(map(str, settings.processes))}: multi-process benchmarks "
            "need albertkit's distributed launcher, which is not available yet")
    from tqdm.auto import tqdm

    frameworks: list[str] = ["albertkit", *[c for c in settings.compare if c != "albertkit"]]
    spec = settings.spec
    flops = training_flops(spec, settings.seq_length, settings.predictions)
    per_step = settings.micro_batch * settings.accumulation
    workers = {f: _WorkerProcess(f, settings) for f in frameworks}
    times: dict[str, list[float]] = {f: [] for f in frameworks}
    peaks: dict[str, int] = {f: 0 for f in frameworks}
    tensor_peaks: dict[str, int] = {}
    info: dict[str, dict[str, Any]] = {}
    try:
        bar = tqdm(total=len(frameworks) * (settings.rounds + 2), desc="benchmark",
                   disable=not progress, unit="phase")
        for f, w in workers.items():  # one at a time: compilation is CPU-heavy
            bar.set_postfix_str(f"{f}: build + warm-up")
            info[f] = w.call("setup")
            bar.update()
        for r in range(settings.rounds):
            order = frameworks if r % 2 == 0 else frameworks[::-1]
            for f in order:
                bar.set_postfix_str(f"round {r + 1}/{settings.rounds}: {f}")
                reply = workers[f].call("steps", n=settings.steps)
                times[f].extend(reply["times"])
                peaks[f] = max(peaks[f], reply["peak_bytes"])
                if "tensor_peak_bytes" in reply:
                    tensor_peaks[f] = max(tensor_peaks.get(f, 0), reply["tensor_peak_bytes"])
                bar.update()
        for f, w in workers.items():
            bar.set_postfix_str(f"{f}: matmul peak")
            info[f].update(w.call("matmul"))
            if f == "albertkit" and settings.pipeline:
                bar.set_postfix_str("input pipeline")
                info[f].update(w.call("pipeline"))
            bar.update()
        bar.close()
    finally:
        for w in workers.values():
            w.close()

    results: dict[str, Any] = {}
    for f in frameworks:
        row = {**info[f], **_summary(times[f], per_step), "step_times_s": times[f],
               "peak_bytes": peaks[f], "training_bytes": peaks[f] - info[f]["baseline_rss"]}
        if f in tensor_peaks:
            row["tensor_peak_bytes"] = tensor_peaks[f]
        row["model_flops_per_s"] = row["sequences_per_s"] * flops.training
        row["mfu"] = row["model_flops_per_s"] / row["matmul_flops_per_s"]
        results[f] = row
    ak = results["albertkit"]
    planned = estimate_memory(spec, settings.seq_length, settings.micro_batch,
                              settings.precision, settings.predictions, settings.accumulation)
    out: dict[str, Any] = {
        "settings": settings.model_dump(),
        "spec": spec.model_dump(),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "load_avg": list(os.getloadavg())},
        "model_flops_per_sequence": flops.training,
        "model_flops_parts_forward": flops.parts,
        "results": results,
        "planner": {"predicted_bytes": planned.peak_bytes,
                    "measured_tensor_peak_bytes": ak["tensor_peak_bytes"],
                    "predicted_over_measured": planned.peak_bytes / max(ak["tensor_peak_bytes"], 1),
                    "estimate": planned.as_dict()},
    }
    if "pipeline_sequences_per_s" in ak:
        out["pipeline_over_step"] = ak["pipeline_sequences_per_s"] / ak["sequences_per_s"]
    if "hf-pytorch" in results:
        hf = results["hf-pytorch"]
        out["ratios_vs_hf"] = {
            "sequences_per_s": ak["sequences_per_s"] / hf["sequences_per_s"],
            "sequences_per_s_worst_case": ak["sequences_per_s_min"] / hf["sequences_per_s_max"],
            "peak_memory": ak["peak_bytes"] / hf["peak_bytes"],
            "training_memory": ak["training_bytes"] / max(hf["training_bytes"], 1),
        }
    return out


# =========================================================================== output
def _mib(x: float) -> str:
    return f"{x / 2**20:,.0f}"


def format_table(result: dict[str, Any]) -> str:
    """A Markdown table of a :func:`run_benchmark` result (one row per framework)."""
    s = result["settings"]
    head = (f"ALBERT-{s['size']} seq {s['seq_length']} micro-batch {s['micro_batch']} x "
            f"accumulation {s['accumulation']}, {s['precision']}, XLA "
            f"{'on' if s['xla'] else 'off'}, {s['optimizer']}; "
            f"{len(next(iter(result['results'].values()))['step_times_s'])} timed steps per "
            f"framework ({s['rounds']} interleaved rounds); load avg "
            f"{result['machine']['load_avg'][0]:.1f}")
    lines = [head, "",
             "| framework | seq/s (median) | step s median [min-max] | IQR % | peak RSS MiB | "
             "train MiB | tensor MiB | matmul GFLOP/s | MFU % | first step s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for f, r in result["results"].items():
        lines.append(
            f"| {f} | {r['sequences_per_s']:.2f} | {r['step_s_median']:.3f} "
            f"[{r['step_s_min']:.3f}-{r['step_s_max']:.3f}] | {r['spread_iqr_pct']:.1f} | "
            f"{_mib(r['peak_bytes'])} | {_mib(r['training_bytes'])} | "
            f"{_mib(r['tensor_peak_bytes']) if 'tensor_peak_bytes' in r else '-'} | "
            f"{r['matmul_flops_per_s'] / 1e9:.1f} | {100 * r['mfu']:.1f} | "
            f"{r['first_step_s']:.1f} |")
    lines.append("")
    lines.append("peak RSS: the process's resident peak during the timed steps; train: minus "
                 "its RSS before the model was built; tensor: TensorFlow allocator peak")
    if "ratios_vs_hf" in result:
        q = result["ratios_vs_hf"]
        lines.append(f"albertkit / hf-pytorch: sequences/s x{q['sequences_per_s']:.2f} "
                     f"(worst case x{q['sequences_per_s_worst_case']:.2f}), peak memory "
                     f"x{q['peak_memory']:.2f}, training memory x{q['training_memory']:.2f}")
    ak = result["results"]["albertkit"]
    if "pipeline_sequences_per_s" in ak:
        lines.append(f"input pipeline ({ak['pipeline_source']}): "
                     f"{ak['pipeline_sequences_per_s']:,.0f} seq/s = "
                     f"x{result['pipeline_over_step']:.1f} the step's consumption")
    p = result["planner"]
    lines.append(f"memory planner: predicted {_mib(p['predicted_bytes'])} MiB vs measured "
                 f"{_mib(p['measured_tensor_peak_bytes'])} MiB peak of TensorFlow's allocator "
                 f"(x{p['predicted_over_measured']:.2f})")
    return "\n".join(lines)


# =========================================================================== CLI
def _parse_int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}"
                                         ) from None


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``albertkit benchmark`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "benchmark", help="measure the training step (and compare with HF PyTorch)",
        description="Measure albertkit's training step: sequences/s, step time, peak memory, "
                    "MFU, input pipeline; optionally side by side with Hugging Face PyTorch.")
    p.add_argument("--size", default="base", choices=list(SIZES))
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--max-predictions", type=int, default=None,
                   help="masked positions per sequence (default ceil(0.15 x seq length))")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--accumulation", type=int, default=1)
    p.add_argument("--precision", default="float32",
                   choices=["float32", "mixed_float16", "mixed_bfloat16"])
    p.add_argument("--xla", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw")
    p.add_argument("--steps", type=int, default=5, help="timed steps per round and framework")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compare", choices=["hf-pytorch"], action="append", default=[])
    p.add_argument("--processes", type=_parse_int_list, default=[1],
                   help="comma-separated process counts (data parallel), e.g. 1,2")
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false")
    p.add_argument("--hf-threads", type=int, default=None,
                   help="torch threads for --compare hf-pytorch (default: torch's own)")
    p.add_argument("--set", dest="model", action="append", default=[], metavar="FIELD=VALUE",
                   help="model field override, e.g. --set num_hidden_layers=2")
    p.add_argument("--json", type=Path, default=None, help="write the full result here")
    p.set_defaults(func=cmd_benchmark)
    return p


def cmd_benchmark(args: argparse.Namespace) -> int:
    """The ``albertkit benchmark`` command."""
    import yaml

    from albertkit.config import atomic_write_text

    model: dict[str, Any] = {}
    for item in args.model:
        key, sep, value = item.partition("=")
        if not sep:
            raise BenchmarkError(f"--set {item!r} must look like field=value")
        model[key.strip()] = yaml.safe_load(value)
    settings = BenchmarkSettings(
        size=args.size, model=model, seq_length=args.seq_length,
        max_predictions=args.max_predictions, micro_batch=args.micro_batch,
        accumulation=args.accumulation, precision=args.precision, xla=args.xla,
        optimizer=args.optimizer, steps=args.steps, warmup=args.warmup, rounds=args.rounds,
        compare=args.compare, processes=args.processes, pipeline=args.pipeline,
        hf_threads=args.hf_threads)
    result = run_benchmark(settings)
    print(format_table(result))
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(result, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "worker":
        raise SystemExit(worker_main(sys.argv[2], sys.argv[3]))
    raise SystemExit("usage: python -m albertkit.benchmark worker FRAMEWORK SETTINGS_JSON "
                     "(internal; use `albertkit benchmark`)")
