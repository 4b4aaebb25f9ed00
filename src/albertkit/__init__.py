"""albertkit: pretrain ALBERT from scratch and fine-tune it with TensorFlow 2 + Keras 3."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from albertkit.config import TrainerConfig

if TYPE_CHECKING:
    from albertkit.training.trainer import AlbertTrainer

__all__ = ["AlbertTrainer", "TrainerConfig"]
# The one place the version is written: pyproject.toml reads it from here (setuptools'
# dynamic version), `albertkit --version` prints it, CHANGELOG.md's newest release names it.
__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    # The trainer pulls in TensorFlow; `import albertkit` for the config or the CLI's
    # argument parsing should not.
    if name == "AlbertTrainer":
        from albertkit.training.trainer import AlbertTrainer

        return AlbertTrainer
    raise AttributeError(f"module 'albertkit' has no attribute {name!r}")
