"""``albertkit plugins``: every registered task, data kind, optimizer and model size, and
who registered it (albertkit itself or a plugin's entry point and distribution); then the
plugins that failed to load, each with its one-line reason, and those left out by
``ALBERTKIT_PLUGINS``."""

from __future__ import annotations

import argparse

from albertkit.config.registry import (
    CATEGORIES,
    ENTRY_POINT_GROUP,
    broken_plugins,
    entries,
    left_out_plugins,
    load_plugins,
)


def add_plugins_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``albertkit plugins`` to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "plugins",
        help="list the registered tasks, data kinds, optimizers, sizes and word segmenters",
        description="Load the plugins (entry-point group "
        f"{ENTRY_POINT_GROUP}) and list every registered part with its source, then every "
        "plugin that failed to load with its reason (exit status 1 when there is one) and "
        "those ALBERTKIT_PLUGINS=name,... leaves out.")
    p.set_defaults(func=run_plugins)
    return p


def plugins_table() -> list[str]:
    """One line per registered part (category, name, source), then one per broken plugin
    (``broken``, its entry point, the reason) and per plugin left out (plugins loaded
    first)."""
    load_plugins()
    rows = []
    for category in CATEGORIES:
        for name, entry in entries(category).items():
            trains = f" (trains {entry.task})" if entry.task else ""
            rows.append((category, name + trains, str(entry.source)))
    for b in broken_plugins():
        rows.append(("broken", b.entry_point, b.reason))
    for name, dist, version in left_out_plugins():
        rows.append(("left out", name, f"plugin {name!r} ({dist} {version}): not in "
                                       "ALBERTKIT_PLUGINS"))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    return [f"{c:<{widths[0]}}  {n:<{widths[1]}}  {s}" for c, n, s in rows]


def run_plugins(args: argparse.Namespace) -> int:
    print("\n".join(plugins_table()))
    return 1 if broken_plugins() else 0
