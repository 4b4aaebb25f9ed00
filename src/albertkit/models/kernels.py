"""The activations and hand-written kernels of albertkit's ALBERT (:mod:`albertkit.models.albert`).

Each kernel is a ``tf.custom_gradient`` whose passes are XLA-compiled TensorFlow functions
(inlined when the whole step is XLA-compiled): the fused GELU variants, LayerNorm's backward
pass, the masked-LM cross-entropy and the attention core. They compute in float32 (float64
for float64 input) whatever the input's dtype, and return the input's dtype. Each replaces
ops that TensorFlow's graph executor ran one by one, keeping more intermediates or making
more passes over memory (measured in docs/performance.md and docs/memory.md). They are traced
as written, without AutoGraph (no branch depends on a tensor's value);
``tests/test_model.py`` checks each against float64 NumPy references.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from keras import ops

from albertkit.models.options import FUSED_ACTIVATIONS


def activation(name: str) -> Callable[[Any], Any]:
    """The Hugging Face activation ``name`` (``transformers.activations.ACT2FN``) in keras.ops."""
    match name:
        case "gelu":  # exact: x * Phi(x) with the erf
            return lambda x: 0.5 * x * (1.0 + ops.erf(x / math.sqrt(2.0)))
        case "gelu_new":  # tanh approximation (Hendrycks & Gimpel 2016), GPT-2 / BERT TF
            c = math.sqrt(2.0 / math.pi)
            return lambda x: 0.5 * x * (1.0 + ops.tanh(c * (x + 0.044715 * x * x * x)))
        case "gelu_fast":  # the same approximation with HF's rounded constant
            return lambda x: 0.5 * x * (1.0 + ops.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))
        case "relu":
            return ops.relu
        case "silu" | "swish":
            return lambda x: x * ops.sigmoid(x)
        case "tanh":
            return ops.tanh
        case "mish":
            return lambda x: x * ops.tanh(ops.softplus(x))
    raise ValueError(f"hidden_act={name!r} is not supported")


# The GELU variants as (value, derivative) in TensorFlow ops, for :func:`fused_activation`.
# d/dx [x Phi(x)] = Phi(x) + x phi(x) (exact GELU, Hendrycks & Gimpel 2016); for the tanh
# approximation 0.5 x (1 + tanh(u)), u = k (x + a x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2).
def _gelu_erf(x: Any) -> tuple[Any, Any]:
    cdf = 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0)))
    return x * cdf, cdf + x * tf.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _gelu_tanh(k: float) -> Callable[[Any], tuple[Any, Any]]:
    def parts(x: Any) -> tuple[Any, Any]:
        x2 = x * x
        t = tf.tanh(k * x * (1.0 + 0.044715 * x2))
        return 0.5 * x * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * k * x * (1.0 - t * t) * (
            1.0 + 3 * 0.044715 * x2)
    return parts


def _wide(x: Any) -> Any:
    """``x`` in float32, or float64 when it is float64: the fused kernels' compute dtype."""
    return tf.cast(x, tf.float64 if x.dtype == tf.float64 else tf.float32)


_FUSED_PARTS: dict[str, Callable[[Any], tuple[Any, Any]]] = {
    "gelu": _gelu_erf,
    "gelu_new": _gelu_tanh(math.sqrt(2.0 / math.pi)),
    "gelu_fast": _gelu_tanh(0.7978845608),  # HF's rounded constant
}
assert set(_FUSED_PARTS) == FUSED_ACTIVATIONS  # the memory planner counts on these


@functools.cache
def fused_activation(name: str) -> Callable[[Any], Any] | None:
    """The activation ``name`` as two XLA-compiled elementwise kernels (forward, and backward
    from the input alone), or None when it has none (then :func:`activation` runs).

    Both kernels compute in float32 (float64 for float64 input) and return the input's
    dtype. TensorFlow's graph executor runs :func:`activation`'s formula op by op: at base seq
    512 under mixed_bfloat16 (XLA off, the CPU default) gelu_new's forward, recomputation and
    autodiff were about a third of the step's operation time, as some 20 passes over each
    F-wide tensor (docs/performance.md). Here each direction is one fused pass, and the backward
    pass keeps only the input, so recomputing the activation (``runtime.remat: selective``)
    saves nothing more. Inside an XLA-compiled step the kernels are inlined into it.
    """
    parts = _FUSED_PARTS.get(name)
    if parts is None:
        return None

    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def forward(x: Any) -> Any:
        return tf.cast(parts(_wide(x))[0], x.dtype)

    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def backward(x: Any, dy: Any) -> Any:
        return tf.cast(_wide(dy) * parts(_wide(x))[1], x.dtype)

    @tf.custom_gradient
    def fused(x: Any) -> Any:
        return forward(x), lambda dy: backward(x, dy)

    return fused


