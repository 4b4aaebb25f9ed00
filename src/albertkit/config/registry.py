"""The registries of albertkit's pluggable parts: tasks with the data kinds they read,
optimizers and model sizes.

Every part goes through one registry, albertkit's own built-ins included
(:mod:`albertkit.config.builtins` registers them with the same ``register_*`` calls a plugin
makes). A part is a typed config class (a pydantic model with a ``kind`` literal) or, for a
size, a set of :class:`~albertkit.config.sizes.AlbertSpec` fields; what needs TensorFlow (a
task class) is named by a dotted path, ``"package.module:Class"``, imported only when a run
builds it.

Outside packages are found through the entry-point group ``albertkit.plugins`` the first time
a config is parsed (never at ``import albertkit``). Each entry point names a function that
takes no argument and calls the ``register_*`` functions below; what it registers is checked
as a whole and committed only when all of it is valid, so a failing plugin leaves nothing
half-registered. In a plugin's ``pyproject.toml``::

    [project.entry-points."albertkit.plugins"]
    my_task = "my_package.albertkit_plugin:register"

Example:
    >>> sorted(data_kinds())  # doctest: +NORMALIZE_WHITESPACE
    ['classification', 'demo', 'multiple_choice', 'squad', 'synthetic', 'tfrecord',
     'user_classification', 'user_pretraining']
    >>> task_of_kind("demo"), sorted(optimizer_kinds()), "tiny" in size_names()
    ('pretraining', ['adamw', 'lamb'], True)
"""

from __future__ import annotations

import importlib
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from albertkit.config.sizes import AlbertSpec
from albertkit.errors import PluginError

ENTRY_POINT_GROUP = "albertkit.plugins"
"""The entry-point group albertkit loads plugins from: each entry point names a function
without arguments that makes ``register_*`` calls."""
PLUGIN_HINT = "a plugin may be missing: pip install it or check `albertkit plugins`"

Category = Literal["task", "data kind", "optimizer", "size"]


@dataclass(frozen=True)
class Source:
    """Who registered a part: albertkit itself, an entry point of a distribution, or a
    ``register_*`` call made outside any plugin."""

    label: str
    distribution: str | None = None  # what to install for the part (None: albertkit itself)

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
    """The tables, the pending batch of the registration in progress and the plugin state."""

    def __init__(self) -> None:
        self.tables: dict[Category, dict[str, Entry]] = {
            "task": {}, "data kind": {}, "optimizer": {}, "size": {}}
        self.version = 0
        self.pending: list[Entry] | None = None
        self.loaded: set[tuple[str, str]] = set()  # (distribution, entry point) committed
        self.plugins_done = False
        self.builtins_done = False


_REGISTRY = _Registry()


