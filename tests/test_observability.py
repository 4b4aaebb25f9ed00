"""Seeing where training time goes: profiler traces (read back with TensorBoard's profile
plugin), the step-time breakdown, the input-bound warning, the report's charts, and run
tracking in MLflow (a local store, resumption, export, an unreachable server)."""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np
import pytest

from albertkit.config import TrainerConfig
from albertkit.errors import ConfigError
from albertkit.training.run_logger import read_metrics
from albertkit.training.trainer import AlbertTrainer

QUIET = {"progress_bar": False, "log_every_steps": 5}


def _time_records(run: Path) -> list[dict]:
    return [r for r in read_metrics(run) if r["kind"] == "time"]


# --------------------------------------------------------------------------- profiler
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_profile_trace_is_listed_by_tensorboards_profile_plugin(tmp_path, tiny_config):
    from tensorboard.plugins import base_plugin
    from xprof.convert.raw_to_tool_data import xspace_to_tool_data
    from xprof.profile_plugin import ProfilePlugin

    run = tmp_path / "run"
    cfg = tiny_config(run, runtime={"max_steps": 10, "profile": {"start_step": 4,
                                                                 "num_steps": 3}},
                      logging=QUIET)
    AlbertTrainer(cfg).fit()
    logdir = run / "tensorboard"
    ctx = base_plugin.TBContext(logdir=str(logdir), data_provider=None,
                                flags=argparse.Namespace(master_tpu_unsecure_channel=""))
    plugin = ProfilePlugin(ctx)
    runs = plugin.runs_imp()
    assert len(runs) == 1, runs
    tools = plugin.run_tools_imp(runs[0])
    assert any(t.startswith("trace_viewer") for t in tools), tools
    assert plugin.host_impl(runs[0], "trace_viewer"), "no host in the profile run"
    # the trace holds the training step itself
    traces = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
    data, content_type = xspace_to_tool_data(traces, "trace_viewer@", {})
    assert content_type == "application/json"
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    assert '"name":"_replica_step"' in text

    # no runtime.profile: no trace at all
    plain = tmp_path / "plain"
    AlbertTrainer(tiny_config(plain, runtime={"max_steps": 6}, logging=QUIET)).fit()
    assert not (plain / "tensorboard" / "plugins").exists()


def test_profile_settings_are_checked(tiny_config):
    with pytest.raises(ConfigError, match="runtime.profile.start_step"):
        tiny_config(runtime={"profile": {"start_step": 0}})
    with pytest.raises(ConfigError, match="runtime.profile.ranks"):
        tiny_config(runtime={"profile": {"start_step": 3, "ranks": []}})


