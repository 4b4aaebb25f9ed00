"""The record of a finished (or interrupted) run: ``run_dir/summary.json``, written once when
the loop ends, from the run's state and the loop's result."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albertkit.fileio import atomic_write_text

if TYPE_CHECKING:
    from albertkit.config import TrainerConfig
    from albertkit.training.loop import LoopResult
    from albertkit.training.state import Run

log = logging.getLogger("albertkit")


def write_summary(cfg: TrainerConfig, run: Run, result: LoopResult, train: dict[str, float],
                  evaluation: dict[str, float],
                  time_breakdown: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's summary; the chief writes it to ``run_dir/summary.json``.

    Args:
        cfg: the run's config.
        run: the run (its state gives the resumed step, best and last checkpoint, sifting).
        result: where the loop ended.
        train: the latest logged train metrics.
        evaluation: the latest evaluation.
        time_breakdown: the latest logged time breakdown (None: not measured).
    """
    state = run.state
    sequences_per_step = cfg.runtime.global_batch_size
    summary = {
        "task": cfg.task,
        "status": "interrupted" if result.stopped_by else "completed",
        "step": result.step,
        "max_steps": cfg.runtime.max_steps,
        "resumed_from_step": state.start_step,
        "train": train,
        "eval": evaluation,
        "best": state.best,
        "skipped_steps": int(run.step.skipped_steps.numpy()),
        "wall_seconds": round(result.wall_seconds, 2),
        "sequences_per_second": round((result.step - state.start_step) * sequences_per_step
                                      / max(result.wall_seconds, 1e-9), 2),
        "global_batch_size": sequences_per_step,
        "accumulation_steps": run.accum,
        "replicas": run.distributor.replicas,
        "parameters": int(run.model.count_params()),
        "last_checkpoint": state.last_checkpoint,
    }
    if time_breakdown:
        summary["time"] = time_breakdown
    if state.sifting is not None:
        summary["sifting"] = state.sifting.totals()
    if run.distributor.is_chief:
        path = Path(cfg.run_dir) / "summary.json"
        atomic_write_text(path, json.dumps(summary, indent=2))
        log.info("summary written to %s", path)
    return summary
