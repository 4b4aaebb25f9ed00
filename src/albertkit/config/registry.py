"""The registries of albertkit's pluggable parts: tasks with the data kinds they read,
optimizers, model sizes, sentence splitters and word segmenters; loading them and reading
them.

Every part goes through one registry, albertkit's own built-ins included
(:mod:`albertkit.config.builtins` registers them with the same ``register_*`` calls a plugin
makes, :mod:`albertkit.config.registration`). A part is a typed config class (a pydantic
model with a ``kind`` literal) or, for a size, a set of :class:`~albertkit.config.sizes.AlbertSpec`
fields; what needs TensorFlow (a task class, an optimizer builder) is named by a dotted path,
``"package.module:name"``, imported only when a run builds it.

Plugins are the entry points of the group ``albertkit.plugins``, loaded the first time a
config is parsed (never at ``import albertkit``). Each names a function that takes no
argument and calls the ``register_*`` functions below; what it registers is checked as a
whole and committed only when all of it is valid. A plugin that fails (its import, its
registration, a name another part owns) is reported once, listed by ``albertkit plugins``
and skipped: configs that use none of its parts still run, and a config that names one of
them stops with the plugin's one-line reason. In a plugin's ``pyproject.toml``::

    [project.entry-points."albertkit.plugins"]
    my_task = "my_package.albertkit_plugin:register"

Which plugins load: all installed ones, or only those the edge of the process allows
(:func:`limit_plugins`, from ``ALBERTKIT_PLUGINS`` at the command line, the SageMaker entry
point and ``to_sagemaker()``), and of those only the ones a config's ``plugins:`` names.

Example:
    >>> sorted(data_kinds())  # doctest: +NORMALIZE_WHITESPACE
    ['classification', 'demo', 'multiple_choice', 'squad', 'synthetic', 'tfrecord',
     'user_classification', 'user_pretraining']
    >>> task_of_kind("demo"), sorted(optimizer_kinds()), "tiny" in size_names()
    ('pretraining', ['adamw', 'lamb'], True)
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from albertkit.config.builtins import register_builtins
from albertkit.config.registration import (
    _REGISTRY,
    BUILTIN,
    CATEGORIES,
    DIRECT,
    Category,
    Entry,
    Source,
    collect,
    commit,
    one_line,
    register_data,
    register_optimizer,
    register_sentence_splitter,
    register_size,
    register_task,
    register_word_segmenter,
    registered,
)
from albertkit.errors import PluginError

__all__ = [
    "BUILTIN", "CATEGORIES", "DIRECT", "ENTRY_POINT_GROUP", "PLUGIN_HINT", "BrokenPlugin",
    "Category", "Entry", "Source", "TASK_OF_KIND", "TaskOfKind", "broken_plugins",
    "data_kinds", "entries", "installed_plugin_names", "left_out_plugins", "limit_plugins", "load_plugins", "missing_hint",
    "optimizer_kinds", "plugin_named", "plugin_names", "plugin_parts", "register_data", "register_optimizer",
    "register_sentence_splitter", "register_size", "register_task", "register_word_segmenter", "run_registration", "size_fields", "size_names",
    "sentence_splitter_for", "sentence_splitters", "task_builder", "task_of_kind",
]

ENTRY_POINT_GROUP = "albertkit.plugins"
"""The entry-point group albertkit loads plugins from: each entry point names a function
without arguments that makes ``register_*`` calls."""
PLUGIN_HINT = "a plugin may be missing: pip install it or check `albertkit plugins`"

@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed to load: its entry point, distribution, the one-line reason and
    the parts it had registered before it failed (empty when its import failed)."""

    entry_point: str
    distribution: str
    version: str
    reason: str
    parts: tuple[tuple[str, str], ...] = ()


def run_registration(register: Callable[[], Any], source: Source) -> None:
    """Call ``register`` (which calls ``register_*``) and commit what it registered, all of
    it or, on any error, none."""
    commit(collect(register, source), source)


# --------------------------------------------------------------------------- loading
def _ensure_builtins() -> None:
    if _REGISTRY.builtins_done:
        return
    _REGISTRY.builtins_done = True
    run_registration(register_builtins, BUILTIN)
    waiting, _REGISTRY.waiting = _REGISTRY.waiting, []
    if waiting:  # register_* calls made before anything was read
        commit(waiting, DIRECT)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # as packaging normalises names


