"""`albertkit report` on hand-built run directories and benchmark files (no TensorFlow).

The run directories are written with albertkit's own ``RunLogger`` (TensorBoard off), so
the fixtures follow the ``metrics.jsonl`` contract of ``albertkit.training.run_logger``. The SQuAD v2.0
threshold curve is checked against the official metric evaluated afresh at every threshold.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

import pytest
import yaml
from PIL import Image

from albertkit.cli.report import add_report_parser
from albertkit.errors import ReportError
from albertkit.perf import BenchmarkResult, BenchmarkSettings
from albertkit.report import (
    load_series,
    read_benchmark,
    write_benchmark_report,
    write_run_report,
)
from albertkit.tasks import squad_metrics as sm
from albertkit.training.run_logger import RunLogger

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        assert im.format == "PNG"
        w, h = im.size
        assert w > 200 and h > 100, (path, im.size)
        # not a blank canvas: a chart has many distinct colours (lines, text, grid)
        assert len(im.convert("RGB").getcolors(maxcolors=1 << 16) or range(1 << 16)) > 20
    return w, h


def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="albertkit")
    add_report_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- fixtures
def make_pretraining_run(run_dir: Path, steps: int = 100, resumed_at: int | None = 60,
                         loss_scale: bool = False) -> dict:
    """A run dir shaped like the trainer's: config.yaml, model_spec.json, metrics.jsonl,
    summary.json. With ``resumed_at`` the steps after it are logged twice (a resumed run)."""
    rng = random.Random(0)
    run_dir.mkdir(parents=True)
    cfg = {"run_dir": str(run_dir), "model": {"size": "tiny"},
           "data": {"kind": "synthetic", "seq_length": 64},
           "optimizer": {"kind": "lamb", "learning_rate": 0.001},
           "runtime": {"precision": "mixed_float16" if loss_scale else "float32", "xla": True,
                       "micro_batch_size": 8, "global_batch_size": 16}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    (run_dir / "model_spec.json").write_text(json.dumps(
        {"vocab_size": 3000, "embedding_size": 64, "hidden_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 2}))

    def train(step: int, offset: float = 0.0) -> dict:
        frac = step / steps
        return {"loss": 8.0 * math.exp(-2 * frac) + 2 + offset + rng.uniform(-.1, .1),
                "mlm_loss": 7.3 * math.exp(-2 * frac) + 1.5 + offset,
                "mlm_accuracy": 0.05 + 0.3 * frac, "sop_loss": 0.69 - 0.2 * frac,
                "sop_accuracy": 0.5 + 0.3 * frac, "grad_norm": 3.0 * math.exp(-frac) + 0.5,
                "skipped_steps": 0.0, "learning_rate": 1e-3 * min(1.0, step / 20) * (1 - frac),
                "seq_per_s": 300 + rng.uniform(-20, 20),
                **({"loss_scale": 2.0 ** (15 - step // 40)} if loss_scale else {})}

    def evaluate(step: int) -> dict:
        frac = step / steps
        return {"loss": 8.5 * math.exp(-2 * frac) + 2.2, "mlm_accuracy": 0.04 + 0.28 * frac,
                "sop_accuracy": 0.5 + 0.25 * frac, "mlm_baseline_accuracy": 0.054,
                "eval_batches": 4.0}

    log = RunLogger(run_dir, tensorboard=False)
    last = steps if resumed_at is None else resumed_at + 15  # killed 15 steps after a ckpt
    for step in range(10, last + 1, 10):
        log.scalars(step, train(step, offset=0.5 if resumed_at and step > resumed_at else 0),
                    echo=False)
        if step % 20 == 0:
            log.scalars(step, evaluate(step), kind="eval", echo=False)
    if resumed_at is not None:
        for step in range(resumed_at + 10, steps + 1, 10):
            log.scalars(step, train(step), echo=False)
            if step % 20 == 0:
                log.scalars(step, evaluate(step), kind="eval", echo=False)
    log.close()
    summary = {"task": "pretraining", "status": "completed", "step": steps, "max_steps": steps,
               "resumed_from_step": resumed_at or 0, "train": train(steps),
               "eval": evaluate(steps),
               "best": {"metric": "loss", "value": 2.3456, "step": steps, "path": "x"},
               "skipped_steps": 0, "wall_seconds": 83.5, "sequences_per_second": 301.25,
               "global_batch_size": 16, "accumulation_steps": 2, "replicas": 1,
               "parameters": 1234567, "last_checkpoint": "x"}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


SQUAD_QAS = [  # id, gold answers (empty = unanswerable), best span, null odds
    ("q1", ["Denver Broncos"], "Denver Broncos", -4.0),
    ("q2", ["Santa Clara"], "Santa Clara, California", -1.5),
    ("q3", ["1966"], "the 1960s", 0.7),
    ("q4", [], "Levi's Stadium", -2.5),
    ("q5", [], "golden", 1.2),
    ("q6", [], "February 7", 3.0),
    ("q7", ["gold"], "", 1e6),  # no valid span at all: the sentinel of tasks/squad.py
    ("q8", ["Super Bowl 50"], "Super Bowl", 2.2),
]


def _squad_dataset() -> dict:
    qas = [{"id": q, "question": "?", "is_impossible": not gold,
            "answers": [{"text": a, "answer_start": 0} for a in gold]}
           for q, gold, _, _ in SQUAD_QAS]
    return {"version": "v2.0", "data": [{"title": "SB50", "paragraphs": [
        {"context": "Super Bowl 50 ...", "qas": qas}]}]}


def make_squad_run(run_dir: Path, eval_file: Path, threshold: float = 0.0) -> None:
    run_dir.mkdir(parents=True)
    eval_file.write_text(json.dumps(_squad_dataset()))
    cfg = {"run_dir": str(run_dir), "model": {"size": "tiny"},
           "data": {"kind": "squad", "version": "2.0", "train_file": str(eval_file),
                    "eval_file": str(eval_file), "tokenizer": "tok",
                    "null_score_diff_threshold": threshold},
           "optimizer": {"kind": "adamw", "learning_rate": 3e-5}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    ev = run_dir / "squad_eval"
    ev.mkdir()
    nbest, preds, odds = {}, {}, {}
    for q, _, best, na in SQUAD_QAS:
        entries = [{"text": best, "probability": 0.6, "start_logit": 1.0, "end_logit": 1.0},
                   {"text": "", "probability": 0.3, "start_logit": 0.5, "end_logit": 0.5},
                   {"text": "other words", "probability": 0.1, "start_logit": 0., "end_logit": 0.}]
        if na > 0:  # the null answer ranks first in the n-best list
            entries[0], entries[1] = entries[1], entries[0]
        nbest[q] = [e for e in entries if e["text"] or not best] if best else entries[1:2]
        odds[q] = na
        preds[q] = "" if na > threshold else best
    (ev / "nbest_predictions.json").write_text(json.dumps(nbest))
    (ev / "null_odds.json").write_text(json.dumps(odds))
    (ev / "predictions.json").write_text(json.dumps(preds))
    gold = sm.gold_from_dataset(_squad_dataset(), "2.0")
    best_non_null = {q: b for q, _, b, _ in SQUAD_QAS}
    official = sm.evaluate_v2(gold, best_non_null, odds, na_prob_thresh=threshold)
    (ev / "eval_results.json").write_text(json.dumps(official))
    log = RunLogger(run_dir, tensorboard=False)
    for step, scale in ((100, 0.6), (200, 0.85), (300, 1.0)):
        log.scalars(step, {"loss": 3.0 / scale, "span_accuracy": 0.3 * scale,
                           "learning_rate": 3e-5 * (1 - step / 300), "seq_per_s": 40.0,
                           "grad_norm": 2.0}, echo=False)
        log.scalars(step, {k: v * scale if k in ("exact", "f1", "best_exact", "best_f1") else v
                           for k, v in official.items()}, kind="eval", echo=False)
    log.close()
    (run_dir / "summary.json").write_text(json.dumps(
        {"task": "squad", "status": "completed", "step": 300, "max_steps": 300,
         "train": {"loss": 3.0}, "eval": official, "wall_seconds": 4000.0,
         "sequences_per_second": 40.0, "global_batch_size": 48, "accumulation_steps": 2,
         "replicas": 1, "parameters": 11683584}))


# --------------------------------------------------------------------------- run report
def test_pretraining_report_writes_valid_pngs_and_summary(tmp_path):
    run = tmp_path / "run"
    summary = make_pretraining_run(run, loss_scale=True)
    report = write_run_report(run)
    assert report.out_dir == run / "report"
    assert list(report.charts) == ["loss", "accuracy", "learning_rate", "throughput",
                                   "grad_norm"]
    for path in report.charts.values():
        assert path.parent == report.out_dir
        _check_png(path)
    md = report.markdown.read_text()
    for path in report.charts.values():
        assert f"]({path.name})" in md  # embedded, relative to report.md
    # the key numbers of summary.json
    assert "**pretraining**" in md and "**completed** at step 100 of 100" in md
    assert "301.2 sequences/s" in md or "301.3 sequences/s" in md
    assert "1,234,567" in md
    assert "| wall time | 83.5 s |" in md
    assert "loss = 2.3456 at step 100" in md
    assert "resumed from step | 60" in md
    assert f"| mlm_accuracy | {summary['train']['mlm_accuracy']:.4f} | " \
           f"{summary['eval']['mlm_accuracy']:.4f} |" in md
    assert "layers 2, hidden 128" in md
    assert "mixed_float16, XLA on" in md
    assert not list(report.out_dir.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_resumed_steps_keep_the_last_record(tmp_path):
    run = tmp_path / "run"
    make_pretraining_run(run, resumed_at=60)
    series = load_series(run)
    steps, losses = series["train"]["loss"]
    assert steps == sorted(set(steps)) == list(range(10, 101, 10))
    # steps 70 (logged twice) hold the second run's value (no +0.5 offset)
    raw = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    at70 = [r["loss"] for r in raw if r["kind"] == "train" and r["step"] == 70]
    assert len(at70) == 2 and losses[steps.index(70)] == at70[-1] != at70[0]
    assert series["eval"]["mlm_accuracy"][0] == [20, 40, 60, 80, 100]


def test_report_without_summary_uses_last_logged_values(tmp_path):
    run = tmp_path / "run"
    make_pretraining_run(run, resumed_at=None)
    (run / "summary.json").unlink()
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"kind": "train", "step": 110, "loss": 1.')  # torn line of a killed run
    report = write_run_report(run, tmp_path / "out")
    md = report.markdown.read_text()
    assert "last logged step 100" in md
    assert any("no summary.json" in n for n in report.notes)
    assert "## Notes" in md and "no summary.json" in md
    assert (tmp_path / "out" / "loss.png").is_file()


def test_report_errors_name_the_problem(tmp_path):
    with pytest.raises(ReportError, match="run directory not found"):
        write_run_report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="neither metrics.jsonl nor summary.json"):
        write_run_report(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"summary\.json: line 1, column 2: malformed JSON in the summary"):
        write_run_report(bad)


def test_missing_matplotlib_gives_install_hint(tmp_path, monkeypatch):
    import builtins

    run = tmp_path / "run"
    make_pretraining_run(run)
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ReportError, match=r"pip install -e '\.\[report\]' in a clone of the albertkit repository"):
        write_run_report(run)


# --------------------------------------------------------------------------- SQuAD
def test_squad_threshold_curve_matches_the_official_metric_at_every_threshold():
    rng = random.Random(1)
    qas = []
    for i in range(60):
        answerable = rng.random() < 0.5
        gold = [rng.choice(["red fox", "blue whale", "the green tree"])] if answerable else []
        best = rng.choice(["red fox", "blue", "a green tree", "whale", ""])
        qas.append((f"q{i}", gold, best, round(rng.uniform(-5, 5), 3)))
    qas[0] = ("q0", qas[0][1], qas[0][2], qas[1][3])  # a tie
    dataset = {"version": "v2.0", "data": [{"paragraphs": [{"context": "c", "qas": [
        {"id": q, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in g]}
        for q, g, _, _ in qas]}]}]}
    gold = sm.gold_from_dataset(dataset, "2.0")
    best = {q: b for q, _, b, _ in qas}
    odds = {q: na for q, _, _, na in qas}
    curve = sm.threshold_curve(gold, best, odds)
    assert len(curve["threshold"]) == len(set(odds.values())) + 1  # + "answer nothing"
    assert curve["threshold"] == sorted(curve["threshold"])
    for t, em, f1 in zip(curve["threshold"], curve["exact"], curve["f1"], strict=True):
        ref = sm.evaluate_v2(gold, best, odds, na_prob_thresh=t)
        assert em == pytest.approx(ref["exact"], abs=1e-9)
        assert f1 == pytest.approx(ref["f1"], abs=1e-9)
    # its maximum is the official best_f1 (no ties at the optimum here)
    ref = sm.evaluate_v2(gold, best, odds)
    assert max(curve["f1"]) == pytest.approx(ref["best_f1"], abs=1e-9)
    assert max(curve["exact"]) == pytest.approx(ref["best_exact"], abs=1e-9)


def test_squad_report_draws_em_f1_and_threshold_curve(tmp_path):
    run = tmp_path / "squad-run"
    make_squad_run(run, tmp_path / "dev-v2.0.json", threshold=0.5)
    args = _cli(["report", str(run), "--out", str(tmp_path / "rep")])
    assert args.func(args) == 0
    out = tmp_path / "rep"
    for name in ("loss", "accuracy", "learning_rate", "throughput", "squad_em_f1",
                 "squad_threshold"):
        _check_png(out / f"{name}.png")
    curve = json.loads((out / "squad_threshold.json").read_text())
    official = json.loads((run / "squad_eval" / "eval_results.json").read_text())
    assert max(curve["f1"]) == pytest.approx(official["best_f1"])
    assert 1e6 in curve["threshold"]  # the sentinel question is scored...
    md = (out / "report.md").read_text()
    assert "![SQuAD v2.0 no-answer threshold](squad_threshold.png)" in md
    assert "![SQuAD EM / F1](squad_em_f1.png)" in md
    # by hand: answering in null-odds order q1 (+1), q4 (-1), q2 (+0.8: "Santa Clara" in
    # "Santa Clara, California"), q3 (+0), q5 (-1), q8 (+0.8), q6 (-1), q7 (0) from 3 of 8
    # (the unanswerable ones) gives F1 totals 4, 3, 3.8, 3.8, 2.8, 3.6, 2.6, 2.6
    f1_at = dict(zip(curve["threshold"], curve["f1"], strict=True))
    assert [f1_at[t] for t in (-4.0, -2.5, -1.5, 0.7, 1.2, 2.2, 3.0, 1e6)] == pytest.approx(
        [50.0, 37.5, 47.5, 47.5, 35.0, 45.0, 32.5, 32.5])
    assert official["best_f1"] == pytest.approx(50.0) and official["best_f1_thresh"] == -4.0
    assert "| best_f1 |  | 50 |" in md and "| best_f1_thresh |  | -4 |" in md
    assert "## Notes" not in md  # nothing was skipped


def test_squad_threshold_curve_skipped_with_a_note_when_data_is_missing(tmp_path):
    run = tmp_path / "squad-run"
    eval_file = tmp_path / "dev.json"
    make_squad_run(run, eval_file)
    eval_file.unlink()
    report = write_run_report(run)
    assert "squad_threshold" not in report.charts and "squad_em_f1" in report.charts
    assert any("eval file was not found" in n and "--squad-data" in n for n in report.notes)
    assert "--squad-data" in report.markdown.read_text()
    # ... and drawn again when the file is given explicitly
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps(_squad_dataset()))
    assert "squad_threshold" in write_run_report(run, squad_data=other).charts


# --------------------------------------------------------------------------- benchmark
def _framework_result(framework: str, seq_per_s: float, **extra) -> dict:
    """One framework's figures as `albertkit benchmark` records them (made-up values)."""
    step = 8 / seq_per_s
    return {"framework": framework, "params": 1_000_000, "baseline_rss": 2**28,
            "build_s": 1.0, "first_step_s": 2.0, "threads": {"intra_op": 2, "inter_op": 2},
            "device": "CPU", "memory_method": "VmHWM", "versions": {},
            "step_s_median": step, "step_s_min": step, "step_s_max": step, "step_s_q1": step,
            "step_s_q3": step, "spread_iqr_pct": 0.0, "sequences_per_s": seq_per_s,
            "sequences_per_s_min": seq_per_s, "sequences_per_s_max": seq_per_s,
            "step_times_s": [step, step], "peak_bytes": 2**30, "training_bytes": 2**29,
            "cpu_s_per_step": 1.0, "matmul_flops_per_s": 1e11,
            "matmul_flops_per_s_rounds": [1e11], "model_flops_per_s": 1e10, "mfu": 0.1,
            "mfu_rounds": [0.1], **extra}


