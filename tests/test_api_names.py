"""Public names that explain themselves: SQuAD's helpers say so (their old names warn, as
docs/api-policy.md's deprecation rules ask), each name has one home, and albertkit's own
tasks are listed once."""

from __future__ import annotations

import importlib
import typing
import warnings
from collections import defaultdict

import pytest

from test_public_api import PUBLIC_MODULES, _all

# old name -> its replacement (docs/api-policy.md, "Deprecations")
DEPRECATED = {
    "albertkit.data.convert_examples": "albertkit.data.convert_squad_examples",
    "albertkit.tasks.postprocess": "albertkit.tasks.postprocess_squad",
    "albertkit.tasks.evaluate_files": "albertkit.tasks.evaluate_squad_files",
    "albertkit.config.ConfigError": "albertkit.errors.ConfigError",
    "albertkit.perf.BenchmarkError": "albertkit.errors.BenchmarkError",
    "albertkit.report.ReportError": "albertkit.errors.ReportError",
}


def _resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return importlib.import_module(module), name


@pytest.mark.parametrize("old", sorted(DEPRECATED))
def test_an_old_name_still_works_and_warns(old):
    module, name = _resolve(old)
    new_module, new_name = _resolve(DEPRECATED[old])
    assert name not in module.__all__ and name not in dir(module)
    for _ in range(2):  # every use warns (the alias is never cached in the package)
        with pytest.warns(DeprecationWarning) as caught:
            value = getattr(module, name)
        assert value is getattr(new_module, new_name)
        message = str(caught[0].message)
        assert message == (f"{old} is deprecated: use {DEPRECATED[old]} (the old name is "
                           "removed in albertkit 0.4)")
    with pytest.warns(DeprecationWarning, match=DEPRECATED[old]):
        exec(f"from {module.__name__} import {name}", {})  # noqa: S102 - our own module


def test_the_deprecation_table_of_the_policy_lists_every_alias():
    from pathlib import Path

    policy = (Path(__file__).resolve().parents[1] / "docs" / "api-policy.md").read_text()
    for old, new in DEPRECATED.items():
        assert f"| `{old}` | `{new}`" in policy, old


def test_a_replacement_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for new in DEPRECATED.values():
            module, name = _resolve(new)
            getattr(module, name)


def test_an_unknown_name_is_still_an_attribute_error():
    import albertkit.tasks

    with pytest.raises(AttributeError, match="has no attribute 'postprocessing'"):
        albertkit.tasks.postprocessing  # noqa: B018


def test_every_public_name_has_one_home():
    """No name is in two packages' ``__all__``; ``albertkit`` itself re-exports the four
    names a first program needs from their homes (docs/api-policy.md)."""
    homes = defaultdict(list)
    for module in PUBLIC_MODULES:
        if module != "albertkit":
            for name in _all(module):
                homes[name].append(module)
    twice = {name: where for name, where in homes.items() if len(where) > 1}
    assert twice == {}
    import albertkit

    for name in albertkit.__all__:
        (home,) = homes[name]
        assert getattr(albertkit, name) is getattr(importlib.import_module(home), name)


def test_albertkit_s_tasks_are_listed_once():
    from albertkit.config import TaskName
    from albertkit.config.builtins import BUILTIN_TASKS
    from albertkit.config.registry import entries
    from albertkit.tasks import TASK_NAMES, task_class

    assert TASK_NAMES == typing.get_args(TaskName) == tuple(BUILTIN_TASKS)
    registered = [name for name, e in entries("task").items() if e.source.builtin]
    assert registered == list(TASK_NAMES)
    for name in TASK_NAMES:
        assert task_class(name).name == name