# --------------------------------------------------------------------------- breakdown
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_split_step_equals_the_fused_step(tiny_config):
    """The breakdown's timed halves compute exactly what the fused step computes."""
    from albertkit.distributed.single import SingleProcess
    from albertkit.training.builders import build_model_and_step

    cfg = tiny_config(runtime={"xla": True, "max_steps": 4})
    fused, split = (build_model_and_step(cfg, SingleProcess()) for _ in range(2))
    for a, b in zip(fused.model.weights, split.model.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    data = fused.task.datasets(cfg, SingleProcess())
    batches = iter(data.train(accum=fused.accum))
    for _ in range(3):
        batch = next(batches)
        out_a = fused.step(batch)
        out_b, halves = split.step.split(batch)
        assert set(halves) == {"compute", "apply"} and min(halves.values()) > 0
        for k in out_a:
            np.testing.assert_allclose(float(out_a[k]), float(out_b[k]), rtol=1e-6, err_msg=k)
    for a, b in zip(fused.model.weights, split.model.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=a.path)


@pytest.mark.slow
@pytest.mark.serial  # compares timed halves with wall time: run alone
def test_breakdown_adds_up_to_the_measured_step_time(tmp_path, tiny_config):
    """A model whose step takes ~120 ms, so dispatch costs do not dominate: input + compute
    + apply cover the window's wall time (less checkpoints and eval) within 5 %, and the two
    timed halves of a split step agree with a fused step (medians over the windows after
    compilation and tracing)."""
    run = tmp_path / "run"
    cfg = tiny_config(
        run,
        model={"hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
               "num_hidden_layers": 4, "max_position_embeddings": 128},
        data={"kind": "synthetic", "seq_length": 128, "max_predictions_per_seq": 20},
        runtime={"micro_batch_size": 8, "global_batch_size": 8, "max_steps": 80,
                 "xla": True, "eval_every_steps": 0, "eval_steps": 2},
        logging={"progress_bar": False, "log_every_steps": 10, "tensorboard": False},
        checkpoint={"every_steps": 1000})
    AlbertTrainer(cfg).fit()
    records = _time_records(run)
    assert [r["step"] for r in records] == [10, 20, 30, 40, 50, 60, 70, 80]
    split = [r for r in records if "split_compute_s" in r]
    assert len(split) == 6  # windows 3..8 (window 2's split traces the halves)
    # the division's sanity check: one timed split per window against the window's mean
    # fused step. Alone this measures 0.97-1.06 (medians ~1.02); late in the full suite the
    # halves ran 6-30 % slower (median 1.12), so only gross errors (a half counted twice,
    # a missing sync) are caught here; the covered share above is held to 5 %
    ratios = [(r["split_compute_s"] + r["split_apply_s"]) / r["fused_step_s"] for r in split]
    assert 0.8 <= statistics.median(ratios) <= 1.5, f"timed halves / fused step: {ratios}"
    # medians over windows 3..8: one window can catch a pause of the machine
    covered = [(r["input_s"] + r["compute_s"] + r["apply_s"])
               / (r["wall_s"] - r["checkpoint_s"] - r["eval_s"]) for r in records[2:]]
    assert 0.95 <= statistics.median(covered) <= 1.0 + 1e-9, f"measured / wall: {covered}"
    for r in records[2:]:
        shares = sum(r[f"{k}_share"] for k in ("input", "compute", "apply", "checkpoint",
                                              "eval", "other"))
        assert shares == pytest.approx(1.0, abs=1e-6)
        assert r["compute_share"] > r["apply_share"] > 0  # forward+backward dominate
        assert 0 < r["rank0_cpu_util"] <= 1.0


def _slow_input(monkeypatch, seconds: float) -> None:
    """Every training batch the loop takes arrives ``seconds`` late on the run's clock: the
    trainer's ``StepClock`` reads real time plus the waits so far (a fake clock, so the test
    does not sleep), and the pretraining data adds a wait as it hands out each batch."""
    import functools

    import albertkit.tasks.pretraining as pretraining
    import albertkit.training.trainer as trainer_module
    from albertkit.training.timing import StepClock

    waited = [0.0]
    monkeypatch.setattr(trainer_module, "StepClock", functools.partial(
        StepClock, clock=lambda: time.perf_counter() + waited[0]))
    original = pretraining.PretrainingData.train

    def slow(self, *args, **kwargs):
        for batch in original(self, *args, **kwargs):
            waited[0] += seconds
            yield batch

    monkeypatch.setattr(pretraining.PretrainingData, "train", slow)


# The normal run runs alone: its input share is a measurement. In the 2-worker pass a
# neighbour's burst of work starved the prefetching threads and pushed one 1-s window of it
# to 0.22. The slow pipeline's waits are on the fake clock (0.2 s a step against ~10 ms of
# compute), so a loaded machine cannot bring its share near the threshold.
@pytest.mark.parametrize("slow", [pytest.param(True, id="slow-input"),
                                  pytest.param(False, id="normal-input",
                                               marks=pytest.mark.serial)])
def test_input_bound_is_reported_only_for_a_slow_pipeline(tmp_path, tiny_config, monkeypatch,
                                                          caplog, slow):
    # threshold 0.3: a tiny model's fused step spends 0.11-0.13 of its ~11 ms fetching the
    # batch (measured alone); the slow pipeline waits for more than half of every window
    threshold = 0.3
    if slow:
        # each step's batch (two micro-batches) waits 0.2 s: a window of 5 steps lasts > 1 s
        # (JUDGED_SECONDS), so each is judged alone; a tiny step computes in ~10 ms
        _slow_input(monkeypatch, 0.2)
        steps, every = 20, 5
    else:
        # 100-step windows: ~1 s each after the two traced ones. (5-step windows of tens of
        # milliseconds were judged one by one before JUDGED_SECONDS, and a 2-worker CI run
        # once caught a pause in one and called the run input-bound.)
        steps, every = 400, 100
    run = tmp_path / "run"
    cfg = tiny_config(run, runtime={"max_steps": steps, "eval_every_steps": 0, "eval_steps": 2},
                      logging={**QUIET, "log_every_steps": every, "tensorboard": False,
                               "input_bound_share": threshold})
    with caplog.at_level(logging.INFO, logger="albertkit"):
        trainer = AlbertTrainer(cfg).fit()
    warned = [r for r in caplog.records if "input-bound" in r.getMessage()]
    shares = [r["input_share"] for r in _time_records(run)]
    assert len(shares) == 4
    if slow:
        assert trainer.summary["time"]["input_bound"] is True
        assert warned and warned[0].levelno == logging.WARNING
        # windows 1-2 also hold tracing (of the step, then of its timed halves)
        assert min(shares[2:]) > 0.5, shares
    else:
        assert max(shares[2:]) < threshold, shares
        assert trainer.summary["time"]["input_bound"] is False
        assert not warned


def test_input_bound_is_judged_on_at_least_a_second(caplog):
    """Windows shorter than JUDGED_SECONDS are pooled: a pause that fills most of a 50 ms
    window does not make the run input-bound; a second of mostly waiting does, once."""
    from albertkit.training import timing

    now = [0.0]
    clock = timing.StepClock(input_bound_share=0.2, clock=lambda: now[0])

    def window(seconds: float, waiting: float, steps: int = 5) -> dict:
        with clock.input():
            now[0] += seconds * waiting
        now[0] += seconds * (1 - waiting)
        clock.steps += steps
        return clock.window()

    with caplog.at_level(logging.INFO, logger="albertkit"):
        assert window(0.05, 0.6)["input_share"] == pytest.approx(0.6)  # reported as measured
        window(0.05, 0.6)
        assert not clock.input_bound  # 0.1 s pooled: not judged yet
        window(1.0, 0.05)  # pooled: (0.06 + 0.05) / 1.1 s = 10 %
        assert not clock.input_bound and not caplog.records
        window(0.6, 0.5)
        window(0.6, 0.5, steps=7)  # 1.2 s pooled, half of it waiting
        assert clock.input_bound and clock.ever_input_bound
        window(1.5, 0.5)  # still bound: warned once only
        window(1.0, 0.05)
        assert not clock.input_bound and clock.ever_input_bound
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0][0] == logging.WARNING
    assert messages[0][1].startswith("input-bound: 50% of the last 12 steps' time")
    assert messages[1] == (logging.INFO, "no longer input-bound (5% waiting for data)")


