"""The two benchmark workers: albertkit's training step and Hugging Face's, one per process.

Each worker answers the same commands (``setup``, ``steps``, ``pipeline``, ``breakdown``)
with JSON-serialisable dicts; :mod:`albertkit.perf.runner` drives them. Both
train on the same random pretraining batch (:func:`random_batch`), with dropout off.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from albertkit.perf.meter import PeakMemory, timed
from albertkit.perf.settings import BenchmarkSettings

if TYPE_CHECKING:
    from albertkit.config import TrainerConfig
    from albertkit.distributed import Distributor


def random_batch(settings: BenchmarkSettings, rng) -> dict[str, Any]:
    """One optimizer step of pretraining inputs, ``[accumulation, micro_batch, ...]``."""
    import numpy as np

    s = settings
    a, b, t, p = s.accumulation, s.micro_batch, s.seq_length, s.predictions
    vocab = settings.spec.vocab_size
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, t), p, replace=False) for _ in range(a * b)]), axis=1
    ).reshape(a, b, p)
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


def trainer_config(settings: BenchmarkSettings, replicas: int = 1) -> TrainerConfig:
    """The trainer's config for the benchmark's step: synthetic pretraining data, the
    settings' model, precision, XLA, optimizer and remat, ``micro_batch x accumulation``
    sequences per replica and step."""
    from albertkit.config import TrainerConfig

    s = settings
    return TrainerConfig.from_dict({
        "model": {"size": s.size, **s.spec.model_dump()},
        "data": {"kind": "synthetic", "seq_length": s.seq_length,
                 "max_predictions_per_seq": s.predictions},
        "optimizer": {"kind": s.optimizer},
        "runtime": {
            "precision": s.precision, "xla": s.xla, "remat": s.remat, "seed": s.seed,
            "micro_batch_size": s.micro_batch,
            "global_batch_size": s.sequences_per_step * replicas,
            "max_steps": 1_000_000,
            "sifting": None if s.sifting_beta is None
            else {"beta": s.sifting_beta, "warmup_steps": 0},
        },
    }, source="benchmark")


def _timed_steps(memory: PeakMemory, run_step, n: int) -> dict[str, Any]:
    """Seconds of each of ``n`` steps, the process's CPU seconds and its peak memory."""
    memory.reset()
    cpu0 = time.process_time()
    times = timed(run_step, n)
    return {"times": times, "cpu_s": time.process_time() - cpu0,
            "peak_bytes": int(memory.peak())}


