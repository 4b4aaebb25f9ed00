"""Two-phase pretraining (docs/howto/two-phase.md): phase 2 names phase 1's run in
``model.load_from`` and trains at a longer sequence length.

Phase 2 starts from exactly phase 1's final weights, with a fresh optimizer (iterations and
slots at 0) and its own warmup; a phase-2 config whose architecture differs from phase 1's,
or whose sequence length is beyond phase 1's position embeddings, is refused in one line.
"""

from __future__ import annotations

import numpy as np
import pytest

from albertkit.config import ConfigError, TrainerConfig
from albertkit.training.export import load_run_model
from albertkit.training.trainer import AlbertTrainer
from conftest import TINY_MODEL, tiny_raw_config

PHASE1_STEPS = 4
PHASE2_STEPS = 6
PHASE2_PEAK = 4e-3
PHASE2_WARMUP = 3


def phase1_raw(run_dir, **runtime) -> dict:
    # max_position_embeddings=64 already covers phase 2's length
    return tiny_raw_config(
        run_dir,
        data={"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5,
              "num_examples": 64, "eval_examples": 0},
        optimizer={"kind": "lamb", "learning_rate": 1e-2,
                   "schedule": {"warmup_steps": 2}},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": PHASE1_STEPS,
                 "eval_every_steps": 0, **runtime},
    )


def phase2_raw(run_dir, phase1, seq=64, **model) -> dict:
    # the recommended phase-2 shape: no architecture, only the run it continues
    raw = tiny_raw_config(
        run_dir,
        data={"kind": "synthetic", "seq_length": seq, "max_predictions_per_seq": 10,
              "num_examples": 64, "eval_examples": 0},
        optimizer={"kind": "lamb", "learning_rate": PHASE2_PEAK,
                   "schedule": {"warmup_steps": PHASE2_WARMUP}},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": PHASE2_STEPS,
                 "eval_every_steps": 0},
    )
    raw["model"] = {"size": "tiny", "load_from": str(phase1), **model}
    return raw


@pytest.fixture(scope="module")
def phase1(tmp_path_factory):
    run = tmp_path_factory.mktemp("two_phase") / "phase1"
    trainer = AlbertTrainer(TrainerConfig.model_validate(phase1_raw(run))).fit()
    assert trainer.summary["step"] == PHASE1_STEPS
    return run


def weights(model) -> dict[str, np.ndarray]:
    # every variable but the dropout layers' random-number state, which belongs to the run
    # (phase 2 draws its own dropout masks from its own runtime.seed)
    found = {v.path: v.numpy() for v in model.variables if "seed_generator" not in v.path}
    assert len(found) >= len(model.trainable_variables) > 0
    return found


def assert_same_weights(ours: dict, theirs: dict) -> None:
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)


def test_phase2_starts_from_phase1_final_weights_with_a_fresh_optimizer(phase1, tmp_path):
    _, final = load_run_model(phase1)  # the checkpoint of phase 1's last step
    phase1_weights = weights(final)
    trainer = AlbertTrainer(TrainerConfig.model_validate(phase2_raw(tmp_path / "p2", phase1)))
    run = trainer._build(for_training=True)  # phase 2 just before its first step
    try:
        assert run.spec == final.spec
        assert_same_weights(weights(run.model), phase1_weights)
        # the optimizer is phase 2's own: no iterations, every slot still zero
        opt = run.optimizer
        assert int(opt.iterations.numpy()) == 0
        slots = [v for v in opt.variables if v is not opt.iterations
                 and "learning_rate" not in v.path]
        assert slots and all(not np.any(v.numpy()) for v in slots)
        # ... and its schedule is phase 2's: warmup from 0 over its own warmup_steps, decay
        # to its own max_steps (not phase 1's step count or peak)
        lr = opt._learning_rate
        assert float(lr(0)) == 0.0
        assert float(lr(1)) == pytest.approx(PHASE2_PEAK / PHASE2_WARMUP)
        assert lr.total_steps == PHASE2_STEPS and lr.warmup_steps == PHASE2_WARMUP
    finally:
        run.logger.close()
        trainer._lock.release()


@pytest.mark.slow  # about 20 s on two loaded cores
def test_phase2_first_step_runs_at_rate_zero_on_phase1_weights(phase1, tmp_path):
    # Through the public path: phase 2's first update runs at its own warmup's rate 0, so
    # the checkpoint after it holds phase 1's final weights bit for bit. A schedule carried
    # over from phase 1 (step 4 of its decay) would have moved them.
    _, final = load_run_model(phase1)
    p2 = tmp_path / "p2"
    AlbertTrainer(TrainerConfig.model_validate(phase2_raw(p2, phase1))).fit(until_step=1)
    _, after_one = load_run_model(p2, checkpoint=1)
    assert after_one.spec.max_position_embeddings == 64
    assert_same_weights(weights(after_one), weights(final))
    # the run goes on to its own max_steps at seq 64 and then has moved away from phase 1
    done = AlbertTrainer(TrainerConfig.model_validate(phase2_raw(p2, phase1))).fit()
    assert done.summary["step"] == PHASE2_STEPS
    _, last = load_run_model(p2)
    moved = weights(last)
    assert any(not np.array_equal(moved[k], v) for k, v in weights(final).items())


def test_phase2_with_another_architecture_is_refused_naming_the_fields(phase1, tmp_path):
    raw = phase2_raw(tmp_path / "p2", phase1, hidden_size=64, num_attention_heads=4,
                     max_position_embeddings=64)  # the last one agrees: not named
    with pytest.raises(ConfigError) as e:
        AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("model.hidden_size=64, model.num_attention_heads=4 disagree with "
                          f"model.load_from={phase1} (hidden_size=32, num_attention_heads=2)")
    assert "max_position_embeddings" not in msg
    assert not (tmp_path / "p2" / "checkpoints").exists()


def test_phase2_beyond_phase1_position_embeddings_is_refused(phase1, tmp_path):
    # tiny's preset covers 512, so the config alone passes; phase 1's model covers 64
    raw = phase2_raw(tmp_path / "p2", phase1, seq=128)
    with pytest.raises(ConfigError) as e:
        AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"data.seq_length=128 exceeds max_position_embeddings=64 of "
                          f"model.load_from={phase1}")
    assert not (tmp_path / "p2" / "checkpoints").exists()


def test_phase2_from_an_unfinished_phase1_says_which_step_it_takes(tmp_path, caplog):
    p1 = tmp_path / "phase1"
    AlbertTrainer(TrainerConfig.model_validate(phase1_raw(p1))).fit(until_step=2)
    trainer = AlbertTrainer(TrainerConfig.model_validate(phase2_raw(tmp_path / "p2", p1)))
    with caplog.at_level("WARNING", logger="albertkit"):
        trainer.fit(until_step=1)
    assert f"model.load_from={p1}: its newest checkpoint is step 2 of runtime.max_steps=" \
           f"{PHASE1_STEPS}" in caplog.text


def test_tiny_model_fixture_is_what_phase1_uses():
    # the refusal test names the fixture's widths: keep them in step
    assert (TINY_MODEL["hidden_size"], TINY_MODEL["num_attention_heads"],
            TINY_MODEL["max_position_embeddings"]) == (32, 2, 64)
