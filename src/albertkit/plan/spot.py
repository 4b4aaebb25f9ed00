"""Spot training: the expected wall time of a job that is interrupted and resumes from its
newest checkpoint, and the checkpoint interval that makes it, and so its cost, least.

The model is first order, as Young's (J. W. Young, "A first order approximation to the
optimum checkpoint interval", Communications of the ACM 17(9), 1974) and the first-order
part of Daly's (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for
restart dumps", Future Generation Computer Systems 22(3), 2006). Assumptions:

* interruptions come one at a time, independently, on average every ``M`` hours of the
  job's wall time (one instance's mean time between interruptions over the instance count:
  any instance's interruption stops the job);
* the job writes a checkpoint after every ``tau`` hours of training, and the write stops
  training for ``C`` hours (albertkit writes checkpoints synchronously);
* an interruption loses the work since the newest checkpoint, on average half a segment
  ``(tau + C) / 2``, plus ``R`` hours to restart (new capacity, container start, restore).
  The stop checkpoint albertkit writes on SIGTERM is not counted on: it is what an
  interruption without a usable notice, or one whose checkpoint does not reach storage in
  time, falls back to;
* ``C``, ``R`` and ``tau`` are short against ``M`` (an interruption during a restart or
  twice within one segment is not modelled; Daly's exact model is, and the tests compare).

Then ``W`` hours of training take ``T`` hours, the training plus its checkpoint writes plus
``T / M`` interruptions of ``R + (tau + C) / 2`` each:

    T = W (1 + C / tau) / (1 - (R + (tau + C) / 2) / M)                       (1)

Cost is price x instances x ``T``: the interval that minimises ``T`` minimises the cost.
With ``K = M - R - C / 2``, ``dT / dtau = 0`` is ``tau^2 + 2 C tau - 2 C K = 0``, so

    tau* = sqrt(C^2 + 2 C K) - C                                               (2)

which is Young's ``sqrt(2 C M)`` when ``C`` and ``R`` are small against ``M``. With
``C = 0`` (1) is the plan's former rule, ``hours / (1 - loss / M)``.

Example (a 20-hour job, interrupted every 3 hours, a 2 s checkpoint, 15 min restarts):
    >>> tau = optimal_checkpoint_interval(checkpoint_h=2 / 3600, restart_h=0.25, between_h=3.0)
    >>> round(tau * 3600)  # seconds of training between checkpoints
    197
    >>> round(expected_hours(20.0, tau, 2 / 3600, 0.25, 3.0), 2)
    22.26
"""

from __future__ import annotations

import math

from albertkit.config.sizes import AlbertSpec
from albertkit.models.footprint import parameter_count

# A checkpoint holds the float32 weights and two float32 slots per weight (AdamW's and
# LAMB's first and second moments): 12 bytes per parameter.
CHECKPOINT_BYTES_PER_PARAMETER = 12
CHECKPOINT_WRITE_MB_PER_S = 100.0  # an assumption: an EBS volume's sustained write, roughly


def checkpoint_seconds(spec: AlbertSpec, mb_per_s: float = CHECKPOINT_WRITE_MB_PER_S) -> float:
    """Seconds to write one checkpoint of ``spec`` (weights and optimizer slots) at
    ``mb_per_s`` megabytes per second."""
    return parameter_count(spec) * CHECKPOINT_BYTES_PER_PARAMETER / (mb_per_s * 1e6)


def expected_hours(work_h: float, interval_h: float, checkpoint_h: float, restart_h: float,
                   between_h: float) -> float | None:
    """Formula (1): wall hours of ``work_h`` hours of training, with a checkpoint after every
    ``interval_h`` of training; ``None`` when interruptions come faster than the job can
    make progress."""
    lost = restart_h + (interval_h + checkpoint_h) / 2
    if interval_h <= 0 or lost >= between_h:
        return None
    return work_h * (1 + checkpoint_h / interval_h) / (1 - lost / between_h)


def optimal_checkpoint_interval(checkpoint_h: float, restart_h: float,
                                between_h: float) -> float | None:
    """Formula (2): the hours of training between checkpoints that minimise (1); ``None``
    when no interval lets the job progress (``K <= 0``)."""
    k = between_h - restart_h - checkpoint_h / 2
    if k <= 0:
        return None
    if checkpoint_h <= 0:  # free checkpoints: as often as possible
        return 0.0
    return math.sqrt(checkpoint_h**2 + 2 * checkpoint_h * k) - checkpoint_h


def best_every_steps(step_h: float, max_steps: int, checkpoint_h: float, restart_h: float,
                     between_h: float) -> int | None:
    """The whole number of steps between checkpoints (1 to ``max_steps``) nearest to
    formula (2)'s optimum: whichever of the two neighbours gives the lower (1)."""
    tau = optimal_checkpoint_interval(checkpoint_h, restart_h, between_h)
    if tau is None:
        return None
    low = min(max(int(tau / step_h), 1), max_steps)
    candidates = {low, min(low + 1, max_steps)}
    scored = [(h, n) for n in candidates
              if (h := expected_hours(1.0, n * step_h, checkpoint_h, restart_h, between_h))
              is not None]
    return min(scored)[1] if scored else None
