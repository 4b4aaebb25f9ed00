"""``albertkit plan`` and :mod:`albertkit.plan`: fits, step time, hours, cost, errors; the
spot checkpoint interval; recipes of several phases."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from albertkit import TrainerConfig
from albertkit.cli import main
from albertkit.config import ConfigError
from albertkit.config.sizes import SIZES, AlbertSpec
from albertkit.errors import BenchmarkError
from albertkit.hardware import NETWORK_GBPS, GiB, resolve_xla
from albertkit.perf import BenchmarkResult, BenchmarkSettings
from albertkit.perf.memory import estimate_memory, plan_batch
from albertkit.plan import FleetEstimate, PriceTable, plan_fleets
from albertkit.plan.cost import allreduce_seconds
from albertkit.plan.prices import ON_DEMAND_USD_PER_HOUR

# The reference system: ALBERT-base, seq 512, global batch 4096, 125,000 steps, and the
# iterations/s it measured on three fleets (with the hours it reported).
REFERENCE = {
    "data": {"kind": "synthetic", "seq_length": 512, "max_predictions_per_seq": 20},
    "runtime": {"global_batch_size": 4096, "micro_batch_size": 32, "max_steps": 125_000,
                "precision": "mixed_float16"},
}
FLEETS = "ml.p3dn.24xlarge:8,ml.p3.16xlarge:8,ml.g4dn.12xlarge:16"
MEASURED = ["ml.p3dn.24xlarge:8=1.72it/s", "ml.p3.16xlarge:8=1.01it/s",
            "ml.g4dn.12xlarge:16=0.51it/s"]


@pytest.fixture
def reference_yaml(tmp_path) -> Path:
    path = tmp_path / "reference.yaml"
    TrainerConfig.model_validate(REFERENCE).to_yaml(path)
    return path


def _plan_json(capsys, *argv: str) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_reference_fleets_give_the_reference_hours_and_ranking(reference_yaml, capsys):
    argv = ["--config", str(reference_yaml), "--fleet", FLEETS]
    for m in MEASURED:
        argv += ["--measured", m]
    plan = _plan_json(capsys, *argv)
    hours = {f["fleet"]: f["hours"] for f in plan["fleets"]}
    assert 19.5 <= hours["ml.p3dn.24xlarge:8"] <= 20.5  # reference: 20 h
    assert 34 <= hours["ml.p3.16xlarge:8"] <= 39  # reference: 39 h
    assert 68 <= hours["ml.g4dn.12xlarge:16"] <= 78  # reference: 78 h
    assert plan["fastest"] == "ml.p3dn.24xlarge:8"
    assert plan["cheapest_on_demand"] == "ml.g4dn.12xlarge:16"
    assert all(f["basis"] == "measured" for f in plan["fleets"])
    assert plan["prices"]["as_of"] and "us-east-1" in plan["prices"]["source"]
    # on-demand cost = instances x the packaged price x hours
    g4dn = next(f for f in plan["fleets"] if f["instance_type"] == "ml.g4dn.12xlarge")
    assert g4dn["cost_on_demand"] == pytest.approx(16 * ON_DEMAND_USD_PER_HOUR[
        "ml.g4dn.12xlarge"] * g4dn["hours"])
    assert main(["plan", *argv]) == 0  # the table for people says the same
    table = capsys.readouterr().out
    assert "fastest: ml.p3dn.24xlarge x 8" in table
    assert "cheapest on demand: ml.g4dn.12xlarge x 16" in table
    assert "as of " in table and "| 20.2 |" in table


def test_a_fleet_measured_at_another_size_is_scaled_by_the_communication_model():
    cfg = TrainerConfig.model_validate(REFERENCE)
    plan = plan_fleets(cfg, "ml.p3dn.24xlarge:8,ml.p3dn.24xlarge:4", [MEASURED[0]])
    eight, four = plan.estimates
    base = AlbertSpec(**SIZES["base"])
    comm8 = allreduce_seconds(base, 8, NETWORK_GBPS["ml.p3dn.24xlarge"])
    comm4 = allreduce_seconds(base, 4, NETWORK_GBPS["ml.p3dn.24xlarge"])
    assert eight.step_s == pytest.approx(1 / 1.72)  # measured: exactly as measured
    assert four.step_s == pytest.approx(2 * (1 / 1.72 - comm8) + comm4)
    assert four.basis == "measured" and "scaled" in four.source
    assert four.scaling_efficiency == pytest.approx(four.compute_s / four.step_s)


def _framework(seq_per_s: float) -> dict:
    step = 32 / seq_per_s
    return {"framework": "albertkit", "params": 11_000_000, "baseline_rss": 2**28,
            "build_s": 1.0, "first_step_s": 9.0, "threads": {}, "device": "GPU:0",
            "memory_method": "tensorflow", "versions": {}, "step_s_median": step,
            "step_s_min": step, "step_s_max": step, "step_s_q1": step, "step_s_q3": step,
            "spread_iqr_pct": 0.0, "sequences_per_s": seq_per_s,
            "sequences_per_s_min": seq_per_s, "sequences_per_s_max": seq_per_s,
            "step_times_s": [step], "peak_bytes": 2**33, "training_bytes": 2**32,
            "cpu_s_per_step": 0.1, "matmul_flops_per_s": 1e14,
            "matmul_flops_per_s_rounds": [1e14], "model_flops_per_s": 1e13, "mfu": 0.3,
            "mfu_rounds": [0.3]}


def _benchmark_file(path: Path, seq_per_s: float, **settings) -> Path:
    s = BenchmarkSettings(**{"size": "base", "seq_length": 512, "micro_batch": 32,
                             "precision": "mixed_float16", **settings})
    result = BenchmarkResult.model_validate({
        "settings": s.model_dump(), "spec": s.spec.model_dump(),
        "machine": {"platform": "Linux", "python": "3.12", "cpus": 96, "load_avg": [0, 0, 0]},
        "model_flops_per_sequence": 2.9e11, "model_flops_parts_forward": {},
        "results": {"albertkit": _framework(seq_per_s)},
        "planner": {"predicted_bytes": 2**33, "estimate": {}}})
    path.write_text(result.to_json())
    return path


def test_a_one_gpu_benchmark_gives_the_compute_and_the_model_adds_the_allreduce(tmp_path):
    cfg = TrainerConfig.model_validate(REFERENCE)
    bench = _benchmark_file(tmp_path / "p4d.json", 400.0)
    row, = plan_fleets(cfg, "ml.p4d.24xlarge:2", [f"ml.p4d.24xlarge={bench}"]).estimates
    comm = allreduce_seconds(cfg.model.spec, 2, NETWORK_GBPS["ml.p4d.24xlarge"])
    assert row.basis == "measured" and "p4d.json" in row.source
    assert row.step_s == pytest.approx(4096 / 16 / 400.0 + comm)
    assert row.hours == pytest.approx(125_000 * row.step_s / 3600)


def test_a_run_directory_gives_its_median_rate(tmp_path):
    cfg = TrainerConfig.model_validate(REFERENCE)
    run = tmp_path / "run"
    run.mkdir()
    cfg.to_yaml(run / "config.yaml")
    rates = [100.0, 7000.0, 7100.0, 6900.0]  # the first window holds compilation
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"kind": "train", "step": 10 * i, "seq_per_s": r}) + "\n"
        for i, r in enumerate(rates)) + '{"kind": "eval", "step": 40}\n{"torn')
    row, = plan_fleets(cfg, "ml.p3dn.24xlarge:8", [f"ml.p3dn.24xlarge:8={run}"]).estimates
    assert row.step_s == pytest.approx(4096 / 7000.0)


def test_without_a_measurement_the_estimate_is_labelled_with_its_range():
    cfg = TrainerConfig.model_validate(REFERENCE)
    plan = plan_fleets(cfg, "ml.p4d.24xlarge:2", mfu=0.3)
    row, = plan.estimates
    assert row.basis == "estimated" and "MFU 30%" in row.source
    assert row.hours_low < row.hours < row.hours_high
    assert row.cost_on_demand_low < row.cost_on_demand < row.cost_on_demand_high
    assert "not measurements" in plan.format_table()
    # a GPU without a published peak is not guessed at
    a10g, = plan_fleets(cfg, "ml.g5.48xlarge:4").estimates
    assert a10g.hours is None and "no published peak" in a10g.problems[0]


@pytest.mark.parametrize(("instance_type", "micro"), [
    ("ml.p3.16xlarge", 32), ("ml.p3.16xlarge", 64), ("ml.p3dn.24xlarge", 64),
    ("ml.g4dn.12xlarge", 64), ("ml.p4d.24xlarge", 64)])
def test_fits_and_the_largest_micro_batch_are_the_planners(instance_type, micro):
    raw = {**REFERENCE, "runtime": {**REFERENCE["runtime"], "micro_batch_size": micro}}
    cfg = TrainerConfig.model_validate(raw)
    row, = plan_fleets(cfg, f"{instance_type}:8").estimates
    gpu = {"ml.p3.16xlarge": "V100", "ml.p3dn.24xlarge": "V100-32GB",
           "ml.g4dn.12xlarge": "T4", "ml.p4d.24xlarge": "A100"}[instance_type]
    replicas = row.gpus
    best = plan_batch(cfg.model.spec, 512, "mixed_float16", gpu, 4096, replicas, 20,
                      cfg.runtime.remat, cfg.runtime.xla)
    per_gpu = 4096 // replicas
    peak = estimate_memory(cfg.model.spec, 512, micro, "mixed_float16", 20,
                           accumulation=per_gpu // micro, remat=cfg.runtime.remat,
                           xla=resolve_xla("auto", "gpu", "mixed_float16").compute,
                           device="gpu").peak_bytes
    assert row.largest_micro_batch == best.micro_batch
    assert row.config_micro_batch_fits == (peak <= best.usable_bytes)
    used = micro if row.config_micro_batch_fits else best.micro_batch
    assert (row.micro_batch, row.accumulation) == (used, per_gpu // used)


def test_a_model_that_does_not_fit_is_said_so_and_not_timed():
    raw = {**REFERENCE, "model": {"size": "xxlarge", "num_hidden_layers": 48},
           "runtime": {**REFERENCE["runtime"], "precision": "float32", "remat": "none"}}
    cfg = TrainerConfig.model_validate(raw)
    best = plan_batch(cfg.model.spec, 512, "float32", "T4", 4096, 4, 20, "none")
    assert not best.fits  # the planner's own answer, which the plan repeats
    row, = plan_fleets(cfg, "ml.g4dn.12xlarge:1").estimates
    assert row.largest_micro_batch == 0 and row.hours is None and row.cost_on_demand is None
    assert "not even a micro-batch of 1 fits a T4" in row.problems[0]
    # on an A100 (40 GB) it fits, with the planner's micro-batch
    a100, = plan_fleets(cfg, "ml.p4d.24xlarge:1").estimates
    assert a100.largest_micro_batch == plan_batch(cfg.model.spec, 512, "float32", "A100", 4096,
                                                  8, 20, "none").micro_batch > 0


def test_a_price_file_overrides_the_packaged_table(tmp_path, reference_yaml, capsys):
    prices = tmp_path / "prices.yaml"
    prices.write_text("as_of: 2030-01-02\nsource: our contract\n"
                      "on_demand: {ml.p3dn.24xlarge: 10.0}\nspot: {ml.p3dn.24xlarge: 4.0}\n"
                      "spot_hours_between_interruptions: 80\nspot_restart_minutes: 30\n")
    plan = _plan_json(capsys, "--config", str(reference_yaml), "--fleet",
                      "ml.p3dn.24xlarge:8,ml.p3.16xlarge:8", "--measured", MEASURED[0],
                      "--prices", str(prices), "--checkpoint-seconds", "0")
    p3dn, p3 = plan["fleets"]
    assert p3dn["on_demand_usd_per_hour"] == 10.0
    assert p3dn["cost_on_demand"] == pytest.approx(10.0 * 8 * p3dn["hours"])
    # spot with free checkpoints: interrupted every 80 / 8 h, each losing half of 500 steps
    # and 30 minutes
    loss = 0.5 * 500 * p3dn["step_s"] / 3600 + 0.5
    assert p3dn["spot_hours"] == pytest.approx(p3dn["hours"] / (1 - loss / 10))
    assert p3dn["cost_spot"] == pytest.approx(4.0 * 8 * p3dn["spot_hours"])
    assert p3["on_demand_usd_per_hour"] == ON_DEMAND_USD_PER_HOUR["ml.p3.16xlarge"]  # kept
    assert plan["prices"]["as_of"] == "2030-01-02" and plan["prices"]["source"] == "our contract"
    bad = tmp_path / "bad.yaml"
    bad.write_text("on_demand: {ml.p3dn.24xlarge: 10.0}\nspot_dicsount: 0.5\n")
    with pytest.raises(ConfigError, match="unknown key 'spot_dicsount'"):
        PriceTable.packaged().with_file(bad)


def test_json_output_schema(reference_yaml, capsys):
    plan = _plan_json(capsys, "--config", str(reference_yaml), "--fleet",
                      "ml.p3dn.24xlarge:8,ml.p4d.24xlarge:2", "--measured", MEASURED[0])
    assert set(plan) == {"schema", "config", "assumptions", "prices", "fleets", "fastest",
                         "cheapest_on_demand", "cheapest_spot"}
    assert plan["schema"] == 1
    assert plan["config"]["max_steps"] == 125_000 and plan["config"]["seq_length"] == 512
    fields = {f.name for f in dataclasses.fields(FleetEstimate)}
    for row in plan["fleets"]:
        assert set(row) == fields
        for key in ("hours", "hours_low", "hours_high", "step_s", "cost_on_demand",
                    "cost_spot", "spot_hours"):
            assert isinstance(row[key], float), key
    assert [r["basis"] for r in plan["fleets"]] == ["measured", "estimated"]
    assert {"mfu", "mfu_band", "link_efficiency", "measurements"} <= set(plan["assumptions"])


def test_plan_and_launch_dry_run_show_the_same_estimate(tmp_path, reference_yaml, capsys,
                                                       monkeypatch):
    from albertkit.sagemaker.submit import to_sagemaker

    raw = {**REFERENCE, "sagemaker": {
        "role_arn": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest",
        "output_path": "s3://my-bucket/albertkit", "instance_type": "ml.p3dn.24xlarge",
        "instance_count": 8, "distribution": {"kind": "horovod"}}}
    for var in ("ROLE_ARN", "IMAGE_URI", "OUTPUT_PATH", "INSTANCE_TYPE", "BUCKET"):
        monkeypatch.delenv(f"ALBERTKIT_SM_{var}", raising=False)
    path = tmp_path / "job.yaml"
    import yaml

    path.write_text(yaml.safe_dump(raw))
    job = to_sagemaker(TrainerConfig.from_yaml(path), env_defaults={})
    estimate = job.estimate([MEASURED[0]])
    assert main(["launch", "--config", str(path), "--dry-run", "--measured", MEASURED[0]]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["ResourceConfig"]["InstanceCount"] == 8  # stdout: the request
    assert estimate.format_table() in out.err
    monkeypatch.setenv("ALBERTKIT_SM_INSTANCE_TYPE", "ml.g4dn.12xlarge")  # the file's wins
    plan = _plan_json(capsys, "--config", str(path), "--measured", MEASURED[0])  # its fleet
    assert plan["fleets"] == [e.as_dict() for e in estimate.estimates]
    assert plan["fleets"][0]["fleet"] == "ml.p3dn.24xlarge:8"


@pytest.mark.parametrize(("argv", "message"), [
    (["--fleet", "ml.p9.24xlarge:8"], "unknown instance type 'ml.p9.24xlarge'"),
    (["--fleet", "ml.p4d.24xlarge:eight"], "'ml.p4d.24xlarge:eight' is not INSTANCE_TYPE"),
    (["--fleet", "ml.p4d.24xlarge:0"], "'ml.p4d.24xlarge:0' is not INSTANCE_TYPE"),
    (["--fleet", "ml.p4d.24xlarge;ml.p3.2xlarge"], "unknown instance type "
                                                   "'ml.p4d.24xlarge;ml.p3.2xlarge'"),
    (["--measured", "ml.p4d.24xlarge:8=fast"], "ml.p4d.24xlarge=fast: neither a rate"),
    (["--measured", "ml.nope.2xlarge=1it/s"], "unknown instance type 'ml.nope.2xlarge'"),
    (["--measured", "ml.m5.large=1it/s"], "--measured ml.m5.large: has no GPU"),
    (["--fleet", "ml.p3dn.24xlarge:8", "--prices", "missing.yaml"], "--prices missing.yaml"),
    (["--fleet", "ml.p3dn.24xlarge:8", "--checkpoint-seconds", "-1"],
     "--checkpoint-seconds -1: must be 0 or more"),
])
def test_bad_input_is_one_line_naming_the_value(reference_yaml, capsys, argv, message):
    assert main(["plan", "--config", str(reference_yaml), *argv]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith("error: ") and message in first, err


@pytest.mark.parametrize(("settings", "message"), [
    ({"size": "large"}, "measured model size 'large'"),
    ({"seq_length": 128}, "measured at seq_length=128; the config trains at 512"),
    ({"precision": "float32"}, "measured in precision=float32"),
])
def test_a_benchmark_of_another_shape_is_refused(tmp_path, reference_yaml, capsys, settings,
                                                 message):
    bench = _benchmark_file(tmp_path / "other.json", 100.0, **settings)
    cfg = TrainerConfig.from_yaml(reference_yaml)
    with pytest.raises(BenchmarkError, match=message):
        plan_fleets(cfg, "ml.p4d.24xlarge:1", [f"ml.p4d.24xlarge={bench}"])
    assert main(["plan", "--config", str(reference_yaml), "--fleet", "ml.p4d.24xlarge:1",
                 "--measured", f"ml.p4d.24xlarge={bench}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"error: {bench}: ") and message in err[0]


def test_a_rates_file_names_fleets_and_values(tmp_path):
    cfg = TrainerConfig.model_validate(REFERENCE)
    rates = tmp_path / "rates.yaml"
    rates.write_text("".join(f"{m.split('=')[0]}: {m.split('=')[1]}\n" for m in MEASURED))
    by_file = plan_fleets(cfg, FLEETS, [str(rates)])
    by_flag = plan_fleets(cfg, FLEETS, MEASURED)
    assert [e.hours for e in by_file.estimates] == [e.hours for e in by_flag.estimates]
    bench = _benchmark_file(tmp_path / "bench.json", 400.0)
    with pytest.raises(ConfigError, match="name the instance type it ran on"):
        plan_fleets(cfg, FLEETS, [str(bench)])


def test_usable_memory_is_reported_in_gib():
    cfg = TrainerConfig.model_validate(REFERENCE)
    row, = plan_fleets(cfg, "ml.p3.16xlarge:8").estimates
    assert row.usable_gib == round(plan_batch(cfg.model.spec, 512, "mixed_float16", "V100",
                                              4096, 64, 20).usable_bytes / GiB, 2)


def test_without_fleet_the_plan_is_of_the_fleet_launch_would_start(reference_yaml, capsys,
                                                                  monkeypatch):
    monkeypatch.setenv("ALBERTKIT_SM_INSTANCE_TYPE", "ml.p3.16xlarge")  # no sagemaker section
    plan = _plan_json(capsys, "--config", str(reference_yaml))
    assert [f["fleet"] for f in plan["fleets"]] == ["ml.p3.16xlarge:1"]
