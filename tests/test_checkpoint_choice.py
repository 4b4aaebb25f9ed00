"""``evaluate``/``export`` of the best, the newest or one step's checkpoint of a run."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import load_file

from albertkit.cli import main
from albertkit.errors import CheckpointError
from albertkit.tasks.pretraining import PretrainingTask
from albertkit.training.checkpoint import CheckpointManager, _keys, parse_checkpoint_choice
from albertkit.training.export import export_run, load_run_model
from albertkit.training.trainer import AlbertTrainer
from conftest import make_tiny_config


def config(run_dir, keep_best=True):
    return make_tiny_config(
        run_dir,
        data={"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5,
              "num_examples": 64, "eval_examples": 16},
        optimizer={"kind": "lamb", "learning_rate": 1e-2},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 8,
                 "eval_every_steps": 4, "eval_steps": 2},
        checkpoint={"every_steps": 3, "keep_last": 2, "keep_best": keep_best},
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run whose best eval (loss, lower is better) is at step 4 and not at the end (8):
    checkpoints 4 (best, kept past keep_last), 6 and 8 remain."""
    run_dir = tmp_path_factory.mktemp("choice") / "run"
    losses = iter([0.5, 2.0])  # step 4, then the final evaluation at step 8
    real = PretrainingTask.evaluate

    def scripted(self, *args, **kwargs):
        return {**real(self, *args, **kwargs), "loss": next(losses)}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PretrainingTask, "evaluate", scripted)
        AlbertTrainer(config(run_dir)).fit()
    return run_dir


def saved_model(run_dir, step):
    return load_file(str(run_dir / "checkpoints" / f"ckpt-{step:08d}" / "model.safetensors"))


def same_weights(model, arrays) -> bool:
    return all(np.array_equal(var.numpy(), arrays[key])
               for key, var in zip(_keys(model.variables), model.variables, strict=True))


def test_the_run_keeps_best_and_newest_apart(run):
    mgr = CheckpointManager(run / "checkpoints")
    assert [p.name for p in mgr.list()] == ["ckpt-00000004", "ckpt-00000006", "ckpt-00000008"]
    assert mgr.latest().state["best"]["step"] == 4
    assert mgr.select("best").step == 4 and mgr.select("newest").step == 8
    assert mgr.select(6).step == 6 and mgr.select("6").step == 6


def test_load_and_export_pick_the_checkpoint_asked_for(run, tmp_path):
    best, newest = saved_model(run, 4), saved_model(run, 8)
    assert any(not np.array_equal(best[k], newest[k]) for k in best)
    _, model = load_run_model(run, checkpoint="best")
    assert same_weights(model, best) and not same_weights(model, newest)
    _, model = load_run_model(run)  # the default stays the newest
    assert same_weights(model, newest)
    _, model = load_run_model(run, checkpoint=6)
    assert same_weights(model, saved_model(run, 6))

    out = export_run(run, tmp_path / "ak-best", format="albertkit", checkpoint="best")
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["ckpt-00000004"]
    assert (out / "checkpoints" / "ckpt-00000004" / "model.safetensors").read_bytes() == (
        run / "checkpoints" / "ckpt-00000004" / "model.safetensors").read_bytes()

    # the Hugging Face export through the command line: best and newest differ, best
    # equals an export of step 4
    for name, choice in (("best", "best"), ("newest", None), ("four", "4")):
        argv = ["export", "--format", "hf", str(run), str(tmp_path / name)]
        assert main(argv + (["--checkpoint", choice] if choice else [])) == 0
    hf = {n: load_file(str(tmp_path / n / "model.safetensors")) for n in ("best", "newest", "four")}
    assert hf["best"].keys() == hf["newest"].keys() == hf["four"].keys()
    assert all(np.array_equal(hf["best"][k], hf["four"][k]) for k in hf["best"])
    assert any(not np.array_equal(hf["best"][k], hf["newest"][k]) for k in hf["best"])


def test_evaluate_best_newest_and_step(run):
    trainer = AlbertTrainer(config(run))
    best = trainer.evaluate(checkpoint="best")
    assert trainer.evaluate(checkpoint=4) == best
    newest = trainer.evaluate()
    assert newest == trainer.evaluate(checkpoint="newest")
    assert newest != best


def test_missing_step_and_missing_best_are_one_line_errors(run, tmp_path, capsys):
    with pytest.raises(CheckpointError, match=r"no checkpoint at step 5 \(steps present: "
                                              r"4, 6, 8\)"):
        export_run(run, tmp_path / "x", checkpoint=5)
    capsys.readouterr()
    assert main(["evaluate", "--config", str(run / "config.yaml"), "--checkpoint", "7"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: ") and "no checkpoint at step 7" in err[0]
    assert "steps present: 4, 6, 8" in err[0]

    plain = tmp_path / "nobest"
    AlbertTrainer(config(plain, keep_best=False)).fit(until_step=3)
    capsys.readouterr()
    assert main(["export", str(plain), str(tmp_path / "y"), "--checkpoint", "best"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: ") and f"run_dir={plain} kept no best checkpoint" in err[0]
    assert "no best metric" in err[0] and not (tmp_path / "y").exists()
    with pytest.raises(CheckpointError, match="kept no best checkpoint"):
        AlbertTrainer(config(plain, keep_best=False)).evaluate(checkpoint="best")


def test_checkpoint_choice_parsing():
    assert parse_checkpoint_choice("newest") == "newest"
    assert parse_checkpoint_choice(12) == 12
    for bad in ("latest", "-3", -3, "4.5", True):
        with pytest.raises(ValueError, match="newest', 'best' or a step"):
            parse_checkpoint_choice(bad)
