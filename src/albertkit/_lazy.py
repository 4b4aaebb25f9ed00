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
import warnings
from collections.abc import Callable, Mapping
from typing import Any

# An old public name -> (its replacement as "module:name", the release that removes it).
Deprecated = Mapping[str, tuple[str, str]]


def deprecated_alias(package: str, name: str, deprecated: Deprecated) -> Any:
    """The replacement of ``package.name``, with a ``DeprecationWarning`` that names it and
    the release the old name goes away in (docs/api-policy.md, "Deprecations"). Never
    stored in the package: every use warns."""
    target, removed_in = deprecated[name]
    module, _, attr = target.partition(":")
    warnings.warn(f"{package}.{name} is deprecated: use {module}.{attr} (the old name is "
                  f"removed in albertkit {removed_in})", DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(module), attr)


def lazy_exports(package: str, where: Mapping[str, str], deprecated: Deprecated | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    ``where`` maps each lazily exported name to the submodule (relative to ``package``) that
    defines it. A name read once is stored in the package, so later reads are plain lookups.
    ``deprecated`` maps old names, no longer in ``__all__``, to their replacement
    (:func:`deprecated_alias`).
    """
    old = deprecated or {}

    def __getattr__(name: str) -> Any:
        if name in old:
            return deprecated_alias(package, name, old)
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