def _normalise(x: Any, epsilon: float) -> tuple[Any, Any]:
    """(x - mean) / sqrt(var + epsilon) over the last axis, and the 1 / sqrt(var + epsilon)."""
    centred = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    inv = tf.math.rsqrt(tf.reduce_mean(centred * centred, axis=-1, keepdims=True) + epsilon)
    return centred * inv, inv


@functools.cache
def layer_norm_kernel(epsilon: float) -> Callable[[Any, Any, Any], Any]:
    """LayerNorm over the last axis (Ba et al. 2016, https://arxiv.org/abs/1607.06450): Keras'
    formula forward, and a backward pass from the input alone as one XLA-compiled kernel.

    With y = x_hat * gamma + beta, x_hat = (x - mean) * inv, inv = 1 / sqrt(var + epsilon),
    g = dy * gamma and means over the normalised axis: dx = inv * (g - mean(g) - x_hat *
    mean(g * x_hat)), dgamma = sum(dy * x_hat) and dbeta = sum(dy) over every other axis. The
    kernel computes in float32 (float64 for float64 input) and returns its inputs' dtypes.
    The forward pass stays Keras' ops: a fused XLA forward kernel made the step slower at base
    128 x 8 in mixed_bfloat16 (docs/performance.md, "Changes, predicted and measured").
    """

    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def backward(x: Any, gamma: Any, dy: Any) -> tuple[Any, Any, Any]:
        x_hat, inv = _normalise(_wide(x), epsilon)
        dy = _wide(dy)
        g = dy * _wide(gamma)
        dx = inv * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                    - x_hat * tf.reduce_mean(g * x_hat, axis=-1, keepdims=True))
        # dgamma and dbeta as one product with a row of ones: XLA's CPU backend splits a
        # reduction over that many rows into a windowed reduction, which was 1.4x slower
        # (base 512 x 4 in mixed_bfloat16: about 9 -> 7 ms per LayerNorm, docs/performance.md).
        width = tf.shape(x)[-1]
        columns = tf.concat([tf.reshape(dy * x_hat, [-1, width]), tf.reshape(dy, [-1, width])], -1)
        sums = tf.linalg.matmul(tf.ones([1, tf.shape(columns)[0]], columns.dtype), columns)[0]
        return (tf.cast(dx, x.dtype), tf.cast(sums[:width], gamma.dtype),
                tf.cast(sums[width:], gamma.dtype))

    @tf.custom_gradient
    def layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
        y = ops.layer_normalization(x, gamma, beta, epsilon=epsilon)
        return y, lambda dy: backward(x, gamma, dy)

    return layer_norm


@tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
def _cross_entropy_forward(logits: Any, labels: Any) -> tuple[Any, Any, Any, Any]:
    x = _wide(logits)
    width = tf.shape(x)[-1]
    peak = tf.reduce_max(x, axis=-1)
    log_sum = tf.math.log(tf.reduce_sum(tf.exp(x - peak[..., None]), axis=-1))
    inside = (labels >= 0) & (labels < width)
    picked = tf.gather(x, tf.clip_by_value(labels, 0, width - 1), batch_dims=len(labels.shape))
    ce = tf.where(inside, log_sum - (picked - peak), tf.constant(math.nan, x.dtype))
    correct = tf.cast(tf.equal(tf.argmax(x, axis=-1, output_type=labels.dtype), labels), x.dtype)
    return ce, correct, peak, log_sum


@tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
def _cross_entropy_backward(logits: Any, labels: Any, peak: Any, log_sum: Any, dce: Any) -> Any:
    x = _wide(logits)
    probs = tf.exp((x - peak[..., None]) - log_sum[..., None])  # the forward pass's softmax
    target = tf.one_hot(labels, tf.shape(x)[-1], dtype=x.dtype)
    return tf.cast((probs - target) * _wide(dce)[..., None], logits.dtype)


@tf.custom_gradient
def _cross_entropy(logits: Any, labels: Any) -> Any:
    ce, correct, peak, log_sum = _cross_entropy_forward(logits, labels)

    def grad(dce: Any, _dcorrect: Any) -> tuple[Any, None]:
        return _cross_entropy_backward(logits, labels, peak, log_sum, dce), None

    return (ce, correct), grad


