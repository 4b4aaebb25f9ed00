"""benchmarks/bench_precision.py: the verdict on bf16 vs fp32 held-out accuracy, and its configs."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("bench_precision")


def _runs(fp32, bf16):
    return ([{"precision": "float32", "mlm_accuracy": a} for a in fp32]
            + [{"precision": "mixed_bfloat16", "mlm_accuracy": a} for a in bf16])


def test_verdict_inside_and_outside_the_float32_range(bench):
    inside = bench.verdict(_runs([0.10, 0.12, 0.11], [0.105, 0.115]))
    assert inside["within_float32_spread"] is True
    assert inside["mean_difference"] == pytest.approx(0.11 - 0.11)
    assert inside["float32"]["stdev"] == pytest.approx(0.01)
    below = bench.verdict(_runs([0.10, 0.12, 0.11], [0.08, 0.09]))
    assert below["within_float32_spread"] is False
    assert below["mean_difference"] == pytest.approx(0.085 - 0.11)


def test_run_config_varies_only_the_model_seed_and_precision(bench, tmp_path):
    class Args:
        steps, data_seed, xla = 40, 0, "auto"

    data = tmp_path / "data"
    data.mkdir()
    a = bench.run_config(data, tmp_path / "a", "float32", 1, Args)
    b = bench.run_config(data, tmp_path / "b", "mixed_bfloat16", 2, Args)
    assert a["data"] == b["data"] and a["data"]["seed"] == 0
    assert (a["runtime"]["seed"], b["runtime"]["seed"]) == (1, 2)
    assert (a["runtime"]["precision"], b["runtime"]["precision"]) == ("float32",
                                                                     "mixed_bfloat16")
    assert a["runtime"]["xla"] == "auto" and a["runtime"]["max_steps"] == 40
    assert (tmp_path / "a" / "data").resolve() == data.resolve()
    from albertkit.config import TrainerConfig

    TrainerConfig.from_dict(b)  # a valid config
