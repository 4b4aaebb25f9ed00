"""The matrix products of one pretraining step, as shapes: a floor for the step's time.

A training step is its matmuls plus everything between them (bias adds, softmax, GELU,
LayerNorm, transposes, the optimizer update, the executor's own cost). Timing the step's
matmuls alone, at the step's shapes and in the same framework, says how much of the step
is arithmetic a faster implementation of the rest could not remove: a speed target whose
step time is below that floor (or leaves the rest less time than any executor needs) cannot
be reached by changing the rest. ``scripts/bench_floor.py`` times these shapes in
TensorFlow (graph executor and XLA) and PyTorch.

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

from albertkit.config.sizes import AlbertSpec
from albertkit.models.footprint import layer_applications


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
