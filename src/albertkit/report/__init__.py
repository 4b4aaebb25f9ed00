"""``albertkit report``: runs and benchmark results as PNG charts plus Markdown.

* :func:`write_run_report` (:mod:`albertkit.report.run`): one run directory's curves,
  fine-tuning scores and the SQuAD v2.0 threshold curve, with ``report.md``;
* :func:`write_benchmark_report` (:mod:`albertkit.report.benchmark`): ``albertkit benchmark
  --json`` results against sequence length and process count, with ``benchmark.md``;
* :mod:`albertkit.report.charts`: the drawing (matplotlib, optional: ``pip install -e
  '.[report]'`` in a clone of this repository);
* :mod:`albertkit.report.output`: what every report shares (its error, the files written).
"""

from albertkit.errors import ReportError
from albertkit.report.benchmark import read_benchmark, write_benchmark_report
from albertkit.report.output import Report
from albertkit.report.run import load_series, write_run_report

__all__ = ["Report", "ReportError", "load_series", "read_benchmark", "write_benchmark_report",
           "write_run_report"]
