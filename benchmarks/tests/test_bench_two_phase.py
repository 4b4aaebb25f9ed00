"""benchmarks/two_phase.py: its run configs (phase 2 continues phase 1 and nothing else) and
its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from albertkit.config import TrainerConfig


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("two_phase")


class Args:
    batch, xla, eval_steps = 8, "auto", 5


def data(tmp_path: Path) -> dict[str, Path]:
    return {name: tmp_path / name for name in ("train128", "train512", "eval512")}


def test_phase2_config_names_phase1_and_no_architecture(bench, tmp_path):
    p1 = bench.run_config(tmp_path / "p1", data(tmp_path), "train128", 128, 90, 5e-4, 3, Args)
    p2 = bench.run_config(tmp_path / "p2", data(tmp_path), "train512", 512, 10, 5e-4 * 2 / 3, 3,
                          Args, load_from=tmp_path / "p1")
    one = bench.run_config(tmp_path / "one", data(tmp_path), "train512", 512, 100, 5e-4, 3, Args)
    for raw in (p1, p2, one):
        TrainerConfig.model_validate(raw)  # every run's config is valid as written
    assert p1["model"]["max_position_embeddings"] == 512  # phase 1 already covers 512
    assert p2["model"] == {"load_from": str(tmp_path / "p1")}
    assert p1["data"]["eval_files"] == []  # only the seq-512 runs are evaluated, on one set
    assert p2["data"]["eval_files"] == one["data"]["eval_files"] != []
    assert (p1["data"]["seq_length"], p2["data"]["seq_length"]) == (128, 512)
    assert p2["optimizer"]["learning_rate"] == pytest.approx(p1["optimizer"]["learning_rate"]
                                                             * 2 / 3)
    assert p1["runtime"]["seed"] == p2["runtime"]["seed"] == one["runtime"]["seed"] == 3


def test_table_gives_each_recipe_its_mean(bench):
    rows = [{"recipe": r, "seed": s, "steps": "x", "mlm_accuracy": a, "mlm_loss": 5.0,
             "train_seconds": t}
            for r, s, a, t in (("two-phase", 0, 0.10, 30), ("two-phase", 1, 0.20, 50),
                               ("seq512", 0, 0.30, 100), ("seq512", 1, 0.50, 120))]
    out = bench.table(rows)
    assert "two-phase: mean MLM acc@512 0.1500 (stdev 0.0707), mean train seconds 40" in out
    assert "seq512: mean MLM acc@512 0.4000 (stdev 0.1414), mean train seconds 110" in out
