"""AlbertTrainer end to end on synthetic data: outputs, resume equivalence, checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from albertkit.config import TrainerConfig
from albertkit.training.checkpoint import CheckpointManager
from albertkit.training.trainer import AlbertTrainer
from conftest import make_tiny_config


def config(run_dir, **runtime) -> TrainerConfig:
    return make_tiny_config(
        run_dir,
        model={"hidden_dropout_prob": 0.1},
        data={"num_examples": 64, "eval_examples": 16},
        optimizer={"kind": "lamb", "learning_rate": 1e-3, "schedule": {"warmup_steps": 2}},
        runtime={"eval_every_steps": 4, "eval_steps": 2, **runtime},
        checkpoint={"every_steps": 3, "keep_last": 2},
        logging={"log_every_steps": 2},
    )


def final_weights(run_dir):
    ckpt = CheckpointManager(run_dir / "checkpoints").latest()
    return ckpt, load_file(str(ckpt.path / "model.safetensors"))


def test_fit_writes_everything(tmp_path):
    run = tmp_path / "run"
    trainer = AlbertTrainer(config(run, malloc_arenas=2)).fit()
    s = json.loads((run / "summary.json").read_text())
    assert s["status"] == "completed" and s["step"] == 8
    assert s["accumulation_steps"] == 2 and s["global_batch_size"] == 8
    assert {"mlm_accuracy", "sop_accuracy", "mlm_baseline_accuracy"} <= set(s["eval"])
    assert trainer.summary == s
    assert TrainerConfig.from_yaml(run / "config.yaml") == trainer.config
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [2, 4, 6, 8]
    assert any(r["kind"] == "eval" for r in records)
    assert list((run / "tensorboard" / "train").glob("events.out.tfevents.*"))
    ckpts = CheckpointManager(run / "checkpoints").list()
    assert ckpts[-1].name == "ckpt-00000008"
    assert not list((run / "checkpoints").glob(".tmp-*"))


def test_resume_equals_uninterrupted(tmp_path):
    """2N steps straight == N steps, stop, resume N steps (weights, optimizer, RNG, data)."""
    straight, resumed = tmp_path / "a", tmp_path / "b"
    AlbertTrainer(config(straight)).fit()
    first = AlbertTrainer(config(resumed)).fit(until_step=5)
    assert first.summary["status"] == "interrupted" and first.summary["step"] == 5
    second = AlbertTrainer(config(resumed)).fit()
    assert second.summary["resumed_from_step"] == 5 and second.summary["step"] == 8
    _, wa = final_weights(straight)
    _, wb = final_weights(resumed)
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)


def test_corrupt_latest_checkpoint_falls_back(tmp_path, caplog):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit(until_step=6)
    mgr = CheckpointManager(run / "checkpoints")
    newest = mgr.list()[-1]
    data = (newest / "model.safetensors").read_bytes()
    (newest / "model.safetensors").write_bytes(data[: len(data) // 2])
    with caplog.at_level("WARNING", logger="albertkit"):
        ckpt = mgr.latest()
    assert ckpt is not None and ckpt.path != newest
    assert "model.safetensors" in caplog.text and newest.name in caplog.text
    trainer = AlbertTrainer(config(run)).fit()
    assert trainer.summary["resumed_from_step"] == ckpt.step


def test_checkpoint_from_other_model_size_is_refused(tmp_path):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit(until_step=3)
    bigger = config(run).model_dump()
    bigger["model"]["hidden_size"] = 64
    with pytest.raises(Exception, match="different model"):
        AlbertTrainer(TrainerConfig.model_validate(bigger)).fit()


def test_evaluate_on_demand(tmp_path):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit()
    metrics = AlbertTrainer(config(run)).evaluate()
    assert 0.0 <= metrics["mlm_accuracy"] <= 1.0


def test_resume_with_a_different_data_stream_is_refused(tmp_path):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit(until_step=3)
    with pytest.raises(Exception, match=r"cannot resume exactly.*micro_batch_size"):
        AlbertTrainer(config(run, micro_batch_size=2)).fit()
    with pytest.raises(Exception, match=r"cannot resume exactly.*seed"):
        AlbertTrainer(config(run, seed=7)).fit()


def test_each_rank_gets_its_own_dropout_stream():
    from albertkit.tasks import build_task
    from albertkit.training.builders import resolve_spec
    from albertkit.training.trainer import _decorrelate_dropout

    cfg = config("unused")
    model = build_task(cfg, resolve_spec(cfg)).build_model()
    states = [v for v in model.variables if v.path.endswith("seed_generator_state")]
    assert states  # hidden_dropout_prob=0.1 in this config
    before = [v.numpy().copy() for v in states]
    _decorrelate_dropout(model, rank=2)
    for b, v in zip(before, states, strict=True):
        assert v.numpy()[0] == b[0] + 2 * 1_000_003 and v.numpy()[1] == b[1]


def test_rerunning_a_completed_run_keeps_its_summary(tmp_path):
    run = tmp_path / "run"
    first = AlbertTrainer(config(run, eval_every_steps=0)).fit().summary
    again = AlbertTrainer(config(run, eval_every_steps=0)).fit().summary
    assert again == first and again["sequences_per_second"] > 0
    assert json.loads((run / "summary.json").read_text()) == first


def test_malloc_arena_cap_is_applied_on_linux():
    import platform

    from albertkit.training.native import limit_malloc_arenas

    assert limit_malloc_arenas(2) is (platform.system() == "Linux")
