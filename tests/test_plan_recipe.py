"""``albertkit plan --config p1.yaml --config p2.yaml``: a recipe of several phases priced as
one (:mod:`albertkit.plan.recipe`), and the planner's old home (``albertkit.perf``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albertkit import TrainerConfig
from albertkit.cli import main
from albertkit.config import ConfigError
from albertkit.plan import plan_fleets, plan_recipe
from test_fleet_plan import _benchmark_file

ROOT = Path(__file__).resolve().parents[1]
PHASES = [str(ROOT / "examples" / "configs" / f"pretrain_base_phase{p}.yaml")
          for p in ("1_seq128", "2_seq512")]
FLEETS = "ml.p4d.24xlarge:8,ml.p3dn.24xlarge:8"


@pytest.fixture(scope="module")
def phases() -> list[TrainerConfig]:
    return [TrainerConfig.from_yaml(p) for p in PHASES]


def test_each_phase_is_planned_at_its_own_shape_and_the_fleets_are_summed(phases):
    recipe = plan_recipe(phases, FLEETS)
    for cfg, plan in zip(phases, recipe.phases, strict=True):
        alone = plan_fleets(cfg, FLEETS)  # the phase as its own plan
        assert [e.as_dict() for e in plan.estimates] == [e.as_dict() for e in alone.estimates]
        assert plan.config["seq_length"] == cfg.data.seq_length
        assert plan.config["max_steps"] == cfg.runtime.max_steps
    (p1_p4d, p1_p3dn), (p2_p4d, p2_p3dn) = (p.estimates for p in recipe.phases)
    assert (p1_p4d.micro_batch, p2_p4d.micro_batch) == (64, 32)  # each config's own
    assert p1_p4d.step_s < p2_p4d.step_s  # seq 128 costs less per step than 512
    p4d, p3dn = recipe.totals
    for total, rows in ((p4d, (p1_p4d, p2_p4d)), (p3dn, (p1_p3dn, p2_p3dn))):
        for key in ("hours", "hours_low", "hours_high", "cost_on_demand", "spot_hours",
                    "cost_spot", "cost_spot_best"):
            assert getattr(total, key) == pytest.approx(sum(getattr(r, key) for r in rows))
        assert total.basis == "estimated" and total.cost_spot_best <= total.cost_spot
    assert recipe.fastest.fleet == "ml.p4d.24xlarge:8"


def test_the_cli_prints_one_total_per_fleet(capsys):
    argv = ["plan", "--config", PHASES[0], "--config", PHASES[1], "--fleet", FLEETS]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [t["fleet"] for t in out["totals"]] == FLEETS.split(",")
    assert len(out["phases"]) == 2 and out["sources"] == PHASES
    assert out["totals"][0]["hours"] == pytest.approx(
        sum(p["fleets"][0]["hours"] for p in out["phases"]))
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "## The recipe: 2 phases" in table and f"## Phase 2: {PHASES[1]}" in table
    assert "fastest: ml.p4d.24xlarge x 8" in table.split("## The recipe")[1]


def test_measurements_go_to_the_phase_they_measured(phases, tmp_path):
    # a benchmark at seq 512 fits phase 2 only; phase 1 stays an estimate
    bench = _benchmark_file(tmp_path / "p4d512.json", 400.0)
    recipe = plan_recipe(phases, "ml.p4d.24xlarge:8", [f"ml.p4d.24xlarge={bench}"])
    (p1,), (p2,) = (p.estimates for p in recipe.phases)
    assert (p1.basis, p2.basis) == ("estimated", "measured")
    assert recipe.totals[0].basis == "estimated"  # not every phase was measured
    # a bare rate names its phase, and then counts for that phase alone
    recipe = plan_recipe(phases, "ml.p3dn.24xlarge:8", ["1:ml.p3dn.24xlarge:8=8it/s",
                                                        "2:ml.p3dn.24xlarge:8=1.72it/s"])
    (p1,), (p2,) = (p.estimates for p in recipe.phases)
    assert (p1.step_s, p2.step_s) == (pytest.approx(1 / 8), pytest.approx(1 / 1.72))
    assert recipe.totals[0].basis == "measured"
    assert recipe.totals[0].hours == pytest.approx((112_500 / 8 + 12_500 / 1.72) / 3600)


@pytest.mark.parametrize(("measured", "message"), [
    ("ml.p3dn.24xlarge:8=1.72it/s", "a rate does not say which phase it was measured in: "
                                    "name it, e.g. --measured 2:ml.p3dn.24xlarge:8=1.72it/s"),
    ("3:ml.p3dn.24xlarge:8=1.72it/s", "phase 3 is not one of the 2 configs"),
])
def test_a_measurement_without_its_phase_is_one_line(capsys, measured, message):
    assert main(["plan", "--config", PHASES[0], "--config", PHASES[1], "--fleet",
                 "ml.p3dn.24xlarge:8", "--measured", measured]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("error: ") and message in first, first


def test_a_benchmark_that_fits_no_phase_is_refused(phases, tmp_path):
    bench = _benchmark_file(tmp_path / "large.json", 100.0, size="large")
    with pytest.raises(ConfigError, match=r"fits no phase \(phase 1: .*measured model size "
                                          r"'large'.*; phase 2: "):
        plan_recipe(phases, "ml.p4d.24xlarge:1", [f"ml.p4d.24xlarge={bench}"])


def test_a_phase_that_loads_the_one_before_is_planned_with_its_architecture(phases):
    large = phases[0].model_copy(update={"model": phases[0].model.model_copy(
        update={"size": "large"})})
    recipe = plan_recipe([large, phases[1]], "ml.p4d.24xlarge:8")
    assert phases[1].model.load_from is not None and phases[1].model.size == "base"
    assert [p.config["hidden_size"] for p in recipe.phases] == [1024, 1024]


def test_the_old_names_in_perf_warn_and_are_the_new_ones():
    import albertkit.perf
    import albertkit.plan

    for name in ("plan_fleets", "FleetPlan", "FleetEstimate", "PriceTable", "predict",
                 "ScalingPrediction"):
        with pytest.warns(DeprecationWarning, match=f"albertkit.plan.{name}.*0.4"):
            assert getattr(albertkit.perf, name) is getattr(albertkit.plan, name)
    assert "plan_fleets" not in albertkit.perf.__all__
    with pytest.raises(AttributeError):
        albertkit.perf.no_such_name  # noqa: B018
