"""LAMB / AdamW / schedule against an independent NumPy implementation of the formulas.

The NumPy reference below is written from the update rules of Google's ALBERT
``lamb_optimizer.py`` and BERT's ``AdamWeightDecayOptimizer`` (no bias correction, decay
added to the update before the trust ratio, ratio 1.0 when either norm is zero, LayerNorm
and bias excluded by name), and from ``create_optimizer`` in ALBERT's ``optimization.py``
for the schedule.
"""

from __future__ import annotations

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albertkit.config import AdamWConfig, LambConfig
from albertkit.optimizers.adamw import AdamW
from albertkit.optimizers.lamb import Lamb
from albertkit.optimizers.schedules import WarmupPolynomialDecay

EXCLUDE = ["layer_norm", "LayerNorm", "bias"]
STEPS = 5


# ----------------------------------------------------------------------------- reference
def np_schedule(step, peak, total, warmup, power=1.0, end=0.0):
    decayed = (peak - end) * (1.0 - min(step, total) / total) ** power + end
    if warmup and step < warmup:
        return peak * step / warmup
    return decayed


def np_run(
    kind,
    params,
    grads_per_step,
    lrs,
    wd=0.01,
    b1=0.9,
    b2=0.999,
    eps=1e-6,
    exclude_decay=EXCLUDE,
    exclude_adapt=None,
):
    """Apply the optimizer formulas step by step in float64 NumPy."""
    exclude_adapt = exclude_decay if exclude_adapt is None else exclude_adapt
    w = {k: np.array(v, np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v = {k: np.zeros_like(x) for k, x in w.items()}
    for grads, lr in zip(grads_per_step, lrs, strict=True):
        for name in w:
            g = np.asarray(grads[name], np.float64)
            m[name] = b1 * m[name] + (1 - b1) * g
            v[name] = b2 * v[name] + (1 - b2) * g * g
            u = m[name] / (np.sqrt(v[name]) + eps)
            if wd and not any(re.search(p, name) for p in exclude_decay):
                u = u + wd * w[name]
            ratio = 1.0
            if kind == "lamb" and not any(re.search(p, name) for p in exclude_adapt):
                wn, un = np.linalg.norm(w[name]), np.linalg.norm(u)
                ratio = wn / un if (wn > 0 and un > 0) else 1.0
            w[name] = w[name] - lr * ratio * u
    return w


# ----------------------------------------------------------------------------- fixtures
def make_params(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "encoder/dense/kernel": rng.normal(0, 0.5, (4, 3)).astype(np.float32),
        "encoder/dense/bias": rng.normal(0, 0.5, (3,)).astype(np.float32),
        "encoder/layer_norm/gamma": (1.0 + rng.normal(0, 0.1, (3,))).astype(np.float32),
        "encoder/zero_init/kernel": np.zeros((3, 2), np.float32),  # trust-ratio fallback
        "embeddings/word/embeddings": rng.normal(0, 0.5, (6, 3)).astype(np.float32),
    }


def make_grads(params, steps=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [
        {k: rng.normal(0, 1.0, v.shape).astype(np.float32) for k, v in params.items()}
        for _ in range(steps)
    ]


def keras_vars(params):
    out = {}
    for path, value in params.items():
        *scopes, leaf = path.split("/")
        ctx = [keras.name_scope(s) for s in scopes]
        for c in ctx:
            c.__enter__()
        out[path] = keras.Variable(value, name=leaf)
        for c in reversed(ctx):
            c.__exit__(None, None, None)
        assert out[path].path == path
    return out


def run_keras(optimizer, params, grads_per_step, jit=None):
    variables = keras_vars(params)
    names = list(params)
    var_list = [variables[n] for n in names]
    optimizer.build(var_list)

    def apply(*grads):
        optimizer.apply(list(grads), var_list)

    if jit is not None:
        apply = tf.function(apply, jit_compile=jit)
    for grads in grads_per_step:
        apply(*[tf.constant(grads[n]) for n in names])
    return {n: variables[n].numpy() for n in names}, optimizer


def assert_close(got, want, rtol=2e-5, atol=2e-6):
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("jit", [None, False, True], ids=["eager", "graph", "xla"])
@pytest.mark.parametrize("kind", ["lamb", "adamw"])
def test_matches_numpy_reference_constant_lr(kind, jit):
    params, lr = make_params(), 0.01
    grads = make_grads(params)
    cls = Lamb if kind == "lamb" else AdamW
    got, _ = run_keras(cls(learning_rate=lr), params, grads, jit=jit)
    want = np_run(kind, params, grads, [lr] * STEPS)
    assert_close(got, want)
    # the reference itself must move every variable (incl. the zero-initialised one)
    for name in params:
        assert not np.allclose(want[name], params[name]), name


@pytest.mark.parametrize("kind", ["lamb", "adamw"])
def test_matches_numpy_reference_with_schedule_under_xla(kind):
    params = make_params(seed=3)
    grads = make_grads(params, steps=6, seed=4)
    schedule = WarmupPolynomialDecay(
        0.02, total_steps=8, warmup_steps=3, power=2.0, end_learning_rate=0.001
    )
    cls = Lamb if kind == "lamb" else AdamW
    got, opt = run_keras(cls(learning_rate=schedule), params, grads, jit=True)
    lrs = [np_schedule(t, 0.02, 8, 3, 2.0, 0.001) for t in range(6)]
    assert lrs[0] == 0.0  # the first update runs at rate 0, as in the reference
    want = np_run(kind, params, grads, lrs)
    assert_close(got, want)
    assert int(opt.iterations.numpy()) == 6


def test_lamb_exclusion_flags_and_zero_variable_fallback():
    params = make_params()
    grads = make_grads(params, steps=1)
    got, opt = run_keras(Lamb(learning_rate=0.1), params, grads)
    variables = opt._trainable_variables
    by_path = {v.path: v for v in variables}
    assert not opt.uses_weight_decay(by_path["encoder/dense/bias"])
    assert not opt.uses_weight_decay(by_path["encoder/layer_norm/gamma"])
    assert opt.uses_weight_decay(by_path["encoder/dense/kernel"])
    assert not opt.uses_layer_adaptation(by_path["encoder/layer_norm/gamma"])
    assert opt.uses_layer_adaptation(by_path["encoder/zero_init/kernel"])
    # ||w|| = 0 -> ratio 1.0 (and decay of a zero weight is zero): w1 = -lr * m / (sqrt(v)+eps)
    g = grads[0]["encoder/zero_init/kernel"].astype(np.float64)
    m, v = 0.1 * g, 0.001 * g * g
    np.testing.assert_allclose(
        got["encoder/zero_init/kernel"], -0.1 * m / (np.sqrt(v) + 1e-6), rtol=1e-5
    )
    assert np.all(np.isfinite(got["encoder/zero_init/kernel"]))


def test_lamb_zero_gradient_and_zero_weight_stays_finite():
    params = {"a/kernel": np.zeros((2, 2), np.float32), "b/kernel": np.ones((2,), np.float32)}
    grads = [{"a/kernel": np.zeros((2, 2), np.float32), "b/kernel": np.zeros(2, np.float32)}]
    got, _ = run_keras(Lamb(learning_rate=0.1, weight_decay_rate=0.0), params, grads, jit=True)
    np.testing.assert_array_equal(got["a/kernel"], 0.0)
    np.testing.assert_array_equal(got["b/kernel"], 1.0)


def test_lamb_separate_layer_adaptation_list():
    params = make_params(seed=5)
    grads = make_grads(params, steps=3, seed=6)
    opt = Lamb(learning_rate=0.01, exclude_from_layer_adaptation=["zero_init"])
    got, _ = run_keras(opt, params, grads, jit=False)
    want = np_run("lamb", params, grads, [0.01] * 3, exclude_adapt=["zero_init"])
    assert_close(got, want)
    # and the list really matters: the default list gives a different result
    other = np_run("lamb", params, grads, [0.01] * 3)
    assert not np.allclose(other["encoder/layer_norm/gamma"], want["encoder/layer_norm/gamma"])


def test_sparse_embedding_gradient_is_densified():
    table = keras.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, name="word")
    kernel = keras.Variable(np.ones((3, 1), np.float32), name="kernel")
    opt = Lamb(learning_rate=0.01)
    ids = tf.constant([0, 2, 2])

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(keras.ops.matmul(keras.ops.take(table, ids, axis=0), kernel))
        g = tape.gradient(loss, [table.value, kernel.value])
        assert isinstance(g[0], tf.IndexedSlices)
        opt.apply(g, [table, kernel])
        return tf.convert_to_tensor(g[0]), g[1]

    before = {"word": table.numpy(), "kernel": kernel.numpy()}
    g_table, g_kernel = step()
    want = np_run("lamb", before, [{"word": g_table.numpy(), "kernel": g_kernel.numpy()}], [0.01])
    np.testing.assert_allclose(table.numpy(), want["word"], rtol=1e-5, atol=1e-7)
    # rows 1 and 3 got no gradient; their weight decay still applies (dense update)
    assert not np.allclose(table.numpy()[1], before["word"][1])


@pytest.mark.parametrize("context", ["cross_replica", "cross_replica_xla", "replica"])
def test_under_distribution_strategy(context):
    # The step reduces gradients itself (distributor.reduce_mean), then applies. Keras then
    # runs update_step on every mirrored component, where the variable is a plain
    # tf.Variable without `.path` (so the exclusion flags must come from build()). Inside
    # strategy.run, stock Keras would all-reduce the gradients a second time (and on Keras
    # 3.15 fails with "destinations can not be empty"); our optimizers do not.
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    params = make_params(seed=7)
    grads = make_grads(params, steps=3, seed=8)
    names = list(params)
    with strategy.scope():
        variables = keras_vars(params)
        opt = Lamb(learning_rate=0.01)
        var_list = [variables[n] for n in names]
        opt.build(var_list)

    @tf.function(jit_compile=context == "cross_replica_xla")
    def apply(gs):
        if context == "replica":
            strategy.run(lambda *g: opt.apply(list(g), var_list), args=tuple(gs))
        else:
            opt.apply(gs, var_list)

    for step in grads:
        apply([tf.constant(step[n]) for n in names])
    want = np_run("lamb", params, grads, [0.01] * 3)
    assert_close({n: variables[n].numpy() for n in names}, want)


def test_config_round_trip_and_config_sections():
    lamb = LambConfig.model_validate(
        {
            "kind": "lamb",
            "learning_rate": 1e-3,
            "schedule": {"warmup_fraction": 0.1, "power": 0.5, "end_learning_rate": 1e-5},
        }
    ).build(total_steps=200)
    assert isinstance(lamb, Lamb)
    schedule = lamb._learning_rate
    assert (schedule.warmup_steps, schedule.total_steps, schedule.power) == (20, 200, 0.5)
    clone = Lamb.from_config(lamb.get_config())
    assert clone.get_config() == lamb.get_config()
    assert clone.exclude_from_layer_adaptation_patterns == tuple(EXCLUDE)
    adamw = AdamWConfig(learning_rate=3e-5).build(total_steps=10)
    assert isinstance(adamw, AdamW)
    assert AdamW.from_config(adamw.get_config()).get_config() == adamw.get_config()
    serialized = keras.optimizers.serialize(lamb)
    assert isinstance(keras.optimizers.deserialize(serialized), Lamb)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"beta_1": 1.0}, "beta_1=1.0"),
        ({"epsilon": 0.0}, "epsilon=0.0"),
        ({"weight_decay_rate": -1.0}, "weight_decay_rate=-1.0"),
        ({"weight_decay": 0.1}, "weight_decay=0.1"),
        ({"global_clipnorm": 1.0}, "global_clipnorm=1.0"),
    ],
)
def test_rejects_bad_arguments(kwargs, fragment):
    for cls in (Lamb, AdamW):
        with pytest.raises(ValueError, match=re.escape(fragment)):
            cls(learning_rate=0.1, **kwargs)


