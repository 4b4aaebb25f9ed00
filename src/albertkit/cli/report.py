"""``albertkit report``: PNG charts and a Markdown summary of a run or of benchmark results."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albertkit.report.charts import INSTALL_HINT


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
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
    p.set_defaults(func=run_report)
    return p


def run_report(args: argparse.Namespace) -> int:
    """The ``albertkit report`` command."""
    from albertkit.errors import ReportError
    from albertkit.report import write_benchmark_report, write_run_report

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