def _write_result(path: Path, settings: BenchmarkSettings, results: dict[str, float],
                  data_parallel: dict[int, tuple[float, float]] | None = None,
                  **extra) -> Path:
    """A file in the format `albertkit benchmark --json` writes (its own typed model)."""
    result = BenchmarkResult.model_validate({
        "settings": settings.model_dump(), "spec": settings.spec.model_dump(),
        "machine": {"platform": "Linux", "python": "3.12", "cpus": 2,
                    "load_avg": [1.0, 1.0, 1.0]},
        "model_flops_per_sequence": 1e9, "model_flops_parts_forward": {"layers": 3e8},
        "results": {f: _framework_result(f, thr) for f, thr in results.items()},
        "planner": {"predicted_bytes": 2**29, "measured_tensor_peak_bytes": 2**29,
                    "predicted_over_measured": 1.0, "estimate": {}},
        "data_parallel": {str(n): _framework_result("albertkit", thr, processes=n,
                                                    scaling_efficiency=eff)
                          for n, (thr, eff) in (data_parallel or {}).items()},
        **extra})
    path.write_text(result.to_json())
    return path


def _benchmark_files(folder: Path) -> list[Path]:
    files = []
    for seq, base in ((128, 400.0), (256, 190.0), (512, 85.0)):
        mixed = BenchmarkSettings(size="base", seq_length=seq, precision="mixed_float16",
                                  xla=True, processes=[1, 2, 4, 8])
        files.append(_write_result(
            folder / f"mixed-{seq}.json", mixed, {"albertkit": base},
            {procs: (base * procs * eff, eff) for procs, eff in ((2, 0.97), (4, 0.93),
                                                                 (8, 0.9))}))
        fp32 = BenchmarkSettings(size="base", seq_length=seq, precision="float32", xla=False)
        files.append(_write_result(folder / f"fp32-{seq}.json", fp32, {"albertkit": base / 3}))
    return files


