"""Lazy re-exports: a package names its public objects without importing the modules that hold them.

Most of albertkit's packages hold modules that import TensorFlow, sentencepiece or the
SageMaker SDK. Their ``__init__.py`` lists the public names in ``__all__`` and hands the
module each one lives in to :func:`lazy_exports`; the module is imported the first time the
name is read (``from albertkit.training import AlbertTrainer``), so importing the package, or
any light module inside it, stays as cheap as before.

Each such package also imports the same names under ``typing.TYPE_CHECKING``, for type
checkers and for the API reference (which reads the source and never imports it);
``tests/test_public_api.py`` checks that the two lists agree.

This module imports nothing from albertkit, so every layer may use it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    ``where`` maps each lazily exported name to the submodule (relative to ``package``) that
    defines it. A name read once is stored in the package, so later reads are plain lookups.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