class AlbertkitWorker:
    """The albertkit side: the trainer's own model and TrainStep on a fixed batch.

    With a multi-process ``distributor`` each step's batch comes from a repeated in-memory
    ``tf.data`` dataset through ``distributor.distribute_dataset``, as in the trainer.
    """

    def __init__(self, settings: BenchmarkSettings, distributor: Distributor | None = None) -> None:
        self.s = settings
        self.memory = PeakMemory()
        self.distributor = distributor

    def setup(self) -> dict[str, Any]:
        import keras
        import numpy as np
        import tensorflow as tf

        from albertkit.distributed.single import SingleProcess
        from albertkit.training.builders import build_model_and_step

        s = self.s
        self.gpu = bool(tf.config.list_physical_devices("GPU"))
        baseline = self.memory.rss()
        distributor = self.distributor or SingleProcess()
        t0 = time.perf_counter()
        # The trainer's own build: seed, task, then model, optimizer and step under the
        # distributor's scope, so the benchmark measures exactly what a run executes.
        built = build_model_and_step(trainer_config(s, distributor.replicas), distributor)
        model, self.step = built.model, built.step
        rng = np.random.default_rng(s.seed + distributor.rank)
        self.batch = {k: tf.constant(v) for k, v in random_batch(s, rng).items()}
        self.batches = None
        if self.distributor is not None:
            ds = tf.data.Dataset.from_tensors(self.batch).repeat().prefetch(2)
            self.batches = iter(distributor.distribute_dataset(ds))
        build_s = time.perf_counter() - t0
        warm = timed(self._run_step, s.warmup)
        return {
            "framework": "albertkit",
            "params": int(model.count_params()),
            "baseline_rss": baseline,
            "build_s": build_s,
            "first_step_s": warm[0],
            "threads": {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                        "inter_op": tf.config.threading.get_inter_op_parallelism_threads()},
            "device": "GPU" if self.gpu else "CPU",
            "memory_method": self.memory.method,
            "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
            "xla_plan": self.step.xla._asdict(),
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
        # On CPU they exist only with the BFC allocator (settings.tensor_stats).
        device = "GPU:0" if self.gpu else "CPU:0"
        try:
            tf.config.experimental.reset_memory_stats(device)
            counted = True
        except ValueError:  # "Cannot reset memory stats": this allocator does not count
            counted = False
        timing = _timed_steps(self.memory, self._run_step, n)
        tensors = tf.config.experimental.get_memory_info(device) if counted else {}
        return {
            **timing,
            "tensor_peak_bytes": int(tensors["peak"]) if counted else None,
            "tensor_current_bytes": int(tensors["current"]) if counted else None,
            **matmul,
        }

    def matmul(self) -> dict[str, Any]:
        import tensorflow as tf

        if not hasattr(self, "_matmul"):
            n = 2048 if not self.gpu else 8192
            dtype = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16}.get(self.s.precision,
                                                                               tf.float16)
            a = tf.cast(tf.random.normal((n, n), dtype=tf.float32), dtype)
            # On the step's compile path: XLA's CPU matmul and the graph executor's are
            # different libraries (on an AVX2 AMD EPYC 156-174 against 128-136 GFLOP/s at
            # 2048^2, float32), and MFU is the step's FLOP rate over this peak.
            fn = tf.function(lambda x: tf.reduce_sum(tf.cast(tf.matmul(x, x), tf.float32)),
                             jit_compile=self.step.xla.compute)
            fn(a).numpy()
            self._matmul = (fn, a, n, dtype.name)
        fn, a, n, dtype_name = self._matmul
        t = min(timed(lambda: fn(a).numpy(), 3))
        return {"matmul_flops_per_s": 2.0 * n**3 / t, "matmul_n": n, "matmul_dtype": dtype_name}

    def pipeline(self) -> dict[str, Any]:
        from albertkit.perf.pipeline import measure_pipeline

        return measure_pipeline(self.s)

    def breakdown(self) -> dict[str, Any]:
        from albertkit.perf.breakdown import step_breakdown

        return {"breakdown_s": step_breakdown(self.step, self.batch, self.s)}


class HFWorker:
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
        batch = random_batch(s, np.random.default_rng(s.seed))
        a, b, t = s.accumulation, s.micro_batch, s.seq_length
        labels = np.full((a, b, t), -100, np.int64)
        np.put_along_axis(labels, batch["masked_lm_positions"].astype(np.int64),
                          batch["masked_lm_ids"].astype(np.int64), axis=2)
        self.micro = [
            {
                "input_ids": torch.tensor(batch["input_ids"][i], dtype=torch.long),
                "attention_mask": torch.tensor(batch["input_mask"][i], dtype=torch.long),
                "token_type_ids": torch.tensor(batch["segment_ids"][i], dtype=torch.long),
                "labels": torch.tensor(labels[i]),
                "sentence_order_label": torch.tensor(batch["next_sentence_labels"][i],
                                                     dtype=torch.long),
            }
            for i in range(a)
        ]
        self.autocast = (torch.autocast("cpu", dtype=torch.bfloat16)
                         if s.precision == "mixed_bfloat16" else contextlib.nullcontext())
        build_s = time.perf_counter() - t0
        warm = timed(self._run_step, s.warmup)
        return {
            "framework": "hf-pytorch",
            "params": int(sum(p.numel() for p in self.model.parameters())),
            "baseline_rss": baseline,
            "build_s": build_s,
            "first_step_s": warm[0],
            "threads": {"intra_op": torch.get_num_threads(),
                        "inter_op": torch.get_num_interop_threads()},
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
        return {**_timed_steps(self.memory, self._run_step, n), **matmul}

    def matmul(self) -> dict[str, Any]:
        import torch

        n = 2048
        dtype = torch.bfloat16 if self.s.precision == "mixed_bfloat16" else torch.float32
        a = torch.randn(n, n, dtype=dtype)
        (a @ a).sum().item()
        t = min(timed(lambda: (a @ a).sum().item(), 3))
        return {"matmul_flops_per_s": 2.0 * n**3 / t, "matmul_n": n, "matmul_dtype": str(dtype)}

    def pipeline(self) -> dict[str, Any]:
        return {}
