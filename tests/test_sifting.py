"""Smart sifting (``runtime.sifting``): the kept set, the sifted gradient, counters, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from albertkit.config import SiftingConfig, TrainerConfig
from albertkit.models.footprint import training_flops
from albertkit.training.checkpoint import CheckpointManager
from albertkit.training.step import kept_indices
from albertkit.training.trainer import AlbertTrainer
from conftest import make_tiny_config
from test_step import PREDS, SEQ, VOCAB, build, fixed_batch, stack

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
              "classifier_dropout_prob": 0.0}


def reference_kept(losses: np.ndarray, keep: int) -> np.ndarray:
    """The criterion in NumPy: the ``keep`` highest losses (earlier position first on a tie),
    returned in position order."""
    order = np.argsort(-losses, kind="stable")
    return np.sort(order[:keep])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("keep", [1, 3, 8, 13, 16])
def test_kept_set_equals_numpy_reference(seed, keep):
    rng = np.random.default_rng(seed)
    losses = rng.gamma(2.0, 1.5, size=16).astype(np.float32)
    if seed % 2:  # ties (near-duplicate examples have equal losses)
        losses[::3] = losses[1]
    got = kept_indices(tf.constant(losses), keep).numpy()
    np.testing.assert_array_equal(got, reference_kept(losses, keep))


@pytest.mark.parametrize(("beta", "micro", "accum", "shape"), [
    (0.5, 8, 1, (1, 4)), (0.5, 8, 4, (2, 8)), (0.3, 8, 4, (3, 8)), (0.0, 8, 3, (3, 8)),
    (0.9, 4, 1, (1, 1)), (0.25, 6, 5, (4, 6)), (0.6, 32, 3, (2, 20)),
])
def test_kept_per_step(beta, micro, accum, shape):
    m, b = SiftingConfig(beta=beta).kept_per_step(micro, accum)
    assert (m, b) == shape
    n = micro * accum
    assert n - int(beta * n) <= m * b <= n and b <= micro and m <= accum


def config(sifting=None, accum=1, micro=4, xla=False, precision="float32") -> TrainerConfig:
    runtime = {"micro_batch_size": micro, "global_batch_size": micro * accum, "max_steps": 50,
               "xla": xla, "precision": precision}
    if sifting is not None:
        runtime["sifting"] = sifting
    return make_tiny_config(model={"vocab_size": VOCAB, **NO_DROPOUT},
                            data={"seq_length": SEQ, "max_predictions_per_seq": PREDS},
                            runtime=runtime)


@pytest.mark.parametrize(("accum", "xla"), [(1, False), (2, False), (2, True)])
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_beta_zero_equals_the_plain_step(accum, xla):
    """Keeping everything trains exactly like no sifting (only the scoring pass is extra)."""
    batches = [stack(fixed_batch(4 * accum, seed=s), accum) for s in range(3)]
    weights = []
    for sifting in (None, {"beta": 0.0, "warmup_steps": 0}):
        cfg = config(sifting, accum=accum, xla=xla)
        _, model, step = build(cfg, accum)
        for b in batches:
            out = step(b)
        weights.append([w.numpy() for w in model.trainable_variables])
        if sifting:
            assert float(out["sift_kept"]) == float(out["sift_seen"]) == 4 * accum
    for a, b in zip(*weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("accum", "micro", "beta", "xla"), [
    (1, 8, 0.5, False), (4, 4, 0.5, False), (4, 4, 0.3, True), (3, 4, 0.6, False),
])
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_sifted_gradients_equal_the_plain_step_on_the_kept_examples(accum, micro, beta, xla):
    batch = fixed_batch(micro * accum, seed=7)
    sift_cfg = config({"beta": beta, "warmup_steps": 0}, accum=accum, micro=micro, xla=xla)
    task, model, sifted = build(sift_cfg, accum)
    m, b = sift_cfg.runtime.sifting.kept_per_step(micro, accum)
    # the losses the criterion sees, then the NumPy criterion
    losses = task.example_losses(model, {k: tf.constant(v) for k, v in batch.items()}).numpy()
    keep = reference_kept(losses, m * b)
    assert len(keep) == m * b < micro * accum
    kept_batch = {k: v[keep] for k, v in batch.items()}

    grads, stats = sifted._compute(stack(batch, accum), tf.constant(1.0))
    assert float(stats["sift_kept"]) == m * b and float(stats["examples"]) == m * b

    plain_cfg = config(None, accum=m, micro=b, xla=xla)
    _, plain_model, plain = build(plain_cfg, m)
    plain_model.set_weights(model.get_weights())
    want, want_stats = plain._compute(stack(kept_batch, m), tf.constant(1.0))
    for g, w in zip(grads, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-6)
    for k, v in want_stats.items():
        assert float(stats[k]) == pytest.approx(float(v), rel=1e-5)


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_sifting_runs_and_keeps_half(precision):
    """Under mixed precision (float16: with loss scaling) the sifted step runs, is finite and
    trains on half of the examples."""
    cfg = config({"beta": 0.5, "warmup_steps": 0}, accum=2, precision=precision)
    _, _, step = build(cfg, 2)
    out = step(stack(fixed_batch(8, seed=1), 2))
    assert float(out["finite"]) == 1.0
    assert (float(out["sift_seen"]), float(out["sift_kept"])) == (8.0, 4.0)


def test_warmup_trains_on_everything_then_sifts():
    cfg = config({"beta": 0.5, "warmup_steps": 2}, accum=2)
    _, _, step = build(cfg, 2)
    kept = [float(step(stack(fixed_batch(8, seed=s), 2))["sift_kept"]) for s in range(4)]
    assert kept == [8.0, 8.0, 4.0, 4.0]


def trainer_config(run_dir, sifting, max_steps=8) -> TrainerConfig:
    return make_tiny_config(
        run_dir,
        model=NO_DROPOUT,
        data={"num_examples": 64, "eval_examples": 16},
        optimizer={"kind": "lamb", "learning_rate": 1e-3, "schedule": {"warmup_steps": 2}},
        runtime={"max_steps": max_steps, "eval_every_steps": 4, "eval_steps": 2,
                 "sifting": sifting},
        checkpoint={"every_steps": 3, "keep_last": 2},
        logging={"log_every_steps": 2},
    )


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_counters_add_up_in_logs_and_summary(tmp_path):
    run = tmp_path / "run"
    cfg = trainer_config(run, {"beta": 0.5, "warmup_steps": 3})
    summary = AlbertTrainer(cfg).fit().summary
    s = summary["sifting"]
    # 8 steps of 8 examples; the first 3 train on all, the other 5 on 4 of 8 (scored: 5 x 8)
    assert s["sift_examples_seen"] == 64 and s["sift_examples_kept"] == 3 * 8 + 5 * 4
    assert s["sift_examples_dropped"] == s["sift_examples_seen"] - s["sift_examples_kept"] == 20
    assert s["sift_examples_scored"] == 40
    forward = training_flops(cfg.model.spec, 32, 5).forward
    assert s["sift_flops_saved"] == pytest.approx(forward * (3 * 20 - 40))
    assert s["sift_flops_saved_share"] == pytest.approx((3 * 20 - 40) / (3 * 64))
    train = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    # steps 1-2 keep everything, 3-4 = one of each, 5-8 half
    assert [r["sift_kept_share"] for r in train] == [1.0, 0.75, 0.5, 0.5]
    assert train[-1]["sift_examples_dropped"] == 20


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_resume_with_sifting_equals_uninterrupted(tmp_path):
    straight, resumed = tmp_path / "a", tmp_path / "b"
    sifting = {"beta": 0.5, "warmup_steps": 2}
    a = AlbertTrainer(trainer_config(straight, sifting)).fit().summary
    first = AlbertTrainer(trainer_config(resumed, sifting)).fit(until_step=5)
    assert first.summary["status"] == "interrupted"
    saved = CheckpointManager(resumed / "checkpoints").latest()
    assert saved.state["sifting"] == {"seen": 40, "kept": 2 * 8 + 3 * 4, "scored": 24}
    b = AlbertTrainer(trainer_config(resumed, sifting)).fit().summary
    assert b["resumed_from_step"] == 5
    assert b["sifting"] == a["sifting"]
    wa = CheckpointManager(straight / "checkpoints").latest()
    wb = CheckpointManager(resumed / "checkpoints").latest()
    from safetensors.numpy import load_file

    ma, mb = (load_file(str(c.path / "model.safetensors")) for c in (wa, wb))
    for k in ma:
        np.testing.assert_array_equal(ma[k], mb[k], err_msg=k)


def test_config_override_turns_sifting_on_and_bad_beta_names_the_field():
    from albertkit.config import ConfigError
    from conftest import tiny_raw_config

    cfg = TrainerConfig.from_dict(tiny_raw_config(None), ["runtime.sifting.beta=0.7"])
    assert cfg.runtime.sifting == SiftingConfig(beta=0.7, warmup_steps=100)
    assert TrainerConfig.from_dict(tiny_raw_config(None)).runtime.sifting is None
    with pytest.raises(ConfigError, match=r"runtime\.sifting\.beta"):
        TrainerConfig.from_dict(tiny_raw_config(None), ["runtime.sifting.beta=1.0"])


def test_benchmark_times_the_sifted_step():
    """``albertkit benchmark --sifting-beta``: the worker's step sifts every step, the table
    says so, and a comparison with Hugging Face (which has no sifted step) is refused."""
    from albertkit.perf import BenchmarkSettings, format_table, measure
    from albertkit.perf.workers import trainer_config

    settings = BenchmarkSettings(size="tiny", model={"vocab_size": 300}, seq_length=32,
                                 micro_batch=4, accumulation=2, steps=2, warmup=1, rounds=1,
                                 xla=False, pipeline=False, sifting_beta=0.5)
    assert trainer_config(settings).runtime.sifting == SiftingConfig(beta=0.5, warmup_steps=0)
    result = measure(settings, progress=False)
    assert len(result.results["albertkit"].step_times_s) == 2
    assert "sifting beta 0.5" in format_table(result)
    with pytest.raises(ValueError, match="sifting-beta"):
        BenchmarkSettings(size="tiny", sifting_beta=0.5, compare=["hf-pytorch"])
