"""Performance: measuring the training step and planning its memory and scaling.

* :mod:`albertkit.perf.settings` -- :class:`BenchmarkSettings`, what ``albertkit benchmark``
  measures;
* :mod:`albertkit.perf.result` -- :class:`BenchmarkResult`, the typed result (the JSON file
  ``--json`` writes and ``albertkit report --benchmark`` reads);
* :mod:`albertkit.perf.runner` -- :func:`measure`: worker processes, interleaved rounds;
* :mod:`albertkit.perf.workers` -- albertkit's step (built as the trainer builds it) and
  Hugging Face PyTorch's; :mod:`~albertkit.perf.meter` (peak memory, timing),
  :mod:`~albertkit.perf.pipeline` (input pipeline), :mod:`~albertkit.perf.breakdown`
  (the step's pieces);
* :mod:`albertkit.perf.noise` -- load before/during/after and round spread: whether a
  result is marked noisy;
* :mod:`albertkit.perf.table` -- :func:`format_table`, the printed Markdown table;
* :mod:`albertkit.perf.memory` -- FLOPs and the batch planner (pure functions; the memory
  estimate it plans with is :mod:`albertkit.models.footprint`);
* :mod:`albertkit.perf.cost` -- the data-parallel communication-cost model;
* :mod:`albertkit.perf.fleet` -- :func:`plan_fleets`, hours and cost of a config on SageMaker
  fleets (``albertkit plan``), from rates :mod:`~albertkit.perf.measured` on the target
  instances or first principles, priced by :mod:`~albertkit.perf.prices`' dated table.

The measurement scripts and what only they use (targets, op profiles, the matmul floor)
live in ``benchmarks/`` at the top of the repository, outside the package.

Nothing here imports TensorFlow at import time: workers import it in their own processes.
The public names (``__all__``) are importable from here.
"""

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.perf.cost import ScalingPrediction, predict
    from albertkit.perf.fleet import FleetEstimate, FleetPlan, plan_fleets
    from albertkit.perf.memory import BatchPlan, format_plan_table, plan_batch, plan_table
    from albertkit.perf.prices import PriceTable
    from albertkit.perf.result import BenchmarkResult
    from albertkit.perf.runner import measure
    from albertkit.perf.settings import BenchmarkSettings
    from albertkit.perf.table import format_table

__all__ = [
    "BatchPlan",
    "BenchmarkResult",
    "BenchmarkSettings",
    "FleetEstimate",
    "FleetPlan",
    "PriceTable",
    "ScalingPrediction",
    "format_plan_table",
    "format_table",
    "measure",
    "plan_batch",
    "plan_fleets",
    "plan_table",
    "predict",
]

# imported on first use, so that a command that needs one part (or `albertkit --help`) does
# not load the others
__getattr__, __dir__ = lazy_exports(__name__, {
    "BatchPlan": "memory",
    "BenchmarkResult": "result",
    "BenchmarkSettings": "settings",
    "FleetEstimate": "fleet",
    "FleetPlan": "fleet",
    "PriceTable": "prices",
    "ScalingPrediction": "cost",
    "format_plan_table": "memory",
    "format_table": "table",
    "measure": "runner",
    "plan_batch": "memory",
    "plan_fleets": "fleet",
    "plan_table": "memory",
    "predict": "cost",
}, deprecated={
    # a name of albertkit 0.2, deprecated in 0.3 (docs/api-policy.md): its home is errors
    "BenchmarkError": ("albertkit.errors:BenchmarkError", "0.4"),
})