def test_report_draws_the_breakdown_and_names_the_bottleneck(tmp_path, tiny_config):
    from albertkit.report.run import write_run_report

    run = tmp_path / "run"
    AlbertTrainer(tiny_config(run, runtime={"max_steps": 20}, logging=QUIET)).fit()
    report = write_run_report(run)
    assert {"time_breakdown", "utilisation"} <= set(report.charts)
    for name in ("time_breakdown", "utilisation"):
        assert report.charts[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = report.markdown.read_text()
    assert "## Bottleneck" in text and "Most of the step time went to" in text


# --------------------------------------------------------------------------- MLflow
def _mlflow_cfg(tiny_config, run: Path, uri: str, max_steps: int):
    return tiny_config(run, runtime={"max_steps": max_steps, "eval_every_steps": 5,
                                     "eval_steps": 2},
                       logging={**QUIET, "mlflow": {"tracking_uri": uri,
                                                    "experiment": "albertkit-tests"}},
                       checkpoint={"every_steps": 5})


@pytest.mark.parametrize("store_kind", ["directory", "file-store"])
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_mlflow_local_store_gets_params_metrics_artifacts_and_resume(tmp_path, tiny_config,
                                                                     monkeypatch, store_kind):
    """``directory``: a plain path (an SQLite database and the artifacts inside it);
    ``file-store``: MLflow's file store (``file:`` URI), which MLflow 3 opens only with
    MLFLOW_ALLOW_FILE_STORE=true."""
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    if store_kind == "directory":
        given, uri = str(store), f"sqlite:///{store / 'mlflow.db'}"
    else:
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        given = uri = store.as_uri()
    run = tmp_path / "run"
    AlbertTrainer(_mlflow_cfg(tiny_config, run, given, 10)).fit(until_step=5)
    first = json.loads((run / "mlflow_run.json").read_text())
    assert first["tracking_uri"] == uri
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(first["run_id"]).info.status == "KILLED"  # interrupted at step 5

    trainer = AlbertTrainer(_mlflow_cfg(tiny_config, run, given, 10)).fit()  # resumes
    assert json.loads((run / "mlflow_run.json").read_text())["run_id"] == first["run_id"]
    exp = client.get_experiment_by_name("albertkit-tests")
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in runs] == [first["run_id"]]  # one MLflow run, appended
    got = client.get_run(first["run_id"])
    assert got.info.status == "FINISHED"
    assert got.data.params["model.hidden_size"] == "32"
    assert got.data.params["runtime.max_steps"] == "10"
    assert "sagemaker.role_arn" not in got.data.params
    loss = client.get_metric_history(first["run_id"], "loss")
    assert sorted(m.step for m in loss) == [5, 10]
    logged = {r["step"]: r["loss"] for r in read_metrics(run) if r["kind"] == "train"}
    assert {m.step: m.value for m in loss} == pytest.approx(logged)
    assert client.get_metric_history(first["run_id"], "eval/mlm_accuracy")
    assert client.get_metric_history(first["run_id"], "time/input_share")
    names = {a.path for a in client.list_artifacts(first["run_id"])}
    assert {"summary.json", "config.yaml"} <= names

    trainer.export(tmp_path / "exported")
    exported = {a.path for a in client.list_artifacts(first["run_id"], "export")}
    assert "export/model.safetensors" in exported and "export/config.json" in exported
    if store_kind == "directory":  # artifacts next to the database, not in the cwd
        assert (store / "artifacts").is_dir()


