"""``albertkit report --benchmark RESULTS.json ...``: benchmark results as charts.

Reads the files ``albertkit benchmark --json`` writes, through their typed model
(:class:`albertkit.perf.result.BenchmarkResult`), and draws throughput against sequence
length and scaling efficiency against process count, with a Markdown table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albertkit.errors import BenchmarkError, ReportError
from albertkit.fileio import atomic_write_text
from albertkit.perf.result import BenchmarkResult
from albertkit.report.charts import Series, draw_lines
from albertkit.report.output import Report, charts_markdown, notes_markdown

# Settings that tell configurations apart; those that differ between the points label them.
_LABEL_FIELDS = ("framework", "size", "precision", "xla", "micro_batch", "accumulation",
                 "optimizer")


@dataclass(frozen=True)
class BenchmarkPoint:
    """One benchmark measurement as the report reads it."""

    label: str
    seq_length: int | None
    processes: int | None
    throughput: float
    efficiency: float | None  # fraction of linear scaling, as recorded by the benchmark
    noisy: bool = False  # the benchmark marked its result noisy (loaded machine, rounds differ)


def read_benchmark(paths: str | Path | Sequence[str | Path]) -> list[BenchmarkPoint]:
    """Measurements from one or more ``albertkit benchmark --json`` files.

    Each file holds one shape: every framework's 1-process result and, when measured,
    albertkit's data-parallel results (with their recorded scaling efficiency). Give
    several files to plot against sequence length or process count. The settings that
    differ between the points (framework, size, precision, XLA, ...) label them.
    """
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    rows: list[tuple[dict[str, Any], int, int, float, float | None, bool]] = []
    for path in map(Path, paths):
        try:
            result = BenchmarkResult.read(path)
        except BenchmarkError as e:
            raise ReportError(str(e)) from None
        s = result.settings
        plan = result.results["albertkit"].xla_plan if "albertkit" in result.results else None
        xla: Any = s.xla if plan is None else plan.compute  # what auto resolved to
        fields = {"size": s.size, "precision": s.precision, "xla": xla,
                  "micro_batch": s.micro_batch, "accumulation": s.accumulation,
                  "optimizer": s.optimizer}
        for framework, r in result.results.items():
            rows.append(({**fields, "framework": framework}, s.seq_length, 1,
                         r.sequences_per_s, None, result.noisy))
        for n, r in result.data_parallel.items():
            rows.append(({**fields, "framework": r.framework}, s.seq_length, int(n),
                         r.sequences_per_s, r.scaling_efficiency, result.noisy))
    label_fields = [k for k in _LABEL_FIELDS if len({repr(f[k]) for f, *_ in rows}) > 1]
    points = []
    for fields, seq, procs, throughput, efficiency, noisy in rows:
        parts = []
        for k in label_fields:
            v = fields[k]
            if k == "xla":
                parts.append("XLA auto" if v == "auto" else "XLA" if v else "no XLA")
            elif k == "micro_batch":
                parts.append(f"micro-batch {v}")
            elif k == "accumulation":
                parts.append(f"accum {v}")
            else:
                parts.append(str(v))
        points.append(BenchmarkPoint(" ".join(parts) or "albertkit", seq, procs, throughput,
                                     efficiency, noisy))
    return points


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
        draw_lines(out / "throughput_vs_seq_length.png", "Training throughput vs sequence length",
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
        draw_lines(out / "scaling_efficiency.png", "Scaling efficiency vs processes",
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
        md.append(f"| {p.label}{' (NOISY)' if p.noisy else ''} | {p.seq_length or ''} | "
                  f"{p.processes or ''} | {p.throughput:,.1f} | "
                  f"{'' if eff is None else f'{100 * eff:.1f}%'} |")
    md.append("")
    for path in files:
        result = BenchmarkResult.read(path)
        if result.noisy:
            report.notes.append(f"{path.name} is marked NOISY by the benchmark: "
                                f"{'; '.join(result.noisy_reasons)}")
    md += charts_markdown(charts) + notes_markdown(report.notes)
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


