"""The matrix products of one pretraining step, as shapes: a floor for the step's time.

A training step is its matmuls plus everything between them (bias adds, softmax, GELU,
LayerNorm, transposes, the optimizer update, the executor's own cost). Timing the step's
matmuls alone, at the step's shapes and in the same framework, says how much of the step
is arithmetic a faster implementation of the rest could not remove: a speed target whose
step time is below that floor (or leaves the rest less time than any executor needs) cannot
be reached by changing the rest. ``benchmarks/bench_floor.py`` times these shapes in
TensorFlow (graph executor and XLA) and PyTorch, in the benchmark's worker processes:
:class:`FloorAlbertkitWorker` and :class:`FloorHFWorker` add a ``floor`` command to
albertkit's two workers (:mod:`albertkit.perf.workers`).

The shapes are those of :func:`albertkit.models.footprint.training_flops` (forward FLOPs by
part) for ``micro_batch`` sequences, each forward product ``y = x w`` followed by its two
backward products ``dx = dy w^T`` and ``dw = x^T dy`` (the FLOP model's "3x forward").

Example:
    >>> from albertkit.config.sizes import SIZES, AlbertSpec
    >>> mms = step_matmuls(AlbertSpec(**SIZES["tiny"]), seq_length=128, micro_batch=32,
    ...                    max_predictions=20)
    >>> round(sum(m.flops for m in mms) / 1e9, 2)
    12.25
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from albertkit.config.sizes import AlbertSpec
from albertkit.models.footprint import layer_applications
from albertkit.perf.meter import timed
from albertkit.perf.settings import BenchmarkSettings
from albertkit.perf.workers import AlbertkitWorker, HFWorker


@dataclass(frozen=True)
class Matmul:
    """``batch`` products of ``op(a) [m, k]`` by ``op(b) [k, n]`` (``op``: transpose or not),
    as ``tf.linalg.matmul(a, b, transpose_a=..., transpose_b=...)`` takes them."""

    part: str
    batch: int
    m: int
    k: int
    n: int
    transpose_a: bool = False
    transpose_b: bool = False

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    @property
    def a_shape(self) -> tuple[int, ...]:
        inner = (self.k, self.m) if self.transpose_a else (self.m, self.k)
        return (self.batch, *inner) if self.batch > 1 else inner

    @property
    def b_shape(self) -> tuple[int, ...]:
        inner = (self.n, self.k) if self.transpose_b else (self.k, self.n)
        return (self.batch, *inner) if self.batch > 1 else inner


def with_backward(part: str, batch: int, m: int, k: int, n: int) -> list[Matmul]:
    """``y = x w`` (``x [m, k]``, ``w [k, n]``) and its gradients ``dx = dy w^T`` and
    ``dw = x^T dy``: the three products autodiff runs for one forward product."""
    return [
        Matmul(part, batch, m, k, n),
        Matmul(f"{part}.dx", batch, m, n, k, transpose_b=True),
        Matmul(f"{part}.dw", batch, k, m, n, transpose_a=True),
    ]


def step_matmuls(
    spec: AlbertSpec, seq_length: int, micro_batch: int, max_predictions: int
) -> list[Matmul]:
    """Every matmul of one pretraining micro-batch (forward and backward), by part."""
    if min(seq_length, micro_batch, max_predictions) <= 0:
        raise ValueError(f"seq_length={seq_length}, micro_batch={micro_batch} and "
                         f"max_predictions={max_predictions} must be positive")
    b, t, p = micro_batch, seq_length, max_predictions
    e, h, f, v = spec.embedding_size, spec.hidden_size, spec.intermediate_size, spec.vocab_size
    heads, d = spec.num_attention_heads, spec.head_size
    tokens = b * t
    layer = [
        *(with_backward("attention_qkv", 1, tokens, h, h) * 3),  # three dense layers
        # scores Q K^T per head: a = Q [t, d], "w" = K^T [d, t]
        *with_backward("attention_scores", b * heads, t, d, t),
        # context P V per head: P [t, t], V [t, d]
        *with_backward("attention_context", b * heads, t, t, d),
        *with_backward("attention_output", 1, tokens, h, h),
        *with_backward("ffn_in", 1, tokens, h, f),
        *with_backward("ffn_out", 1, tokens, f, h),
    ]
    return [
        *with_backward("embedding_projection", 1, tokens, e, h),
        *(layer * layer_applications(spec)),
        *with_backward("pooler", 1, b, h, h),
        *with_backward("sop", 1, b, h, 2),
        *with_backward("mlm_transform", 1, b * p, h, e),
        *with_backward("mlm_decoder", 1, b * p, e, v),
    ]


# =========================================================================== timed alone
class FloorAlbertkitWorker(AlbertkitWorker):
    """albertkit's benchmark worker with a ``floor`` command."""

    def floor(self, calls: int, jit: bool) -> dict[str, Any]:
        """Seconds per pass over the step's matmuls alone (:func:`step_matmuls`), in
        the step's compute dtype, with ``jit``: XLA, else the graph executor. No ``setup``
        needed; the first call per ``jit`` builds (and compiles) the function."""
        cache = self.__dict__.setdefault("_floor", {})
        if jit not in cache:
            cache[jit] = tf_floor_function(self.s, jit)
            _wait_last(cache[jit]())
        products = cache[jit]
        return {"times": timed(lambda: _wait_last(products()), calls),
                "flops": sum(m.flops for m in floor_matmuls(self.s))}


