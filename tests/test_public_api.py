"""albertkit's public Python API is what the ``__all__`` lists say, and nothing else by accident.

Public are the names in ``__all__`` of ``albertkit``, of each of its packages and of
``albertkit.errors`` (docs/api-policy.md). This file checks that

* every package declares ``__all__``, and every name in it resolves and is visible to static
  analysis (the API reference reads the source without importing it);
* the surface equals the checked-in list ``tests/public_api.txt``, so adding or removing a
  public name is a deliberate edit of that file (and a CHANGELOG entry);
* every public class, function and constant has a docstring;
* the examples and the documentation's code import only public names;
* importing the packages stays as light as before: no TensorFlow.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "albertkit"
SURFACE_FILE = Path(__file__).with_name("public_api.txt")

PACKAGES = ["albertkit"] + sorted(
    f"albertkit.{p.name}" for p in SRC.iterdir() if (p / "__init__.py").is_file())
PUBLIC_MODULES = [*PACKAGES, "albertkit.errors"]


def _source(module: str) -> Path:
    path = SRC.parent.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _all(module: str) -> list[str]:
    return list(importlib.import_module(module).__all__)


def surface() -> list[str]:
    """``module:name`` for every public name, sorted."""
    return sorted(f"{m}:{name}" for m in PUBLIC_MODULES for name in _all(m))


def test_the_packages_are_found():
    # a wrong SRC would leave every test below green over an empty list
    assert {"albertkit.config", "albertkit.training", "albertkit.sagemaker"} <= set(PACKAGES)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_module_declares_all(module):
    names = importlib.import_module(module).__dict__.get("__all__")
    assert names, f"{module} has no __all__"
    assert len(names) == len(set(names)), f"{module}.__all__ repeats a name"


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_name_in_all_resolves(module):
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"
    # `from module import *` takes exactly __all__, and dir() shows the lazy names
    namespace: dict = {}
    exec(f"from {module} import *", namespace)  # noqa: S102 - our own module
    assert set(namespace) - {"__builtins__"} == set(mod.__all__)
    assert set(mod.__all__) <= set(dir(mod))


def _static_names(path: Path) -> set[str]:
    """Names a module binds at top level as a reader of its source sees them, counting
    imports under ``if TYPE_CHECKING:`` (what a lazily exported name is declared with)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = list(tree.body)
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                   "typing.TYPE_CHECKING"):
            body += node.body
    names = set()
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_is_visible_without_importing(module):
    # the API reference reads the source: a lazy export must also be imported under
    # TYPE_CHECKING, or the reference silently loses it
    missing = set(_all(module)) - _static_names(_source(module))
    assert not missing, f"{module}: in __all__ but not bound in its source: {sorted(missing)}"


def test_the_check_sees_a_name_only_the_lazy_table_knows(tmp_path):
    path = tmp_path / "pkg.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from x import A\n__all__ = ['A', 'B']\n")
    assert {"A", "B"} - _static_names(path) == {"B"}


def test_the_surface_is_the_checked_in_list():
    want = [ln for ln in SURFACE_FILE.read_text(encoding="utf-8").splitlines()
            if ln and not ln.startswith("#")]
    have = surface()
    added, removed = sorted(set(have) - set(want)), sorted(set(want) - set(have))
    assert not (added or removed), (
        f"the public API changed: added {added}, removed {removed}. If that is intended, "
        f"update {SURFACE_FILE.name} and write it in CHANGELOG.md (docs/api-policy.md)")
    assert want == sorted(want), f"keep {SURFACE_FILE.name} sorted"


# ----------------------------------------------------------------------------- docstrings
def _own_docstring(obj) -> str:
    doc = obj.__doc__ if isinstance(obj, type) else getattr(obj, "__doc__", None)
    doc = (doc or "").strip()
    if dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""  # the signature dataclasses writes in when a class has no docstring
    return doc


def _attribute_docstring(name: str, package: str) -> str:
    """The string literal right after the top-level assignment of ``name`` in ``package``'s
    modules (where the API reference reads a constant's documentation)."""
    root = _source(package)
    files = sorted(root.parent.rglob("*.py")) if root.name == "__init__.py" else [root]
    for path in files:
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for node, after in zip(body, body[1:], strict=False):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                        and isinstance(after.value.value, str):
                    return after.value.value.strip()
                return ""
    return ""


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module):
    mod = importlib.import_module(module)
    undocumented = []
    for name in mod.__all__:
        obj = getattr(mod, name)
        if isinstance(obj, types.ModuleType):
            doc = obj.__doc__
        elif inspect.isclass(obj) or inspect.isroutine(obj):
            doc = _own_docstring(obj)
        else:  # a constant or a type alias: documented where it is assigned
            doc = _attribute_docstring(name, module) or _attribute_docstring(name, "albertkit")
        if not doc:
            undocumented.append(name)
    assert not undocumented, f"{module}: public names without a docstring: {undocumented}"