def plugin_names(text: str | None) -> list[str] | None:
    """The names in a comma-separated list (``ALBERTKIT_PLUGINS``), None for no list."""
    if text is None:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


def limit_plugins(names: Iterable[str] | None) -> None:
    """Let this process load only the plugins ``names`` lists (entry-point or distribution
    names; None: every installed plugin). The edges call it (``ALBERTKIT_PLUGINS``)."""
    allowed = None if names is None else frozenset(_normal(n) for n in names)
    if allowed != _REGISTRY.allowed:
        _REGISTRY.allowed = allowed
        _REGISTRY.plugins_done = False


def _picked(ep_name: str, dist: str, names: Collection[str] | None) -> bool:
    return names is None or bool({_normal(ep_name), _normal(dist)} & set(names))


def installed_plugins() -> Iterator[tuple[Any, str, str]]:
    """(entry point, distribution name, version) of every installed plugin, by name."""
    import importlib.metadata  # here, not at import: `import albertkit` stays lean

    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    for ep in sorted(found, key=lambda ep: ep.name):
        dist = getattr(ep, "dist", None)
        name = dist.metadata["Name"] if dist is not None else "an unknown distribution"
        yield ep, name, dist.version if dist is not None else "?"


def installed_plugin_names() -> set[str]:
    """The entry-point and distribution names of every installed plugin."""
    return {n for ep, dist, _ in installed_plugins() for n in (ep.name, dist)}


def plugin_named(names: str | Iterable[str], among: Iterable[str]) -> bool:
    """Whether ``names`` (one name or several) holds one of ``among``, compared as packaging
    compares distribution names (``My_Plugin`` is ``my-plugin``)."""
    mine = {_normal(names)} if isinstance(names, str) else {_normal(n) for n in names}
    return bool(mine & {_normal(n) for n in among})


def load_plugins(only: Iterable[str] | None = None) -> None:
    """Load the allowed ``albertkit.plugins`` entry points not tried yet (``only``: just
    these, by entry-point or distribution name). A plugin that fails is reported once and
    skipped (:func:`broken_plugins`)."""
    _ensure_builtins()
    if _REGISTRY.plugins_done:
        return
    wanted = None if only is None else {_normal(n) for n in only}
    for ep, dist, version in installed_plugins():
        key = (dist, ep.name)
        if key in _REGISTRY.loaded or key in _REGISTRY.broken \
                or not _picked(ep.name, dist, _REGISTRY.allowed) \
                or not _picked(ep.name, dist, wanted):
            continue
        _load(ep, dist, version)
    if wanted is None:
        _REGISTRY.plugins_done = True


def _load(ep: Any, dist: str, version: str) -> None:
    source = Source(f"plugin {ep.name!r} ({dist} {version})", dist, ep.name)
    claimed: list[Entry] = []
    try:
        try:
            register = ep.load()
        except Exception as e:  # noqa: BLE001 - the plugin's problem, named as such
            raise PluginError(f"albertkit plugin {ep.name!r} of {dist} {version} failed to "
                              f"import ({ep.value}): {one_line(e)}") from e
        if not callable(register):
            raise PluginError(f"albertkit plugin {ep.name!r} of {dist} {version}: {ep.value} "
                              "is not a function; the entry point must name the function "
                              "that registers (module:function)")
        commit(collect(register, source, into=claimed), source)
    except PluginError as e:
        report = BrokenPlugin(ep.name, dist, version, str(e),
                              tuple((p.category, p.name) for p in claimed))
        _REGISTRY.broken[(dist, ep.name)] = report
        import logging  # here, not at import: `import albertkit` stays lean

        logging.getLogger(__name__).warning("%s (plugin skipped)", report.reason)
        return
    _REGISTRY.loaded.add((dist, ep.name))


def left_out_plugins() -> list[tuple[str, str, str]]:
    """(entry point, distribution, version) of the installed plugins this process may not
    load (:func:`limit_plugins`)."""
    return [(ep.name, dist, version) for ep, dist, version in installed_plugins()
            if not _picked(ep.name, dist, _REGISTRY.allowed)]


def broken_plugins() -> list[BrokenPlugin]:
    """The plugins that failed to load in this process, each with its one-line reason."""
    return list(_REGISTRY.broken.values())