# ----------------------------------------------------------------------------- schedule
def test_schedule_hand_computed_values():
    s = WarmupPolynomialDecay(1e-3, total_steps=100, warmup_steps=10, power=1.0)
    # warmup: peak * step / warmup
    assert float(s(0)) == 0.0
    assert float(s(1)) == pytest.approx(1e-4)
    assert float(s(9)) == pytest.approx(9e-4)
    # decay measured from step 0 (ALBERT): peak * (1 - step/total)
    assert float(s(10)) == pytest.approx(9e-4)
    assert float(s(55)) == pytest.approx(4.5e-4)
    assert float(s(100)) == pytest.approx(0.0, abs=1e-12)
    assert float(s(150)) == pytest.approx(0.0, abs=1e-12)

    q = WarmupPolynomialDecay(
        2e-3, total_steps=50, warmup_steps=0, power=2.0, end_learning_rate=1e-4
    )
    # (peak - end) * (1 - t/T)^2 + end
    assert float(q(0)) == pytest.approx(2e-3)
    assert float(q(25)) == pytest.approx(1.9e-3 * 0.25 + 1e-4)
    assert float(q(40)) == pytest.approx(1.9e-3 * 0.04 + 1e-4)
    assert float(q(50)) == pytest.approx(1e-4)
    assert float(q(1000)) == pytest.approx(1e-4)


def test_schedule_matches_reference_everywhere_and_compiles():
    s = WarmupPolynomialDecay(0.00176, total_steps=1000, warmup_steps=31, power=1.0)
    steps = tf.range(0, 1200, dtype=tf.int64)
    got = tf.function(lambda x: tf.map_fn(s, x, fn_output_signature=tf.float32), jit_compile=True)(
        steps
    ).numpy()
    want = [np_schedule(int(t), 0.00176, 1000, 31) for t in range(1200)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-10)


def test_schedule_serialises_and_validates():
    s = WarmupPolynomialDecay(
        1e-3, total_steps=100, warmup_steps=10, power=0.5, end_learning_rate=1e-5
    )
    clone = WarmupPolynomialDecay.from_config(s.get_config())
    assert clone.get_config() == s.get_config()
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(s))
    assert float(restored(42)) == pytest.approx(float(s(42)))
    with pytest.raises(ValueError, match="warmup_steps=200"):
        WarmupPolynomialDecay(1e-3, total_steps=100, warmup_steps=200)
    with pytest.raises(ValueError, match="total_steps=0"):
        WarmupPolynomialDecay(1e-3, total_steps=0)
