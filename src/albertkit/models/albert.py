"""ALBERT (Lan et al. 2020, https://arxiv.org/abs/1909.11942) in Keras 3 layers.

The math is that of Hugging Face's PyTorch ``AlbertModel`` (transformers v5,
``models/albert/modeling_albert.py``), which ``tests/test_hf_parity.py`` proves to 1e-5:

* factorised embeddings: word + token-type + position (size E), LayerNorm, dropout, then one
  dense projection E -> H (HF ``encoder.embedding_hidden_mapping_in``);
* ``num_hidden_layers`` applications of ``num_hidden_groups`` parameter groups, each group
  holding ``inner_group_num`` transformer layers; layer ``i`` uses group
  ``int(i / (num_hidden_layers / num_hidden_groups))`` exactly as HF computes it;
* post-LayerNorm transformer layers (or, with ``pre_layer_norm``, LayerNorm before each
  sub-block plus one final LayerNorm: no HF equivalent, so it cannot be exported);
* a tanh pooler on the first ([CLS]) token.

Only ``keras.ops`` is used inside layers, so every model compiles under
``tf.function(jit_compile=True)``. Mixed precision is the ``dtype`` policy argument of each
model (``"mixed_float16"``, ``"mixed_bfloat16"``); LayerNorm runs in float32, the attention
softmax in float32 under mixed_float16 and in bfloat16 under mixed_bfloat16 (its sum
accumulated in float32, :func:`softmax_dtype`), and every model output is cast to float32 so
that losses are float32. Without attention dropout the attention core is
:func:`attention_core`, whose backward pass is written out (FlashAttention's) instead of
left to autodiff.

Variable paths are deterministic (``<model name>/albert/group_0/layer_0/attention/query/
kernel``...): they are the keys of albertkit checkpoints and of the HF name mapping in
``hf.py``. Every LayerNormalization layer's name contains ``layer_norm`` and every bias
variable's path ends in ``bias``; the optimizers exclude both from weight decay by name.
The encoder's paths are the same in every task model after the first path component, so a
checkpoint key with its first component stripped is task independent.

One deliberate difference from the PyTorch class, visible only in training with
``hidden_dropout_prob > 0``: dropout is applied to the feed-forward output before the
residual LayerNorm, as in Google's ALBERT (``modeling.py: attention_ffn_block``) and HF's
TensorFlow ALBERT; HF's PyTorch ``AlbertLayer`` defines that dropout but never applies it.
ALBERT v2 uses no dropout, so inference and v2 training are unaffected.
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf
from keras import ops

# Keras exports no public name for the scope its layers cast variables under (a layer keeps an
# enclosing scope of its own compute dtype: keras/src/layers/layer.py, Layer.__call__).
from keras.src.backend import AutocastScope

from albertkit.config.sizes import AlbertSpec
from albertkit.models.footprint import FUSED_ACTIVATIONS, RematMode, remat_mode

# Added to attention scores of padding keys (in float32, before the softmax). Google's BERT
# and ALBERT use -10000: exp(-1e4) underflows to exactly 0 in float32, and the value is
# representable in float16 and bfloat16, so the mask is safe whatever precision adds it.
# A fully padded row still gets a finite (uniform) softmax, never NaN.
MASK_BIAS = -10000.0

Inputs = dict[str, Any]


# --------------------------------------------------------------------------- helpers
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

    @tf.function(jit_compile=True, reduce_retracing=True)
    def forward(x: Any) -> Any:
        return tf.cast(parts(_wide(x))[0], x.dtype)

    @tf.function(jit_compile=True, reduce_retracing=True)
    def backward(x: Any, dy: Any) -> Any:
        return tf.cast(_wide(dy) * parts(_wide(x))[1], x.dtype)

    @tf.custom_gradient
    def fused(x: Any) -> Any:
        return forward(x), lambda dy: backward(x, dy)

    return fused


def _kernel_init(spec: AlbertSpec) -> keras.initializers.Initializer:
    # A fresh initializer per variable: one unseeded Keras 3 initializer instance returns
    # the same values on every call. Seeds come from Python's `random`, so
    # keras.utils.set_random_seed makes initialisation reproducible.
    return keras.initializers.TruncatedNormal(stddev=spec.initializer_range)


def _dense(spec: AlbertSpec, units: int, name: str, dtype: Any) -> keras.layers.Dense:
    return keras.layers.Dense(
        units,
        kernel_initializer=_kernel_init(spec),
        bias_initializer="zeros",
        name=name,
        dtype=dtype,
    )


def _normalise(x: Any, epsilon: float) -> tuple[Any, Any]:
    """(x - mean) / sqrt(var + epsilon) over the last axis, and the 1 / sqrt(var + epsilon)."""
    centred = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    inv = tf.math.rsqrt(tf.reduce_mean(centred * centred, axis=-1, keepdims=True) + epsilon)
    return centred * inv, inv


@functools.cache
def _layer_norm_kernel(epsilon: float) -> Callable[[Any, Any, Any], Any]:
    """LayerNorm over the last axis (Ba et al. 2016, https://arxiv.org/abs/1607.06450): Keras'
    formula forward, and a backward pass from the input alone as one XLA-compiled kernel.

    With y = x_hat * gamma + beta, x_hat = (x - mean) * inv, inv = 1 / sqrt(var + epsilon),
    g = dy * gamma and means over the normalised axis: dx = inv * (g - mean(g) - x_hat *
    mean(g * x_hat)), dgamma = sum(dy * x_hat) and dbeta = sum(dy) over every other axis. The
    kernel computes in float32 (float64 for float64 input) and returns its inputs' dtypes.
    The forward pass stays Keras' ops: a fused XLA forward kernel made the step slower at base
    128 x 8 in mixed_bfloat16 (docs/performance.md, "Changes, predicted and measured").
    """

    @tf.function(jit_compile=True, reduce_retracing=True)
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


class LayerNorm(keras.layers.LayerNormalization):
    """Keras' LayerNormalization over the last axis (the same variables, configuration and
    values) whose backward pass is one fused kernel (:func:`_layer_norm_kernel`).

    Autodiff of Keras' formula in TensorFlow's graph executor runs its gradient op by op and
    keeps its intermediates (in float32 under mixed precision) for the backward pass; the
    fused backward pass keeps only the input and reads it again. Measured: the allocator
    peak of ALBERT-base at seq 512 x 4 in mixed_bfloat16 drops from 1,164 to 957 MiB
    (docs/memory.md). Inside an XLA-compiled step the kernel is inlined.
    """

    def call(self, inputs: Any) -> Any:
        y = _layer_norm_kernel(float(self.epsilon))(
            inputs, tf.convert_to_tensor(self.gamma.value), tf.convert_to_tensor(self.beta.value)
        )
        return ops.cast(y, self.compute_dtype)


def _layer_norm(spec: AlbertSpec, name: str, dtype: Any) -> LayerNorm:
    assert "layer_norm" in name  # the optimizers exclude LayerNorm by this substring
    return LayerNorm(epsilon=spec.layer_norm_eps, name=name, dtype=dtype)


@tf.function(jit_compile=True, reduce_retracing=True)
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


@tf.function(jit_compile=True, reduce_retracing=True)
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
    return _cross_entropy(logits, tf.cast(labels, tf.int32))


def gather_positions(sequence: Any, positions: Any) -> Any:
    """Rows ``positions`` [B, P] of ``sequence`` [B, T, D] -> [B, P, D] (one flat gather)."""
    shape = ops.shape(sequence)
    batch, length, width = shape[0], shape[1], shape[2]
    positions = ops.cast(positions, "int32")
    offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * length, 1)
    flat_index = ops.reshape(positions + offsets, (-1,))
    flat = ops.reshape(sequence, (-1, width))
    gathered = ops.take(flat, flat_index, axis=0)
    return ops.reshape(gathered, (batch, ops.shape(positions)[1], width))


def _check_dtype(dtype: Any) -> Any:
    if dtype is None:
        return None
    try:
        keras.dtype_policies.get(dtype)
    except ValueError:
        raise ValueError(
            f"dtype={dtype!r} is not a Keras dtype policy (use 'float32', 'mixed_float16' or "
            "'mixed_bfloat16')"
        ) from None
    return dtype


def _dummy_batch(seq_length: int, max_predictions: int | None = None) -> Inputs:
    batch = {
        "input_ids": ops.zeros((1, seq_length), "int32"),
        "input_mask": ops.ones((1, seq_length), "int32"),
        "segment_ids": ops.zeros((1, seq_length), "int32"),
    }
    if max_predictions is not None:
        batch["masked_lm_positions"] = ops.zeros((1, max_predictions), "int32")
    return batch


def _as_float32(outputs: dict[str, Any]) -> dict[str, Any]:
    return {k: ops.cast(v, "float32") for k, v in outputs.items()}


def softmax_dtype(compute_dtype: str) -> str:
    """The dtype the attention softmax takes its scores in.

    float16 scores go to float32 first (their range ends at 65504, the usual mixed-precision
    rule). bfloat16 has float32's exponent range and the softmax kernels accumulate its sum
    in float32 (TensorFlow's oneDNN CPU kernel, and XLA's lowering, which sums in the
    accumulation type), so bfloat16 scores are used as they are: the two casts of every
    T x T score, forward and backward, were a third of the attention core's time at seq 512.
    """
    return "float32" if compute_dtype == "float16" else compute_dtype


@tf.function(jit_compile=True, reduce_retracing=True)
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


# --------------------------------------------------------------------------- layers
# Seeds drawn before a recomputed ("full" remat) layer application, by Dropout layer id:
# the forward pass and its recomputation in the backward pass must drop the same elements,
# so neither may advance a generator inside the recomputed function.
_DRAWN_SEEDS: contextvars.ContextVar[dict[int, Any] | None] = contextvars.ContextVar(
    "albertkit_drawn_dropout_seeds", default=None
)


class _DrawnSeed(keras.random.SeedGenerator):
    """A seed already drawn (a tensor) standing in for a generator: ``keras.random`` takes
    its value as is and no state advances. Holds no variable (the base initialiser, which
    creates one, is deliberately not called)."""

    def __init__(self, value: Any):  # noqa: D107 - no SeedGenerator state on purpose
        self._value = value

    def next(self, ordered: bool = True) -> Any:
        return self._value


class Dropout(keras.layers.Layer):
    """Dropout whose RNG state variable has a deterministic path.

    ``keras.layers.Dropout`` creates its ``SeedGenerator`` at construction under a globally
    counted name (``seed_generator_17/...``), so its state's path would change with the
    number of models built before. Here it is created in ``build`` under the layer's own
    scope (``.../dropout/seed_generator/seed_generator_state``) and only if ``rate > 0``.
    """

    def __init__(self, rate: float, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
        self.rate = rate
        self.seed_generator = None

    def build(self, input_shape: Any = None) -> None:
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(name="seed_generator")
        self.built = True

    def _seed(self) -> keras.random.SeedGenerator:
        drawn = _DRAWN_SEEDS.get()
        if drawn is not None and id(self) in drawn:
            return _DrawnSeed(drawn[id(self)])
        return self.seed_generator

    def call(self, x: Any, training: bool = False) -> Any:
        if training and self.seed_generator is not None:
            return keras.random.dropout(x, self.rate, seed=self._seed())
        return x

    def keep_mask(self, shape: Any) -> Any:
        """A boolean mask of the elements to keep (each with probability 1 - rate), drawn
        from this layer's generator; None when the rate is 0."""
        if self.seed_generator is None:
            return None
        return keras.random.uniform(shape, seed=self._seed()) >= self.rate

    def apply_keep(self, x: Any, keep: Any) -> Any:
        """Dropout with a mask from :meth:`keep_mask`: kept elements scaled by 1 / (1 - rate)."""
        return ops.where(keep, x * (1.0 / (1.0 - self.rate)), ops.zeros_like(x))


