"""The registration half of the registries: the ``register_*`` calls and the tables they fill.

This module only records parts. Loading them (albertkit's built-ins, then the plugins'
entry points) and reading them is :mod:`albertkit.config.registry`, the module plugins and
users import; albertkit's built-ins (:mod:`albertkit.config.builtins`) make the same calls
from here, so that the registry stays above them in the import order.

A category is one row of :data:`CATEGORIES`: a new kind of pluggable part is a name there,
its ``register_*`` function and a reader in :mod:`albertkit.config.registry`.

Example:
    >>> entries = collect(lambda: register_size("small", {"hidden_size": 384}), DIRECT)
    >>> [(e.category, e.name) for e in entries]
    [('size', 'small')]
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from albertkit.config.sizes import AlbertSpec
from albertkit.config.validation import first_error
from albertkit.errors import PluginError

Category = Literal["task", "data kind", "optimizer", "size", "sentence splitter",
                   "word segmenter"]
CATEGORIES: tuple[Category, ...] = typing.get_args(Category)
"""Every category of registered part, in the order listings show them."""


@dataclass(frozen=True)
class Source:
    """Who registered a part: albertkit itself, an entry point of a distribution, or a
    ``register_*`` call made outside any plugin."""

    label: str
    distribution: str | None = None  # what to install for the part (None: albertkit itself)
    entry_point: str | None = None  # the entry point's name (plugins only)

    @property
    def builtin(self) -> bool:
        return self is BUILTIN

    def __str__(self) -> str:
        return self.label


BUILTIN = Source("albertkit (built-in)")
DIRECT = Source("a register_* call outside any plugin")


@dataclass(frozen=True)
class Entry:
    """One registered part: its category, name, what it is and who registered it.

    ``value`` is the task's class or its ``"module:attr"`` path (task), the config class
    (data kind, optimizer) or the architecture fields (size); ``task`` is the task a data kind
    trains.
    """

    category: Category
    name: str
    value: Any
    source: Source = DIRECT
    task: str | None = None


class _Registry:
    """The tables, the batch of the registration in progress, the direct calls waiting for
    the built-ins, and the plugin state (:mod:`albertkit.config.registry` loads)."""

    def __init__(self) -> None:
        self.tables: dict[Category, dict[str, Entry]] = {c: {} for c in CATEGORIES}
        self.pending: list[Entry] | None = None
        self.waiting: list[Entry] = []  # direct register_* calls made before the built-ins
        self.builtins_done = False
        self.plugins_done = False
        self.allowed: frozenset[str] | None = None  # plugins this process may load (None: all)
        self.loaded: set[tuple[str, str]] = set()  # (distribution, entry point) committed
        self.broken: dict[tuple[str, str], Any] = {}  # (distribution, entry point) -> report


_REGISTRY = _Registry()


# --------------------------------------------------------------------------- registering
def register_task(name: str, task: str | type, *, data: Iterable[type[BaseModel]] = ()) -> None:
    """Register task ``name``, built by ``task`` (a class with ``for_data``, or its
    ``"module:Class"`` path, imported when a run needs it), with the data kinds it reads
    (config classes, each with a ``kind`` literal)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise PluginError(f"task name {name!r} is not an identifier")
    if isinstance(task, str):
        _check_path(task, f"task {name!r}", "module:Class")
    elif not callable(getattr(task, "for_data", None)):
        raise PluginError(f"task {name!r}: {task!r} has no for_data(data, spec, ...) method")
    entries = [Entry("task", name, task)]
    entries += [_data_entry(cls, name) for cls in data]
    _submit(entries)


def register_data(config: type[BaseModel], *, task: str) -> None:
    """Register a data kind (its config class) for the already registered ``task``."""
    _submit([_data_entry(config, task)])


def register_optimizer(config: type[BaseModel]) -> None:
    """Register an optimizer: its config class, with a ``kind`` literal, the ``clip_norm``
    and ``schedule`` fields the trainer reads, and what builds the Keras optimizer: the
    ``"module:function"`` path its ``builder`` names (``function(config, total_steps)``,
    imported when a run builds it) or its own ``build(total_steps)``."""
    kind = _kind_of(config, "optimizer")
    builder = getattr(config, "builder", None)
    if builder is not None:
        _check_path(builder, f"optimizer {kind!r}", "module:function")
    elif not _has_own_build(config):
        raise PluginError(f"optimizer {kind!r}: {config.__qualname__} has no build(total_steps) "
                          "and names no builder ('module:function')")
    if not {"clip_norm", "schedule"} <= set(config.model_fields):
        raise PluginError(f"optimizer {kind!r}: {config.__qualname__} lacks the clip_norm and "
                          "schedule fields the trainer reads (subclass "
                          "albertkit.config.OptimizerSection)")
    _submit([Entry("optimizer", kind, config)])


def register_size(name: str, spec: Mapping[str, Any]) -> None:
    """Register model size ``name``: ``AlbertSpec`` fields (the rest take its defaults)."""
    if not isinstance(name, str) or not name:
        raise PluginError(f"size name {name!r} is not a non-empty string")
    try:
        AlbertSpec(**spec)
    except ValidationError as e:
        raise PluginError(f"size {name!r}: {first_error(e).removeprefix('<root>: ')}"
                          ) from None
    except TypeError as e:
        raise PluginError(f"size {name!r}: {one_line(e)}") from None
    _submit([Entry("size", name, dict(spec))])


