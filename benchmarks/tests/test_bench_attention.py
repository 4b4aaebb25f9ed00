"""benchmarks/bench_attention.py: albertkit's attention core against PyTorch's fused
scaled_dot_product_attention (the independent reference), gradients and timings."""

from __future__ import annotations

import pytest

SMALL = ["--seq-length", "24", "--batch", "2", "--heads", "3", "--head-dim", "8",
         "--rounds", "3", "--warmup", "1"]


@pytest.mark.parametrize("precision,tolerance", [("float32", 1e-5), ("bfloat16", 3e-2)])
@pytest.mark.parametrize("keep", [False, True])
def test_core_gradients_match_torch_sdpa_and_both_sides_are_timed(precision, tolerance, keep, load_script):
    script = load_script("bench_attention")
    argv = [*SMALL, "--precision", precision] + (["--no-recompute"] if keep else [])
    result = script.measure(script.parse(argv))
    rel = result["gradient_relative_difference"]
    assert set(rel) == {"q", "k", "v"}
    # the padded quarter of the last sequence is masked on both sides: a core that ignored
    # the bias, or a wrong backward formula, differs by far more than rounding
    assert max(rel.values()) < tolerance, rel
    assert result["albertkit_ms"] > 0 and result["torch_ms"] > 0
    assert result["ratio_q1"] <= result["ratio_median"] <= result["ratio_q3"]


def test_script_prints_its_figures(capsys, load_script):
    script = load_script("bench_attention")
    assert script.main([*SMALL, "--precision", "float32"]) == 0
    out = capsys.readouterr().out
    assert "gradients vs torch sdpa" in out and "per-round ratio albertkit / torch" in out
    assert "[2, 3, 24, 8] float32, recomputed probabilities" in out
