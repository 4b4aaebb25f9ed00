"""Tasks: what a model learns (pretraining, SQuAD, classification, multiple choice) and how it
is scored.

``build_task(cfg, spec)`` builds the task ``cfg.task`` names (the data kind decides it, see
``albertkit.config.TASK_OF_KIND``); ``task_class(name)`` gives its class, whose ``log_keys``
name the metrics it reports. Tasks come from the registry (:mod:`albertkit.config.registry`),
where albertkit's own are registered exactly as a plugin's. Importing a task module does not
import TensorFlow.

The public names (``__all__``) are importable from here. Besides the two above:

* the contract a task of your own implements: the :class:`Task` base class, the names of
  its metrics (:class:`LogKeys`), and its data, :class:`TaskData` (which
  :class:`albertkit.data.ExampleData` builds from examples), made of :data:`Batch` es, with
  :data:`Stats` sums for the metrics;
* SQuAD's pieces on their own: :func:`postprocess_squad` turns a model's logits into
  answers (:class:`SquadPredictions`), :func:`evaluate_squad_files` scores them as the
  official scripts do.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albertkit._lazy import lazy_exports
from albertkit.config import TaskName
from albertkit.config.registry import task_builder

if TYPE_CHECKING:
    from albertkit.config import TrainerConfig
    from albertkit.config.sizes import AlbertSpec
    from albertkit.tasks.base import Batch, LogKeys, Stats, Task, TaskData
    from albertkit.tasks.squad import SquadPredictions, postprocess_squad
    from albertkit.tasks.squad_metrics import evaluate_squad_files

__all__ = [
    "Batch",
    "LogKeys",
    "SquadPredictions",
    "Stats",
    "Task",
    "TaskData",
    "build_task",
    "evaluate_squad_files",
    "postprocess_squad",
    "task_class",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Batch": "base",
    "LogKeys": "base",
    "SquadPredictions": "squad",
    "Stats": "base",
    "Task": "base",
    "TaskData": "base",
    "evaluate_squad_files": "squad_metrics",
    "postprocess_squad": "squad",
}, deprecated={
    # the names of albertkit 0.2, deprecated in 0.3 (docs/api-policy.md)
    "evaluate_files": ("albertkit.tasks:evaluate_squad_files", "0.4"),
    "postprocess": ("albertkit.tasks:postprocess_squad", "0.4"),
})

# albertkit's own tasks, from the one list (the registry may hold more, from plugins).
TASK_NAMES: tuple[str, ...] = typing.get_args(TaskName)


def task_class(name: str) -> type[Task]:
    """The class of the task called ``name`` (imported from the registry's path)."""
    return task_builder(name)


def build_task(cfg: TrainerConfig, spec: AlbertSpec) -> Task:
    """The task ``cfg.task`` names, for ``cfg.data`` (with its tokenizer, see
    :func:`finetune_data`) and the run's batch shape, precision and rematerialisation."""
    return task_class(cfg.task).for_data(
        finetune_data(cfg), spec, micro_batch_size=cfg.runtime.micro_batch_size,
        dtype=cfg.runtime.precision, remat=cfg.runtime.remat)


def finetune_data(cfg: TrainerConfig) -> Any:
    """``cfg.data``; for fine-tuning from ``model.load_from``, with the tokenizer that model
    carries when ``data.tokenizer`` is unset, and refused when ``data.tokenizer`` names
    another (vocabulary size, special ids or hash differ). Pretraining data finds its
    tokenizer itself (from its manifest).

    Raises:
        ConfigError: the tokenizers differ, or there is none to take (both named).
    """
    data, source = cfg.data, cfg.model.load_from
    if cfg.task == "pretraining" or source is None or not hasattr(data, "tokenizer"):
        return data
    from albertkit.data.tokenizer_match import (
        TokenizerIdentity,
        check_model_tokenizer,
        model_tokenizer_dir,
    )
    from albertkit.errors import ConfigError

    if data.tokenizer is not None:
        if Path(data.tokenizer).exists():  # (a missing one is named where it is loaded)
            check_model_tokenizer(TokenizerIdentity.of(data.tokenizer),
                                  f"data.tokenizer={data.tokenizer}", source)
        return data
    own = model_tokenizer_dir(source)
    if own is None:
        raise ConfigError(
            f"data.tokenizer is not set and model.load_from={source} carries no tokenizer "
            "(an albertkit run or export keeps it in tokenizer/, a Hugging Face directory "
            "beside config.json): set data.tokenizer")
    return data.model_copy(update={"tokenizer": own})