class FloorHFWorker(HFWorker):
    """Hugging Face's benchmark worker with a ``floor`` command."""

    def floor(self, calls: int) -> dict[str, Any]:
        """Seconds per pass over albertkit's step matmuls (the same shapes as
        :meth:`FloorAlbertkitWorker.floor`) in PyTorch, bfloat16 under mixed_bfloat16."""
        import numpy as np
        import torch

        if self.s.hf_threads:
            torch.set_num_threads(self.s.hf_threads)
        mms = floor_matmuls(self.s)
        if not hasattr(self, "_floor"):
            dtype = torch.bfloat16 if self.s.precision == "mixed_bfloat16" else torch.float32
            operands = floor_operands(self.s, np.random.default_rng(self.s.seed))
            # (a, b, out): the products go to buffers made once, as TensorFlow's pool
            # allocator reuses its blocks; fresh tensors would time the page faults of
            # PyTorch's large allocations too.
            self._floor = [
                (torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype),
                 torch.empty((m.batch, m.m, m.n) if m.batch > 1 else (m.m, m.n), dtype=dtype))
                for (a, b), m in zip(operands, mms, strict=True)
            ]

        def products():
            with torch.no_grad():
                for (a, b, out), m in zip(self._floor, mms, strict=True):
                    torch.matmul(a.mT if m.transpose_a else a, b.mT if m.transpose_b else b,
                                 out=out)
            return float(self._floor[-1][2].flatten()[0])  # CPU ops are synchronous

        products()
        return {"times": timed(products, calls), "flops": sum(m.flops for m in mms)}


WORKERS = {"albertkit": FloorAlbertkitWorker, "hf-pytorch": FloorHFWorker}


def floor_matmuls(settings: BenchmarkSettings) -> list[Matmul]:
    """The matmuls of one micro-batch of the benchmarked step (:func:`step_matmuls`)."""
    return step_matmuls(settings.spec, settings.seq_length, settings.micro_batch,
                        settings.predictions)


def floor_operands(settings: BenchmarkSettings, rng) -> list[tuple[Any, Any]]:
    """Random float32 operands for :func:`floor_matmuls` (NumPy arrays)."""
    import numpy as np

    return [(rng.standard_normal(m.a_shape, dtype=np.float32),
             rng.standard_normal(m.b_shape, dtype=np.float32))
            for m in floor_matmuls(settings)]


def tf_floor_function(settings: BenchmarkSettings, jit: bool):
    """A ``tf.function`` (``jit_compile=jit``) returning every product of
    :func:`floor_matmuls` on :func:`floor_operands`, in the step's compute dtype. Every
    product is an output, so no compiler can drop or shrink one."""
    import numpy as np
    import tensorflow as tf

    dtype = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16}.get(settings.precision,
                                                                        tf.float16)
    mms = floor_matmuls(settings)
    operands = [(tf.cast(a, dtype), tf.cast(b, dtype))
                for a, b in floor_operands(settings, np.random.default_rng(settings.seed))]

    @tf.function(jit_compile=jit)
    def products():
        return [tf.linalg.matmul(a, b, transpose_a=m.transpose_a, transpose_b=m.transpose_b)
                for (a, b), m in zip(operands, mms, strict=True)]

    return products


def _wait_last(tensors: list[Any]) -> None:
    """Block until a function's outputs are computed: a function call returns its outputs
    together, and on a GPU one stream runs its kernels in order, so reading one element of
    the last output is enough (one small copy instead of one per output)."""
    t = tensors[-1]
    t[(0,) * len(t.shape)].numpy()
