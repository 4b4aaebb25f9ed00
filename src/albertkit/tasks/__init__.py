"""Tasks: what a model learns (pretraining, SQuAD, classification) and how it is scored.

``build_task(cfg, spec)`` builds the task ``cfg.task`` names (the data kind decides it, see
``albertkit.config.TASK_OF_KIND``); ``task_class(name)`` gives its class, whose ``log_keys``
name the metrics it reports. Tasks come from the registry (:mod:`albertkit.config.registry`),
where albertkit's own are registered exactly as a plugin's. Importing a task module does not
import TensorFlow.

The public names (``__all__``) are importable from here. Besides the two above and the
:class:`Task` base class, they are SQuAD's pieces on their own: :func:`postprocess` turns a
model's logits into answers (:class:`SquadPredictions`), :func:`evaluate_files` scores them
as the official scripts do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports
from albertkit.config.registry import task_builder

if TYPE_CHECKING:
    from albertkit.config import TaskName, TrainerConfig
    from albertkit.config.sizes import AlbertSpec
    from albertkit.tasks.base import Task
    from albertkit.tasks.squad import SquadPredictions, postprocess
    from albertkit.tasks.squad_metrics import evaluate_files

__all__ = [
    "SquadPredictions",
    "Task",
    "build_task",
    "evaluate_files",
    "postprocess",
    "task_class",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "SquadPredictions": "squad",
    "Task": "base",
    "evaluate_files": "squad_metrics",
    "postprocess": "squad",
})

# albertkit's own tasks (the registry may hold more, from plugins).
TASK_NAMES: tuple[TaskName, ...] = ("pretraining", "squad", "classification")


def task_class(name: str) -> type[Task]:
    """The class of the task called ``name`` (imported from the registry's path)."""
    return task_builder(name)


def build_task(cfg: TrainerConfig, spec: AlbertSpec) -> Task:
    """The task ``cfg.task`` names, for ``cfg.data`` and the run's batch shape, precision and
    rematerialisation."""
    return task_class(cfg.task).for_data(
        cfg.data, spec, micro_batch_size=cfg.runtime.micro_batch_size,
        dtype=cfg.runtime.precision, remat=cfg.runtime.remat)
