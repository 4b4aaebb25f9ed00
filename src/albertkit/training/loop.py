"""The training loop: take a step, let every hook look at it, until done or told to stop.

Everything with a cadence (logging, evaluation, checkpoints, the stop signal) is a hook
(:mod:`albertkit.training.hooks`), so the loop itself stays this short, in the spirit of
orbit's ``Controller`` and its actions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from albertkit.training.hooks import Hook
from albertkit.training.timing import StepClock


@dataclass(frozen=True)
class LoopResult:
    """Where the loop ended: the global step, the reason it stopped early (None when it
    reached ``max_steps``) and the seconds it ran."""

    step: int
    stopped_by: str | None
    wall_seconds: float


def train_loop(step_fn: Callable[[Any], dict[str, Any]], batches: Iterator[Any],
               start_step: int, max_steps: int, hooks: Sequence[Hook],
               clock: StepClock | None = None) -> LoopResult:
    """Run optimizer steps ``start_step + 1 .. max_steps``; after each one call every hook in
    order with ``(step, outputs as floats)``. The first hook that returns a reason ends the
    loop after that step; an exception from a hook ends it at once. ``clock`` times the
    input wait, the step and the hooks (:mod:`albertkit.training.timing`)."""
    clock = clock or StepClock()
    step, started = start_step, time.perf_counter()
    while step < max_steps:
        with clock.input():
            batch = next(batches)
        out = clock.step(step + 1, step_fn, batch)
        step += 1
        for hook in hooks:
            with clock.hook(hook):
                reason = hook(step, out)
            if reason is not None:
                return LoopResult(step, reason, time.perf_counter() - started)
    return LoopResult(step, None, time.perf_counter() - started)
