"""The shared training step: accumulation, XLA, precisions, loss scaling, learning."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albertkit.config import TrainerConfig
from albertkit.distributed.single import SingleProcess
from albertkit.tasks import build_task
from albertkit.training.builders import resolve_spec
from albertkit.training.step import TrainStep
from conftest import make_tiny_config

SEQ, PREDS, VOCAB = 16, 4, 97


def config(**runtime) -> TrainerConfig:
    """The tiny model on SEQ-token examples, one micro-batch of 8 per step; ``runtime``
    entries override (test_xla_plan builds its steps from this too)."""
    return make_tiny_config(
        model={"vocab_size": VOCAB, "classifier_dropout_prob": 0.0},
        data={"seq_length": SEQ, "max_predictions_per_seq": PREDS},
        runtime={"micro_batch_size": 8, "max_steps": 100, **runtime},
    )


def fixed_batch(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Pretraining examples with padding and one weight per prediction slot."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(SEQ // 2, SEQ + 1, size=n)
    ids = rng.integers(5, VOCAB, size=(n, SEQ)).astype(np.int32)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
    ids *= mask
    seg = ((np.arange(SEQ)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int32)
    pos = np.stack([rng.choice(np.arange(1, lengths[i]), PREDS, replace=False)
                    for i in range(n)]).astype(np.int32)
    return {
        "input_ids": ids, "input_mask": mask, "segment_ids": seg,
        "masked_lm_positions": pos,
        "masked_lm_ids": np.take_along_axis(ids, pos, 1).astype(np.int32),
        "masked_lm_weights": np.ones((n, PREDS), np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=n).astype(np.int32),
    }


def build(cfg: TrainerConfig, accum: int = 1):
    import keras

    keras.utils.set_random_seed(0)
    task = build_task(cfg, resolve_spec(cfg))
    model = task.build_model()
    opt = cfg.optimizer.build(cfg.runtime.max_steps)
    return task, model, TrainStep(task, model, opt, SingleProcess(), cfg.runtime, accum,
                                  cfg.optimizer.clip_norm)


def stack(batch: dict[str, np.ndarray], accum: int) -> dict[str, tf.Tensor]:
    return {k: tf.constant(v.reshape((accum, -1) + v.shape[1:])) for k, v in batch.items()}


@pytest.mark.parametrize("xla", [False, True])
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_accumulation_equals_one_big_batch(xla):
    """k micro-batches of m give the same gradient as one batch of k*m."""
    cfg = config(xla=xla)
    batch = fixed_batch(8)
    _, _, step = build(cfg, accum=1)
    g1, s1 = step._compute(stack(batch, 1), tf.constant(1.0))
    _, _, step4 = build(cfg, accum=4)
    g4, s4 = step4._compute(stack(batch, 4), tf.constant(1.0))
    for a, b in zip(g1, g4, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    for k in s1:
        np.testing.assert_allclose(float(s1[k]), float(s4[k]), rtol=1e-5)


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_xla_on_and_off_agree():
    batch = stack(fixed_batch(8), 2)
    results = []
    for xla in (False, True):
        cfg = config(xla=xla, micro_batch_size=4)
        _, model, step = build(cfg, accum=2)
        out = step(batch)
        results.append((float(out["mlm_loss_sum"]), [v.numpy() for v in model.trainable_variables]))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-4)
    for a, b in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_the_step_is_traced_without_autograph(autograph_conversions):
    """Training (accumulation's while_loop included), evaluation and prediction trace
    albertkit's code as written: AutoGraph converts none of it (albertkit.training.step's
    docstring says why). A function traced with AutoGraph on is seen by the probe."""
    _, _, step = build(config(micro_batch_size=4, precision="mixed_float16"), accum=2)
    batch = stack(fixed_batch(8), 2)
    assert step(batch)["finite"] == 1.0
    one = {k: v[0] for k, v in batch.items()}
    assert float(step.evaluate_batch(one)["mlm_loss_sum"]) > 0
    assert step.predict(one)
    assert [name for name in autograph_conversions if name.startswith("albertkit.")] == []
    assert int(tf.function(lambda x: x + 1)(tf.constant(1))) == 2  # AutoGraph on: converted
    assert [name for name in autograph_conversions if name.startswith(__name__)]


@pytest.mark.parametrize("precision", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_precisions_train(precision):
    cfg = config(precision=precision, xla=True)
    task, model, step = build(cfg)
    batch = stack(fixed_batch(8), 1)
    before = [v.numpy().copy() for v in model.trainable_variables]
    out = step(batch)
    assert out["finite"] == 1.0
    assert np.isfinite(float(out["mlm_loss_sum"]))
    assert all(v.dtype == "float32" for v in model.trainable_variables)  # master weights
    changed = [not np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables,
                                                                 strict=True)]
    assert sum(changed) > len(changed) // 2
    expected_scale = 2.0**15 if precision == "mixed_float16" else 1.0
    assert float(step.loss_scale.numpy()) == expected_scale


def test_float16_overflow_is_skipped_and_scale_halves():
    cfg = config(precision="mixed_float16", initial_loss_scale=2.0**100)
    _, model, step = build(cfg)
    before = [v.numpy().copy() for v in model.trainable_variables]
    out = step(stack(fixed_batch(8), 1))
    assert out["finite"] == 0.0
    assert int(step.skipped_steps.numpy()) == 1
    assert float(step.loss_scale.numpy()) == 2.0**99
    for b, v in zip(before, model.trainable_variables, strict=True):
        np.testing.assert_array_equal(b, v.numpy())


def test_tiny_model_halves_its_loss():
    cfg = config(xla=True)
    task, model, step = build(cfg)
    batch = stack(fixed_batch(8), 1)
    first = None
    for _ in range(60):
        out = step(batch)
        loss = task.metrics({k: float(v) for k, v in out.items()})["loss"]
        first = first if first is not None else loss
    assert loss < first / 2, (first, loss)


def test_remat_config_gives_the_same_gradients():
    batch = stack(fixed_batch(8), 1)
    grads = []
    for remat in (False, True):
        _, _, step = build(config(remat=remat))
        g, _ = step._compute(batch, tf.constant(1.0))
        grads.append([x.numpy() for x in g])
    for a, b in zip(*grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
