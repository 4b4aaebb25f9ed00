"""Charts drawn with matplotlib's object API (``matplotlib.figure.Figure`` rendered by Agg).

Nothing process-wide (pyplot state, the default backend) is touched, so reports can be
drawn inside any program. matplotlib is an optional dependency (``pip install -e
'.[report]'`` in a clone of this repository), imported only when a chart is drawn.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albertkit.errors import ReportError
from albertkit.fileio import atomic_write_bytes

INSTALL_HINT = "pip install -e '.[report]' in a clone of the albertkit repository"

# null_odds at or beyond this magnitude are the "no valid span at all" sentinel
# (albertkit.tasks.squad.NO_SPAN_ODDS = 1e6): such questions never change the curve, so
# they are kept out of the threshold axis.
SENTINEL_ODDS = 1e5


@dataclass(frozen=True)
class Series:
    """One line of a chart: x and y values with a label and a style."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    style: str = "train"  # train | eval | baseline | ideal | points
    color: str | None = None
    linewidth: float = 1.6


def figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError(
            f"albertkit report draws charts with matplotlib, which is not installed: "
            f"{INSTALL_HINT}") from None
    return Figure


COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:gray", "tab:olive", "tab:cyan")


def draw_lines(path: Path, title: str, xlabel: str, ylabel: str, series: Sequence[Series],
               *, logx: bool = False, logy: bool = False, vlines: Sequence[tuple[float, str, str]] = (),
               steps_post: bool = False, integer_x: bool = True, y_from_zero: bool = False,
               legend: bool = False) -> bool:
    """Draw ``series`` into a PNG at ``path`` (atomically); False if nothing to draw."""
    series = [s for s in series if any(finite(v) for v in s.y)]
    if not series:
        return False
    Figure = figure_class()
    fig = Figure(figsize=(7.5, 4.2), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    for i, s in enumerate(series):
        color = s.color or COLORS[i % len(COLORS)]
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
        ticks = sorted({x for s in series for x in s.x if finite(x) and x > 0})
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
    save(fig, path)
    return True


def save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(path, buf.getvalue())


def finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def draw_grad_norm(path: Path, gn: Series, scale: Series | None) -> bool:
    Figure = figure_class()
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
    save(fig, path)
    return True


def draw_threshold(path: Path, curve: dict[str, list[float]], configured: float,
                   best_i: int) -> bool:
    """Two panels: score vs the threshold on null odds, and score vs the share of questions
    answered (readable however the null odds are spread; an undertrained model puts them
    in a narrow cluster)."""
    keep = [i for i, t in enumerate(curve["threshold"]) if abs(t) < SENTINEL_ODDS]
    if not keep:
        return False
    xs = [curve["threshold"][i] for i in keep]
    ems, f1s = [curve["exact"][i] for i in keep], [curve["f1"][i] for i in keep]
    # extend the last step to the right so that its value is visible
    xs.append(xs[-1] + max(1.0, 0.05 * (xs[-1] - xs[0])))
    ems.append(ems[-1])
    f1s.append(f1s[-1])
    best_t, best_f1 = curve["threshold"][best_i], curve["f1"][best_i]
    Figure = figure_class()
    fig = Figure(figsize=(11, 4.2), dpi=110, layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True)
    left.plot(xs, f1s, drawstyle="steps-post", color="tab:orange", linewidth=3.0, label="F1")
    left.plot(xs, ems, drawstyle="steps-post", color="tab:blue", linewidth=1.4, label="EM")
    left.axvline(configured, color="tab:gray", linestyle="-.", linewidth=1.0,
                 label=f"configured threshold ({configured:g})")
    if abs(best_t) < SENTINEL_ODDS:
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
    save(fig, path)
    return True


def draw_stacked(path: Path, title: str, steps: Sequence[float],
                 parts: Sequence[tuple[str, Sequence[float]]]) -> bool:
    """Shares that add up to 1 in each logging window, as stacked bars: the bar of the window
    ending at step s spans the steps since the previous window (the step-time breakdown)."""
    parts = [(label, ys) for label, ys in parts if any(finite(v) and v > 0 for v in ys)]
    if not parts or not steps:
        return False
    Figure = figure_class()
    fig = Figure(figsize=(7.5, 4.2), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    xs = list(steps)
    widths = [b - a for a, b in zip([0.0, *xs[:-1]], xs, strict=True)]
    bottom = [0.0] * len(xs)
    for i, (label, values) in enumerate(parts):
        heights = [100.0 * v if finite(v) else 0.0 for v in values]
        ax.bar([x - w for x, w in zip(xs, widths, strict=True)], heights, width=widths,
               bottom=bottom, align="edge", label=label, color=COLORS[i % len(COLORS)],
               linewidth=0)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel("share of wall time (%)")
    ax.set_ylim(0, 100)
    ax.set_xlim(0, max(xs))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save(fig, path)
    return True
