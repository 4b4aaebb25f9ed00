"""benchmarks/plan_check.py: the plan's 2-process prediction beside a measured 2-process run."""

from __future__ import annotations

import json

import pytest

from albertkit.perf import BenchmarkResult, BenchmarkSettings
from albertkit.plan.cost import allreduce_seconds


def _framework(seq_per_s: float, **extra) -> dict:
    step = 32 / seq_per_s
    return {"framework": "albertkit", "params": 1_000_000, "baseline_rss": 2**28,
            "build_s": 1.0, "first_step_s": 2.0, "threads": {}, "device": "CPU",
            "memory_method": "VmHWM", "versions": {}, "step_s_median": step,
            "step_s_min": step, "step_s_max": step, "step_s_q1": step, "step_s_q3": step,
            "spread_iqr_pct": 0.0, "sequences_per_s": seq_per_s,
            "sequences_per_s_min": seq_per_s, "sequences_per_s_max": seq_per_s,
            "step_times_s": [step], "peak_bytes": 2**30, "training_bytes": 2**29,
            "cpu_s_per_step": 1.0, "matmul_flops_per_s": 1e11,
            "matmul_flops_per_s_rounds": [1e11], "model_flops_per_s": 1e10, "mfu": 0.1,
            "mfu_rounds": [0.1], **extra}


@pytest.fixture
def saved(tmp_path):
    s = BenchmarkSettings(size="tiny", seq_length=128, micro_batch=32, processes=[1, 2])
    result = BenchmarkResult.model_validate({
        "settings": s.model_dump(), "spec": s.spec.model_dump(),
        "machine": {"platform": "Linux", "python": "3.12", "cpus": 2, "load_avg": [0, 0, 0]},
        "model_flops_per_sequence": 1e9, "model_flops_parts_forward": {},
        "results": {"albertkit": _framework(100.0)},
        "planner": {"predicted_bytes": 2**29, "estimate": {}},
        "data_parallel": {"2": _framework(150.0, processes=2, scaling_efficiency=0.75)}})
    path = tmp_path / "two.json"
    path.write_text(result.to_json())
    return path


def test_prediction_is_the_plans_step_formula(load_script, saved):
    check = load_script("plan_check")
    result = BenchmarkResult.read(saved)
    pred = check.predict(result, link_gbps=10.0, link_efficiency=0.7)
    comm = allreduce_seconds(result.spec, 2, 10.0, link_efficiency=0.7)
    assert pred["allreduce_s"] == pytest.approx(comm)
    assert pred["a_device_each"] == pytest.approx(2 * 32 / (32 / 100.0 + comm))


def test_from_a_saved_result_prints_prediction_measurement_and_error(load_script, saved,
                                                                     capsys):
    check = load_script("plan_check")
    assert check.main(["--from", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "2 processes measured:" in out and "150.00 seq/s" in out
    last = json.loads(out.strip().splitlines()[-1])
    pred = last["a_device_each"]["predicted_seq_per_s"]
    assert last["a_device_each"]["error"] == pytest.approx((pred - 150.0) / 150.0)
