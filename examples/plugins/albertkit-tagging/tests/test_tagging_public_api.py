"""The plugin imports nothing private from albertkit.

Every ``import albertkit...`` / ``from albertkit... import name`` in the package's source is
read from its syntax tree and must name albertkit's public API: a public module (one that
``tests/public_api.txt`` lists names of) or a ``module:name`` line of that file.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "albertkit_tagging"
PUBLIC_API = Path(__file__).resolve().parents[4] / "tests" / "public_api.txt"


def public_api() -> tuple[set[str], set[tuple[str, str]]]:
    """albertkit's public modules and ``(module, name)`` pairs."""
    pairs = set()
    for line in PUBLIC_API.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            module, _, name = line.strip().partition(":")
            pairs.add((module, name))
    return {m for m, _ in pairs}, pairs


def private_imports(source: str, filename: str = "<source>") -> list[str]:
    """The imports of albertkit in ``source`` that reach past the public API."""
    modules, names = public_api()
    bad = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "albertkit" and alias.name not in modules:
                    bad.append(f"{filename}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "albertkit":
            for alias in node.names:
                public = (node.module, alias.name) in names \
                    or f"{node.module}.{alias.name}" in modules
                if not public:
                    bad.append(f"{filename}:{node.lineno}: from {node.module} import "
                               f"{alias.name}")
    return bad


def test_the_plugin_imports_only_albertkit_s_public_api():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) >= 7
    used = 0
    for path in files:
        source = path.read_text(encoding="utf-8")
        assert private_imports(source, path.name) == []
        used += source.count("from albertkit")
    assert used >= 8  # the check has something to check


def test_the_check_catches_private_imports():
    source = "\n".join([
        "import albertkit.models.hf",                            # a private module
        "from albertkit.data.finetune import FinetuneDatasets",  # a name from one
        "from albertkit.config import _REGISTRY",                # an underscore name
        "from albertkit.tasks.base import Task",                 # public name, private path
        "from albertkit.config import TrainerConfig",            # fine
        "from albertkit import models",                          # fine: a public module
        "import albertkit.errors",                               # fine
        "if True:",
        "    from albertkit.fileio import atomic_write_text",    # nested: still found
    ])
    assert private_imports(source) == [
        "<source>:1: import albertkit.models.hf",
        "<source>:2: from albertkit.data.finetune import FinetuneDatasets",
        "<source>:3: from albertkit.config import _REGISTRY",
        "<source>:4: from albertkit.tasks.base import Task",
        "<source>:9: from albertkit.fileio import atomic_write_text",
    ]