# --------------------------------------------------------------------------- registering
def register_task(name: str, task: str | type, *, data: Iterable[type[BaseModel]] = ()) -> None:
    """Register task ``name``, built by ``task`` (a class with ``for_data``, or its
    ``"module:Class"`` path, imported when a run needs it), with the data kinds it reads
    (config classes, each with a ``kind`` literal)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise PluginError(f"task name {name!r} is not an identifier")
    if isinstance(task, str):
        module, _, attr = task.partition(":")
        if not module or not attr:
            raise PluginError(f"task {name!r}: {task!r} is not a 'module:Class' path")
    elif not callable(getattr(task, "for_data", None)):
        raise PluginError(f"task {name!r}: {task!r} has no for_data(data, spec, ...) method")
    entries = [Entry("task", name, task)]
    entries += [_data_entry(cls, name) for cls in data]
    _submit(entries)


def register_data(config: type[BaseModel], *, task: str) -> None:
    """Register a data kind (its config class) for the already registered ``task``."""
    _submit([_data_entry(config, task)])


def register_optimizer(config: type[BaseModel]) -> None:
    """Register an optimizer: its config class, with a ``kind`` literal and a
    ``build(total_steps)`` that returns the Keras optimizer."""
    kind = _kind_of(config, "optimizer")
    if not callable(getattr(config, "build", None)):
        raise PluginError(f"optimizer {kind!r}: {config.__qualname__} has no build(total_steps)")
    if not {"clip_norm", "schedule"} <= set(config.model_fields):
        raise PluginError(f"optimizer {kind!r}: {config.__qualname__} lacks the clip_norm and "
                          "schedule fields the trainer reads (subclass "
                          "albertkit.config.sections.OptimizerSection)")
    _submit([Entry("optimizer", kind, config)])


def register_size(name: str, spec: Mapping[str, Any]) -> None:
    """Register model size ``name``: ``AlbertSpec`` fields (the rest take its defaults)."""
    if not isinstance(name, str) or not name:
        raise PluginError(f"size name {name!r} is not a non-empty string")
    try:
        AlbertSpec(**spec)
    except ValidationError as e:
        from albertkit.config.validation import first_error

        raise PluginError(f"size {name!r}: {first_error(e).removeprefix('<root>: ')}"
                          ) from None
    except TypeError as e:
        raise PluginError(f"size {name!r}: {_one_line(e)}") from None
    _submit([Entry("size", name, dict(spec))])


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
    if _REGISTRY.pending is not None:  # inside a plugin's registration: committed together
        _REGISTRY.pending.extend(entries)
    else:
        _ensure_builtins()
        _commit(entries, DIRECT)


def _commit(entries: list[Entry], source: Source) -> None:
    """Check ``entries`` against the registry and each other, then add all of them (or
    none)."""
    tables = _REGISTRY.tables
    seen: dict[tuple[str, str], Entry] = {}
    for e in entries:
        key = (e.category, e.name)
        owner = tables[e.category].get(e.name)
        if owner is not None or key in seen:
            first = owner.source if owner is not None else source
            raise PluginError(f"{e.category} {e.name!r} is registered twice: by {first} and "
                              f"by {source}")
        seen[key] = e
    tasks = set(tables["task"]) | {e.name for e in entries if e.category == "task"}
    for e in entries:
        if e.category == "data kind" and e.task not in tasks:
            raise PluginError(f"{source}: data kind {e.name!r} names task {e.task!r}, which "
                              f"nobody registered; known tasks: {sorted(tasks)}")
    for e in entries:
        tables[e.category][e.name] = Entry(e.category, e.name, e.value, source, e.task)
    if entries:
        _REGISTRY.version += 1


def run_registration(register: Callable[[], Any], source: Source) -> None:
    """Call ``register`` (which calls ``register_*``) and commit what it registered, all of
    it or, on any error, none."""
    if _REGISTRY.pending is not None:
        raise PluginError(f"{source}: registrations cannot nest")
    _REGISTRY.pending = []
    try:
        register()
        entries = _REGISTRY.pending
    except PluginError as e:
        raise PluginError(f"{source}: {e}") from None
    except Exception as e:  # noqa: BLE001 - any failure of outside code is named as its own
        raise PluginError(f"{source}: registration failed: {_one_line(e)}") from e
    finally:
        _REGISTRY.pending = None
    _commit(entries, source)


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


# --------------------------------------------------------------------------- loading
def _ensure_builtins() -> None:
    if not _REGISTRY.builtins_done:
        _REGISTRY.builtins_done = True
        from albertkit.config.builtins import register_builtins

        run_registration(register_builtins, BUILTIN)


def load_plugins() -> None:
    """Load every ``albertkit.plugins`` entry point not loaded yet (once per process when
    they all load; a failing one raises :class:`PluginError` each time it is tried)."""
    _ensure_builtins()
    if _REGISTRY.plugins_done:
        return
    import importlib.metadata  # here, not at import: `import albertkit` stays lean

    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    for ep in sorted(found, key=lambda ep: ep.name):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else "an unknown distribution"
        version = dist.version if dist is not None else "?"
        if (dist_name, ep.name) in _REGISTRY.loaded:
            continue
        source = Source(f"plugin {ep.name!r} ({dist_name} {version})", dist_name)
        try:
            register = ep.load()
        except Exception as e:  # noqa: BLE001 - the plugin's problem, named as such
            raise PluginError(f"albertkit plugin {ep.name!r} of {dist_name} {version} failed to "
                              f"import ({ep.value}): {_one_line(e)}") from e
        if not callable(register):
            raise PluginError(f"albertkit plugin {ep.name!r} of {dist_name} {version}: "
                              f"{ep.value} is not a function; the entry point must name the "
                              "function that registers (module:function)")
        run_registration(register, source)
        _REGISTRY.loaded.add((dist_name, ep.name))
    _REGISTRY.plugins_done = True


def current_version() -> int:
    """A number that changes whenever something is registered (plugins loaded first)."""
    load_plugins()
    return _REGISTRY.version


# --------------------------------------------------------------------------- reading
def entries(category: Category) -> dict[str, Entry]:
    """The registered parts of ``category`` by name, in registration order (built-ins
    first); plugins are not loaded by this call."""
    _ensure_builtins()
    return dict(_REGISTRY.tables[category])


def data_kinds() -> dict[str, type[BaseModel]]:
    """Config class of every registered data kind."""
    return {k: e.value for k, e in entries("data kind").items()}


def optimizer_kinds() -> dict[str, type[BaseModel]]:
    """Config class of every registered optimizer."""
    return {k: e.value for k, e in entries("optimizer").items()}


def size_names() -> list[str]:
    """Every registered model size."""
    return list(entries("size"))


def size_fields(name: str) -> dict[str, Any]:
    """The ``AlbertSpec`` fields of size ``name``."""
    table = entries("size")
    if name not in table:
        raise PluginError(f"unknown model size {name!r}; known: {list(table)} ({PLUGIN_HINT})")
    return dict(table[name].value)


def task_of_kind(kind: str) -> str:
    """The task that data kind ``kind`` trains."""
    table = entries("data kind")
    if kind not in table:
        raise PluginError(f"unknown data kind {kind!r}; known: {list(table)} ({PLUGIN_HINT})")
    return str(table[kind].task)


def task_builder(name: str) -> Any:
    """The class of task ``name`` (imported now when it was registered by path)."""
    table = entries("task")
    if name not in table:
        raise PluginError(f"unknown task {name!r}; known: {list(table)} ({PLUGIN_HINT})")
    entry = table[name]
    if not isinstance(entry.value, str):
        return entry.value
    module, _, attr = entry.value.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise PluginError(f"task {name!r} of {entry.source}: cannot import {entry.value}: "
                          f"{_one_line(e)}") from e


def union_tags() -> set[str]:
    """Every ``kind`` of the tagged unions (pydantic puts them in error locations)."""
    return set(entries("data kind")) | set(entries("optimizer"))


def plugin_parts(data_kind: str, optimizer_kind: str, size: str) -> list[Entry]:
    """The parts a config with these kinds and size takes from outside albertkit (its data
    kind, the task that kind trains, its optimizer, its size)."""
    wanted = [("data kind", data_kind), ("optimizer", optimizer_kind), ("size", size)]
    kind = entries("data kind").get(data_kind)
    if kind is not None and kind.task is not None:
        wanted.append(("task", kind.task))
    out = []
    for category, name in wanted:
        entry = entries(category).get(name)  # type: ignore[arg-type]
        if entry is not None and not entry.source.builtin:
            out.append(entry)
    return out


class TaskOfKind(Mapping[str, str]):
    """Read-only view: data kind -> the task it trains, as registered (``TASK_OF_KIND``).
    A kind not registered yet loads the plugins before it counts as unknown."""

    def __getitem__(self, kind: str) -> str:
        entry = entries("data kind").get(kind)
        if entry is None:
            load_plugins()
            entry = entries("data kind").get(kind)
        if entry is None:
            raise KeyError(kind)
        return str(entry.task)

    def __iter__(self):
        return iter(entries("data kind"))

    def __len__(self) -> int:
        return len(entries("data kind"))

    def __repr__(self) -> str:
        return repr(dict(self))
