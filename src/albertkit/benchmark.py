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
from albertkit.training.native import limit_malloc_arenas

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
    remat: bool = Field(False, description="recompute each layer in the backward pass")
    malloc_arenas: int | None = Field(
        None, gt=0, description="cap glibc malloc arenas in every worker (None: glibc default)"
    )
    steps: int = Field(5, gt=0, description="timed steps per round and framework")
    warmup: int = Field(2, ge=1, description="untimed steps (compilation) before timing")
    rounds: int = Field(3, gt=0)
    compare: list[Framework] = []
    processes: list[int] = [1]
    pipeline: bool = True
    pipeline_batches: int = Field(200, gt=0)
    breakdown: bool = Field(False, description="also time the step's pieces (albertkit)")
    hf_threads: int | None = Field(None, gt=0, description="torch threads (None: its default)")
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> BenchmarkSettings:
        spec = self.spec  # validates the overrides
        if self.seq_length > spec.max_position_embeddings:
            raise ValueError(
                f"seq_length={self.seq_length} exceeds model "
                f"max_position_embeddings={spec.max_position_embeddings}"
            )
        if self.predictions > self.seq_length:
            raise ValueError(
                f"max_predictions={self.predictions} exceeds seq_length={self.seq_length}"
            )
        if "hf-pytorch" in self.compare and spec.pre_layer_norm:
            raise ValueError("--compare hf-pytorch: Hugging Face ALBERT has no pre_layer_norm")
        if "hf-pytorch" in self.compare and self.precision == "mixed_float16":
            raise ValueError(
                "--compare hf-pytorch runs CPU PyTorch: use float32 or "
                "mixed_bfloat16 (autocast), not mixed_float16"
            )
        if any(p < 1 for p in self.processes):
            raise ValueError(f"processes={self.processes}: every entry must be >= 1")
        return self

    @property
    def spec(self) -> AlbertSpec:
        # Dropout off on both sides (issue 9): v2 presets have none except the classifier.
        fields = {
            **SIZES[self.size],
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
            "classifier_dropout_prob": 0.0,
            **self.model,
        }
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

    a, b, t, p = (
        settings.accumulation,
        settings.micro_batch,
        settings.seq_length,
        settings.predictions,
    )
    vocab = settings.spec.vocab_size
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, t), p, replace=False) for _ in range(a * b)]), axis=1
    ).reshape(a, b, p)
    return {
        "input_ids": rng.integers(5, vocab, (a, b, t)).astype(np.int32),
        "input_mask": np.ones((a, b, t), np.int32),
        "segment_ids": (np.arange(t)[None, None, :] >= t // 2)
        .astype(np.int32)
        .repeat(a, 0)
        .repeat(b, 1),
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.integers(5, vocab, (a, b, p)).astype(np.int32),
        "masked_lm_weights": np.ones((a, b, p), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (a, b)).astype(np.int32),
    }


# =========================================================================== workers
class _AlbertkitWorker:
    """The albertkit side: the trainer's own TrainStep on a fixed batch.

    With a multi-process ``distributor`` each step's batch comes from a repeated in-memory
    ``tf.data`` dataset through ``distributor.distribute_dataset``, as in the trainer.
    """

    def __init__(self, settings: BenchmarkSettings, distributor: Any = None) -> None:
        self.s = settings
        self.memory = PeakMemory()
        self.distributor = distributor

    def setup(self) -> dict[str, Any]:
        import numpy as np
        import tensorflow as tf

        from albertkit.config import TrainerConfig
        from albertkit.distributed.single import SingleProcess
        from albertkit.tasks import build_task
        from albertkit.training.step import TrainStep

        s = self.s
        self.gpu = bool(tf.config.list_physical_devices("GPU"))
        baseline = self.memory.rss()
        distributor = self.distributor or SingleProcess()
        cfg = TrainerConfig.from_dict(
            {
                "model": {"size": s.size, **s.spec.model_dump()},
                "data": {
                    "kind": "synthetic",
                    "seq_length": s.seq_length,
                    "max_predictions_per_seq": s.predictions,
                },
                "optimizer": {"kind": s.optimizer},
                "runtime": {
                    "precision": s.precision,
                    "xla": s.xla,
                    "seed": s.seed,
                    "micro_batch_size": s.micro_batch,
                    "global_batch_size": s.micro_batch * s.accumulation,
                    "max_steps": 1_000_000,
                },
            },
            source="benchmark",
        )
        import keras

        keras.utils.set_random_seed(s.seed)
        t0 = time.perf_counter()
        task = build_task(cfg, s.spec)
        with distributor.scope():
            if s.remat:
                from albertkit.models.albert import AlbertForPretraining

                model = AlbertForPretraining(s.spec, dtype=s.precision, remat=True)
                model(task.dummy_batch(2), training=False)
            else:
                model = task.build_model()
            optimizer = cfg.optimizer.build(total_steps=cfg.runtime.max_steps)
            self.step = TrainStep(
                task,
                model,
                optimizer,
                distributor,
                cfg.runtime,
                s.accumulation,
                cfg.optimizer.clip_norm,
            )
        rng = np.random.default_rng(s.seed + distributor.rank)
        self.batch = {k: tf.constant(v) for k, v in _random_batch(s, rng).items()}
        self.batches = None
        if self.distributor is not None:
            ds = tf.data.Dataset.from_tensors(self.batch).repeat().prefetch(2)
            self.batches = iter(distributor.distribute_dataset(ds))
        build_s = time.perf_counter() - t0
        warm = _timed(self._run_step, s.warmup)
        return {
            "framework": "albertkit",
            "params": int(model.count_params()),
            "baseline_rss": baseline,
            "build_s": build_s,
            "first_step_s": warm[0],
            "threads": {
                "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            },
            "device": "GPU" if self.gpu else "CPU",
            "memory_method": self.memory.method,
            "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
        }

    def _run_step(self) -> None:
        batch = self.batch if self.batches is None else next(self.batches)
        metrics = self.step(batch)
        float(metrics["grad_norm"])  # wait for the step (and its update) to finish

    def steps(self, n: int) -> dict[str, Any]:
        import tensorflow as tf

        matmul = self.matmul()  # the device's peak now, under the load the steps will see
        # TensorFlow's allocator statistics (GPU, and CPU since TF 2.x) count exactly the
        # tensors of the step (XLA's buffers included): the quantity the planner predicts.
        device = "GPU:0" if self.gpu else "CPU:0"
        tf.config.experimental.reset_memory_stats(device)
        self.memory.reset()
        cpu0 = time.process_time()
        times = _timed(self._run_step, n)
        cpu = time.process_time() - cpu0
        tensors = tf.config.experimental.get_memory_info(device)
        return {
            "times": times,
            "cpu_s": cpu,
            "peak_bytes": int(self.memory.peak()),
            "tensor_peak_bytes": int(tensors["peak"]),
            "tensor_current_bytes": int(tensors["current"]),
            **matmul,
        }

    def matmul(self) -> dict[str, Any]:
        import tensorflow as tf

        if not hasattr(self, "_matmul"):
            n = 2048 if not self.gpu else 8192
            dtype = (
                tf.float32
                if self.s.precision == "float32"
                else (tf.bfloat16 if self.s.precision == "mixed_bfloat16" else tf.float16)
            )
            a = tf.cast(tf.random.normal((n, n), dtype=tf.float32), dtype)
            fn = tf.function(lambda x: tf.reduce_sum(tf.cast(tf.matmul(x, x), tf.float32)))
            fn(a).numpy()
            self._matmul = (fn, a, n, dtype.name)
        fn, a, n, dtype_name = self._matmul
        t = min(_timed(lambda: fn(a).numpy(), 3))
        return {"matmul_flops_per_s": 2.0 * n**3 / t, "matmul_n": n, "matmul_dtype": dtype_name}

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
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
        batch = _random_batch(s, np.random.default_rng(s.seed))
        a, b, t = s.accumulation, s.micro_batch, s.seq_length
        labels = np.full((a, b, t), -100, np.int64)
        np.put_along_axis(
            labels,
            batch["masked_lm_positions"].astype(np.int64),
            batch["masked_lm_ids"].astype(np.int64),
            axis=2,
        )
        self.micro = [
            {
                "input_ids": torch.tensor(batch["input_ids"][i], dtype=torch.long),
                "attention_mask": torch.tensor(batch["input_mask"][i], dtype=torch.long),
                "token_type_ids": torch.tensor(batch["segment_ids"][i], dtype=torch.long),
                "labels": torch.tensor(labels[i]),
                "sentence_order_label": torch.tensor(
                    batch["next_sentence_labels"][i], dtype=torch.long
                ),
            }
            for i in range(a)
        ]
        self.autocast = (
            torch.autocast("cpu", dtype=torch.bfloat16)
            if s.precision == "mixed_bfloat16"
            else contextlib.nullcontext()
        )
        build_s = time.perf_counter() - t0
        warm = _timed(self._run_step, s.warmup)
        return {
            "framework": "hf-pytorch",
            "params": int(sum(p.numel() for p in self.model.parameters())),
            "baseline_rss": baseline,
            "build_s": build_s,
            "first_step_s": warm[0],
            "threads": {
                "intra_op": torch.get_num_threads(),
                "inter_op": torch.get_num_interop_threads(),
            },
            "attention": self.model.config._attn_implementation,
            "device": "CPU",
            "memory_method": self.memory.method,
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
        matmul = self.matmul()
        self.memory.reset()
        cpu0 = time.process_time()
        times = _timed(self._run_step, n)
        cpu = time.process_time() - cpu0
        return {"times": times, "cpu_s": cpu, "peak_bytes": int(self.memory.peak()), **matmul}

    def matmul(self) -> dict[str, Any]:
        import torch

        n = 2048
        dtype = torch.bfloat16 if self.s.precision == "mixed_bfloat16" else torch.float32
        a = torch.randn(n, n, dtype=dtype)
        (a @ a).sum().item()
        t = min(_timed(lambda: (a @ a).sum().item(), 3))
        return {"matmul_flops_per_s": 2.0 * n**3 / t, "matmul_n": n, "matmul_dtype": str(dtype)}

    def pipeline(self) -> dict[str, Any]:
        return {}


def step_breakdown(
    step: Any, batch: dict[str, Any], s: BenchmarkSettings, repeats: int = 3
) -> dict[str, float]:
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
        "one transformer layer fwd+bwd": fwd_bwd(lambda x: layer(x, bias, training=True), hidden),
        "attention block fwd+bwd": fwd_bwd(
            lambda x: layer.attention(x, bias, training=True), hidden
        ),
        "MLM head (gathered) fwd+bwd": fwd_bwd(mlm, masked),
        "MLM head at all T positions fwd+bwd (HF's way)": fwd_bwd(mlm, hidden),
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
        result[name] = statistics.median(_timed(lambda fn=fn, args=args: sync(fn(*args)), repeats))
    result["layers x num_hidden_layers (fwd+bwd)"] = (
        result["one transformer layer fwd+bwd"] * s.spec.num_hidden_layers * s.spec.inner_group_num
    )
    return result


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
        files = _write_pretraining_records(
            Path(tmp),
            s,
            max(4096, 8 * s.micro_batch * s.accumulation),
            np.random.default_rng(s.seed),
        )
        static = pd.build_pretraining_dataset(
            files,
            seq_length=s.seq_length,
            max_predictions_per_seq=s.predictions,
            batch_size=s.micro_batch,
            masking="static",
            shuffle_buffer=1000,
            seed=s.seed,
            deterministic=True,
            repeat=True,
            training=True,
        )
        out["pipeline_tfrecord_sequences_per_s"] = _pipeline_rate(static, s)
    dynamic = pd.build_synthetic_dataset(
        vocab_size=s.spec.vocab_size,
        seq_length=s.seq_length,
        max_predictions_per_seq=s.predictions,
        batch_size=s.micro_batch,
        num_examples=64 * s.micro_batch,
        seed=s.seed,
        repeat=True,
    )
    out["pipeline_synthetic_sequences_per_s"] = _pipeline_rate(dynamic, s)
    out["pipeline_source"] = "tfrecord (static masking)"
    out["pipeline_sequences_per_s"] = out["pipeline_tfrecord_sequences_per_s"]
    return out


def _pipeline_rate(ds: Any, s: BenchmarkSettings) -> float:
    import tensorflow as tf

    per_step = s.micro_batch * s.accumulation
    ds = ds.batch(s.accumulation, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    it = iter(ds)
    for _ in range(5):
        next(it)
    t0 = time.perf_counter()
    steps = 0
    while steps < s.pipeline_batches or time.perf_counter() - t0 < 2.0:
        next(it)
        steps += 1
    return steps * per_step / (time.perf_counter() - t0)


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
    if settings.malloc_arenas:
        limit_malloc_arenas(settings.malloc_arenas)
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
            [
                sys.executable,
                "-m",
                "albertkit.benchmark",
                "worker",
                framework,
                settings.model_dump_json(),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
        )

    def call(self, cmd: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(MARKER):
                reply = json.loads(line[len(MARKER) :])
                if not reply.pop("ok"):
                    raise BenchmarkError(f"{self.framework} worker, {cmd}: {reply['error']}")
                return reply
        self.stderr.seek(0)
        tail = "".join(self.stderr.readlines()[-15:])
        raise BenchmarkError(
            f"{self.framework} worker died during {cmd!r} (exit code {self.proc.wait()}):\n{tail}"
        )

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
        "step_s_median": median,
        "step_s_min": ordered[0],
        "step_s_max": ordered[-1],
        "step_s_q1": q[0],
        "step_s_q3": q[2],
        "spread_iqr_pct": 100.0 * (q[2] - q[0]) / median,
        "sequences_per_s": sequences_per_step / median,
        "sequences_per_s_min": sequences_per_step / ordered[-1],
        "sequences_per_s_max": sequences_per_step / ordered[0],
    }


def _interleaved(
    settings: BenchmarkSettings, frameworks: list[str], progress: bool
) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Set up one worker per framework, then alternate timed rounds between them."""
    from tqdm.auto import tqdm

    workers = {f: _WorkerProcess(f, settings) for f in frameworks}
    info: dict[str, dict[str, Any]] = {}
    rounds: dict[str, list[dict[str, Any]]] = {f: [] for f in frameworks}
    pipeline = settings.pipeline
    try:
        bar = tqdm(
            total=len(frameworks) * (settings.rounds + 1) + int(pipeline),
            desc="benchmark",
            disable=not progress,
            unit="phase",
        )
        with bar:
            for f, w in workers.items():  # one at a time: compilation is CPU-heavy
                bar.set_postfix_str(f"{f}: build + warm-up")
                info[f] = w.call("setup")
                bar.update()
            for r in range(settings.rounds):
                for f in frameworks if r % 2 == 0 else frameworks[::-1]:
                    bar.set_postfix_str(f"round {r + 1}/{settings.rounds}: {f}")
                    rounds[f].append(workers[f].call("steps", n=settings.steps))
                    bar.update()
            if pipeline:
                bar.set_postfix_str("input pipeline")
                info["albertkit"].update(workers["albertkit"].call("pipeline"))
                bar.update()
            if settings.breakdown:
                bar.set_postfix_str("step breakdown")
                info["albertkit"].update(workers["albertkit"].call("breakdown"))
    finally:
        for w in workers.values():
            w.close()
    return info, rounds


def _row(
    info: dict[str, Any], rounds: list[dict[str, Any]], per_step: int, flops_per_sequence: float
) -> dict[str, Any]:
    """One framework's figures: step-time statistics over all rounds, per-round MFU."""
    times = [t for r in rounds for t in r["times"]]
    row = {
        **info,
        **_summary(times, per_step),
        "step_times_s": times,
        "peak_bytes": max(r["peak_bytes"] for r in rounds),
    }
    row["training_bytes"] = row["peak_bytes"] - info["baseline_rss"]
    row["cpu_s_per_step"] = sum(r["cpu_s"] for r in rounds) / len(times)
    if any("tensor_peak_bytes" in r for r in rounds):
        row["tensor_peak_bytes"] = max(r.get("tensor_peak_bytes", 0) for r in rounds)
    # The matmul peak is measured right before each round, so each round's MFU compares the
    # step with the device under the same load; the median over rounds is reported.
    mfus = [
        per_step * flops_per_sequence / statistics.median(r["times"]) / r["matmul_flops_per_s"]
        for r in rounds
    ]
    row["matmul_flops_per_s"] = max(r["matmul_flops_per_s"] for r in rounds)
    row["matmul_flops_per_s_rounds"] = [r["matmul_flops_per_s"] for r in rounds]
    row["model_flops_per_s"] = row["sequences_per_s"] * flops_per_sequence
    row["mfu"] = statistics.median(mfus)
    row["mfu_rounds"] = mfus
    return row


def run_benchmark(settings: BenchmarkSettings, progress: bool = True) -> dict[str, Any]:
    """Run the benchmark described by ``settings``; returns a JSON-serialisable dict."""
    frameworks: list[str] = ["albertkit", *[c for c in settings.compare if c != "albertkit"]]
    spec = settings.spec
    flops = training_flops(spec, settings.seq_length, settings.predictions)
    per_step = settings.micro_batch * settings.accumulation
    info, rounds = _interleaved(settings, frameworks, progress)
    results = {f: _row(info[f], rounds[f], per_step, flops.training) for f in frameworks}
    ak = results["albertkit"]
    planned = estimate_memory(
        spec,
        settings.seq_length,
        settings.micro_batch,
        settings.precision,
        settings.predictions,
        settings.accumulation,
        remat=settings.remat,
    )
    out: dict[str, Any] = {
        "settings": settings.model_dump(),
        "spec": spec.model_dump(),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_avg": list(os.getloadavg()),
        },
        "model_flops_per_sequence": flops.training,
        "model_flops_parts_forward": flops.parts,
        "results": results,
        "planner": {
            "predicted_bytes": planned.peak_bytes,
            "measured_tensor_peak_bytes": ak["tensor_peak_bytes"],
            "predicted_over_measured": planned.peak_bytes / max(ak["tensor_peak_bytes"], 1),
            "estimate": planned.as_dict(),
        },
    }
    if "pipeline_sequences_per_s" in ak:
        out["pipeline_over_step"] = ak["pipeline_sequences_per_s"] / ak["sequences_per_s"]
    if "hf-pytorch" in results:
        hf = results["hf-pytorch"]
        out["ratios_vs_hf"] = {
            "sequences_per_s": ak["sequences_per_s"] / hf["sequences_per_s"],
            "sequences_per_s_worst_case": ak["sequences_per_s_min"] / hf["sequences_per_s_max"],
            "sequences_per_s_best_case": ak["sequences_per_s_max"] / hf["sequences_per_s_min"],
            "cpu_s_per_step": ak["cpu_s_per_step"] / hf["cpu_s_per_step"],
            "peak_memory": ak["peak_bytes"] / hf["peak_bytes"],
            "training_memory": ak["training_bytes"] / max(hf["training_bytes"], 1),
        }
    multi = [n for n in settings.processes if n > 1]
    if multi:
        out["data_parallel"] = {str(n): run_data_parallel(settings, n) for n in multi}
        for n, row in out["data_parallel"].items():
            row["scaling_efficiency"] = row["sequences_per_s"] / (int(n) * ak["sequences_per_s"])
    return out


def run_data_parallel(
    settings: BenchmarkSettings, processes: int, timeout: float = 3600.0
) -> dict[str, Any]:
    """albertkit's step as ``processes`` local tf_multiworker processes (the CLI's --nproc).

    Every process runs ``warmup`` + ``rounds x steps`` steps of micro-batch x accumulation
    sequences each (so the global batch grows with the process count); rank 0 reports.
    """
    import io

    from albertkit.distributed.launch import launch_local

    out = io.StringIO()
    code = launch_local(
        [sys.executable, "-m", "albertkit.benchmark", "rank", settings.model_dump_json()],
        processes,
        "tf_multiworker",
        timeout=timeout,
        output=out,
    )
    lines = [line.split(MARKER, 1)[1] for line in out.getvalue().splitlines() if MARKER in line]
    if code != 0 or not lines:
        tail = "\n".join(out.getvalue().splitlines()[-15:])
        raise BenchmarkError(
            f"--processes {processes}: the launched job failed (exit code {code}):\n{tail}"
        )
    reply = json.loads(lines[-1])
    per_step = processes * settings.micro_batch * settings.accumulation
    flops = training_flops(settings.spec, settings.seq_length, settings.predictions).training
    row = _row(reply["info"], reply["rounds"], per_step, flops)
    row["processes"] = processes
    return row


def rank_main(settings_json: str) -> int:
    """One process of a launched data-parallel benchmark (TF_CONFIG set by the launcher)."""
    from albertkit.config import DistributedConfig
    from albertkit.distributed import build_distributor

    settings = BenchmarkSettings.model_validate_json(settings_json)
    if settings.malloc_arenas:
        limit_malloc_arenas(settings.malloc_arenas)
    distributor = build_distributor(DistributedConfig(backend="tf_multiworker"))
    worker = _AlbertkitWorker(settings, distributor)
    info = worker.setup()
    rounds = [worker.steps(settings.steps) for _ in range(settings.rounds)]
    if distributor.is_chief:
        print(MARKER + json.dumps({"info": info, "rounds": rounds}), flush=True)
    return 0


# =========================================================================== output
def _mib(x: float) -> str:
    return f"{x / 2**20:,.0f}"


def format_table(result: dict[str, Any]) -> str:
    """A Markdown table of a :func:`run_benchmark` result (one row per framework)."""
    s = result["settings"]
    head = (
        f"ALBERT-{s['size']} seq {s['seq_length']} micro-batch {s['micro_batch']} x "
        f"accumulation {s['accumulation']}, {s['precision']}, XLA "
        f"{'on' if s['xla'] else 'off'}, {s['optimizer']}"
        f"{', remat' if s.get('remat') else ''}"
        f"{', malloc arenas ' + str(s['malloc_arenas']) if s.get('malloc_arenas') else ''}; "
        f"{len(next(iter(result['results'].values()))['step_times_s'])} timed steps per "
        f"framework ({s['rounds']} interleaved rounds); load avg "
        f"{result['machine']['load_avg'][0]:.1f}"
    )
    lines = [
        head,
        "",
        "| framework | seq/s (median) | step s median [min-max] | IQR % | CPU s/step | "
        "peak RSS MiB | train MiB | tensor MiB | matmul GFLOP/s | MFU % | first step s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = list(result["results"].items())
    rows += [(f"albertkit x{n} processes", r) for n, r in result.get("data_parallel", {}).items()]
    for f, r in rows:
        lines.append(
            f"| {f} | {r['sequences_per_s']:.2f} | {r['step_s_median']:.3f} "
            f"[{r['step_s_min']:.3f}-{r['step_s_max']:.3f}] | {r['spread_iqr_pct']:.1f} | "
            f"{r['cpu_s_per_step']:.2f} | {_mib(r['peak_bytes'])} | "
            f"{_mib(r['training_bytes'])} | "
            f"{_mib(r['tensor_peak_bytes']) if 'tensor_peak_bytes' in r else '-'} | "
            f"{r['matmul_flops_per_s'] / 1e9:.1f} | {100 * r['mfu']:.1f} | "
            f"{r['first_step_s']:.1f} |"
        )
    lines.append("")
    lines.append(
        "peak RSS: the process's resident peak during the timed steps; train: minus "
        "its RSS before the model was built; tensor: TensorFlow allocator peak; "
        "MFU: median over rounds of model FLOP/s over the matmul peak measured just "
        "before that round"
    )
    for n, r in result.get("data_parallel", {}).items():
        lines.append(
            f"{n} processes (tf_multiworker, global batch x{n}): scaling efficiency "
            f"{100 * r['scaling_efficiency']:.0f}% of {n} x the 1-process seq/s"
        )
    if "ratios_vs_hf" in result:
        q = result["ratios_vs_hf"]
        lines.append(
            f"albertkit / hf-pytorch: sequences/s x{q['sequences_per_s']:.2f} "
            f"(range x{q['sequences_per_s_worst_case']:.2f}-"
            f"x{q['sequences_per_s_best_case']:.2f}), CPU s/step "
            f"x{q['cpu_s_per_step']:.2f}, peak memory x{q['peak_memory']:.2f}, "
            f"training memory x{q['training_memory']:.2f}"
        )
    ak = result["results"]["albertkit"]
    if "pipeline_sequences_per_s" in ak:
        lines.append(
            f"input pipeline ({ak['pipeline_source']}): "
            f"{ak['pipeline_sequences_per_s']:,.0f} seq/s = "
            f"x{result['pipeline_over_step']:.1f} the step's consumption; with "
            f"dynamic masking (synthetic source): "
            f"{ak['pipeline_synthetic_sequences_per_s']:,.0f} seq/s"
        )
    elif "pipeline_source" in ak:
        lines.append(f"input pipeline: {ak['pipeline_source']}")
    if "breakdown_s" in ak:
        lines += ["", "| piece (albertkit, median of 3) | seconds |", "|---|---:|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in ak["breakdown_s"].items()]
    p = result["planner"]
    lines.append(
        f"memory planner: predicted {_mib(p['predicted_bytes'])} MiB vs measured "
        f"{_mib(p['measured_tensor_peak_bytes'])} MiB peak of TensorFlow's allocator "
        f"(x{p['predicted_over_measured']:.2f})"
    )
    return "\n".join(lines)


# =========================================================================== CLI
def _parse_int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``albertkit benchmark`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "benchmark",
        help="measure the training step (and compare with HF PyTorch)",
        description="Measure albertkit's training step: sequences/s, step time, peak memory, "
        "MFU, input pipeline; optionally side by side with Hugging Face PyTorch.",
    )
    p.add_argument("--size", default="base", choices=list(SIZES))
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument(
        "--max-predictions",
        type=int,
        default=None,
        help="masked positions per sequence (default ceil(0.15 x seq length))",
    )
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--accumulation", type=int, default=1)
    p.add_argument(
        "--precision", default="float32", choices=["float32", "mixed_float16", "mixed_bfloat16"]
    )
    p.add_argument("--xla", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw")
    p.add_argument(
        "--remat",
        action="store_true",
        help="albertkit recomputes each layer in the backward pass (less memory)",
    )
    p.add_argument(
        "--malloc-arenas",
        type=int,
        default=None,
        help="cap glibc malloc arenas in both frameworks' processes (e.g. 2)",
    )
    p.add_argument("--steps", type=int, default=5, help="timed steps per round and framework")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compare", choices=["hf-pytorch"], action="append", default=[])
    p.add_argument(
        "--processes",
        type=_parse_int_list,
        default=[1],
        help="comma-separated process counts (data parallel), e.g. 1,2",
    )
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false")
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="also time the pieces of albertkit's step (docs/performance.md)",
    )
    p.add_argument(
        "--hf-threads",
        type=int,
        default=None,
        help="torch threads for --compare hf-pytorch (default: torch's own)",
    )
    p.add_argument(
        "--set",
        dest="model",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="model field override, e.g. --set num_hidden_layers=2",
    )
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
        size=args.size,
        model=model,
        seq_length=args.seq_length,
        max_predictions=args.max_predictions,
        micro_batch=args.micro_batch,
        accumulation=args.accumulation,
        precision=args.precision,
        xla=args.xla,
        optimizer=args.optimizer,
        steps=args.steps,
        warmup=args.warmup,
        rounds=args.rounds,
        compare=args.compare,
        processes=args.processes,
        pipeline=args.pipeline,
        hf_threads=args.hf_threads,
        breakdown=args.breakdown,
        remat=args.remat,
        malloc_arenas=args.malloc_arenas,
    )
    result = run_benchmark(settings)
    print(format_table(result))
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(result, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "worker":
        raise SystemExit(worker_main(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "rank":
        raise SystemExit(rank_main(sys.argv[2]))
    raise SystemExit(
        "usage: python -m albertkit.benchmark worker FRAMEWORK SETTINGS_JSON "
        "(internal; use `albertkit benchmark`)"
    )