# ------------------------------------------------------------- examples and documentation
FROM_IMPORT = re.compile(r"^\s*from\s+(albertkit(?:\.\w+)*)\s+import\s+(\([^)]*\)|.+)$", re.M)
PLAIN_IMPORT = re.compile(r"^\s*import\s+(albertkit(?:\.\w+)*)", re.M)
FENCE = re.compile(r"^(`{3,})[^\n]*\n(.*?)^\1", re.M | re.S)


def private_imports(text: str, where: str) -> list[str]:
    """Each ``from albertkit... import X`` / ``import albertkit...`` in ``text`` that is not
    a public module and a name in its ``__all__``."""
    public = {m: set(_all(m)) for m in PUBLIC_MODULES}
    found = []
    for match in FROM_IMPORT.finditer(text):
        module, names = match.group(1), match.group(2).strip("()\n ")
        for item in names.split(","):
            name = item.split("#")[0].split(" as ")[0].strip()
            if name and (module not in public or name not in public[module]):
                found.append(f"{where}: from {module} import {name}")
    for match in PLAIN_IMPORT.finditer(text):
        if match.group(1) not in public:
            found.append(f"{where}: import {match.group(1)}")
    return found


def _documented_code() -> list[tuple[str, str]]:
    out = [(f"examples/{p.name}", p.read_text(encoding="utf-8"))
           for p in sorted((ROOT / "examples").glob("*.py"))]
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        out += [(str(path.relative_to(ROOT)), m.group(2)) for m in FENCE.finditer(text)]
    return out


def test_examples_and_docs_import_only_public_names():
    code = _documented_code()
    assert len({where for where, _ in code}) >= 15, "examples/ or docs/ moved"
    found = [line for where, text in code for line in private_imports(text, where)]
    assert found == [], "import these from the public places:\n" + "\n".join(found)


def test_the_import_check_can_fail():
    text = ("from albertkit.training.export import export_run\n"
            "from albertkit.training import (\n    AlbertTrainer,\n    run_tokenizer_dir,\n)\n"
            "import albertkit.training.checkpoint\n"
            "from albertkit import AlbertTrainer, TrainerConfig as C\n")
    assert private_imports(text, "x") == [
        "x: from albertkit.training.export import export_run",
        "x: from albertkit.training import run_tokenizer_dir",
        "x: import albertkit.training.checkpoint",
    ]


# ------------------------------------------------------------------------------ lightness
def test_importing_the_packages_does_not_import_tensorflow():
    # The lazy exports keep `import albertkit.<package>` as light as before they existed:
    # configs, the CLI's argument parsing and reading a run's metrics never start TensorFlow.
    code = ("import sys\n"
            f"for m in {PACKAGES!r}: __import__(m)\n"
            "print(sorted(m for m in ('tensorflow', 'keras', 'sentencepiece', 'sagemaker')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# ------------------------------------------------------------------------ the API reference
def test_the_reference_has_a_page_for_every_public_module():
    # mkdocs build --strict (scripts/docs.sh, in CI) renders these; a module left out would
    # be missing from the reference without any warning
    pages = (ROOT / "docs" / "reference").glob("*.md")
    rendered = {m for p in pages for m in re.findall(r"^::: (\S+)$", p.read_text(), re.M)}
    assert rendered == set(PUBLIC_MODULES)
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    unlisted = [str(p.relative_to(ROOT / "docs")) for p in sorted((ROOT / "docs").rglob("*.md"))
                if f" {p.relative_to(ROOT / 'docs')}\n" not in nav]
    assert unlisted == [], f"pages missing from mkdocs.yml's nav: {unlisted}"


def test_the_docs_link_check_finds_a_missing_file(tmp_path):
    spec = importlib.util.spec_from_file_location("mkdocs_hooks",
                                                  ROOT / "scripts" / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    (tmp_path / "docs").mkdir()
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "a.py").touch()
    (tmp_path / "docs" / "b.md").touch()
    text = ("[ok](../examples/a.py) [page](b.md#part) [web](https://x.org/y) [here](#z)\n"
            "[gone](../examples/gone.py) [no page](c.md) [outside](../../etc/passwd)\n"
            "`[code](d.md)`\n```\n[fenced](e.md)\n```\n")
    assert hooks.broken_links(text, tmp_path / "docs" / "index.md", tmp_path) == [
        "../examples/gone.py", "c.md", "../../etc/passwd"]


def test_every_error_class_is_public():
    """A user catches albertkit's errors by class: each one defined in albertkit.errors is in
    its __all__ (a new error added without listing it fails here)."""
    import inspect

    import albertkit.errors as errors

    defined = {name for name, obj in vars(errors).items()
               if inspect.isclass(obj) and issubclass(obj, errors.AlbertkitError)
               and obj.__module__ == errors.__name__}
    assert defined - set(errors.__all__) == set()
