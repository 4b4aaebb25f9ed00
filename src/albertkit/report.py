"""``albertkit report``: a run directory (or benchmark results) as PNG charts plus Markdown.

``albertkit report RUN_DIR [--out DIR]`` reads what every run directory holds
(``metrics.jsonl``, ``summary.json``, ``config.yaml``, ``model_spec.json`` and, for SQuAD,
``squad_eval/``) and writes into ``DIR`` (default ``RUN_DIR/report``):

* ``loss.png``, ``accuracy.png`` (MLM/SOP or task accuracy, train and eval, with the
  most-frequent-token baseline), ``learning_rate.png``, ``throughput.png`` (sequences/s),
  ``grad_norm.png`` (with the loss scale under mixed float16);
* fine-tuning: ``squad_em_f1.png`` (EM/F1 over steps) or ``eval_scores.png`` (GLUE
  scores), and for SQuAD v2.0 ``squad_threshold.png``: EM and F1 as functions of the
  no-answer threshold, computed with the official metric (``albertkit.tasks.squad_metrics``)
  from ``squad_eval/null_odds.json``, ``squad_eval/nbest_predictions.json`` and the eval file
  named in ``config.yaml`` (the curve's values also go to ``squad_threshold.json``);
* ``report.md``: the key numbers of ``summary.json`` and the charts.

``albertkit report --benchmark RESULTS.json`` plots ``albertkit benchmark`` results:
throughput against sequence length and scaling efficiency against process count.

Charts are drawn with matplotlib's object API (``matplotlib.figure.Figure`` rendered by
Agg), so nothing process-wide (pyplot state, the default backend) is touched. matplotlib is
an optional dependency (``pip install 'albertkit[report]'``), imported only here.

Example:
    >>> report = write_run_report("runs/demo")            # doctest: +SKIP
    >>> sorted(report.charts)                              # doctest: +SKIP
    ['accuracy', 'grad_norm', 'learning_rate', 'loss', 'throughput']
"""

from __future__ import annotations

import argparse
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from albertkit.config import TASK_OF_KIND, atomic_write_bytes, atomic_write_text
from albertkit.training.run_logger import read_metrics

INSTALL_HINT = "pip install 'albertkit[report]'"

# null_odds at or beyond this magnitude are the "no valid span at all" sentinel
# (albertkit.tasks.squad.NO_SPAN_ODDS = 1e6): such questions never change the curve, so
# they are kept out of the threshold axis.
_SENTINEL_ODDS = 1e5

# Metric keys in the order a reader looks for them; anything else follows alphabetically.
_KEY_ORDER = (
    "loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy", "mlm_baseline_accuracy",
    "mlm_accuracy_over_baseline", "accuracy", "span_accuracy", "start_accuracy",
    "end_accuracy", "exact", "exact_match", "f1", "mcc", "pearson", "spearman",
    "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
    "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "learning_rate", "seq_per_s",
    "grad_norm", "loss_scale", "skipped_steps",
)


class ReportError(ValueError):
    """The report cannot be made (no metrics, unreadable files); the message names the file."""


