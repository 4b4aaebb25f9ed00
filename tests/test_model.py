"""The Keras ALBERT: masking, precision policies, heads, kernels, naming, a NumPy reference.

Output shapes and dtypes, XLA against the uncompiled pass, variable sequence length and the
config round trip of every model run through the shared harness in test_model_common.py.
HF PyTorch parity lives in test_hf_parity.py; the NumPy reference here also covers the
pre-LayerNorm variant, which has no HF counterpart.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from albertkit.models import precision
from albertkit.models.albert import (
    AlbertAttention,
    AlbertEncoder,
    AlbertForPretraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertLayer,
    gather_positions,
)
from albertkit.models.kernels import (
    activation,
    attention_core,
    fused_activation,
    sparse_cross_entropy,
)
from albertkit.models.layers import LayerNorm
from conftest import GROUPED_LAYERS, tiny_spec_with

# grouped layers (the sharing is under test); the FFN width is this file's own, the shapes its
# tolerances were set on
SPEC = tiny_spec_with(**GROUPED_LAYERS, intermediate_size=48)


def batch(b: int = 3, t: int = 12, p: int = 4, seed: int = 0, pad: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    mask = np.ones((b, t), "int32")
    if pad:
        for i in range(1, b):
            mask[i, t - 3 * i :] = 0
    seg = np.zeros((b, t), "int32")
    seg[:, t // 2 :] = 1
    return {
        "input_ids": rng.integers(5, SPEC.vocab_size, (b, t)).astype("int32"),
        "input_mask": mask,
        "segment_ids": seg * mask,
        "masked_lm_positions": rng.integers(0, t // 2, (b, p)).astype("int32"),
    }


@pytest.fixture(scope="module")
def pretraining() -> AlbertForPretraining:
    keras.utils.set_random_seed(1)
    model = AlbertForPretraining(SPEC)
    model.build_for(seq_length=12, max_predictions=4)
    return model


# --------------------------------------------------------------------------- arguments
def test_argument_validation():
    with pytest.raises(ValueError, match="num_labels"):
        AlbertForSequenceClassification(SPEC, num_labels=0)
    with pytest.raises(ValueError, match="dtype policy"):
        AlbertForPretraining(SPEC, dtype="float8_nonsense")
    with pytest.raises(TypeError, match="AlbertSpec"):
        AlbertEncoder({"hidden_size": 32})


def test_qa_model_has_no_pooler_and_layers_are_shared():
    qa = AlbertForQuestionAnswering(SPEC)
    qa.build()
    assert not any("pooler" in v.path for v in qa.weights)
    # Parameters depend on groups x inner layers, not on the number of layer applications.
    deeper = AlbertForQuestionAnswering(SPEC.model_copy(update={"num_hidden_layers": 7}))
    deeper.build()
    assert len(deeper.weights) == len(qa.weights)
    n_layers = sum("query/kernel" in v.path for v in qa.weights)
    assert n_layers == SPEC.num_hidden_groups * SPEC.inner_group_num


# --------------------------------------------------------------------------- masking
def test_padding_does_not_change_real_token_outputs(pretraining):
    x = batch(b=2, t=8, pad=False)
    base = pretraining.albert(x)
    # Append 6 padding positions holding random ids: real-token outputs must not move.
    rng = np.random.default_rng(5)
    padded = {
        "input_ids": np.concatenate([x["input_ids"], rng.integers(0, 100, (2, 6))], 1).astype(
            "int32"
        ),
        "input_mask": np.concatenate([x["input_mask"], np.zeros((2, 6), "int32")], 1),
        "segment_ids": np.concatenate([x["segment_ids"], np.ones((2, 6), "int32")], 1),
    }
    out = pretraining.albert(padded)
    np.testing.assert_allclose(out["sequence_output"][:, :8], base["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], base["pooled_output"], atol=1e-5)
    # ... while the mask does matter: unmasking the padding changes them.
    padded["input_mask"] = np.ones_like(padded["input_mask"])
    unmasked = pretraining.albert(padded)
    assert np.abs(unmasked["sequence_output"][:, :8] - base["sequence_output"]).max() > 1e-3


def test_fully_padded_row_is_finite(pretraining):
    x = batch(b=2, t=8)
    x["input_mask"][1] = 0
    out = pretraining(x)
    assert all(np.isfinite(v).all() for v in out.values())


# --------------------------------------------------------------------------- heads
def test_gathered_mlm_head_equals_full_sequence_logits(pretraining):
    x = batch(b=3, t=12, p=5, seed=3)
    gathered = pretraining(x)["mlm_logits"].numpy()
    full = pretraining.full_mlm_logits(x).numpy()
    expected = np.take_along_axis(full, x["masked_lm_positions"][:, :, None], axis=1)
    np.testing.assert_allclose(gathered, expected, atol=1e-5)


def test_gather_positions_matches_numpy():
    seq = np.random.default_rng(0).normal(size=(3, 7, 5)).astype("float32")
    pos = np.array([[0, 6, 2], [1, 1, 3], [5, 4, 0]], "int32")
    got = gather_positions(seq, pos).numpy()
    np.testing.assert_array_equal(got, np.take_along_axis(seq, pos[:, :, None], axis=1))


def test_mlm_decoder_is_tied_to_word_embeddings(pretraining):
    names = [v.path for v in pretraining.weights]
    assert sum("word_embeddings" in n for n in names) == 1
    assert not any("decoder" in n for n in names)


# --------------------------------------------------------------------------- activations
@pytest.mark.parametrize(
    "name", ["gelu", "gelu_new", "gelu_fast", "relu", "silu", "swish", "tanh", "mish"]
)
def test_activations_match_reference_formulas(name):
    x = np.linspace(-6, 6, 101).astype("float32")
    erf = np.vectorize(math.erf)
    tanh_gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    expected = {
        "gelu": 0.5 * x * (1 + erf(x / math.sqrt(2))),
        "gelu_new": tanh_gelu,
        "gelu_fast": tanh_gelu,
        "relu": np.maximum(x, 0),
        "silu": x / (1 + np.exp(-x)),
        "swish": x / (1 + np.exp(-x)),
        "tanh": np.tanh(x),
        "mish": x * np.tanh(np.log1p(np.exp(x))),
    }[name]
    np.testing.assert_allclose(activation(name)(x), expected, atol=2e-6)
    assert np.abs(activation("gelu")(x) - activation("gelu_new")(x)).max() > 1e-4


@pytest.mark.parametrize("name", ["gelu", "gelu_new", "gelu_fast"])
def test_fused_activation_matches_the_formula_and_its_finite_difference_slope(name):
    # Reference: the float64 NumPy formula; its slope by central differences (step 1e-6),
    # so the fused kernel's hand-written derivative is checked against no formula of ours.
    erf = np.vectorize(math.erf)

    def f(x):
        if name == "gelu":
            return 0.5 * x * (1 + erf(x / math.sqrt(2)))
        k = math.sqrt(2 / math.pi) if name == "gelu_new" else 0.7978845608
        return 0.5 * x * (1 + np.tanh(k * (x + 0.044715 * x**3)))

    x64 = np.linspace(-6, 6, 241)
    slope = (f(x64 + 1e-6) - f(x64 - 1e-6)) / 2e-6
    act = fused_activation(name)
    for dtype, atol in ((tf.float32, 2e-6), (tf.bfloat16, 2e-2)):
        x = tf.constant(x64, dtype)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = act(x)
        dy = tape.gradient(y, x)
        assert y.dtype == dtype and dy.dtype == dtype
        exact = tf.cast(x, tf.float64).numpy()  # the values bfloat16 rounded x to
        ref_slope = slope if dtype == tf.float32 else (
            (f(exact + 1e-6) - f(exact - 1e-6)) / 2e-6)
        np.testing.assert_allclose(tf.cast(y, tf.float64), f(exact), atol=atol,
                                   rtol=atol)
        np.testing.assert_allclose(tf.cast(dy, tf.float64), ref_slope, atol=atol * 2,
                                   rtol=atol)


@pytest.mark.parametrize("recompute", [False, True])
def test_layer_gradients_with_the_fused_activation_equal_the_formulas(recompute):
    spec = SPEC.model_copy(update={"hidden_act": "gelu_new"})
    layer = AlbertLayer(spec, recompute=recompute)
    layer.build((None, None, spec.hidden_size))
    assert layer.fused_act is not None and fused_activation("relu") is None
    x = tf.random.stateless_normal((2, 7, spec.hidden_size), seed=(1, 2))
    bias = tf.zeros((2, 1, 1, 7))

    def grads():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, bias, training=True)
            loss = tf.reduce_sum(y * tf.sin(y))
        return tape.gradient(loss, [x, *layer.trainable_variables])

    fused = grads()
    layer.fused_act, layer.act = None, activation("gelu_new")  # the autodiff path
    formula = grads()
    for a, b in zip(fused, formula, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_layer_norm_matches_numpy_and_its_finite_difference_gradients():
    # Reference: the float64 NumPy formula of the loss sum(w * LayerNorm(x)), differentiated
    # by central differences, so the kernel's hand-written backward pass meets no formula of ours.
    rng = np.random.default_rng(3)
    x, w = rng.normal(1.0, 2.0, (2, 3, 8)), rng.normal(size=(2, 3, 8))
    gamma, beta = rng.normal(size=8), rng.normal(size=8)
    eps = 1e-6

    def loss(x, gamma, beta):
        mu = x.mean(-1, keepdims=True)
        y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * gamma + beta
        return (w * y).sum(), y

    def slope(i):
        args, out = [x, gamma, beta], np.zeros_like([x, gamma, beta][i])
        for j in np.ndindex(out.shape):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[i][j] += 1e-6
            down[i][j] -= 1e-6
            out[j] = (loss(*up)[0] - loss(*down)[0]) / 2e-6
        return out

    ln = LayerNorm(epsilon=eps, dtype="float64")
    ln.build(x.shape)
    ln.gamma.assign(gamma)
    ln.beta.assign(beta)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = ln(xt)
        total = tf.reduce_sum(w * y)
    grads = tape.gradient(total, [xt, ln.gamma, ln.beta])
    np.testing.assert_allclose(y, loss(x, gamma, beta)[1], atol=1e-12)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, slope(i), atol=1e-6, rtol=1e-6)


def test_sparse_cross_entropy_matches_numpy_log_softmax_and_its_gradient():
    # Reference: the float64 NumPy definitions, -log softmax(x)[label] (shifted by nothing, the
    # logits are small) and its derivative softmax(x) - onehot(label); hits by np.argmax,
    # which also takes the first of equal maxima (row 0 ties labels 2 and 4).
    rng = np.random.default_rng(5)
    x, w = rng.normal(0.0, 3.0, (2, 3, 7)), rng.normal(size=(2, 3))
    x[0, 0, 2] = x[0, 0, 4] = x[0, 0].max() + 1.0
    labels = rng.integers(0, 7, (2, 3))
    labels[0, 0] = 4
    labels[1, 2] = int(np.argmax(x[1, 2]))
    soft = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    ce_want = -np.log(np.take_along_axis(soft, labels[..., None], -1))[..., 0]
    grad_want = w[..., None] * (soft - np.eye(7)[labels])

    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        ce, hit = sparse_cross_entropy(xt, tf.constant(labels))
        total = tf.reduce_sum(w * ce)
    np.testing.assert_allclose(ce, ce_want, rtol=1e-12)
    np.testing.assert_array_equal(hit, (np.argmax(x, -1) == labels).astype(float))
    assert hit.numpy()[0, 0] == 0.0 and hit.numpy()[1, 2] == 1.0
    np.testing.assert_allclose(tape.gradient(total, xt), grad_want, atol=1e-12)


def test_sparse_cross_entropy_takes_labels_of_any_rank_in_one_process():
    """Rank 1, then 2, then 3 labels (the kernels are traced once per process and reused):
    each equals TensorFlow's op. A kernel traced for two ranks used to fall back to an
    unknown rank and fail on the next call."""
    rng = np.random.default_rng(7)
    for shape in [(3,), (2, 3), (2, 2, 3), (4,)]:
        x = tf.constant(rng.normal(size=(*shape, 5)), tf.float32)
        labels = tf.constant(rng.integers(0, 5, shape))
        ce, hit = sparse_cross_entropy(x, labels)
        assert ce.shape == hit.shape == shape
        np.testing.assert_allclose(
            ce, tf.nn.sparse_softmax_cross_entropy_with_logits(labels, x), rtol=1e-6)


def test_sparse_cross_entropy_takes_low_precision_logits_and_flags_bad_labels():
    """bfloat16 logits: float32 losses equal to TensorFlow's op on the same values, the
    gradient in bfloat16 within its rounding; a label outside [0, V) gives NaN, not a loss."""
    rng = np.random.default_rng(6)
    x = tf.cast(tf.constant(rng.normal(0.0, 4.0, (4, 50)), tf.float32), tf.bfloat16)
    labels = tf.constant([3, 0, 49, 17])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ce, _ = sparse_cross_entropy(x, labels)
        ref = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, tf.cast(x, tf.float32))
    assert ce.dtype == tf.float32
    np.testing.assert_allclose(ce, ref, rtol=1e-6)
    got, want = tape.gradient(ce, x), tape.gradient(ref, x)
    assert got.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(got, tf.float32), tf.cast(want, tf.float32), atol=2**-8)

    bad, _ = sparse_cross_entropy(x, tf.constant([3, -1, 50, 17]))
    assert np.isfinite(bad.numpy()).tolist() == [True, False, False, True]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_layer_norm_equals_keras_layer_normalization(policy):
    # The class it replaces: same variables, same values and gradients (float32: 1e-5), and
    # under mixed_bfloat16 the same dtypes with values within bfloat16 rounding.
    rng = np.random.default_rng(4)
    x = tf.cast(tf.constant(rng.normal(0.5, 3.0, (4, 5, 32)), tf.float32),
                "bfloat16" if policy == "mixed_bfloat16" else "float32")
    w = tf.constant(rng.normal(size=(4, 5, 32)), tf.float32)
    out = []
    for cls in (LayerNorm, keras.layers.LayerNormalization):
        ln = cls(epsilon=1e-12, dtype=policy, name="layer_norm")
        ln.build(x.shape)
        ln.gamma.assign(rng.normal(size=32) if cls is LayerNorm else out[0][-2])
        ln.beta.assign(rng.normal(size=32) if cls is LayerNorm else out[0][-1])

        @tf.function
        def step(ln=ln):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = ln(x)
                total = tf.reduce_sum(tf.cast(y, tf.float32) * w)
            return [y, *tape.gradient(total, [x, ln.gamma, ln.beta])]

        out.append([*step(), ln.gamma.numpy(), ln.beta.numpy()])
        assert [v.path for v in ln.weights] == ["layer_norm/gamma", "layer_norm/beta"]
    tol = 1e-5 if policy == "float32" else 2e-2
    for a, b in zip(*out, strict=True):
        assert a.dtype == b.dtype
        scale = max(1.0, float(np.abs(np.asarray(b, np.float32)).max()))
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32),
                                   atol=tol * scale, rtol=tol)


# --------------------------------------------------------------------------- NumPy reference
def _np_layer_norm(x, ln, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * ln.gamma.numpy() + ln.beta.numpy()


def _np_dense(x, layer):
    return x @ layer.kernel.numpy() + layer.bias.numpy()


def numpy_encoder(enc: AlbertEncoder, x: dict) -> np.ndarray:
    """ALBERT's encoder written from the paper / Google's modeling.py, in float64 NumPy."""
    s = enc.spec
    eps = s.layer_norm_eps
    e = enc.embeddings
    ids, seg, mask = x["input_ids"], x["segment_ids"], x["input_mask"].astype("float64")
    t = ids.shape[1]
    h = (
        e.word_embeddings.embeddings.numpy()[ids]
        + e.token_type_embeddings.embeddings.numpy()[seg]
        + e.position_embeddings.embeddings.numpy()[np.arange(t)][None]
    )
    h = _np_dense(_np_layer_norm(h, e.layer_norm, eps), enc.embedding_hidden_mapping_in)
    act = activation(s.hidden_act)
    bias = (1.0 - mask)[:, None, None, :] * -1e4

    def heads(y):
        return y.reshape(y.shape[0], t, s.num_attention_heads, s.head_size).transpose(0, 2, 1, 3)

    for i in range(s.num_hidden_layers):
        group = enc.albert_layer_groups[int(i * s.num_hidden_groups / s.num_hidden_layers)]
        for layer in group.albert_layers:
            att = layer.attention
            a_in = _np_layer_norm(h, att.layer_norm, eps) if s.pre_layer_norm else h
            q, k, v = (heads(_np_dense(a_in, d)) for d in (att.query, att.key, att.value))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(s.head_size) + bias
            p = np.exp(scores - scores.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            ctx = (p @ v).transpose(0, 2, 1, 3).reshape(h.shape)
            a = h + _np_dense(ctx, att.dense)
            if not s.pre_layer_norm:
                a = _np_layer_norm(a, att.layer_norm, eps)
            f_in = _np_layer_norm(a, layer.full_layer_layer_norm, eps) if s.pre_layer_norm else a
            f = _np_dense(
                np.asarray(act(_np_dense(f_in, layer.ffn).astype("float32"))), layer.ffn_output
            )
            h = (
                a + f
                if s.pre_layer_norm
                else _np_layer_norm(a + f, layer.full_layer_layer_norm, eps)
            )
    if s.pre_layer_norm:
        h = _np_layer_norm(h, enc.final_layer_norm, eps)
    return h


@pytest.mark.parametrize("pre_ln", [False, True])
def test_encoder_matches_numpy_reference(pre_ln):
    keras.utils.set_random_seed(2)
    spec = SPEC.model_copy(update={"pre_layer_norm": pre_ln, "hidden_act": "gelu"})
    enc = AlbertEncoder(spec)
    enc.build()
    # Non-trivial LayerNorm parameters so that their placement matters.
    rng = np.random.default_rng(0)
    for v in enc.weights:
        if "layer_norm" in v.path:
            v.assign(rng.normal(1.0 if v.path.endswith("gamma") else 0.0, 0.3, v.shape))
    x = batch(b=3, t=10)
    got = enc(x)["sequence_output"].numpy()
    np.testing.assert_allclose(got, numpy_encoder(enc, x), atol=2e-5)
    if pre_ln:
        assert any("final_layer_norm" in v.path for v in enc.weights)


# --------------------------------------------------------------------------- precision / XLA
@pytest.mark.parametrize(
    "policy,atol", [("float32", 0), ("mixed_float16", 0.03), ("mixed_bfloat16", 0.15)]
)
def test_precision_policies_run_finite_and_close(pretraining, policy, atol):
    model = AlbertForPretraining(SPEC, dtype=policy)
    model.build_for(seq_length=12, max_predictions=4)
    assert all(v.dtype == "float32" for v in model.trainable_weights)
    model.set_weights(pretraining.get_weights())
    x = batch(seed=7)
    out = model(x)
    ref = pretraining(x)
    for key, value in out.items():
        assert value.dtype == "float32"
        assert np.isfinite(value.numpy()).all()
        np.testing.assert_allclose(value, ref[key], atol=atol + 1e-6)
    # a training step under the policy also yields finite gradients
    with tf.GradientTape() as tape:
        out = model(x, training=True)
        loss = tf.reduce_mean(out["mlm_logits"] ** 2) + tf.reduce_mean(out["sop_logits"] ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)  # every variable takes part
    assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


def test_dropout_only_in_training_and_compiles_under_xla():
    keras.utils.set_random_seed(4)
    spec = SPEC.model_copy(update={"hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.2})
    model = AlbertForSequenceClassification(spec, num_labels=2)
    model.build_for(seq_length=12)
    x = batch()
    x.pop("masked_lm_positions")
    a, b = model(x)["logits"], model(x)["logits"]
    np.testing.assert_array_equal(a, b)

    @tf.function(jit_compile=True)
    def train_forward(inputs):
        return model(inputs, training=True)["logits"]

    t1, t2 = train_forward(x), train_forward(x)
    assert np.abs(t1 - a).max() > 1e-4 and np.abs(t1 - t2).max() > 1e-6  # RNG state advances


# --------------------------------------------------------------------------- naming
def test_variable_paths_are_deterministic_and_follow_the_naming_rules():
    def paths():
        m = AlbertForPretraining(SPEC.model_copy(update={"hidden_dropout_prob": 0.1}))
        m.build()
        return [v.path for v in m.variables]

    first, second = paths(), paths()
    assert first == second and len(set(first)) == len(first)
    model = AlbertForPretraining(SPEC)
    model.build()
    for v in model.trainable_variables:
        assert v.path.startswith("albert_for_pretraining/")
        if v.path.endswith(("gamma", "beta")):
            assert "layer_norm" in v.path
        if len(v.shape) == 1 and not v.path.endswith(("gamma", "beta")):
            assert v.path.endswith("bias"), v.path
    assert "albert_for_pretraining/albert/group_1/layer_1/attention/query/kernel" in first


@pytest.mark.parametrize("pre_ln", [False, True])
def test_hf_name_map_covers_every_trainable_weight_once(pre_ln):
    from albertkit.models.hf import hf_weight_map

    spec = SPEC.model_copy(update={"pre_layer_norm": pre_ln})
    for model in (
        AlbertForPretraining(spec),
        AlbertForQuestionAnswering(spec),
        AlbertForSequenceClassification(spec, num_labels=2),
        AlbertEncoder(spec),
    ):
        mapping = hf_weight_map(model)
        mapped = sorted(v.path for v, _ in mapping.values())
        assert mapped == sorted(v.path for v in model.trainable_variables)
        for name, (v, transpose) in mapping.items():
            assert transpose == v.path.endswith("kernel"), name


# --------------------------------------------------------------------------- fused attention core
def _np_attention(q, k, v, bias, d_out):
    """softmax(q k^T + bias) v and its gradients by the textbook softmax Jacobian
    (dS = P * (dP - sum(dP * P))), in float64 NumPy: an independent reference for
    attention_core's FlashAttention-style backward pass."""
    s = q @ np.swapaxes(k, -1, -2) + bias
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    out = p @ v
    d_p = d_out @ np.swapaxes(v, -1, -2)
    d_s = p * (d_p - (d_p * p).sum(-1, keepdims=True))
    return out, d_s @ k, np.swapaxes(d_s, -1, -2) @ q, np.swapaxes(p, -1, -2) @ d_out