def missing_hint(category: str | None = None, name: str | None = None) -> str:
    """What to tell a config that names a part nobody registered: the broken plugin that
    claimed it, else that a plugin may be missing (and which plugins are broken)."""
    broken = broken_plugins()
    for b in broken:
        if (category, name) in b.parts:
            return f"it belongs to a plugin that failed to load: {b.reason}"
    if not broken:
        return PLUGIN_HINT
    return PLUGIN_HINT + "; plugins that failed to load: " + "; ".join(b.reason for b in broken)


# --------------------------------------------------------------------------- reading
def entries(category: Category) -> dict[str, Entry]:
    """The registered parts of ``category`` by name, in registration order (built-ins
    first); plugins are not loaded by this call."""
    _ensure_builtins()
    return dict(registered(category))


def data_kinds() -> dict[str, type[BaseModel]]:
    """Config class of every registered data kind."""
    return {k: e.value for k, e in entries("data kind").items()}


def optimizer_kinds() -> dict[str, type[BaseModel]]:
    """Config class of every registered optimizer."""
    return {k: e.value for k, e in entries("optimizer").items()}


def size_names() -> list[str]:
    """Every registered model size."""
    return list(entries("size"))


def _unknown(category: str, name: str, table: Mapping[str, Entry]) -> PluginError:
    return PluginError(f"unknown {category} {name!r}; known: {list(table)} "
                       f"({missing_hint(category, name)})")


def size_fields(name: str) -> dict[str, Any]:
    """The ``AlbertSpec`` fields of size ``name``."""
    table = entries("size")
    if name not in table:
        raise _unknown("model size", name, table)
    return dict(table[name].value)


def task_of_kind(kind: str) -> str:
    """The task that data kind ``kind`` trains."""
    table = entries("data kind")
    if kind not in table:
        raise _unknown("data kind", kind, table)
    return str(table[kind].task)


def task_builder(name: str) -> Any:
    """The class of task ``name`` (imported now when it was registered by path)."""
    table = entries("task")
    if name not in table:
        raise _unknown("task", name, table)
    entry = table[name]
    if not isinstance(entry.value, str):
        return entry.value
    module, _, attr = entry.value.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise PluginError(f"task {name!r} of {entry.source}: cannot import {entry.value}: "
                          f"{one_line(e)}") from e


def sentence_splitters() -> dict[str, tuple[str, ...]]:
    """The languages of every registered sentence splitter, by name (plugins loaded)."""
    load_plugins()
    return {k: e.value[1] for k, e in entries("sentence splitter").items()}


def sentence_splitter_for(language: str) -> Any:
    """A sentence splitter (an instance with ``build(language)``) for ``language``: the
    last one registered that lists it, a plugin's before albertkit's; the one named
    ``punctuation`` when none does."""
    load_plugins()
    table = entries("sentence splitter")
    claims = [e for e in table.values() if language in e.value[1]]
    plugins = [e for e in claims if not e.source.builtin]
    chosen = (plugins or claims or [table.get("punctuation")])[-1]
    if chosen is None:
        raise PluginError(f"no sentence splitter for language {language!r}; registered: "
                          f"{list(table)} ({PLUGIN_HINT})")
    splitter = chosen.value[0]
    if isinstance(splitter, str):
        module, _, attr = splitter.partition(":")
        try:
            splitter = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise PluginError(f"sentence splitter {chosen.name!r} of {chosen.source}: cannot "
                              f"import {chosen.value[0]}: {one_line(e)}") from e
    return splitter()


def plugin_parts(data_kind: str, optimizer_kind: str, size: str) -> list[Entry]:
    """The parts a config with these kinds and size takes from outside albertkit (its data
    kind, the task that kind trains, its optimizer, its size)."""
    wanted: list[tuple[Category, str]] = [
        ("data kind", data_kind), ("optimizer", optimizer_kind), ("size", size)]
    kind = entries("data kind").get(data_kind)
    if kind is not None and kind.task is not None:
        wanted.append(("task", kind.task))
    out = []
    for category, name in wanted:
        entry = entries(category).get(name)
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


TASK_OF_KIND: Mapping[str, str] = TaskOfKind()
"""What each data kind (``data.kind``) trains: the one mapping (the config's ``task``, the
task builder and the report read it here), a read-only view of the registry, so it also
holds the kinds plugins register."""