@dataclass
class Report:
    """What a report wrote.

    Attributes:
        out_dir: the output directory.
        markdown: the Markdown summary (``report.md`` / ``benchmark.md``).
        charts: chart name -> PNG path, in the order they appear in the summary.
        notes: charts that were skipped and why, and data problems found on the way.
    """

    out_dir: Path
    markdown: Path
    charts: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Series:
    """One line of a chart: x and y values with a label and a style."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    style: str = "train"  # train | eval | baseline | ideal | points
    color: str | None = None
    linewidth: float = 1.6


# =========================================================================== drawing
def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError(
            f"albertkit report draws charts with matplotlib, which is not installed: "
            f"{INSTALL_HINT}") from None
    return Figure


_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:gray", "tab:olive", "tab:cyan")


def _draw_lines(path: Path, title: str, xlabel: str, ylabel: str, series: Sequence[Series],
                *, logx: bool = False, logy: bool = False, vlines: Sequence[tuple[float, str, str]] = (),
                steps_post: bool = False, integer_x: bool = True, y_from_zero: bool = False,
                legend: bool = False) -> bool:
    """Draw ``series`` into a PNG at ``path`` (atomically); False if nothing to draw."""
    series = [s for s in series if any(_finite(v) for v in s.y)]
    if not series:
        return False
    Figure = _figure_class()
    fig = Figure(figsize=(7.5, 4.2), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    for i, s in enumerate(series):
        color = s.color or _COLORS[i % len(_COLORS)]
        kw: dict[str, Any] = {"label": s.label, "color": color}
        if s.style == "eval":
            kw.update(linestyle="--", marker="o", markersize=4, linewidth=1.4)
        elif s.style == "baseline":
            kw.update(linestyle=":", linewidth=1.4)
        elif s.style == "points":
            kw.update(marker="o", markersize=5, linewidth=1.6)
        elif s.style == "ideal":
            kw.update(linestyle=":", linewidth=1.0, color="black")
        else:
            kw.update(linewidth=s.linewidth)
            if len(s.x) == 1:
                kw.update(marker="o")
        if steps_post:
            kw["drawstyle"] = "steps-post"
        ax.plot(list(s.x), list(s.y), **kw)
    for x, label, color in vlines:
        ax.axvline(x, color=color, linestyle="-.", linewidth=1.0, label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:  # sequence lengths and process counts: powers of two, shown as plain numbers
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

        ax.set_xscale("log", base=2)
        ticks = sorted({x for s in series for x in s.x if _finite(x) and x > 0})
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    if logy:
        ax.set_yscale("log")
    if y_from_zero:
        ax.set_ylim(bottom=0)
    if integer_x and not logx:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    entries = len(series) + len(vlines)
    if entries > 4:  # many lines: the legend goes beside the plot, never over the data
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    elif legend or entries > 1:
        ax.legend(fontsize="small")
    _save(fig, path)
    return True


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(path, buf.getvalue())


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


# =========================================================================== run data
def load_series(run_dir: Path) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """``metrics.jsonl`` as ``{kind: {metric: (steps, values)}}``, sorted by step.

    A resumed run logs again the steps after its last checkpoint: the last record of a
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


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: unreadable {what}: {e}") from None


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
    summary = _read_json(run_dir / "summary.json", "summary")
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
    chart("loss", "Loss", _draw_lines(out / "loss.png", "Loss", "step", "loss", loss),
          "no loss values logged")

    # ---- accuracy (MLM/SOP for pretraining; the task's accuracies for fine-tuning)
    acc_keys = [("mlm_accuracy", "MLM accuracy"), ("sop_accuracy", "SOP accuracy"),
                ("accuracy", "accuracy"), ("span_accuracy", "span accuracy"),
                ("start_accuracy", "start accuracy"), ("end_accuracy", "end accuracy")]
    acc: list[Series | None] = []
    for i, (key, label) in enumerate(acc_keys):
        color = _COLORS[i]
        acc += [_series(data, "train", key, f"train {label}", color=color),
                _series(data, "eval", key, f"eval {label}", color=color)]
    acc.append(_series(data, "eval", "mlm_baseline_accuracy",
                       "MLM baseline (most frequent token)", "baseline", "black"))
    chart("accuracy", "Accuracy",
          _draw_lines(out / "accuracy.png", "Accuracy", "step", "accuracy", _present(acc)),
          "no accuracy values logged")

    # ---- learning rate, throughput, gradient norm
    lr = _present([_series(data, "train", "learning_rate", "learning rate")])
    chart("learning_rate", "Learning rate",
          _draw_lines(out / "learning_rate.png", "Learning rate", "step", "learning rate", lr),
          "no learning_rate logged")
    thr = _present([_series(data, "train", "seq_per_s", "sequences/s")])
    title = "Training throughput"
    if thr:
        ys = [v for v in thr[0].y if _finite(v)]
        med = sorted(ys)[len(ys) // 2]
        title += f" (median {med:,.1f} sequences/s)"
    chart("throughput", "Throughput",
          _draw_lines(out / "throughput.png", title, "step", "sequences / second", thr,
                      y_from_zero=True),
          "no seq_per_s logged")
    gn = _present([_series(data, "train", "grad_norm", "gradient norm (before clipping)")])
    if gn:
        drawn = _draw_grad_norm(out / "grad_norm.png", gn[0],
                                _series(data, "train", "loss_scale", "loss scale"))
        chart("grad_norm", "Gradient norm", drawn)

    # ---- fine-tuning scores
    if task == "squad" or "exact" in data.get("eval", {}) or "exact_match" in data.get("eval", {}):
        keys = [("exact", "EM"), ("exact_match", "EM"), ("f1", "F1"), ("best_exact", "best EM"),
                ("best_f1", "best F1"), ("HasAns_f1", "F1 (answerable)"),
                ("NoAns_f1", "F1 (unanswerable)")]
        sq = _present(_series(data, "eval", k, label, "eval", _COLORS[i])
                      for i, (k, label) in enumerate(keys))
        chart("squad_em_f1", "SQuAD EM / F1",
              _draw_lines(out / "squad_em_f1.png", "SQuAD exact match and F1 (eval)", "step",
                          "score (%)", sq),
              "no SQuAD evaluation logged")
        _threshold_chart(run_dir, out, config, squad_data, report, charts)
    elif task == "classification":
        keys = [("accuracy", "accuracy"), ("f1", "F1"), ("mcc", "Matthews corr."),
                ("accuracy_f1", "(accuracy + F1) / 2"), ("pearson", "Pearson"),
                ("spearman", "Spearman"), ("pearson_spearman", "(Pearson + Spearman) / 2")]
        sc = _present(_series(data, "eval", k, label, "eval", _COLORS[i])
                      for i, (k, label) in enumerate(keys))
        chart("eval_scores", "Evaluation scores",
              _draw_lines(out / "eval_scores.png", "Evaluation scores", "step", "score", sc),
              "no evaluation logged")

    atomic_write_text(report.markdown,
                      _run_markdown(run_dir, task, summary, data, config, charts, report.notes))
    return report


def _task_of(config: dict[str, Any]) -> str | None:
    kind = (config.get("data") or {}).get("kind") if isinstance(config.get("data"), dict) else None
    return TASK_OF_KIND.get(kind) if isinstance(kind, str) else None


def _draw_grad_norm(path: Path, gn: Series, scale: Series | None) -> bool:
    Figure = _figure_class()
    fig = Figure(figsize=(7.5, 4.2), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.plot(gn.x, gn.y, color="tab:blue", linewidth=1.6, label=gn.label,
            marker="o" if len(gn.x) == 1 else None)
    ax.set_xlabel("step")
    ax.set_ylabel("global gradient norm")
    ax.set_title("Gradient norm" + (" and loss scale" if scale else ""))
    ax.grid(True, alpha=0.3)
    if scale is not None:
        ax2 = ax.twinx()
        ax2.plot(scale.x, scale.y, color="tab:red", linewidth=1.2, linestyle="--",
                 label=scale.label, drawstyle="steps-post")
        ax2.set_yscale("log", base=2)
        ax2.set_ylabel("loss scale", color="tab:red")
        lines = ax.get_lines() + ax2.get_lines()
        ax.legend(lines, [ln.get_label() for ln in lines], fontsize="small")
    _save(fig, path)
    return True


# --------------------------------------------------------------------------- SQuAD v2.0
def squad_threshold_curve(gold: dict[str, Any], best_non_null: dict[str, str],
                          null_odds: dict[str, float]) -> dict[str, list[float]]:
    """EM and F1 (percent) when "no answer" is predicted for ``null_odds > threshold``.

    ``gold`` maps question ids to :class:`albertkit.tasks.squad_metrics.GoldQuestion`;
    ``best_non_null`` holds each question's best non-empty answer. At a threshold ``t`` a
    question is answered with its best span when ``null_odds <= t`` (the rule of
    ``evaluate-v2.0.py``'s ``apply_no_ans_threshold``) and scores as a no-answer otherwise.
    The curve is evaluated at every distinct ``null_odds`` value (where it can change),
    preceded by "answer nothing". Returns ``{"threshold", "exact", "f1", "answered"}``
    lists (``answered``: percent of questions answered at that threshold).
    """
    from albertkit.tasks import squad_metrics

    missing = [q for q in gold if q not in null_odds]
    if missing:
        raise ReportError(f"null_odds has no value for question id {missing[0]!r}"
                          + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    preds = {q: best_non_null.get(q, "") for q in gold}
    exact_raw, f1_raw = squad_metrics.raw_scores(gold, preds, "2.0")
    order = sorted(gold, key=lambda q: float(null_odds[q]))
    n = max(len(order), 1)
    no_answer = {q: 0.0 if gold[q].has_answer else 1.0 for q in gold}
    em = f1 = sum(no_answer.values())  # answer nothing: only unanswerable questions score
    out: dict[str, list[float]] = {"threshold": [], "exact": [], "f1": [], "answered": []}
    if order:
        lowest = float(null_odds[order[0]])
        out["threshold"].append(lowest - max(1.0, 0.05 * abs(lowest)))
        out["exact"].append(100.0 * em / n)
        out["f1"].append(100.0 * f1 / n)
        out["answered"].append(0.0)
    for i, q in enumerate(order):
        em += exact_raw[q] - no_answer[q]
        f1 += f1_raw[q] - no_answer[q]
        t = float(null_odds[q])
        if i + 1 < len(order) and float(null_odds[order[i + 1]]) == t:
            continue  # ties: the threshold takes all questions with this value at once
        out["threshold"].append(t)
        out["exact"].append(100.0 * em / n)
        out["f1"].append(100.0 * f1 / n)
        out["answered"].append(100.0 * (i + 1) / n)
    return out


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
        curve = squad_threshold_curve(gold, best, odds)
    except (ReportError, squad_metrics.SquadEvalError) as e:
        report.notes.append(f"squad_threshold.png skipped: {e}")
        return
    atomic_write_text(out / "squad_threshold.json", json.dumps(
        {"eval_file": str(gold_file), **curve}, indent=2) + "\n")
    best_i = max(range(len(curve["f1"])), key=lambda i: (curve["f1"][i], -i))
    best_f1 = curve["f1"][best_i]
    configured = float(data_cfg.get("null_score_diff_threshold", 0.0) or 0.0)
    if _draw_threshold(out / "squad_threshold.png", curve, configured, best_i):
        report.charts["squad_threshold"] = out / "squad_threshold.png"
        charts.append(("squad_threshold", "SQuAD v2.0 no-answer threshold",
                       out / "squad_threshold.png"))
    official = _read_json(ev / "eval_results.json", "SQuAD eval results")
    if isinstance(official, dict) and _finite(official.get("best_f1")) \
            and abs(float(official["best_f1"]) - best_f1) > 1e-6:
        report.notes.append(
            f"the threshold curve's best F1 ({best_f1:.4f}) differs from eval_results.json "
            f"best_f1 ({float(official['best_f1']):.4f}): equal null odds are scored together "
            "here, or the files come from different evaluations")


def _draw_threshold(path: Path, curve: dict[str, list[float]], configured: float,
                    best_i: int) -> bool:
    """Two panels: score vs the threshold on null odds, and score vs the share of questions
    answered (readable however the null odds are spread; an undertrained model puts them
    in a narrow cluster)."""
    keep = [i for i, t in enumerate(curve["threshold"]) if abs(t) < _SENTINEL_ODDS]
    if not keep:
        return False
    xs = [curve["threshold"][i] for i in keep]
    ems, f1s = [curve["exact"][i] for i in keep], [curve["f1"][i] for i in keep]
    # extend the last step to the right so that its value is visible
    xs.append(xs[-1] + max(1.0, 0.05 * (xs[-1] - xs[0])))
    ems.append(ems[-1])
    f1s.append(f1s[-1])
    best_t, best_f1 = curve["threshold"][best_i], curve["f1"][best_i]
    Figure = _figure_class()
    fig = Figure(figsize=(11, 4.2), dpi=110, layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True)
    left.plot(xs, f1s, drawstyle="steps-post", color="tab:orange", linewidth=3.0, label="F1")
    left.plot(xs, ems, drawstyle="steps-post", color="tab:blue", linewidth=1.4, label="EM")
    left.axvline(configured, color="tab:gray", linestyle="-.", linewidth=1.0,
                 label=f"configured threshold ({configured:g})")
    if abs(best_t) < _SENTINEL_ODDS:
        left.axvline(best_t, color="tab:red", linestyle="-.", linewidth=1.0,
                     label=f"best F1 {best_f1:.2f} at {best_t:.4g}")
    left.set_title("Score vs no-answer threshold")
    left.set_xlabel("threshold on null odds (null score − best span score)")
    left.set_ylabel("score (%)")
    answered = curve["answered"]
    right.plot(answered, curve["f1"], drawstyle="steps-post", color="tab:orange",
               linewidth=3.0, label="F1")
    right.plot(answered, curve["exact"], drawstyle="steps-post", color="tab:blue",
               linewidth=1.4, label="EM")
    right.axvline(answered[best_i], color="tab:red", linestyle="-.", linewidth=1.0,
                  label=f"best F1: {answered[best_i]:.0f}% answered")
    right.set_title("Score vs share of questions answered")
    right.set_xlabel("questions answered, lowest null odds first (%)")
    right.set_xlim(0, 100)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("SQuAD v2.0 no-answer threshold (official EM/F1)")
    _save(fig, path)
    return True


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
    if _finite(s.get("wall_seconds")):
        rows.append(("wall time", _duration(float(s["wall_seconds"]))))
    if _finite(s.get("sequences_per_second")):
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
        rows.append(("precision", f"{runtime.get('precision', '?')}, XLA "
                     f"{'on' if runtime.get('xla', True) else 'off'}"))
    best = s.get("best")
    if isinstance(best, dict) and "metric" in best:
        rows.append(("best checkpoint", f"{best['metric']} = {_num(best.get('value'))} at step "
                     f"{best.get('step')}"))
    if s.get("resumed_from_step"):
        rows.append(("resumed from step", str(s["resumed_from_step"])))
    if "skipped_steps" in s:
        rows.append(("skipped steps (non-finite)", str(s["skipped_steps"])))
    lines += [f"| {k} | {v} |" for k, v in rows] + [""]

    train = s.get("train") if isinstance(s.get("train"), dict) and s.get("train") else \
        _last(data.get("train", {}))
    ev = s.get("eval") if isinstance(s.get("eval"), dict) and s.get("eval") else \
        _last(data.get("eval", {}))
    keys = _ordered(set(train) | set(ev))
    if keys:
        lines += ["## Final metrics", "", "| metric | train | eval |", "|---|---|---|"]
        lines += [f"| {k} | {_num(train.get(k))} | {_num(ev.get(k))} |" for k in keys]
        lines.append("")
    if charts:
        lines += ["## Charts", ""]
        for name, title, path in charts:
            rel = path.name if path is not None else f"{name}.png"
            lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def _model_line(run_dir: Path, config: dict[str, Any]) -> str:
    spec = _read_json(run_dir / "model_spec.json", "model spec")
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


# =========================================================================== benchmark
_SEQ_KEYS = ("seq_length", "seq_len", "sequence_length", "max_seq_length", "seq")
_THROUGHPUT_KEYS = ("sequences_per_s", "sequences_per_second", "seq_per_s", "seqs_per_s",
                    "sequences_per_sec", "throughput", "samples_per_second")
_PROC_KEYS = ("processes", "num_processes", "replicas", "world_size", "num_workers", "workers",
              "np", "gpus", "num_gpus", "devices")
_EFF_KEYS = ("scaling_efficiency", "efficiency")
_LABEL_KEYS = ("framework", "implementation", "impl", "engine", "name", "label", "size",
               "model_size", "precision", "xla", "micro_batch", "micro_batch_size",
               "accumulation", "accumulation_steps", "backend", "optimizer")


@dataclass(frozen=True)
class BenchmarkPoint:
    """One benchmark measurement as the report reads it."""

    label: str
    seq_length: int | None
    processes: int | None
    throughput: float
    efficiency: float | None  # fraction of linear scaling, as recorded by the benchmark


def read_benchmark(paths: str | Path | Sequence[str | Path]) -> list[BenchmarkPoint]:
    """Measurements from one or more benchmark JSON files, read tolerantly.

    ``albertkit benchmark --json`` writes one file per invocation (one shape): an object
    with ``settings`` (size, seq_length, precision, xla, micro_batch, processes, ...) and
    ``results`` mapping each framework (``albertkit``, ``hf-pytorch``) to its measurements
    (``sequences_per_s``, ...); give several such files to plot against sequence length or
    process count. Other accepted shapes: a list of records, or an object holding one under
    ``results``, ``runs``, ``records``, ``measurements`` or ``benchmarks``; the object's
    ``settings`` (if any) apply to every record. A record is a (possibly
    nested) object; keys are matched by their last component: sequence length
    (``seq_length``, ``seq_len``, ...), throughput (``sequences_per_second``,
    ``seq_per_s``, ``throughput``, ...), process count (``processes``, ``replicas``,
    ``world_size``, ...), ``scaling_efficiency``. A record with several throughputs under
    different prefixes (``albertkit.seq_per_s``, ``hf_pytorch.seq_per_s``) gives one point
    per prefix, labelled by it. Fields that differ between records (framework, size,
    precision, xla, ...) label the lines.
    """
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    flat: list[dict[str, Any]] = []
    for path in map(Path, paths):
        raw = _read_json(path, "benchmark results")
        if raw is None:
            raise ReportError(f"benchmark results not found: {path}")
        records = _benchmark_records(raw)
        if records is None:
            raise ReportError(f"{path}: expected a list of results or an object with a "
                              "'results' list or mapping")
        flat += [_flatten(r) for r in records if isinstance(r, dict)]
    where = str(paths[0]) if len(paths) == 1 else f"{len(paths)} benchmark files"
    rows: list[tuple[dict[str, Any], str, float]] = []  # (record, prefix, throughput)
    for rec in flat:
        hits = [(k, v) for k, v in rec.items() if _leaf(k) in _THROUGHPUT_KEYS and _finite(v)]
        # prefer the most specific throughput name when a record has several for one prefix
        by_prefix: dict[str, float] = {}
        for k, v in sorted(hits, key=lambda kv: _THROUGHPUT_KEYS.index(_leaf(kv[0]))):
            by_prefix.setdefault(_prefix(k), float(v))
        for prefix, v in by_prefix.items():
            rows.append((rec, prefix, v))
    if not rows:
        raise ReportError(f"{where}: no record holds a throughput (one of "
                          f"{', '.join(_THROUGHPUT_KEYS)})")
    multi_prefix = len({p for _, p, _ in rows}) > 1
    label_fields = [k for k in _LABEL_KEYS
                    if len({repr(_get(r, k, p)) for r, p, _ in rows}) > 1]
    points = []
    for rec, prefix, thr in rows:
        parts = [prefix] if multi_prefix and prefix else []
        for k in label_fields:
            v = _get(rec, k, prefix)
            if v is None:
                continue
            if k == "xla" and isinstance(v, bool):
                parts.append("XLA" if v else "no XLA")
            elif k in ("micro_batch", "micro_batch_size"):
                parts.append(f"micro-batch {v}")
            elif k in ("accumulation", "accumulation_steps"):
                parts.append(f"accum {v}")
            else:
                parts.append(str(v))
        seq = _get(rec, _SEQ_KEYS, prefix)
        procs = _get(rec, _PROC_KEYS, prefix)
        if isinstance(procs, list):  # a list of process counts: one run covers only one
            procs = procs[0] if len(procs) == 1 else None
        eff = _get(rec, _EFF_KEYS, prefix)
        if _finite(eff) and eff > 1.5:  # recorded in percent
            eff = eff / 100.0
        points.append(BenchmarkPoint(
            " ".join(parts) or "albertkit",
            int(seq) if _finite(seq) else None,
            int(procs) if _finite(procs) else None,
            thr, float(eff) if _finite(eff) else None))
    return points


def _benchmark_records(raw: Any) -> list[Any] | None:
    if isinstance(raw, list):
        return raw
    if not isinstance(raw, dict):
        return None
    shared = raw.get("settings") if isinstance(raw.get("settings"), dict) else {}
    for key in ("results", "runs", "records", "measurements", "benchmarks"):
        value = raw.get(key)
        if isinstance(value, list):
            return [{**shared, **r} if isinstance(r, dict) else r for r in value]
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            # {"albertkit": {...}, "hf-pytorch": {...}}: one record per framework
            return [{**shared, "framework": name, **r} for name, r in value.items()]
    if any(k in raw for k in _THROUGHPUT_KEYS):
        return [raw]
    return None


def _flatten(rec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in rec.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _leaf(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _prefix(key: str) -> str:
    return key.rsplit(".", 1)[0] if "." in key else ""


def _get(rec: dict[str, Any], names: str | Sequence[str], prefix: str) -> Any:
    """The value of the first name found: under the throughput's prefix, its parents, or
    anywhere in the record (shared settings such as the sequence length)."""
    names = (names,) if isinstance(names, str) else tuple(names)
    for name in names:
        scopes = [prefix]
        while scopes[-1]:
            scopes.append(_prefix(scopes[-1]))
        for scope in scopes:
            key = f"{scope}.{name}" if scope else name
            if key in rec:
                return rec[key]
        for k, v in rec.items():
            if _leaf(k) == name:
                return v
    return None


def write_benchmark_report(results: str | Path | Sequence[str | Path],
                           out_dir: str | Path | None = None) -> Report:
    """``throughput_vs_seq_length.png``, ``scaling_efficiency.png`` and ``benchmark.md``
    from one or more benchmark JSON files (default output: ``<first>_report/`` beside the
    first file, or ``benchmark_report/`` for several)."""
    files = [Path(results)] if isinstance(results, str | Path) else [Path(r) for r in results]
    if not files:
        raise ReportError("no benchmark results given")
    points = read_benchmark(files)
    first = files[0]
    default = first.parent / (f"{first.stem}_report" if len(files) == 1 else "benchmark_report")
    out = Path(out_dir) if out_dir is not None else default
    out.mkdir(parents=True, exist_ok=True)
    report = Report(out, out / "benchmark.md")
    charts: list[tuple[str, str, Path | None]] = []

    # throughput vs sequence length: one line per label (and process count when it varies)
    procs_vary = len({p.processes for p in points}) > 1
    lines: dict[str, list[BenchmarkPoint]] = {}
    for p in points:
        if p.seq_length is None:
            continue
        name = p.label + (f", {p.processes} proc" if procs_vary and p.processes else "")
        lines.setdefault(name, []).append(p)
    series = []
    for name, pts in lines.items():
        pts = sorted(pts, key=lambda p: p.seq_length or 0)
        series.append(Series(name, tuple(float(p.seq_length or 0) for p in pts),
                             tuple(p.throughput for p in pts), "points"))
    seqs = {p.seq_length for p in points if p.seq_length is not None}
    if len(seqs) >= 1 and series:
        _draw_lines(out / "throughput_vs_seq_length.png", "Training throughput vs sequence length",
                    "sequence length (tokens)", "sequences / second", series,
                    logx=len(seqs) > 1, integer_x=False, y_from_zero=True, legend=True)
        report.charts["throughput_vs_seq_length"] = out / "throughput_vs_seq_length.png"
        charts.append(("throughput_vs_seq_length", "Throughput vs sequence length",
                       out / "throughput_vs_seq_length.png"))
    else:
        report.notes.append("throughput_vs_seq_length.png skipped: no record names a sequence "
                            "length")

    # scaling efficiency vs processes
    eff_series = _efficiency_series(points)
    if eff_series:
        xs = sorted({x for s in eff_series for x in s.x})
        eff_series.append(Series("linear scaling", (xs[0], xs[-1]), (100.0, 100.0), "ideal"))
        _draw_lines(out / "scaling_efficiency.png", "Scaling efficiency vs processes",
                    "processes", "efficiency (% of linear scaling)", eff_series,
                    logx=len(xs) > 2)
        report.charts["scaling_efficiency"] = out / "scaling_efficiency.png"
        charts.append(("scaling_efficiency", "Scaling efficiency", out / "scaling_efficiency.png"))
    else:
        report.notes.append("scaling_efficiency.png skipped: the results hold one process "
                            "count only (run the benchmark with several to measure scaling)")

    md = [f"# Benchmark report: {', '.join(f'`{f.name}`' for f in files)}", "",
          "| configuration | sequence length | processes | sequences/s | scaling efficiency |",
          "|---|---|---|---|---|"]
    for p in sorted(points, key=lambda p: (p.label, p.seq_length or 0, p.processes or 0)):
        eff = _point_efficiency(p, points)
        md.append(f"| {p.label} | {p.seq_length or ''} | {p.processes or ''} | "
                  f"{p.throughput:,.1f} | {'' if eff is None else f'{100 * eff:.1f}%'} |")
    md.append("")
    if charts:
        md += ["## Charts", ""]
        for _name, title, path in charts:
            md += [f"### {title}", "", f"![{title}]({path.name if path else ''})", ""]
    if report.notes:
        md += ["## Notes", ""] + [f"- {n}" for n in report.notes] + [""]
    atomic_write_text(report.markdown, "\n".join(md))
    return report


def _point_efficiency(p: BenchmarkPoint, points: Sequence[BenchmarkPoint]) -> float | None:
    """Recorded efficiency, else throughput per process relative to the fewest processes
    of the same configuration and sequence length (1.0 = linear scaling)."""
    if p.efficiency is not None:
        return p.efficiency
    if p.processes is None:
        return None
    peers = [q for q in points if q.label == p.label and q.seq_length == p.seq_length
             and q.processes is not None]
    base = min(peers, key=lambda q: q.processes or 0, default=None)
    if base is None or base.processes is None or base.processes == p.processes and len(peers) < 2:
        return None
    return (p.throughput / p.processes) / (base.throughput / base.processes)


def _efficiency_series(points: Sequence[BenchmarkPoint]) -> list[Series]:
    groups: dict[str, list[tuple[int, float]]] = {}
    for p in points:
        eff = _point_efficiency(p, points)
        if eff is None or p.processes is None:
            continue
        name = p.label + (f", seq {p.seq_length}" if p.seq_length else "")
        groups.setdefault(name, []).append((p.processes, 100.0 * eff))
    out = []
    for name, pts in groups.items():
        pts.sort()
        if len({n for n, _ in pts}) < 2:
            continue
        out.append(Series(name, tuple(float(n) for n, _ in pts), tuple(e for _, e in pts),
                          "points"))
    return out


# =========================================================================== CLI
def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``albertkit report``."""
    p = subparsers.add_parser(
        "report", help="PNG charts and a Markdown summary of a run (or of benchmark results)",
        description="Draw a run directory's metrics (loss, accuracy, learning rate, "
                    "throughput, EM/F1, the SQuAD v2.0 threshold curve) as PNG charts with a "
                    "Markdown summary, or plot `albertkit benchmark` results with --benchmark. "
                    f"Needs matplotlib ({INSTALL_HINT}).")
    p.add_argument("run_dir", nargs="?", type=Path, help="the run directory to report on")
    p.add_argument("--benchmark", type=Path, nargs="+", metavar="RESULTS.json",
                   help="plot `albertkit benchmark --json` results instead of a run (several "
                        "files: one line per configuration across their sequence lengths)")
    p.add_argument("--out", type=Path, help="output directory (default: RUN_DIR/report, or "
                                            "RESULTS_report/ beside the first results file)")
    p.add_argument("--squad-data", type=Path, metavar="FILE",
                   help="SQuAD v2.0 eval file for the threshold curve (default: "
                        "data.eval_file of RUN_DIR/config.yaml)")
    p.set_defaults(func=cmd_report)
    return p


def cmd_report(args: argparse.Namespace) -> int:
    if (args.run_dir is None) == (args.benchmark is None):
        raise ReportError("give either RUN_DIR or --benchmark RESULTS.json (exactly one)")
    if args.benchmark is not None:
        report = write_benchmark_report(args.benchmark, args.out)
    else:
        report = write_run_report(args.run_dir, args.out, args.squad_data)
    print(f"wrote {report.markdown} and {len(report.charts)} chart(s):")
    for path in report.charts.values():
        print(f"  {path}")
    for note in report.notes:
        print(f"note: {note}")
    return 0