def _core_inputs(dtype):
    rng = np.random.default_rng(3)
    q, k, v, d_out = (rng.normal(0, 1.0, (2, 3, 7, 8)) for _ in range(4))
    bias = np.zeros((2, 1, 1, 7))
    bias[1, ..., 4:] = -10000.0  # the second sequence pads its last 3 keys
    return [q, k, v, bias, d_out], [tf.constant(x, dtype) for x in (q, k, v, bias, d_out)]


@pytest.mark.parametrize("recompute", [False, True], ids=["kept", "recomputed"])
@pytest.mark.parametrize("jit", [False, True], ids=["graph", "xla"])
def test_attention_core_matches_numpy_gradients(recompute, jit):
    ref_in, (q, k, v, bias, d_out) = _core_inputs(tf.float64)

    @tf.function(jit_compile=jit)
    def run(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = attention_core(q, k, v, bias, recompute)
        return [out, *tape.gradient(out, [q, k, v], output_gradients=d_out)]

    for got, want in zip(run(q, k, v), _np_attention(*ref_in), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-10)


def test_attention_core_bfloat16_within_bfloat16_rounding():
    """In bfloat16 (softmax taken in bfloat16, its sum accumulated in float32) the output and
    gradients stay within a few bfloat16 roundings (2^-8 relative) of the float64 values."""
    ref_in, (q, k, v, bias, d_out) = _core_inputs(tf.bfloat16)
    ref_in = [tf.cast(tf.constant(x, tf.bfloat16), tf.float64).numpy() for x in ref_in]
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        out = attention_core(q, k, v, bias, True)
    got = [out, *tape.gradient(out, [q, k, v], output_gradients=d_out)]
    for g, want in zip(got, _np_attention(*ref_in), strict=True):
        g = tf.cast(g, tf.float64).numpy()
        rms = np.sqrt(np.mean((g - want) ** 2)) / np.sqrt(np.mean(want**2))
        assert rms < 4 * 2.0**-8, rms


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("remat", ["none", "selective", "full"])
def test_fused_attention_gives_autodiffs_gradients(monkeypatch, policy, remat):
    """The model without attention dropout runs the fused core; its loss and gradients
    equal those of the autodiff core (AlbertAttention._attend) in every remat mode."""
    calls = []
    fused = AlbertAttention._fused

    def counted(self, *args, **kwargs):
        calls.append(kwargs["recompute"])
        return fused(self, *args, **kwargs)

    def loss_and_grads():
        keras.utils.set_random_seed(5)
        model = AlbertForPretraining(SPEC, dtype=policy, remat=remat)
        model.build_for(seq_length=12, max_predictions=4)
        calls.clear()  # building ran the model in inference
        x = batch(seed=9)
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(out["mlm_logits"] ** 2) + tf.reduce_mean(out["sop_logits"])
        grads = tape.gradient(loss, model.trainable_variables)
        return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]

    monkeypatch.setattr(AlbertAttention, "_fused", counted)
    loss, grads = loss_and_grads()
    assert calls and all(c == (remat == "selective") for c in calls)
    monkeypatch.setattr(
        AlbertAttention, "_fused", lambda self, q, k, v, b, recompute: self._attend(q, k, v, b)
    )
    ref_loss, ref_grads = loss_and_grads()
    if policy == "float32":
        assert loss == pytest.approx(ref_loss, rel=1e-6)
        for a, b in zip(grads, ref_grads, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    else:
        # bfloat16 rounds differently on the two paths: compared as one vector (relative RMS),
        # since some gradients are rounding noise only (the key bias's is zero in exact math)
        assert loss == pytest.approx(ref_loss, rel=0.01)
        a, b = (np.concatenate([x.ravel() for x in g]) for g in (grads, ref_grads))
        assert np.sqrt(np.mean((a - b) ** 2)) < 0.02 * np.sqrt(np.mean(b**2))


def _casts_per_variable(graph: tf.Graph, dtype: tf.DType) -> dict[str, int]:
    """How many ``Cast`` ops of ``graph`` turn a read of each variable into ``dtype``."""
    counts: dict[str, int] = {}
    for op in graph.get_operations():
        if op.type != "Cast" or op.get_attr("DstT") != dtype:
            continue
        source = op.inputs[0].op
        while source.type in ("StopGradient", "Identity"):
            source = source.inputs[0].op
        if source.type == "ReadVariableOp":
            handle = source.inputs[0].name
            counts[handle] = counts.get(handle, 0) + 1
    return counts


def _mixed_gradient_step(remat: str, init_seed: int, batch_seed: int):
    """A mixed_bfloat16 pretraining model (seeded) and a graph-mode function returning the
    gradients of a loss on a fixed batch; the model is built, the function not yet traced."""
    keras.utils.set_random_seed(init_seed)
    model = AlbertForPretraining(SPEC, dtype="mixed_bfloat16", remat=remat)
    model.build_for(seq_length=12, max_predictions=4)
    x = batch(seed=batch_seed)

    @tf.function(jit_compile=False)
    def step():
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(out["mlm_logits"] ** 2) + tf.reduce_mean(out["sop_logits"])
        return tape.gradient(loss, model.trainable_variables)

    return model, step


@pytest.mark.parametrize("remat", ["none", "selective", "full"])
def test_shared_layer_weights_are_cast_once_per_forward_pass(monkeypatch, remat):
    """Under mixed precision without XLA the encoder casts each weight once per forward pass
    (not once per application of the shared layer), and the gradients are those of a cast
    per read: each read's gradient still reaches the float32 variable on its own."""
    from keras.src.backend import AutocastScope

    import albertkit.models.albert as albert

    def grads_and_casts():
        _, step = _mixed_gradient_step(remat, init_seed=5, batch_seed=9)
        grads = [tf.convert_to_tensor(g).numpy() for g in step()]
        forward = step.get_concrete_function().graph
        return grads, _casts_per_variable(forward, tf.bfloat16)

    shared, shared_casts = grads_and_casts()
    monkeypatch.setattr(albert, "SharedWeightCasts", lambda dtype, reads: AutocastScope(dtype))
    per_read, per_read_casts = grads_and_casts()
    # SPEC applies group 0 (two inner layers) twice: each of its weights was cast twice per
    # forward pass; now once (full remat casts again when it recomputes in the backward pass)
    assert max(per_read_casts.values()) > max(shared_casts.values())
    if remat != "full":
        assert set(shared_casts.values()) == {1}
    assert sum(shared_casts.values()) < sum(per_read_casts.values())
    for a, b in zip(shared, per_read, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_fanned_cast_sums_its_uses_gradients_in_float32():
    """A shared weight's low-precision uses (one per layer application) get the cast value,
    and the weight's gradient is the sum of the uses' gradients computed in float32 by one
    kernel: 1 + 11 x 2^-9 is exact in float32, while a bfloat16 sum (8-bit significand)
    rounds each 2^-9 away or the total to 1.0234375."""
    v = tf.Variable([1.5, -2.25, 3.0])
    scales = tf.constant([1.0] + [2.0**-9] * 11, tf.bfloat16)

    @tf.function(jit_compile=False)
    def step():
        with tf.GradientTape() as tape:
            uses = precision._fanned_cast(tf.convert_to_tensor(v), tf.bfloat16, 12)
            loss = tf.add_n([tf.reduce_sum(tf.cast(u * scales[i], tf.float32))
                             for i, u in enumerate(uses)])
        return uses, tape.gradient(loss, v)

    uses, grad = step()
    assert len(uses) == 12
    for u in uses:
        assert u.dtype == tf.bfloat16
        np.testing.assert_array_equal(u.numpy().astype(np.float32), [1.5, -2.25, 3.0])
    assert grad.dtype == tf.float32
    np.testing.assert_array_equal(grad.numpy(), np.full(3, 1 + 11 * 2.0**-9, np.float32))
    graph = step.get_concrete_function().graph
    kernels = _sum_kernels(graph)
    assert len(kernels) == 1 and len(kernels[0].inputs) == 12


def _sum_kernels(graph: tf.Graph) -> list[tf.Operation]:
    """The calls of the fan-out's float32 sum kernel (``precision._sum_wide``) in ``graph``."""
    return [op for op in graph.get_operations() if op.type == "PartitionedCall"
            and "_sum_wide" in op.get_attr("f").name]

@pytest.mark.parametrize("remat", ["none", "selective"])
def test_the_encoder_fans_out_each_shared_weights_cast(remat):
    """The encoder's training pass under mixed precision takes the fan-out path for every
    weight of a group applied more than once: one float32 sum kernel per such weight, with
    one input per application. The encoder finds those weights by the id of the variable
    Keras hands its autocast scope; if Keras changed what it hands over, the pass would fall
    back to one cast per read (still correct, more memory) and only this test would say so."""
    model, step = _mixed_gradient_step(remat, init_seed=3, batch_seed=2)
    graph = step.get_concrete_function().graph
    sums = _sum_kernels(graph)
    # SPEC: 3 layers over 2 groups, so group 0 (two inner layers) is applied twice, group 1 once
    # (LayerNorm reads its float32 gamma and beta uncast: it has no cast to fan out.)
    shared = model.albert.albert_layer_groups[0].weights
    cast = [w for w in shared if "layer_norm" not in w.path]
    assert (len(shared), len(cast)) == (32, 24)
    assert len(sums) == len(cast)
    assert {len(op.inputs) for op in sums} == {2}


_PEAK_SCRIPT = """
import sys
import tensorflow as tf
from albertkit.models.kernels import attention_core

recompute, jit = sys.argv[1] == "recomputed", sys.argv[2] == "xla"
layers, shape = 6, [1, 4, 512, 16]  # each layer's probabilities: 4 x 512 x 512 float32 = 4 MiB
x0 = tf.random.stateless_normal(shape, seed=[1, 2])
bias = tf.zeros([1, 1, 1, 512])
scales = [tf.Variable(1.0 + 0.1 * i) for i in range(layers)]

@tf.function(jit_compile=jit)
def step(x):
    with tf.GradientTape() as tape:
        h = x
        for s in scales:
            h = h + attention_core(h * s, h * 0.5, h * 1.5, bias, recompute)
        loss = tf.reduce_sum(h * h)
    return tape.gradient(loss, scales)

step(x0)
tf.config.experimental.reset_memory_stats("CPU:0")
[g.numpy() for g in step(x0)]
print(tf.config.experimental.get_memory_info("CPU:0")["peak"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("jit", [False, True], ids=["graph", "xla"])
def test_recomputed_attention_core_keeps_no_probabilities(jit):
    """Selective recomputation must lower the tensor peak by about one T x T tensor per layer
    on both compile paths: XLA drops control edges and schedules Q K^T as soon as its operands
    exist, so a recomputation tied to the incoming gradient by a control edge only was
    hoisted into the forward pass and kept as much as no recomputation. Measured on
    TensorFlow's BFC allocator (it counts tensor bytes), in a fresh process."""
    import os
    import subprocess
    import sys

    import albertkit

    src = os.path.dirname(os.path.dirname(albertkit.__file__))  # the albertkit under test
    path = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "TF_CPU_ALLOCATOR_USE_BFC": "true",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    mode = "xla" if jit else "graph"

    def peak(which):
        done = subprocess.run(
            [sys.executable, "-c", _PEAK_SCRIPT, which, mode],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout.split()[-1])

    kept, recomputed = peak("kept"), peak("recomputed")
    probs = 4 * 512 * 512 * 4  # one layer's float32 probabilities
    # Kept: all 6 layers' probabilities are live at the start of the backward pass;
    # recomputed: at most a couple at a time. Require at least 3 layers' worth saved.
    assert kept - recomputed >= 3 * probs, (kept / 2**20, recomputed / 2**20)