def test_benchmark_report(tmp_path):
    files = _benchmark_files(tmp_path)
    points = read_benchmark(files)
    assert len(points) == 15
    assert {p.label for p in points} == {"mixed_float16 XLA", "float32 no XLA"}
    args = _cli(["report", "--benchmark", *map(str, files)])
    assert args.func(args) == 0
    out = tmp_path / "benchmark_report"
    _check_png(out / "throughput_vs_seq_length.png")
    _check_png(out / "scaling_efficiency.png")
    md = (out / "benchmark.md").read_text()
    assert "](throughput_vs_seq_length.png)" in md and "](scaling_efficiency.png)" in md
    # the efficiency the benchmark recorded: 0.93 at 4 processes
    assert "| mixed_float16 XLA | 128 | 4 | 1,488.0 | 93.0% |" in md


def _albertkit_benchmark_file(path: Path, seq: int, ak: float, hf: float) -> Path:
    """One `albertkit benchmark --compare hf-pytorch --json` file."""
    settings = BenchmarkSettings(size="tiny", seq_length=seq, compare=["hf-pytorch"])
    return _write_result(path, settings, {"albertkit": ak, "hf-pytorch": hf},
                         ratios_vs_hf={"sequences_per_s": ak / hf,
                                       "sequences_per_s_worst_case": ak / hf,
                                       "sequences_per_s_best_case": ak / hf,
                                       "cpu_s_per_step": 1.0, "peak_memory": 1.0,
                                       "training_memory": 1.0})


