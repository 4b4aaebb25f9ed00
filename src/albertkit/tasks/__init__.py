"""Tasks: what a model learns (pretraining, SQuAD, classification) and how it is scored."""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

if TYPE_CHECKING:
    from albertkit.config import TrainerConfig
    from albertkit.models.sizes import AlbertSpec
    from albertkit.tasks.base import Task


def build_task(cfg: TrainerConfig, spec: AlbertSpec) -> Task:
    """The task for ``cfg.data.kind`` (exhaustive over the data union)."""
    d = cfg.data
    dtype = cfg.runtime.precision
    remat = cfg.runtime.remat
    match d.kind:
        case "synthetic" | "tfrecord" | "demo":
            from albertkit.tasks.pretraining import PretrainingTask

            return PretrainingTask(spec, d.seq_length, d.max_predictions_per_seq, dtype=dtype,
                                   remat=remat)
        case "squad":
            from albertkit.tasks.squad import SquadTask

            return SquadTask(spec, d, dtype=dtype, remat=remat)
        case "classification":
            from albertkit.tasks.classification import ClassificationTask

            return ClassificationTask(spec, d, dtype=dtype, remat=remat)
        case _:
            assert_never(d.kind)