def sparse_cross_entropy(logits: Any, labels: Any) -> tuple[Any, Any]:
    """Softmax cross-entropy of integer ``labels`` [...] under ``logits`` [..., V], and
    whether each row's largest logit (the first one among equals) is its label (1.0 or 0.0).

    The same values as ``tf.nn.sparse_softmax_cross_entropy_with_logits`` (log-sum-exp
    shifted by the row's maximum) and ``tf.argmax``, computed in float32 (float64 for float64
    logits) whatever the logits' dtype, as one XLA-compiled kernel each way: the backward
    pass recomputes the softmax from the logits and two saved numbers per row, and returns
    the logits' dtype. TensorFlow's graph executor ran the softmax, its gradient and the
    argmax as separate passes over the MLM logits [B, P, V] (docs/performance.md). A label
    outside [0, V) gives a NaN loss and gradient (TensorFlow's op raises instead): the
    trainer skips such a step as non-finite and stops after ``runtime.max_nonfinite_steps``.

        >>> ce, hit = sparse_cross_entropy(tf.constant([[0.0, 2.0]]), tf.constant([1]))
        >>> [round(float(ce[0]), 4), float(hit[0])]
        [0.1269, 1.0]
    """
    labels = tf.cast(labels, tf.int32)
    if labels.shape.rank == 2:  # the MLM head's [B, P]: straight to the kernels
        return _cross_entropy(logits, labels)
    # Any other rank goes through as one row [1, N] (and back): the kernels are traced for
    # rank-2 labels only, since a kernel traced for two label ranks falls back to an
    # unknown rank that tf.gather's batch_dims cannot take.
    width = tf.shape(logits)[-1]
    ce, correct = _cross_entropy(tf.reshape(logits, tf.stack([1, -1, width])),
                                 tf.reshape(labels, [1, -1]))
    return tf.reshape(ce, tf.shape(labels)), tf.reshape(correct, tf.shape(labels))


@tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
def _score_gradient(probs: Any, d_probs: Any, row: Any) -> Any:
    """``probs * (d_probs - row)`` as one XLA-compiled pass over the T x T tensors, in float32
    (float64 for float64) and returned in the probabilities' dtype: the graph executor's
    subtraction and product were two passes with a T x T temporary between them."""
    return tf.cast(_wide(probs) * (_wide(d_probs) - row), probs.dtype)


def attention_core(q: Any, k: Any, v: Any, bias: Any, recompute: bool) -> Any:
    """``softmax(q k^T + bias) v`` on head-major ``[B, heads, T, d]`` tensors (``q`` already
    scaled by 1 / sqrt(d)), with its gradient written out instead of left to autodiff.

    ``bias`` (``[B, 1, 1, T]``, the padding mask) gets no gradient. The backward pass is
    FlashAttention's (Dao et al. 2022, https://arxiv.org/abs/2205.14135, Algorithm 4,
    without its tiling): with ``P = softmax(S)`` and ``O = P V``,
    ``dS = P * (dP - rowsum(dO * O))`` where ``dP = dO V^T``; the row sum is taken over the
    head dimension (``[B, heads, T, d]``) instead of over the T x T product ``dP * P``, so
    no T x T reduction runs. With ``recompute`` the probabilities are recomputed in the
    backward pass from ``q``, ``k`` and the bias (selective recomputation: no T x T tensor
    is kept between the passes); without, they are kept.
    """

    def probabilities(q: Any) -> Any:
        return tf.nn.softmax(tf.linalg.matmul(q, k, transpose_b=True) + bias, axis=-1)

    @tf.custom_gradient
    def core(q: Any, k: Any, v: Any) -> Any:
        kept = probabilities(q)
        out = tf.linalg.matmul(kept, v)

        def grad(d_out: Any) -> tuple[Any, Any, Any]:
            if recompute:
                # Tied to the incoming gradient by data, not only by a control edge: the
                # graph executor would otherwise run every layer's recomputation as soon as
                # Q and K exist, and XLA (which drops control edges) schedules the T x T
                # product Q K^T as early as its operands allow, holding every layer's at
                # once. Adding 0 * (one element of dO) to Q gives the same values through an
                # operand that exists only once this layer's backward pass begins (a
                # non-finite dO makes the gradients non-finite either way).
                tie = tf.cast(tf.reduce_sum(d_out[:1, :1, :1, :1]), q.dtype) * 0
                with tf.control_dependencies([d_out]):
                    probs = probabilities(q + tie)
            else:
                probs = kept
            d_v = tf.linalg.matmul(probs, d_out, transpose_a=True)
            d_probs = tf.linalg.matmul(d_out, v, transpose_b=True)
            row = tf.reduce_sum(_wide(d_out) * _wide(out), axis=-1, keepdims=True)
            d_scores = _score_gradient(probs, d_probs, row)
            d_q = tf.linalg.matmul(d_scores, k)
            d_k = tf.linalg.matmul(d_scores, q, transpose_a=True)
            return d_q, d_k, d_v

        return out, grad

    return core(q, k, v)

