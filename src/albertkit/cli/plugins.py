"""``albertkit plugins``: every registered task, data kind, optimizer and model size, and
who registered it (albertkit itself or a plugin's entry point and distribution)."""

from __future__ import annotations

import argparse

from albertkit.config.registry import ENTRY_POINT_GROUP, entries, load_plugins


def add_plugins_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``albertkit plugins`` to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "plugins",
        help="list the registered tasks, data kinds, optimizers, sizes and word segmenters",
        description="Load the plugins (entry-point group "
        f"{ENTRY_POINT_GROUP}) and list every registered part with its source.")
    p.set_defaults(func=run_plugins)
    return p


def plugins_table() -> list[str]:
    """One line per registered part: category, name, source (plugins loaded first)."""
    load_plugins()
    rows = []
    for category in ("task", "data kind", "optimizer", "size", "word segmenter"):
        for name, entry in entries(category).items():
            trains = f" (trains {entry.task})" if entry.task else ""
            rows.append((category, name + trains, str(entry.source)))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    return [f"{c:<{widths[0]}}  {n:<{widths[1]}}  {s}" for c, n, s in rows]


def run_plugins(args: argparse.Namespace) -> int:
    print("\n".join(plugins_table()))
    return 0
