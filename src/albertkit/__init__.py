"""albertkit: pretrain ALBERT from scratch and fine-tune it with TensorFlow 2 + Keras 3.

The names a first program needs are importable from here::

    from albertkit import AlbertTrainer, TrainerConfig

Everything else public is in a subpackage's ``__all__`` (``albertkit.config``,
``albertkit.data``, ``albertkit.models``, ``albertkit.training``, ``albertkit.sagemaker`` ...)
and in ``albertkit.errors``; what is public and how it changes is written down in
``docs/api-policy.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports
from albertkit.config import TrainerConfig
from albertkit.errors import AlbertkitError, ConfigError

if TYPE_CHECKING:
    from albertkit.training.trainer import AlbertTrainer

__all__ = ["AlbertTrainer", "AlbertkitError", "ConfigError", "TrainerConfig"]
# The one place the version is written: pyproject.toml reads it from here (setuptools'
# dynamic version), `albertkit --version` prints it, CHANGELOG.md's newest release names it.
__version__ = "0.2.0"

# The trainer pulls in TensorFlow; `import albertkit` for the config or the CLI's argument
# parsing should not.
__getattr__, __dir__ = lazy_exports(__name__, {"AlbertTrainer": "training.trainer"})