def register_sentence_splitter(name: str, splitter: str | type, *,
                               languages: Iterable[str]) -> None:
    """Register sentence splitter ``name`` for ``languages`` (codes): a class whose instances
    have ``build(language)`` returning a function ``str -> list[str]``, or its
    ``"module:Class"`` path (imported when text is split). For its languages it replaces
    albertkit's own splitter."""
    if not isinstance(name, str) or not name.isidentifier():
        raise PluginError(f"sentence splitter name {name!r} is not an identifier")
    if isinstance(splitter, str):
        _check_path(splitter, f"sentence splitter {name!r}", "module:Class")
    elif not callable(getattr(splitter, "build", None)):
        raise PluginError(f"sentence splitter {name!r}: {splitter!r} has no build(language)")
    codes = (languages,) if isinstance(languages, str) else tuple(languages)
    if not all(isinstance(c, str) and c for c in codes):
        raise PluginError(f"sentence splitter {name!r}: languages={languages!r} is not a list "
                          "of language codes")
    _submit([Entry("sentence splitter", name, (splitter, codes))])


def register_word_segmenter(
    name: str, segmenter: str | type[BaseModel], *, languages: Iterable[str] = ()
) -> None:
    """Register word segmenter ``name``: its config class (a pydantic model with
    ``kind: Literal[name]`` and a ``build()`` that returns an object whose ``words(text)``
    gives the ``(start, end)`` character spans of the words of ``text``), or that class's
    ``"module:Class"`` path, imported when data is prepared. ``languages``: the language
    codes for which ``word_segmenter: auto`` picks it (the first registered wins)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise PluginError(f"word segmenter name {name!r} is not an identifier")
    if isinstance(segmenter, str):
        _check_path(segmenter, f"word segmenter {name!r}", "module:Class")
    else:
        kind = _kind_of(segmenter, "word segmenter")
        if kind != name:
            raise PluginError(f"word segmenter {name!r}: {segmenter.__qualname__} has "
                              f"kind {kind!r}")
        if not callable(getattr(segmenter, "build", None)):
            raise PluginError(f"word segmenter {name!r}: {segmenter.__qualname__} has no "
                              "build()")
    codes = tuple(languages)
    if not all(isinstance(c, str) and c for c in codes):
        raise PluginError(f"word segmenter {name!r}: languages={codes!r} are not codes")
    _submit([Entry("word segmenter", name, (segmenter, codes))])


def _has_own_build(config: type) -> bool:
    # OptimizerSection.build calls the builder the class names: only an override counts
    build = getattr(config, "build", None)
    return callable(build) and not getattr(build, "calls_builder", False)


def _check_path(path: Any, what: str, shape: str) -> None:
    module, _, attr = path.partition(":") if isinstance(path, str) else ("", "", "")
    if not module or not attr:
        raise PluginError(f"{what}: {path!r} is not a '{shape}' path")


def _kind_of(config: Any, what: str) -> str:
    if not (isinstance(config, type) and issubclass(config, BaseModel)):
        raise PluginError(f"{what} config {config!r} is not a pydantic model class")
    info = config.model_fields.get("kind")
    values = typing.get_args(info.annotation) if info is not None else ()
    if info is None or typing.get_origin(info.annotation) is not Literal or len(values) != 1 \
            or not isinstance(values[0], str):
        raise PluginError(f"{what} config {config.__qualname__} needs a field "
                          "kind: Literal['<name>'] (the name configs select it by)")
    return values[0]


def _data_entry(config: type[BaseModel], task: str) -> Entry:
    return Entry("data kind", _kind_of(config, "data"), config, task=task)


def _submit(entries: list[Entry]) -> None:
    if _REGISTRY.pending is not None:  # inside a registration: committed together
        _REGISTRY.pending.extend(entries)
    elif not _REGISTRY.builtins_done:  # the built-ins come first, then these
        _REGISTRY.waiting.extend(entries)
    else:
        commit(entries, DIRECT)


def commit(entries: list[Entry], source: Source) -> None:
    """Check ``entries`` against the registry and each other, then add all of them (or
    none)."""
    tables = _REGISTRY.tables
    seen: set[tuple[str, str]] = set()
    for e in entries:
        owner = tables[e.category].get(e.name)
        if owner is not None or (e.category, e.name) in seen:
            first = owner.source if owner is not None else source
            raise PluginError(f"{e.category} {e.name!r} is registered twice: by {first} and "
                              f"by {source}")
        seen.add((e.category, e.name))
    tasks = set(tables["task"]) | {e.name for e in entries if e.category == "task"}
    for e in entries:
        if e.category == "data kind" and e.task not in tasks:
            raise PluginError(f"{source}: data kind {e.name!r} names task {e.task!r}, which "
                              f"nobody registered; known tasks: {sorted(tasks)}")
    for e in entries:
        tables[e.category][e.name] = Entry(e.category, e.name, e.value, source, e.task)


def collect(register: Callable[[], Any], source: Source,
            into: list[Entry] | None = None) -> list[Entry]:
    """Call ``register`` (which calls ``register_*``) and return what it registered, without
    committing it. ``into`` receives each part as it is registered, so that a caller still
    knows what a failing registration had claimed."""
    if _REGISTRY.pending is not None:
        raise PluginError(f"{source}: registrations cannot nest")
    _REGISTRY.pending = into if into is not None else []
    try:
        register()
        return _REGISTRY.pending
    except PluginError as e:
        raise PluginError(f"{source}: {e}") from None
    except Exception as e:  # noqa: BLE001 - any failure of outside code is named as its own
        raise PluginError(f"{source}: registration failed: {one_line(e)}") from e
    finally:
        _REGISTRY.pending = None


def one_line(e: BaseException) -> str:
    """``Type: message`` of an exception, on one line."""
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


def registered(category: Category) -> dict[str, Entry]:
    """The parts of ``category`` committed so far (nothing is loaded by this call)."""
    return _REGISTRY.tables[category]
