"""``albertkit report``: runs and benchmark results as PNG charts plus Markdown.

* :func:`write_run_report` (:mod:`albertkit.report.run`): one run directory's curves,
  fine-tuning scores and the SQuAD v2.0 threshold curve, with ``report.md``;
* :func:`write_benchmark_report` (:mod:`albertkit.report.benchmark`): ``albertkit benchmark
  --json`` results against sequence length and process count, with ``benchmark.md``;
* :mod:`albertkit.report.charts`: the drawing (matplotlib, optional: ``pip install -e
  '.[report]'`` in a clone of this repository);
* :mod:`albertkit.report.output`: what every report shares (the files written; its error
  is :class:`albertkit.errors.ReportError`).
"""

from albertkit._lazy import lazy_exports
from albertkit.report.benchmark import read_benchmark, write_benchmark_report
from albertkit.report.output import Report
from albertkit.report.run import load_series, write_run_report

__all__ = ["Report", "load_series", "read_benchmark", "write_benchmark_report",
           "write_run_report"]

# a name of albertkit 0.2, deprecated in 0.3 (docs/api-policy.md): its home is albertkit.errors
__getattr__, __dir__ = lazy_exports(__name__, {}, deprecated={
    "ReportError": ("albertkit.errors:ReportError", "0.4"),
})
