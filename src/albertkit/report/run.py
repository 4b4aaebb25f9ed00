"""``albertkit report RUN_DIR``: a run directory as PNG charts plus Markdown.

It reads what every run directory holds (``metrics.jsonl``, ``summary.json``,
``config.yaml``, ``model_spec.json`` and, for SQuAD, ``squad_eval/``) and writes into
``DIR`` (default ``RUN_DIR/report``):

* ``loss.png``, ``accuracy.png`` (MLM/SOP or task accuracy, train and eval, with the
  most-frequent-token baseline), ``learning_rate.png``, ``throughput.png`` (sequences/s),
  ``grad_norm.png`` (with the loss scale under mixed float16);
* fine-tuning: ``squad_em_f1.png`` (EM/F1 over steps) or ``eval_scores.png`` (GLUE
  scores), and for SQuAD v2.0 ``squad_threshold.png``: EM and F1 as functions of the
  no-answer threshold, computed with the official metric
  (:func:`albertkit.tasks.squad_metrics.threshold_curve`) from ``squad_eval/null_odds.json``,
  ``squad_eval/nbest_predictions.json`` and the eval file named in ``config.yaml`` (the
  curve's values also go to ``squad_threshold.json``);
* ``report.md``: the key numbers of ``summary.json`` and the charts.

Example (a run directory with four logged steps and nothing else):
    >>> run = Path("run")
    >>> run.mkdir()
    >>> records = [{"kind": "train", "step": s, "loss": 6.0 / s, "learning_rate": 1e-3}
    ...            for s in (1, 2, 3, 4)]
    >>> _ = (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in records))
    >>> report = write_run_report(run)
    >>> list(report.charts), str(report.markdown)
    (['loss', 'learning_rate'], 'run/report/report.md')
    >>> for note in report.notes:
    ...     print(note)
    no summary.json: the run is still going or was killed; the numbers below are the last
    logged values
    accuracy.png skipped: no accuracy values logged
    throughput.png skipped: no seq_per_s logged

    A training run's logs also give the ``accuracy``, ``throughput`` and ``grad_norm``
    charts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from albertkit.config import TASK_OF_KIND
from albertkit.fileio import atomic_write_text
from albertkit.report.charts import (
    COLORS,
    Series,
    draw_grad_norm,
    draw_lines,
    draw_stacked,
    draw_threshold,
    finite,
)
from albertkit.report.output import (
    Report,
    ReportError,
    charts_markdown,
    notes_markdown,
    read_json,
)
from albertkit.training.run_logger import read_metrics

# Metric keys in the order a reader looks for them; anything else follows alphabetically.
_KEY_ORDER = (
    "loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy", "mlm_baseline_accuracy",
    "mlm_accuracy_over_baseline", "accuracy", "span_accuracy", "start_accuracy",
    "end_accuracy", "exact", "exact_match", "f1", "mcc", "pearson", "spearman",
    "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
    "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "learning_rate", "seq_per_s",
    "grad_norm", "loss_scale", "skipped_steps",
)



# =========================================================================== run data
def load_series(run_dir: Path) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """``metrics.jsonl`` as ``{kind: {metric: (steps, values)}}``, sorted by step.

    A resumed run removes the records after its checkpoint's step before logging them
    again; files of older albertkit versions can still hold both: the last record of a
    ``(kind, step)`` wins, so the curves show the run that produced the final weights.
    """
    latest: dict[str, dict[int, dict[str, float]]] = {}
    for rec in read_metrics(run_dir):
        if not isinstance(rec, dict) or not isinstance(rec.get("step"), int | float):
            continue
        kind = str(rec.get("kind", "train"))
        values = {k: float(v) for k, v in rec.items()
                  if k not in ("kind", "step") and isinstance(v, int | float)
                  and not isinstance(v, bool)}
        latest.setdefault(kind, {})[int(rec["step"])] = values
    out: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
    for kind, by_step in latest.items():
        metrics: dict[str, tuple[list[int], list[float]]] = {}
        for step in sorted(by_step):
            for k, v in by_step[step].items():
                xs, ys = metrics.setdefault(k, ([], []))
                xs.append(step)
                ys.append(v)
        out[kind] = metrics
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: unreadable config: {e}") from None
    return raw if isinstance(raw, dict) else {}


def _series(data: dict[str, dict[str, tuple[list[int], list[float]]]], kind: str, key: str,
            label: str, style: str | None = None, color: str | None = None) -> Series | None:
    got = data.get(kind, {}).get(key)
    if not got:
        return None
    return Series(label, tuple(got[0]), tuple(got[1]), style or kind, color)


def _present(items: Iterable[Series | None]) -> list[Series]:
    return [s for s in items if s is not None]


# =========================================================================== run report
def write_run_report(run_dir: str | Path, out_dir: str | Path | None = None,
                     squad_data: str | Path | None = None) -> Report:
    """Charts and ``report.md`` for one run directory.

    Args:
        run_dir: an albertkit run directory (``metrics.jsonl`` and/or ``summary.json``).
        out_dir: where to write (default ``run_dir/report``).
        squad_data: the SQuAD v2.0 eval file for the threshold curve (default: the
            ``data.eval_file`` of ``run_dir/config.yaml``).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"run directory not found: {run_dir}")
    out = Path(out_dir) if out_dir is not None else run_dir / "report"
    summary = read_json(run_dir / "summary.json", "summary")
    summary = summary if isinstance(summary, dict) else None
    data = load_series(run_dir)
    if summary is None and not data:
        raise ReportError(f"{run_dir}: neither metrics.jsonl nor summary.json holds anything to "
                          "report (is this an albertkit run directory?)")
    config = _read_yaml(run_dir / "config.yaml")
    task = (summary or {}).get("task") or _task_of(config)
    report = Report(out, out / "report.md")
    if summary is None:
        report.notes.append("no summary.json: the run is still going or was killed; the "
                            "numbers below are the last logged values")
    if not data:
        report.notes.append(f"{run_dir / 'metrics.jsonl'} is missing or empty: no curves")
    out.mkdir(parents=True, exist_ok=True)
    charts: list[tuple[str, str, Path | None]] = []  # (name, title, path)

    def chart(name: str, title: str, drawn: bool, why: str = "") -> None:
        if drawn:
            report.charts[name] = out / f"{name}.png"
            charts.append((name, title, out / f"{name}.png"))
        elif why:
            report.notes.append(f"{name}.png skipped: {why}")

    # ---- loss
    loss = _present([
        _series(data, "train", "loss", "train loss", color="tab:blue"),
        _series(data, "eval", "loss", "eval loss", color="tab:blue"),
        _series(data, "train", "mlm_loss", "train MLM loss", color="tab:orange"),
        _series(data, "eval", "mlm_loss", "eval MLM loss", color="tab:orange"),
        _series(data, "train", "sop_loss", "train SOP loss", color="tab:green"),
        _series(data, "eval", "sop_loss", "eval SOP loss", color="tab:green"),
    ])
    chart("loss", "Loss", draw_lines(out / "loss.png", "Loss", "step", "loss", loss),
          "no loss values logged")

    # ---- accuracy (MLM/SOP for pretraining; the task's accuracies for fine-tuning)
    acc_keys = [("mlm_accuracy", "MLM accuracy"), ("sop_accuracy", "SOP accuracy"),
                ("accuracy", "accuracy"), ("span_accuracy", "span accuracy"),
                ("start_accuracy", "start accuracy"), ("end_accuracy", "end accuracy")]
    acc: list[Series | None] = []
    for i, (key, label) in enumerate(acc_keys):
        color = COLORS[i]
        acc += [_series(data, "train", key, f"train {label}", color=color),
                _series(data, "eval", key, f"eval {label}", color=color)]
    acc.append(_series(data, "eval", "mlm_baseline_accuracy",
                       "MLM baseline (most frequent token)", "baseline", "black"))
    chart("accuracy", "Accuracy",
          draw_lines(out / "accuracy.png", "Accuracy", "step", "accuracy", _present(acc)),
          "no accuracy values logged")

    # ---- learning rate, throughput, gradient norm
    lr = _present([_series(data, "train", "learning_rate", "learning rate")])
    chart("learning_rate", "Learning rate",
          draw_lines(out / "learning_rate.png", "Learning rate", "step", "learning rate", lr),
          "no learning_rate logged")
    thr = _present([_series(data, "train", "seq_per_s", "sequences/s")])
    title = "Training throughput"
    if thr:
        ys = [v for v in thr[0].y if finite(v)]
        med = sorted(ys)[len(ys) // 2]
        title += f" (median {med:,.1f} sequences/s)"
    chart("throughput", "Throughput",
          draw_lines(out / "throughput.png", title, "step", "sequences / second", thr,
                     y_from_zero=True),
          "no seq_per_s logged")
    gn = _present([_series(data, "train", "grad_norm", "gradient norm (before clipping)")])
    if gn:
        drawn = draw_grad_norm(out / "grad_norm.png", gn[0],
                               _series(data, "train", "loss_scale", "loss scale"))
        chart("grad_norm", "Gradient norm", drawn)

    # ---- where the time went (logging.breakdown) and utilisation per rank
    timing = data.get("time", {})
    shares = [(k, label) for k, label in TIME_PARTS if k in timing]
    if shares:
        steps = timing[shares[0][0]][0]
        chart("time_breakdown", "Where the time went",
              draw_stacked(out / "time_breakdown.png", "Where the step time went (per logging "
                           "window)", steps,
                           [(label, _aligned(timing[k], steps)) for k, label in shares]),
              "no time breakdown logged")
        util = _present(_series(data, "time", k, _util_label(k), "train", COLORS[i % 10])
                        for i, k in enumerate(sorted(k for k in timing
                                                     if k.endswith(("_cpu_util", "_gpu_util")))))
        chart("utilisation", "Utilisation per rank",
              draw_lines(out / "utilisation.png", "Utilisation per rank (window mean)", "step",
                         "utilisation (0-1)", util, y_from_zero=True, legend=True),
              "no utilisation logged")

    # ---- fine-tuning scores
    if task == "squad" or "exact" in data.get("eval", {}) or "exact_match" in data.get("eval", {}):
        keys = [("exact", "EM"), ("exact_match", "EM"), ("f1", "F1"), ("best_exact", "best EM"),
                ("best_f1", "best F1"), ("HasAns_f1", "F1 (answerable)"),
                ("NoAns_f1", "F1 (unanswerable)")]
        sq = _present(_series(data, "eval", k, label, "eval", COLORS[i])
                      for i, (k, label) in enumerate(keys))
        chart("squad_em_f1", "SQuAD EM / F1",
              draw_lines(out / "squad_em_f1.png", "SQuAD exact match and F1 (eval)", "step",
                         "score (%)", sq),
              "no SQuAD evaluation logged")
        _threshold_chart(run_dir, out, config, squad_data, report, charts)
    elif task == "classification":
        keys = [("accuracy", "accuracy"), ("f1", "F1"), ("mcc", "Matthews corr."),
                ("accuracy_f1", "(accuracy + F1) / 2"), ("pearson", "Pearson"),
                ("spearman", "Spearman"), ("pearson_spearman", "(Pearson + Spearman) / 2")]
        sc = _present(_series(data, "eval", k, label, "eval", COLORS[i])
                      for i, (k, label) in enumerate(keys))
        chart("eval_scores", "Evaluation scores",
              draw_lines(out / "eval_scores.png", "Evaluation scores", "step", "score", sc),
              "no evaluation logged")

    atomic_write_text(report.markdown,
                      _run_markdown(run_dir, task, summary, data, config, charts, report.notes))
    return report


TIME_PARTS = (("input_share", "waiting for input"), ("compute_share", "compute"),
              ("apply_share", "reduce + apply"), ("checkpoint_share", "checkpoints"),
              ("eval_share", "evaluation"), ("other_share", "other"),
              ("step_share", "step, not yet divided"))


def _aligned(series: tuple[list[int], list[float]], steps: list[int]) -> list[float]:
    by_step = dict(zip(series[0], series[1], strict=True))
    return [by_step.get(x, 0.0) for x in steps]


def _util_label(key: str) -> str:
    rank, _, what = key.partition("_")
    return f"{rank} {what.replace('_util', '').upper()}"


def bottleneck(summary: dict[str, Any] | None,
               data: dict[str, dict[str, tuple[list[int], list[float]]]]) -> str | None:
    """One sentence: where most of the run's time went, over all logged windows."""
    from albertkit.training.timing import breakdown_sentence

    timing = data.get("time", {})
    if not any(k in timing for k, _ in TIME_PARTS):
        return None
    # weight each window by its wall time per step (windows have equal step counts)
    walls = dict(zip(*timing["wall_s"], strict=True)) if "wall_s" in timing else {}
    totals: dict[str, float] = {}
    for k, _ in TIME_PARTS:
        if k in timing:
            totals[k] = sum(v * walls.get(x, 1.0) for x, v in zip(*timing[k], strict=True))
    whole = sum(totals.values()) or 1.0
    sentence = breakdown_sentence({k: v / whole for k, v in totals.items()})
    if (summary or {}).get("time", {}).get("input_bound"):
        sentence += " The run was input-bound in at least one window."
    return sentence


def _task_of(config: dict[str, Any]) -> str | None:
    kind = (config.get("data") or {}).get("kind") if isinstance(config.get("data"), dict) else None
    return TASK_OF_KIND.get(kind) if isinstance(kind, str) else None


# --------------------------------------------------------------------------- SQuAD v2.0
def _threshold_chart(run_dir: Path, out: Path, config: dict[str, Any],
                     squad_data: str | Path | None, report: Report,
                     charts: list[tuple[str, str, Path | None]]) -> None:
    from albertkit.tasks import squad_metrics

    data_cfg = config.get("data") if isinstance(config.get("data"), dict) else {}
    if str(data_cfg.get("version", "2.0")) == "1.1":
        report.notes.append("squad_threshold.png skipped: SQuAD v1.1 has no no-answer threshold")
        return
    ev = run_dir / "squad_eval"
    odds_path, nbest_path = ev / "null_odds.json", ev / "nbest_predictions.json"
    if not odds_path.is_file():
        report.notes.append(f"squad_threshold.png skipped: {odds_path} not found (written by "
                            "the SQuAD v2.0 evaluation)")
        return
    candidates: list[Path] = []
    if squad_data is not None:
        candidates = [Path(squad_data)]
    elif data_cfg.get("eval_file"):
        p = Path(str(data_cfg["eval_file"]))
        candidates = [p] if p.is_absolute() else [p, run_dir / p, run_dir.parent / p]
    gold_file = next((c for c in candidates if c.is_file()), None)
    if gold_file is None:
        where = ", ".join(str(c) for c in candidates) or "config.yaml names no data.eval_file"
        report.notes.append(f"squad_threshold.png skipped: the SQuAD eval file was not found "
                            f"({where}); pass --squad-data FILE")
        return
    try:
        dataset = squad_metrics.load_json(gold_file, "SQuAD data")
        gold = squad_metrics.gold_from_dataset(dataset, "2.0", str(gold_file))
        odds = squad_metrics.load_json(odds_path, "null odds")
        nbest = squad_metrics.load_json(nbest_path, "n-best predictions") \
            if nbest_path.is_file() else {}
        preds = squad_metrics.load_json(ev / "predictions.json", "predictions") \
            if (ev / "predictions.json").is_file() else {}
    except squad_metrics.SquadEvalError as e:
        report.notes.append(f"squad_threshold.png skipped: {e}")
        return
    best = _best_non_null(gold, nbest, preds)
    try:
        curve = squad_metrics.threshold_curve(gold, best, odds)
    except squad_metrics.SquadEvalError as e:
        report.notes.append(f"squad_threshold.png skipped: {e}")
        return
    atomic_write_text(out / "squad_threshold.json", json.dumps(
        {"eval_file": str(gold_file), **curve}, indent=2) + "\n")
    best_i = max(range(len(curve["f1"])), key=lambda i: (curve["f1"][i], -i))
    best_f1 = curve["f1"][best_i]
    configured = float(data_cfg.get("null_score_diff_threshold", 0.0) or 0.0)
    if draw_threshold(out / "squad_threshold.png", curve, configured, best_i):
        report.charts["squad_threshold"] = out / "squad_threshold.png"
        charts.append(("squad_threshold", "SQuAD v2.0 no-answer threshold",
                       out / "squad_threshold.png"))
    official = read_json(ev / "eval_results.json", "SQuAD eval results")
    if isinstance(official, dict) and finite(official.get("best_f1")) \
            and abs(float(official["best_f1"]) - best_f1) > 1e-6:
        report.notes.append(
            f"the threshold curve's best F1 ({best_f1:.4f}) differs from eval_results.json "
            f"best_f1 ({float(official['best_f1']):.4f}): equal null odds are scored together "
            "here, or the files come from different evaluations")


def _best_non_null(gold: dict[str, Any], nbest: Any, preds: Any) -> dict[str, str]:
    """Each question's best non-empty answer: the first non-empty n-best text (the list is
    sorted by score), else a non-empty ``predictions.json`` answer, else ""."""
    out: dict[str, str] = {}
    for q in gold:
        text = ""
        entries = nbest.get(q) if isinstance(nbest, dict) else None
        for e in entries or []:
            if isinstance(e, dict) and str(e.get("text", "")).strip():
                text = str(e["text"])
                break
        if not text and isinstance(preds, dict) and isinstance(preds.get(q), str):
            text = preds[q]
        out[q] = text
    return out


# --------------------------------------------------------------------------- Markdown
def _run_markdown(run_dir: Path, task: str | None, summary: dict[str, Any] | None,
                  data: dict[str, dict[str, tuple[list[int], list[float]]]],
                  config: dict[str, Any], charts: list[tuple[str, str, Path | None]],
                  notes: list[str]) -> str:
    s = summary or {}
    lines = [f"# Run report: `{run_dir.name or run_dir}`", ""]
    head = [f"Run directory `{run_dir}`"]
    if task:
        head.append(f"task **{task}**")
    if summary is not None:
        head.append(f"status **{s.get('status', '?')}** at step {s.get('step', '?')} of "
                    f"{s.get('max_steps', '?')}")
    else:
        last = max((xs[-1] for m in data.values() for xs, _ in m.values() if xs), default=None)
        head.append(f"last logged step {last}")
    lines += [" · ".join(head), "", "| | |", "|---|---|"]
    runtime = config.get("runtime") if isinstance(config.get("runtime"), dict) else {}
    rows: list[tuple[str, str]] = []
    if finite(s.get("wall_seconds")):
        rows.append(("wall time", _duration(float(s["wall_seconds"]))))
    if finite(s.get("sequences_per_second")):
        gb, accum = s.get("global_batch_size"), s.get("accumulation_steps")
        reps, micro = s.get("replicas"), runtime.get("micro_batch_size")
        detail = ""
        if gb and accum and reps:
            detail = (f" (global batch {gb} = micro-batch {micro or '?'} × {accum} accumulation "
                      f"× {reps} replica{'s' if reps != 1 else ''})")
        rows.append(("throughput", f"{float(s['sequences_per_second']):,.1f} sequences/s"
                     + detail))
    if isinstance(s.get("parameters"), int):
        rows.append(("parameters", f"{s['parameters']:,}"))
    model = _model_line(run_dir, config)
    if model:
        rows.append(("model", model))
    opt = config.get("optimizer") if isinstance(config.get("optimizer"), dict) else {}
    if opt:
        rows.append(("optimizer", f"{opt.get('kind', '?')}, peak learning rate "
                     f"{opt.get('learning_rate', '?')}"))
    if runtime:
        xla = runtime.get("xla", "auto")
        rows.append(("precision", f"{runtime.get('precision', '?')}, XLA "
                     f"{'auto' if xla == 'auto' else ('on' if xla else 'off')}"))
    best = s.get("best")
    if isinstance(best, dict) and "metric" in best:
        rows.append(("best checkpoint", f"{best['metric']} = {_num(best.get('value'))} at step "
                     f"{best.get('step')}"))
    if s.get("resumed_from_step"):
        rows.append(("resumed from step", str(s["resumed_from_step"])))
    if "skipped_steps" in s:
        rows.append(("skipped steps (non-finite)", str(s["skipped_steps"])))
    lines += [f"| {k} | {v} |" for k, v in rows] + [""]
    sentence = bottleneck(summary, data)
    if sentence:
        lines += ["## Bottleneck", "", sentence, ""]

    train = s.get("train") if isinstance(s.get("train"), dict) and s.get("train") else \
        _last(data.get("train", {}))
    ev = s.get("eval") if isinstance(s.get("eval"), dict) and s.get("eval") else \
        _last(data.get("eval", {}))
    keys = _ordered(set(train) | set(ev))
    if keys:
        lines += ["## Final metrics", "", "| metric | train | eval |", "|---|---|---|"]
        lines += [f"| {k} | {_num(train.get(k))} | {_num(ev.get(k))} |" for k in keys]
        lines.append("")
    lines += charts_markdown(charts) + notes_markdown(notes)
    return "\n".join(lines)


def _model_line(run_dir: Path, config: dict[str, Any]) -> str:
    spec = read_json(run_dir / "model_spec.json", "model spec")
    size = (config.get("model") or {}).get("size") if isinstance(config.get("model"), dict) \
        else None
    if not isinstance(spec, dict):
        return f"size {size}" if size else ""
    parts = [f"size {size}" if size else "custom"]
    for key, label in (("num_hidden_layers", "layers"), ("hidden_size", "hidden"),
                       ("embedding_size", "embedding"), ("num_attention_heads", "heads"),
                       ("vocab_size", "vocab")):
        if key in spec:
            parts.append(f"{label} {spec[key]}")
    return ", ".join(parts)


def _last(metrics: dict[str, tuple[list[int], list[float]]]) -> dict[str, float]:
    return {k: ys[-1] for k, (_, ys) in metrics.items() if ys}


def _ordered(keys: Iterable[str]) -> list[str]:
    keys = set(keys)
    first = [k for k in _KEY_ORDER if k in keys]
    return first + sorted(keys - set(first))


def _num(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v == int(v) and abs(v) < 1e9:
            return f"{int(v):,}"
        return f"{v:.4g}" if abs(v) < 1e-3 or abs(v) >= 1e4 else f"{v:.4f}"
    return str(v)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {sec:02d} s"


