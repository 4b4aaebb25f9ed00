"""A resumed run's ``metrics.jsonl``: the records after its checkpoint are rolled back."""

from __future__ import annotations

import json

from albertkit.report import load_series, write_run_report
from albertkit.training.checkpoint import CheckpointManager
from albertkit.training.run_logger import RunLogger
from albertkit.training.trainer import AlbertTrainer
from conftest import make_tiny_config


def config(run_dir):
    return make_tiny_config(
        run_dir,
        data={"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5,
              "num_examples": 64, "eval_examples": 16},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 8,
                 "eval_every_steps": 4, "eval_steps": 2},
        checkpoint={"every_steps": 3, "keep_last": 3, "keep_best": False},
        logging={"log_every_steps": 2, "progress_bar": False},
    )


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_resume_rolls_back_the_killed_attempts_later_steps(tmp_path):
    run = tmp_path / "run"
    AlbertTrainer(config(run)).fit(until_step=5)
    # as if killed by kill -9 at step 5: steps 4 (train and eval) were logged, the newest
    # checkpoint is step 3, no summary, and a torn last line
    CheckpointManager(run / "checkpoints").list()[-1].rename(tmp_path / "gone")
    (run / "summary.json").unlink()
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"kind": "train", "step": 5, "loss": 1.')
    first = [(r["kind"], r["step"]) for r in map(json.loads, (run / "metrics.jsonl")
             .read_text().splitlines()[:-1])]
    assert ("train", 4) in first and ("eval", 4) in first

    trainer = AlbertTrainer(config(run)).fit()
    assert trainer.summary["resumed_from_step"] == 3 and trainer.summary["step"] == 8
    recs = records(run)  # every line parses: the torn one went too
    steps = [r["step"] for r in recs]
    assert steps == sorted(steps), steps  # never backwards
    assert [r["step"] for r in recs if r["kind"] == "train"] == [2, 4, 6, 8]
    assert [r["step"] for r in recs if r["kind"] == "eval"] == [4, 8]

    series = load_series(run)
    assert series["train"]["loss"][0] == [2, 4, 6, 8]
    assert [steps for steps, _ in series["eval"].values()][0] == [4, 8]
    report = write_run_report(run, tmp_path / "report")
    assert report.markdown.is_file() and (tmp_path / "report" / "loss.png").is_file()


def test_roll_back_keeps_records_up_to_the_step_and_appends_after_them(tmp_path):
    logger = RunLogger(tmp_path, tensorboard=False)
    for step in (1, 2, 3):
        logger.scalars(step, {"loss": float(step)}, echo=False)
    logger.scalars(2, {"acc": 0.5}, kind="eval", echo=False)
    assert logger.roll_back(3) == 0  # nothing after step 3
    assert logger.roll_back(1) == 3  # train 2, 3 and eval 2
    logger.scalars(2, {"loss": 9.0}, echo=False)
    logger.close()
    assert [(r["kind"], r["step"], r.get("loss")) for r in records(tmp_path)] == [
        ("train", 1, 1.0), ("train", 2, 9.0)]
    assert not list(tmp_path.glob(".*tmp*"))
    assert RunLogger(tmp_path, enabled=False).roll_back(0) == 0