def test_unreachable_tracking_server_only_warns(tmp_path, tiny_config, monkeypatch, caplog):
    from albertkit.training.tracking import MlflowTracker

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    monkeypatch.setattr(MlflowTracker, "RETRIES", 1)
    monkeypatch.setattr(MlflowTracker, "BACKOFF", 0.05)
    run = tmp_path / "run"
    cfg = _mlflow_cfg(tiny_config, run, "http://127.0.0.1:9", 10)  # discard port: refused
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="albertkit"):
        trainer = AlbertTrainer(cfg).fit()
    assert trainer.summary["status"] == "completed" and trainer.summary["step"] == 10
    assert time.perf_counter() - started < 120
    warnings = [r.getMessage() for r in caplog.records if "MLflow" in r.getMessage()]
    assert warnings and all("training goes on" in w for w in warnings), warnings
    assert not (run / "mlflow_run.json").exists()


def test_mlflow_settings_refuse_credentials(tiny_config):
    with pytest.raises(ConfigError, match="password"):
        tiny_config(logging={"mlflow": {"tracking_uri": "https://me:pw@mlflow.example.com"}})


def test_sagemaker_mlflow_uri_reaches_the_job_config(tiny_config):
    from albertkit.sagemaker.config import SageMakerConfig
    from albertkit.sagemaker.plan import transported_config

    arn = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/team"
    cfg = tiny_config(run_dir="runs/x")
    sm = SageMakerConfig(role_arn="arn:aws:iam::123456789012:role/r", bucket="my-bucket",
                         image_uri="123456789012.dkr.ecr.eu-west-1.amazonaws.com/a:1",
                         mlflow_tracking_uri=arn)
    shipped = transported_config(cfg, sm)
    assert isinstance(shipped, TrainerConfig)
    assert shipped.logging.mlflow is not None and shipped.logging.mlflow.tracking_uri == arn
    for bad in ("/tmp/mlruns", "https://u:p@host/mlflow"):
        with pytest.raises(ValueError, match="mlflow_tracking_uri"):
            SageMakerConfig(role_arn="arn:aws:iam::123456789012:role/r", bucket="my-bucket",
                            mlflow_tracking_uri=bad)
