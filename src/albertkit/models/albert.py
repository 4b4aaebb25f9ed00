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
accumulated in float32, :func:`~albertkit.models.precision.softmax_dtype`), and every model
output is cast to float32 so that losses are float32. Without attention dropout the attention
core is :func:`~albertkit.models.kernels.attention_core`, whose backward pass is written out
(FlashAttention's) instead of left to autodiff. The hand-written kernels (fused activations,
LayerNorm's backward pass, the attention core) live in :mod:`albertkit.models.kernels`, the
mixed-precision plumbing in :mod:`albertkit.models.precision`, and the remat modes in
:mod:`albertkit.models.options`.

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

import functools
import math
from typing import Any

import keras
from keras import ops

from albertkit.config.sizes import AlbertSpec
from albertkit.models.kernels import activation, attention_core, fused_activation
from albertkit.models.layers import DRAWN_SEEDS, Dropout, LayerNorm
from albertkit.models.options import RematMode, remat_mode
from albertkit.models.precision import SharedWeightCasts, as_float32, check_dtype, softmax_dtype

# Added to attention scores of padding keys (in float32, before the softmax). Google's BERT
# and ALBERT use -10000: exp(-1e4) underflows to exactly 0 in float32, and the value is
# representable in float16 and bfloat16, so the mask is safe whatever precision adds it.
# A fully padded row still gets a finite (uniform) softmax, never NaN.
MASK_BIAS = -10000.0

Inputs = dict[str, Any]


# --------------------------------------------------------------------------- helpers
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


def _layer_norm(spec: AlbertSpec, name: str, dtype: Any) -> LayerNorm:
    assert "layer_norm" in name  # the optimizers exclude LayerNorm by this substring
    return LayerNorm(epsilon=spec.layer_norm_eps, name=name, dtype=dtype)


def _hf_dense(name: str, layer: keras.layers.Dense) -> dict[str, tuple[Any, bool]]:
    """A dense layer's weights under Hugging Face names (the kernel transposed)."""
    return {f"{name}.weight": (layer.kernel, True), f"{name}.bias": (layer.bias, False)}


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


def _dummy_batch(seq_length: int, max_predictions: int | None = None) -> Inputs:
    batch = {
        "input_ids": ops.zeros((1, seq_length), "int32"),
        "input_mask": ops.ones((1, seq_length), "int32"),
        "segment_ids": ops.zeros((1, seq_length), "int32"),
    }
    if max_predictions is not None:
        batch["masked_lm_positions"] = ops.zeros((1, max_predictions), "int32")
    return batch


# --------------------------------------------------------------------------- layers
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
        super().__init__(name=name, dtype=check_dtype(dtype), **kwargs)
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

    hf_architectures = ("AlbertModel",)

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
        with SharedWeightCasts(self.compute_dtype, self._shared_reads(training)):
            return self._forward(inputs, training)

    def _shared_reads(self, training: bool) -> dict[int, int]:
        """Reads per forward pass of each variable of a group applied more than once (for
        :class:`SharedWeightCasts`); none under full recomputation in training, whose
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
            token = DRAWN_SEEDS.set(seeds)
            try:
                return group(h, b, training=True)
            finally:
                DRAWN_SEEDS.reset(token)

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
        super().__init__(name=name, dtype=check_dtype(dtype), **kwargs)
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
        return as_float32({"mlm_logits": mlm, "sop_logits": sop})

    def full_mlm_logits(self, inputs: Inputs, training: bool = False) -> Any:
        """Vocabulary logits at every position [B, T, V] (float32); tests and inference only."""
        enc = self.albert(inputs, training=training)
        logits = self.predictions(
            enc["sequence_output"], self.albert.embeddings.word_embeddings.embeddings
        )
        return ops.cast(logits, "float32")

    def build_for(self, seq_length: int = 8, max_predictions: int | None = 2) -> dict[str, Any]:
        return super().build_for(seq_length, max_predictions or 1)

    hf_architectures = ("AlbertForPreTraining", "AlbertForMaskedLM", "AlbertModel")

    def hf_head_weights(self) -> dict[str, tuple[Any, bool]]:
        """The MLM and SOP heads' weights by Hugging Face name (see ``HFExportable``)."""
        norm = self.predictions.layer_norm
        return {**_hf_dense("predictions.dense", self.predictions.dense),
                "predictions.LayerNorm.weight": (norm.gamma, False),
                "predictions.LayerNorm.bias": (norm.beta, False),
                "predictions.bias": (self.predictions.bias, False),
                **_hf_dense("sop_classifier.classifier", self.sop_classifier)}


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
        return as_float32({"start_logits": logits[..., 0], "end_logits": logits[..., 1]})

    hf_architectures = ("AlbertForQuestionAnswering",)

    def hf_head_weights(self) -> dict[str, tuple[Any, bool]]:
        """The span head's weights by Hugging Face name (see ``HFExportable``)."""
        return _hf_dense("qa_outputs", self.qa_outputs)


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
        return as_float32({"logits": logits})

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_labels": self.num_labels}

    hf_architectures = ("AlbertForSequenceClassification", "AlbertModel")

    def hf_head_weights(self) -> dict[str, tuple[Any, bool]]:
        """The classifier's weights by Hugging Face name (see ``HFExportable``)."""
        return _hf_dense("classifier", self.classifier)
