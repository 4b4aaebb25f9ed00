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


def apply_overrides(
    raw: dict[str, Any], overrides: list[str], values: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return a copy of ``raw`` with dotted ``a.b.c=value`` overrides applied.

    Values are parsed as YAML scalars/lists (``1e-3`` -> float, ``true`` -> bool,
    ``[a, b]`` -> list); ``key=null`` removes an override. ``values`` maps dotted keys to
    values that are set as they are, after the text overrides: command-line paths go there,
    because YAML would turn ``runs/x #tmp`` into ``runs/x``, ``on`` into true and ``0123``
    into 83.
    """
    out = json.loads(json.dumps(raw, default=str))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        key, _, text = item.partition("=")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        _set_dotted(out, key, value, item)
    for key, value in (values or {}).items():
        _set_dotted(out, key, value, f"{key}={value}")
    return out


def _set_dotted(out: dict[str, Any], key: str, value: Any, item: str) -> None:
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"override {item!r} has an empty key")
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