def test_benchmark_report_from_albertkit_benchmark_files(tmp_path):
    files = [_albertkit_benchmark_file(tmp_path / f"b{seq}.json", seq, ak, hf)
             for seq, ak, hf in ((128, 210.0, 120.0), (256, 95.0, 60.0), (512, 40.0, 27.0))]
    points = read_benchmark(files)
    assert sorted((p.label, p.seq_length, p.processes, p.throughput) for p in points) == [
        ("albertkit", 128, 1, 210.0), ("albertkit", 256, 1, 95.0), ("albertkit", 512, 1, 40.0),
        ("hf-pytorch", 128, 1, 120.0), ("hf-pytorch", 256, 1, 60.0),
        ("hf-pytorch", 512, 1, 27.0)]
    args = _cli(["report", "--benchmark", *map(str, files)])
    assert args.func(args) == 0
    out = tmp_path / "benchmark_report"
    _check_png(out / "throughput_vs_seq_length.png")
    md = (out / "benchmark.md").read_text()
    assert "| albertkit | 256 | 1 | 95.0 |  |" in md and "| hf-pytorch | 512 | 1 | 27.0 |" in md
    assert "scaling_efficiency.png skipped" in md


def test_benchmark_report_default_output_beside_one_file(tmp_path):
    res = _albertkit_benchmark_file(tmp_path / "bench.json", 128, 210.0, 120.0)
    args = _cli(["report", "--benchmark", str(res)])
    assert args.func(args) == 0
    _check_png(tmp_path / "bench_report" / "throughput_vs_seq_length.png")


