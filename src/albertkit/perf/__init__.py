"""Performance: measuring the training step and planning its memory.

* :mod:`albertkit.perf.settings` -- :class:`BenchmarkSettings`, what ``albertkit benchmark``
  measures;
* :mod:`albertkit.perf.result` -- :class:`BenchmarkResult`, the typed result (the JSON file
  ``--json`` writes and ``albertkit report --benchmark`` reads);
* :mod:`albertkit.perf.runner` -- :func:`measure`: worker processes, interleaved rounds;
* :mod:`albertkit.perf.workers` -- albertkit's step (built as the trainer builds it) and
  Hugging Face PyTorch's, with :mod:`~albertkit.perf.meter`, :mod:`~albertkit.perf.pipeline`
  and :mod:`~albertkit.perf.breakdown`; :mod:`albertkit.perf.noise` -- whether a result is
  noisy; :mod:`albertkit.perf.table` -- :func:`format_table`, the printed table;
* :mod:`albertkit.perf.memory` -- FLOPs and the batch planner (pure functions; the memory
  estimate it plans with is :mod:`albertkit.models.footprint`).

Hours and dollars per fleet, the communication-cost model and prices are
:mod:`albertkit.plan`'s; their old names here (``plan_fleets``, ``FleetPlan``,
``FleetEstimate``, ``PriceTable``, ``predict``, ``ScalingPrediction``) still work with a
``DeprecationWarning`` until 0.4. The measurement scripts and what only they use (targets,
the matmul floor) live in ``benchmarks/`` at the top of the repository, outside the package.

Nothing here imports TensorFlow at import time: workers import it in their own processes.
The public names (``__all__``) are importable from here.
"""

import warnings
from typing import TYPE_CHECKING, Any

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.perf.memory import BatchPlan, format_plan_table, plan_batch, plan_table
    from albertkit.perf.result import BenchmarkResult
    from albertkit.perf.runner import measure
    from albertkit.perf.settings import BenchmarkSettings
    from albertkit.perf.table import format_table

__all__ = [
    "BatchPlan",
    "BenchmarkResult",
    "BenchmarkSettings",
    "format_plan_table",
    "format_table",
    "measure",
    "plan_batch",
    "plan_table",
]

# imported on first use, so that a command that needs one part (or `albertkit --help`) does
# not load the others
_lazy_getattr, __dir__ = lazy_exports(__name__, {
    "BatchPlan": "memory",
    "BenchmarkResult": "result",
    "BenchmarkSettings": "settings",
    "format_plan_table": "memory",
    "format_table": "table",
    "measure": "runner",
    "plan_batch": "memory",
    "plan_table": "memory",
}, deprecated={
    # a name of albertkit 0.2, deprecated in 0.3 (docs/api-policy.md): its home is errors
    "BenchmarkError": ("albertkit.errors:BenchmarkError", "0.4"),
})
MOVED_TO_PLAN = ("FleetEstimate", "FleetPlan", "PriceTable", "ScalingPrediction", "plan_fleets",
                 "predict")


def __getattr__(name: str) -> Any:
    # Deprecated in 0.3 (docs/api-policy.md): the planner's names moved to albertkit.plan.
    # Not cached, so every use warns. The one import of albertkit.plan from perf.
    if name in MOVED_TO_PLAN:
        warnings.warn(f"albertkit.perf.{name} moved to albertkit.plan.{name}; the old name "
                      "goes away in albertkit 0.4", DeprecationWarning, stacklevel=2)
        import albertkit.plan

        return getattr(albertkit.plan, name)
    return _lazy_getattr(name)
