"""Planning: a training config's hours and dollars on SageMaker fleets (``albertkit plan``).

:mod:`albertkit.perf` measures the training step; this package turns rates (measured, or
estimated from first principles) into hours and cost:

* :mod:`albertkit.plan.fleet` -- :func:`plan_fleets`: per fleet, whether the micro-batch
  fits, the step time, the hours to ``runtime.max_steps``, the cost on demand and on spot;
* :mod:`albertkit.plan.recipe` -- :func:`plan_recipe`: several configs (the phases of one
  recipe, e.g. seq 128 then 512) priced as one, a total per fleet;
* :mod:`albertkit.plan.spot` -- the expected time of an interrupted spot job and the
  checkpoint interval that minimises it (:func:`optimal_checkpoint_interval`);
* :mod:`albertkit.plan.cost` -- :func:`predict`, the data-parallel communication-cost model;
* :mod:`albertkit.plan.measured` -- rates measured on the target instances;
* :mod:`albertkit.plan.prices` -- :class:`PriceTable`, the dated price table and its
  overrides.

Each plan prints itself for people (``format_table()``) beside its own module's code.

Nothing here imports TensorFlow. The public names (``__all__``) are importable from here.
"""

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.plan.cost import ScalingPrediction, predict
    from albertkit.plan.fleet import FleetEstimate, FleetPlan, plan_fleets
    from albertkit.plan.prices import PriceTable
    from albertkit.plan.recipe import RecipePlan, RecipeTotal, plan_recipe
    from albertkit.plan.spot import optimal_checkpoint_interval

__all__ = [
    "FleetEstimate",
    "FleetPlan",
    "PriceTable",
    "RecipePlan",
    "RecipeTotal",
    "ScalingPrediction",
    "optimal_checkpoint_interval",
    "plan_fleets",
    "plan_recipe",
    "predict",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "FleetEstimate": "fleet",
    "FleetPlan": "fleet",
    "PriceTable": "prices",
    "RecipePlan": "recipe",
    "RecipeTotal": "recipe",
    "ScalingPrediction": "cost",
    "optimal_checkpoint_interval": "spot",
    "plan_fleets": "fleet",
    "plan_recipe": "recipe",
    "predict": "cost",
})