def test_benchmark_reader_reads_albertkit_results_only(tmp_path):
    path = _albertkit_benchmark_file(tmp_path / "b.json", 128, 120.0, 60.0)
    report = write_benchmark_report(path, tmp_path / "o")
    assert "throughput_vs_seq_length" in report.charts
    assert "scaling_efficiency" not in report.charts
    assert any("one process count" in n for n in report.notes)
    # anything else is an error that names the file and what is wrong, never a guess
    path.write_text(json.dumps({"rows": 3}))
    with pytest.raises(ReportError, match=r"b.json: not an `albertkit benchmark --json` "
                                          r"result: settings: Field required"):
        read_benchmark(path)
    path.write_text(json.dumps([{"seq_length": 128, "seq_per_s": 120.0}]))
    with pytest.raises(ReportError, match="not an `albertkit benchmark --json` result"):
        read_benchmark(path)
    with pytest.raises(ReportError, match="benchmark results not found"):
        read_benchmark(tmp_path / "missing.json")


def test_cli_needs_exactly_one_source(tmp_path):
    args = _cli(["report"])
    with pytest.raises(ReportError, match="exactly one"):
        args.func(args)


def test_classification_report_draws_eval_scores(tmp_path):
    run = tmp_path / "glue"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"data": {
        "kind": "classification", "task": "mrpc", "train_file": "t.tsv", "tokenizer": "tok"}}))
    log = RunLogger(run, tensorboard=False)
    for step in (50, 100, 150):
        log.scalars(step, {"loss": 0.7 - step / 1000, "accuracy": 0.6 + step / 1000,
                           "learning_rate": 2e-5, "seq_per_s": 90.0, "grad_norm": 1.0},
                    echo=False)
        log.scalars(step, {"loss": 0.65, "accuracy": 0.68 + step / 2000, "f1": 0.8,
                           "mcc": 0.3 + step / 1000, "accuracy_f1": 0.75, "examples": 408.0},
                    kind="eval", echo=False)
    log.close()
    report = write_run_report(run)
    assert "eval_scores" in report.charts and "squad_em_f1" not in report.charts
    _check_png(report.charts["eval_scores"])
    md = report.markdown.read_text()
    assert "task **classification**" in md and "last logged step 150" in md
    assert "| mcc |  | 0.4500 |" in md