class AlbertEmbeddings(keras.layers.Layer):
    """Word + token-type + position embeddings (size E), LayerNorm, dropout."""

    def __init__(self, spec: AlbertSpec, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        dt = self.dtype_policy
        def table(rows: int, name: str) -> keras.layers.Embedding:
            return keras.layers.Embedding(
                rows, spec.embedding_size, embeddings_initializer=_kernel_init(spec),
                name=name, dtype=dt,
            )

        self.word_embeddings = table(spec.vocab_size, "word_embeddings")
        self.position_embeddings = table(spec.max_position_embeddings, "position_embeddings")
        self.token_type_embeddings = table(spec.type_vocab_size, "token_type_embeddings")
        self.layer_norm = _layer_norm(spec, "layer_norm", dt)
        self.dropout = Dropout(spec.hidden_dropout_prob, name="dropout", dtype=dt)

    def build(self, input_shape: Any = None) -> None:
        self.word_embeddings.build((None, None))
        self.position_embeddings.build((None, None))
        self.token_type_embeddings.build((None, None))
        self.layer_norm.build((None, None, self.spec.embedding_size))
        self.dropout.build()
        self.built = True

    def call(self, input_ids: Any, segment_ids: Any, training: bool = False) -> Any:
        length = ops.shape(input_ids)[1]
        positions = ops.expand_dims(ops.arange(length, dtype="int32"), 0)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(segment_ids)
        x = x + self.position_embeddings(positions)
        return self.dropout(self.layer_norm(x), training=training)


class AlbertAttention(keras.layers.Layer):
    """Multi-head self-attention with output projection, dropout and (post- or pre-) LayerNorm.

    With ``recompute`` the attention core (:meth:`_attend`) is recomputed in training's
    backward pass instead of keeping its T x T tensors.
    """

    def __init__(self, spec: AlbertSpec, recompute: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.recompute = recompute
        dt = self.dtype_policy
        h = spec.hidden_size
        self.query = _dense(spec, h, "query", dt)
        self.key = _dense(spec, h, "key", dt)
        self.value = _dense(spec, h, "value", dt)
        self.dense = _dense(spec, h, "dense", dt)
        self.layer_norm = _layer_norm(spec, "layer_norm", dt)
        self.attention_dropout = Dropout(
            spec.attention_probs_dropout_prob, name="attention_dropout", dtype=dt
        )
        self.output_dropout = Dropout(spec.hidden_dropout_prob, name="output_dropout", dtype=dt)

    def build(self, input_shape: Any) -> None:
        shape = (None, None, self.spec.hidden_size)
        for layer in (self.query, self.key, self.value, self.dense, self.layer_norm):
            layer.build(shape)
        self.attention_dropout.build()
        self.output_dropout.build()
        self.built = True

    def _heads(self, x: Any, batch: Any, length: Any) -> Any:
        s = self.spec
        x = ops.reshape(x, (batch, length, s.num_attention_heads, s.head_size))
        return ops.transpose(x, (0, 2, 1, 3))  # [B, heads, T, head_size]

    def _attend(self, q: Any, k: Any, v: Any, attention_bias: Any, keep: Any = None) -> Any:
        """The attention core, token-major [B, T, H] Q, K, V -> context [B, T, H]: heads,
        scores, softmax, dropout (``keep``: the kept probabilities, drawn by the caller), the
        weighted sum of values and the heads merged back. Differentiated by autodiff: used
        with attention dropout and with float16; otherwise :meth:`_fused` runs."""
        s = self.spec
        batch, length = ops.shape(q)[0], ops.shape(q)[1]
        # The 1 / sqrt(d) scale goes on Q (B x T x H elements), not on the B x heads x T x T
        # scores; for a power-of-two head size (64 in every ALBERT size) the two are equal.
        q = q * (1.0 / math.sqrt(s.head_size))
        q, k, v = (self._heads(t, batch, length) for t in (q, k, v))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        # Keras casts float call arguments to the compute dtype, hence the cast of the bias.
        dtype = softmax_dtype(self.compute_dtype)
        scores = ops.cast(scores, dtype) + ops.cast(ops.stop_gradient(attention_bias), dtype)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        if keep is not None:
            probs = self.attention_dropout.apply_keep(probs, keep)
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))
        return ops.reshape(context, (batch, length, s.hidden_size))

    def _fused(self, q: Any, k: Any, v: Any, attention_bias: Any, recompute: bool) -> Any:
        """:meth:`_attend` without dropout through :func:`attention_core`: the same
        forward values, a cheaper backward pass, and with ``recompute`` its own selective
        recomputation (no T x T tensor kept)."""
        s = self.spec
        batch, length = ops.shape(q)[0], ops.shape(q)[1]
        q = q * (1.0 / math.sqrt(s.head_size))
        q, k, v = (self._heads(t, batch, length) for t in (q, k, v))
        bias = ops.cast(ops.stop_gradient(attention_bias), self.compute_dtype)
        context = ops.transpose(attention_core(q, k, v, bias, recompute), (0, 2, 1, 3))
        return ops.reshape(context, (batch, length, s.hidden_size))

    def call(self, hidden: Any, attention_bias: Any, training: bool = False) -> Any:
        s = self.spec
        batch, length = ops.shape(hidden)[0], ops.shape(hidden)[1]
        x = self.layer_norm(hidden) if s.pre_layer_norm else hidden
        keep = None
        if training:
            keep = self.attention_dropout.keep_mask(
                (batch, s.num_attention_heads, length, length)
            )
        args = (self.query(x), self.key(x), self.value(x), attention_bias)
        if keep is None and softmax_dtype(self.compute_dtype) == self.compute_dtype:
            context = self._fused(*args, recompute=training and self.recompute)
        elif training and self.recompute:
            # Selective recomputation (Korthikanti et al. 2022, "Reducing Activation
            # Recomputation in Large Transformer Models", https://arxiv.org/abs/2205.05198):
            # the T x T scores and probabilities and the head-major copies are not kept for
            # the backward pass but recomputed from Q, K and V, a few percent of the layer's
            # FLOPs. The dropout mask is drawn outside, so the recomputation sees the same one.
            # The boolean mask is bound, not passed: recompute_grad differentiates every
            # positional argument.
            context = keras.remat(functools.partial(self._attend, keep=keep))(*args)
        else:
            context = self._attend(*args, keep=keep)
        out = self.output_dropout(self.dense(context), training=training)
        if s.pre_layer_norm:
            return hidden + out
        return self.layer_norm(hidden + out)


