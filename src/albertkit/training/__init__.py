"""Running a task: the :class:`AlbertTrainer` facade, checkpoints, a run's metrics and export.

The public names (``__all__``) are importable from here: ``from albertkit.training import
AlbertTrainer, export_run``. Each is imported on first use, so importing this package (or
reading a run's metrics) never pulls in TensorFlow. The modules beside it (the loop and its
hooks, the one training step, the run logger) are albertkit's own workings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.training.checkpoint import Checkpoint, CheckpointManager
    from albertkit.training.export import export_run, load_run_model
    from albertkit.training.run_logger import read_metrics, setup_console_logging
    from albertkit.training.trainer import AlbertTrainer

__all__ = [
    "AlbertTrainer",
    "Checkpoint",
    "CheckpointManager",
    "export_run",
    "load_run_model",
    "read_metrics",
    "setup_console_logging",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "AlbertTrainer": "trainer",
    "Checkpoint": "checkpoint",
    "CheckpointManager": "checkpoint",
    "export_run": "export",
    "load_run_model": "export",
    "read_metrics": "run_logger",
    "setup_console_logging": "run_logger",
})
