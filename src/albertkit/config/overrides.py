"""Dotted ``--set key.path=value`` overrides on a raw config mapping.

Example:
    >>> apply_overrides({"runtime": {"max_steps": 10}}, ["runtime.max_steps=20", "seed=3"])
    {'runtime': {'max_steps': 20}, 'seed': 3}
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from albertkit.errors import ConfigError


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``raw`` with dotted ``a.b.c=value`` overrides applied.

    Values are parsed as YAML scalars/lists (``1e-3`` -> float, ``true`` -> bool,
    ``[a, b]`` -> list); ``key=null`` removes an override.
    """
    out = json.loads(json.dumps(raw, default=str))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        key, _, text = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"override {item!r} has an empty key")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(
                    f"override {item!r}: {'.'.join(parts[: i + 1])} is a value, not a section"
                )
            node = nxt
        node[parts[-1]] = value
    return out