class AlbertLayer(keras.layers.Layer):
    """One transformer layer: attention block then feed-forward block.

    ``recompute`` ("selective" remat): in training, the attention core and the FFN
    activation are recomputed in the backward pass instead of keeping their intermediates.
    """

    def __init__(self, spec: AlbertSpec, recompute: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.recompute = recompute
        dt = self.dtype_policy
        self.attention = AlbertAttention(
            spec, recompute=recompute, name="attention", dtype=dt
        )
        self.ffn = _dense(spec, spec.intermediate_size, "ffn", dt)
        self.ffn_output = _dense(spec, spec.hidden_size, "ffn_output", dt)
        self.full_layer_layer_norm = _layer_norm(spec, "full_layer_layer_norm", dt)
        self.dropout = Dropout(spec.hidden_dropout_prob, name="dropout", dtype=dt)
        self.fused_act = fused_activation(spec.hidden_act)
        self.act = self.fused_act or activation(spec.hidden_act)

    def build(self, input_shape: Any) -> None:
        h = self.spec.hidden_size
        self.attention.build((None, None, h))
        self.ffn.build((None, None, h))
        self.ffn_output.build((None, None, self.spec.intermediate_size))
        self.full_layer_layer_norm.build((None, None, h))
        self.dropout.build()
        self.built = True

    def dropouts(self) -> list[Dropout]:
        """This layer's Dropout layers (attention probabilities, attention output, FFN output)."""
        return [self.attention.attention_dropout, self.attention.output_dropout, self.dropout]

    def call(self, hidden: Any, attention_bias: Any, training: bool = False) -> Any:
        a = self.attention(hidden, attention_bias, training=training)
        x = self.full_layer_layer_norm(a) if self.spec.pre_layer_norm else a
        h = self.ffn(x)
        # Autodiff of a formula activation keeps its elementwise intermediates (for relu
        # none, for mish the softplus and tanh, each F-wide); recomputed, only its input is
        # kept. A fused activation keeps only its input anyway.
        recompute = training and self.recompute and self.fused_act is None
        h = keras.remat(self.act)(h) if recompute else self.act(h)
        f = self.dropout(self.ffn_output(h), training=training)
        if self.spec.pre_layer_norm:
            return a + f
        return self.full_layer_layer_norm(a + f)


class AlbertLayerGroup(keras.layers.Layer):
    """``inner_group_num`` transformer layers applied in turn (one set of shared parameters)."""

    def __init__(self, spec: AlbertSpec, recompute: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.albert_layers = [
            AlbertLayer(spec, recompute, name=f"layer_{i}", dtype=self.dtype_policy)
            for i in range(spec.inner_group_num)
        ]

    def build(self, input_shape: Any) -> None:
        for layer in self.albert_layers:
            layer.build((None, None, self.spec.hidden_size))
        self.built = True

    def call(self, hidden: Any, attention_bias: Any, training: bool = False) -> Any:
        for layer in self.albert_layers:
            hidden = layer(hidden, attention_bias, training=training)
        return hidden


class AlbertMLMHead(keras.layers.Layer):
    """Masked-LM head: dense (H -> E), activation, LayerNorm, decoder tied to the word embeddings."""

    def __init__(self, spec: AlbertSpec, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        dt = self.dtype_policy
        self.dense = _dense(spec, spec.embedding_size, "dense", dt)
        self.layer_norm = _layer_norm(spec, "layer_norm", dt)
        self.act = fused_activation(spec.hidden_act) or activation(spec.hidden_act)

    def build(self, input_shape: Any = None) -> None:
        self.dense.build((None, None, self.spec.hidden_size))
        self.layer_norm.build((None, None, self.spec.embedding_size))
        self.bias = self.add_weight(shape=(self.spec.vocab_size,), initializer="zeros", name="bias")
        self.built = True

    def call(self, hidden: Any, word_embeddings: Any) -> Any:
        x = self.layer_norm(self.act(self.dense(hidden)))
        table = ops.cast(word_embeddings, x.dtype)  # [V, E]: the tied decoder weight
        return ops.matmul(x, ops.transpose(table)) + ops.cast(self.bias, x.dtype)


# --------------------------------------------------------------------------- models
class _SharedWeightCasts(AutocastScope):
    """Mixed precision's weight casts, made once per forward pass and shared by every
    application of a shared layer.

    Keras casts a float32 variable to the compute dtype each time a layer reads it. ALBERT
    applies one parameter group ``num_hidden_layers`` times, so a forward pass makes that
    many low-precision copies of the group's weights, and the graph executor keeps each one
    for its application's backward pass (XLA merges the equal casts; the executor does
    not): at base 11 extra bfloat16 copies of 7.1 M weights, 156 MB. Under this scope each
    variable is cast once.

    ``reads`` maps ``id`` of a variable to the number of reads expected in one pass (a
    shared layer's applications). Such a variable is cast by :func:`_fanned_cast`, whose
    outputs are handed out one per read and whose backward pass sums the reads' gradients
    in float32 in one kernel; other variables' reads return their one cast through
    :func:`_shared_cast_use`, whose gradient is the read's own gradient in the variable's
    dtype. Either way the applications' weight gradients are summed in float32, as with a
    cast per read.
    """

    def __init__(self, dtype: Any, reads: dict[int, int] | None = None):
        super().__init__(dtype)
        self._reads = reads or {}
        self._casts: dict[int, tuple[Any, Any, list[Any]]] = {}

    def maybe_cast(self, value: Any) -> Any:
        dtype = tf.as_dtype(self.dtype) if self.dtype is not None else None
        if dtype is None or not value.dtype.is_floating or value.dtype == dtype:
            return super().maybe_cast(value)
        read = tf.convert_to_tensor(value)  # a recorded read: the gradient reaches value
        entry = self._casts.get(id(value))
        if entry is None:
            # The variable is held with its cast so that its id is not reused in this pass.
            reads = self._reads.get(id(value), 1)
            if reads > 1:
                uses = list(_fanned_cast(read, dtype, reads))
                entry = (value, tf.stop_gradient(uses[0]), uses)
            else:
                entry = (value, tf.cast(tf.stop_gradient(read), dtype), [])
            self._casts[id(value)] = entry
        if entry[2]:
            return entry[2].pop(0)
        return _shared_cast_use(read, entry[1])


def _fanned_cast(read: Any, dtype: Any, reads: int) -> list[Any]:
    """``reads`` uses of one ``dtype`` cast of ``read``; the gradient is the sum of the
    uses' gradients, computed in ``read``'s dtype by one XLA kernel: each element is read
    once and widened in registers, with no full-size float32 copy per use.

    Autodiff would sum a shared read's gradients itself, but in the compute dtype; with a
    cast per read it casts each to float32 first (at base 12 float32 copies of the layer's
    gradients, alive together at the end of the backward pass) and then adds them.
    """

    @tf.custom_gradient
    def fan(x: Any) -> tuple[list[Any], Callable[..., Any]]:
        cast = tf.cast(x, dtype)

        def grad(*d_uses: Any) -> Any:
            return _sum_wide([d for d in d_uses if d is not None], x.dtype)

        return [tf.identity(cast) for _ in range(reads)], grad

    return fan(read)


@tf.function(jit_compile=True, reduce_retracing=True)
def _sum_wide(parts: list[Any], dtype: Any) -> Any:
    return tf.add_n([tf.cast(p, dtype) for p in parts])


@tf.custom_gradient
def _shared_cast_use(read: Any, cast: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``cast`` (the shared low-precision copy of ``read``) passed on as this read's value;
    the gradient goes to ``read`` in its own dtype, none to the shared copy."""

    def grad(d_cast: Any) -> tuple[Any, None]:
        return tf.cast(d_cast, read.dtype), None

    return tf.identity(cast), grad


class AlbertEncoder(keras.Model):
    """The ALBERT encoder: embeddings, shared transformer groups and the [CLS] pooler.

    Args:
        spec: the architecture.
        dtype: a Keras dtype policy name (``"float32"``, ``"mixed_float16"``,
            ``"mixed_bfloat16"``) or None for Keras' default.
        add_pooling_layer: build the tanh pooler (HF's question-answering and masked-LM
            models have none).
        remat: what training recomputes in the backward pass instead of keeping
            (``keras.remat``, gradient checkpointing; :data:`RematMode`): ``"none"``,
            ``"selective"`` (each layer's attention core and FFN activation: at base seq 512
            a third less peak memory, no measurable time; docs/memory.md) or ``"full"``
            (each transformer-layer application: activation memory drops to one layer's
            plus each layer's input, for about one extra forward pass). True means
            ``"full"``, False ``"none"``.

    Example:
        >>> from albertkit.config.sizes import SIZES, AlbertSpec
        >>> enc = AlbertEncoder(AlbertSpec(**SIZES["tiny"]))
        >>> out = enc.build_for(seq_length=16)
        >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
        ((1, 16, 128), (1, 128))
    """

    def __init__(
        self,
        spec: AlbertSpec,
        dtype: Any = None,
        add_pooling_layer: bool = True,
        name: str = "albert",
        remat: RematMode | bool = "none",
        **kwargs: Any,
    ):
        super().__init__(name=name, dtype=_check_dtype(dtype), **kwargs)
        if not isinstance(spec, AlbertSpec):
            raise TypeError(f"spec must be an AlbertSpec, got {type(spec).__name__}")
        self.spec = spec
        self.add_pooling_layer = add_pooling_layer
        self.remat = remat_mode(remat)
        dt = self.dtype_policy
        self.embeddings = AlbertEmbeddings(spec, name="embeddings", dtype=dt)
        self.embedding_hidden_mapping_in = _dense(
            spec, spec.hidden_size, "embedding_hidden_mapping_in", dt
        )
        self.albert_layer_groups = [
            AlbertLayerGroup(spec, self.remat == "selective", name=f"group_{g}", dtype=dt)
            for g in range(spec.num_hidden_groups)
        ]
        self.final_layer_norm = (
            _layer_norm(spec, "final_layer_norm", dt) if spec.pre_layer_norm else None
        )
        self.pooler = _dense(spec, spec.hidden_size, "pooler", dt) if add_pooling_layer else None

    def group_index(self, layer: int) -> int:
        """The parameter group used by transformer layer ``layer`` (HF's float formula)."""
        s = self.spec
        return int(layer / (s.num_hidden_layers / s.num_hidden_groups))

    def build(self, input_shape: Any = None) -> None:
        s = self.spec
        self.embeddings.build()
        self.embedding_hidden_mapping_in.build((None, None, s.embedding_size))
        for group in self.albert_layer_groups:
            group.build((None, None, s.hidden_size))
        if self.final_layer_norm is not None:
            self.final_layer_norm.build((None, None, s.hidden_size))
        if self.pooler is not None:
            self.pooler.build((None, s.hidden_size))
        self.built = True

    def call(self, inputs: Inputs, training: bool = False) -> dict[str, Any]:
        if self.compute_dtype == self.variable_dtype:
            return self._forward(inputs, training)
        with _SharedWeightCasts(self.compute_dtype, self._shared_reads(training)):
            return self._forward(inputs, training)

    def _shared_reads(self, training: bool) -> dict[int, int]:
        """Reads per forward pass of each variable of a group applied more than once (for
        :class:`_SharedWeightCasts`); none under full recomputation in training, whose
        backward pass reads the weights again."""
        if self.remat == "full" and training:
            return {}
        uses = [0] * len(self.albert_layer_groups)
        for i in range(self.spec.num_hidden_layers):
            uses[self.group_index(i)] += 1
        return {
            id(w._value): n
            for group, n in zip(self.albert_layer_groups, uses, strict=True)
            if n > 1
            for w in group.weights
        }

    def _forward(self, inputs: Inputs, training: bool) -> dict[str, Any]:
        input_ids = inputs["input_ids"]
        mask = inputs.get("input_mask")
        if mask is None:
            mask = ops.ones_like(input_ids)
        segment_ids = inputs.get("segment_ids")
        if segment_ids is None:
            segment_ids = ops.zeros_like(input_ids)
        # [B, 1, 1, T] float32: 0 for real keys, MASK_BIAS for padding keys.
        bias = (1.0 - ops.cast(mask, "float32")) * MASK_BIAS
        bias = ops.expand_dims(ops.expand_dims(bias, 1), 1)

        hidden = self.embeddings(input_ids, segment_ids, training=training)
        hidden = self.embedding_hidden_mapping_in(hidden)
        for i in range(self.spec.num_hidden_layers):
            group = self.albert_layer_groups[self.group_index(i)]
            if self.remat == "full" and training:
                hidden = self._recomputed(group, hidden, bias)
            else:
                hidden = group(hidden, bias, training=training)
        if self.final_layer_norm is not None:
            hidden = self.final_layer_norm(hidden)
        outputs = {"sequence_output": hidden}
        if self.pooler is not None:
            outputs["pooled_output"] = ops.tanh(self.pooler(hidden[:, 0]))
        return outputs

    def _recomputed(self, group: AlbertLayerGroup, hidden: Any, bias: Any) -> Any:
        """One training application of ``group`` whose activations are recomputed in the
        backward pass (``keras.remat``). Its dropout seeds are drawn here, once, as the
        plain path draws them, so the recomputation drops exactly what the forward pass did."""
        seeds = {
            id(d): d.seed_generator.next()
            for layer in group.albert_layers
            for d in layer.dropouts()
            if d.seed_generator is not None
        }

        def apply(h: Any, b: Any) -> Any:
            token = _DRAWN_SEEDS.set(seeds)
            try:
                return group(h, b, training=True)
            finally:
                _DRAWN_SEEDS.reset(token)

        return keras.remat(apply)(hidden, bias)

    def build_for(self, seq_length: int = 8) -> dict[str, Any]:
        """Create every variable by running a one-example dummy batch; returns its outputs."""
        return self(_dummy_batch(seq_length))

    def get_config(self) -> dict[str, Any]:
        return {
            "spec": self.spec.model_dump(),
            "dtype": self.dtype_policy.name,
            "add_pooling_layer": self.add_pooling_layer,
            "name": self.name,
            "remat": self.remat,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> AlbertEncoder:
        config = dict(config)
        return cls(AlbertSpec(**config.pop("spec")), **config)


class _AlbertHeadModel(keras.Model):
    """The Keras model behind every task: the encoder plus a task head (pretraining, span,
    classification); holds the spec, the encoder and the dummy-batch builder."""

    _pooling = True

    def __init__(self, spec: AlbertSpec, dtype: Any, name: str, remat: RematMode | bool = "none",
                 **kwargs: Any):
        super().__init__(name=name, dtype=_check_dtype(dtype), **kwargs)
        if not isinstance(spec, AlbertSpec):
            raise TypeError(f"spec must be an AlbertSpec, got {type(spec).__name__}")
        self.spec = spec
        self.albert = AlbertEncoder(
            spec, dtype=self.dtype_policy, add_pooling_layer=self._pooling, name="albert",
            remat=remat,
        )

    def build_for(self, seq_length: int = 8, max_predictions: int | None = None) -> dict[str, Any]:
        """Create every variable by running a one-example dummy batch; returns its outputs.

        Call it right after construction: it fixes the variable paths (checkpoint keys).
        """
        return self(_dummy_batch(seq_length, max_predictions))

    def get_config(self) -> dict[str, Any]:
        return {"spec": self.spec.model_dump(), "dtype": self.dtype_policy.name, "name": self.name,
                "remat": self.albert.remat}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> _AlbertHeadModel:
        config = dict(config)
        return cls(AlbertSpec(**config.pop("spec")), **config)


class AlbertForPretraining(_AlbertHeadModel):
    """ALBERT with the masked-LM head (at the masked positions only) and the SOP head.

    Inputs: ``input_ids``, ``input_mask``, ``segment_ids`` [B, T] and ``masked_lm_positions``
    [B, P]. Outputs (float32): ``mlm_logits`` [B, P, V] and ``sop_logits`` [B, 2]. The MLM head
    gathers the P masked positions first, so full-sequence vocabulary logits are never formed
    (``full_mlm_logits`` computes them, for tests and for HF's ``AlbertForMaskedLM`` view).

    Example:
        >>> from albertkit.config.sizes import SIZES, AlbertSpec
        >>> model = AlbertForPretraining(AlbertSpec(**SIZES["tiny"]))
        >>> out = model.build_for(seq_length=16, max_predictions=3)
        >>> tuple(out["mlm_logits"].shape), tuple(out["sop_logits"].shape)
        ((1, 3, 3000), (1, 2))
    """

    def __init__(
        self,
        spec: AlbertSpec,
        dtype: Any = None,
        name: str = "albert_for_pretraining",
        **kwargs: Any,
    ):
        super().__init__(spec, dtype, name, **kwargs)
        dt = self.dtype_policy
        self.predictions = AlbertMLMHead(spec, name="predictions", dtype=dt)
        self.sop_dropout = Dropout(spec.classifier_dropout_prob, name="sop_dropout", dtype=dt)
        self.sop_classifier = _dense(spec, 2, "sop_classifier", dt)

    def build(self, input_shape: Any = None) -> None:
        self.albert.build()
        self.predictions.build()
        self.sop_dropout.build()
        self.sop_classifier.build((None, self.spec.hidden_size))
        self.built = True

    def call(self, inputs: Inputs, training: bool = False) -> dict[str, Any]:
        enc = self.albert(inputs, training=training)
        masked = gather_positions(enc["sequence_output"], inputs["masked_lm_positions"])
        mlm = self.predictions(masked, self.albert.embeddings.word_embeddings.embeddings)
        sop = self.sop_classifier(self.sop_dropout(enc["pooled_output"], training=training))
        return _as_float32({"mlm_logits": mlm, "sop_logits": sop})

    def full_mlm_logits(self, inputs: Inputs, training: bool = False) -> Any:
        """Vocabulary logits at every position [B, T, V] (float32); tests and inference only."""
        enc = self.albert(inputs, training=training)
        logits = self.predictions(
            enc["sequence_output"], self.albert.embeddings.word_embeddings.embeddings
        )
        return ops.cast(logits, "float32")

    def build_for(self, seq_length: int = 8, max_predictions: int | None = 2) -> dict[str, Any]:
        return super().build_for(seq_length, max_predictions or 1)


class AlbertForQuestionAnswering(_AlbertHeadModel):
    """ALBERT with a span head: ``start_logits`` and ``end_logits`` [B, T] (float32).

    As in HF's ``AlbertForQuestionAnswering`` there is no pooler. For SQuAD v2 the task
    reads the no-answer score at position 0 ([CLS]).

    Example:
        >>> from albertkit.config.sizes import SIZES, AlbertSpec
        >>> model = AlbertForQuestionAnswering(AlbertSpec(**SIZES["tiny"]))
        >>> tuple(model.build_for(seq_length=16)["start_logits"].shape)
        (1, 16)
    """

    _pooling = False

    def __init__(
        self,
        spec: AlbertSpec,
        dtype: Any = None,
        name: str = "albert_for_question_answering",
        **kwargs: Any,
    ):
        super().__init__(spec, dtype, name, **kwargs)
        self.qa_outputs = _dense(spec, 2, "qa_outputs", self.dtype_policy)

    def build(self, input_shape: Any = None) -> None:
        self.albert.build()
        self.qa_outputs.build((None, None, self.spec.hidden_size))
        self.built = True

    def call(self, inputs: Inputs, training: bool = False) -> dict[str, Any]:
        enc = self.albert(inputs, training=training)
        logits = self.qa_outputs(enc["sequence_output"])  # [B, T, 2]
        return _as_float32({"start_logits": logits[..., 0], "end_logits": logits[..., 1]})


class AlbertForSequenceClassification(_AlbertHeadModel):
    """ALBERT with dropout and a linear classifier on the pooled output.

    Output: ``logits`` [B, num_labels] (float32); ``num_labels=1`` is regression.

    Example:
        >>> from albertkit.config.sizes import SIZES, AlbertSpec
        >>> model = AlbertForSequenceClassification(AlbertSpec(**SIZES["tiny"]), num_labels=3)
        >>> tuple(model.build_for(seq_length=16)["logits"].shape)
        (1, 3)
    """

    def __init__(
        self,
        spec: AlbertSpec,
        num_labels: int,
        dtype: Any = None,
        name: str = "albert_for_sequence_classification",
        **kwargs: Any,
    ):
        if not isinstance(num_labels, int) or isinstance(num_labels, bool) or num_labels < 1:
            raise ValueError(f"num_labels must be a positive integer, got {num_labels!r}")
        super().__init__(spec, dtype, name, **kwargs)
        self.num_labels = num_labels
        dt = self.dtype_policy
        self.dropout = Dropout(spec.classifier_dropout_prob, name="dropout", dtype=dt)
        self.classifier = _dense(spec, num_labels, "classifier", dt)

    def build(self, input_shape: Any = None) -> None:
        self.albert.build()
        self.dropout.build()
        self.classifier.build((None, self.spec.hidden_size))
        self.built = True

    def call(self, inputs: Inputs, training: bool = False) -> dict[str, Any]:
        enc = self.albert(inputs, training=training)
        logits = self.classifier(self.dropout(enc["pooled_output"], training=training))
        return _as_float32({"logits": logits})

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_labels": self.num_labels}
