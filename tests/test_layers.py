"""The import-layer contract: albertkit's packages import one way, bottom to top.

    errors, fileio, hardware, tfstart, _lazy -> config -> models, optimizers, data -> distributed
    -> tasks -> training -> sagemaker, perf, plan, report, doctor -> cli

A module may import from its own layer or a lower one, never from a higher one; lazy imports
inside functions count too. Three exemptions, all deliberate: the package root re-exports the
public API; two documented conveniences reach up, each through one lazy import:
``AlbertTrainer.to_sagemaker()`` (in ``training/trainer.py``) and
``AlbertEncoderLayer.from_run()`` (in ``models/encoder_layer.py``, which reads a run through
``training.export``).

No two modules import each other, directly or around a circle, in any layer: every import
counts here too (lazy ones inside functions, and those only type checkers see), the
exemptions above included.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "albertkit"

LAYERS: dict[str, int] = {
    "errors": 0, "fileio": 0, "hardware": 0, "tfstart": 0, "_lazy": 0,
    "config": 1,
    "models": 2, "optimizers": 2, "data": 2,
    "distributed": 3,
    "tasks": 4,
    "training": 5,
    "sagemaker": 6, "perf": 6, "plan": 6, "report": 6, "doctor": 6,
    "cli": 7,
}
EXEMPT = {
    ("albertkit", "*"),  # the package root re-exports the public API lazily
    ("albertkit.training.trainer", "albertkit.sagemaker"),  # to_sagemaker(), documented
    ("albertkit.models.encoder_layer", "albertkit.training.export"),  # from_run(), documented
}


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the package root itself
    if parts[1] not in LAYERS:
        raise KeyError(f"module {module} belongs to no layer: add its top-level name to LAYERS")
    return LAYERS[parts[1]]


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return [(line, t) for line, t in found if t == "albertkit" or t.startswith("albertkit.")]


def violations(root: Path) -> list[str]:
    """Every upward import under ``root`` (the albertkit package folder), as readable lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        if (module, "*") in EXEMPT:
            continue
        mine = _layer(module)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _imports(tree, module, path.name == "__init__.py"):
            theirs = _layer(target)
            if theirs is None or mine is None or theirs <= mine:
                continue
            if any(module == m and (target == t or target.startswith(t + "."))
                   for m, t in EXEMPT):
                continue
            out.append(f"{path.relative_to(root.parent)}:{line}: {module} (layer {mine}) "
                       f"imports {target} (layer {theirs})")
    return out


def test_every_module_belongs_to_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py")
            or (p.is_dir() and (p / "__init__.py").is_file())}
    assert tops - set(LAYERS) == set(), "add new top-level modules to LAYERS"


def test_no_upward_imports():
    found = violations(SRC)
    assert found == [], "upward imports:\n" + "\n".join(found)


@pytest.mark.parametrize(("victim", "line"), [
    ("models/albert.py", "from albertkit.training.trainer import AlbertTrainer\n"),
    ("config/__init__.py", "    import albertkit.sagemaker.config\n"),
    ("data/corpus.py", "from albertkit.cli import main\n"),
])
def test_contract_catches_an_upward_import(tmp_path, victim, line):
    copy = tmp_path / "albertkit"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / victim
    text = target.read_text(encoding="utf-8")
    if line.startswith("    "):  # a lazy import inside a function body
        text += "\n\ndef _injected():\n" + line
    else:
        text += "\n" + line
    target.write_text(text, encoding="utf-8")
    found = violations(copy)
    assert len(found) == 1 and victim in found[0], found


# --------------------------------------------------------------------------- cycles
def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules it imports, for every module under ``root`` (a package folder):
    every import statement counts, wherever it stands. ``from package import name`` is an
    import of module ``package.name`` when there is one, else of ``package``."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".") if is_package else module.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                         for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in paths:  # `import a.b.c` of an attribute path
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def import_cycles(root: Path) -> list[list[str]]:
    """Every group of modules that import each other around a circle (the strongly connected
    components of :func:`import_graph` with more than one module; Tarjan's algorithm), each
    sorted, as one list."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycles():
    cycles = import_cycles(SRC)
    assert cycles == [], "modules that import each other:\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_detector_finds_a_planted_cycle(tmp_path):
    pkg = tmp_path / "albertkit"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from albertkit.sub.low import x\n")
    (pkg / "sub" / "low.py").write_text("x = 1\n")
    (pkg / "sub" / "mid.py").write_text("from albertkit.sub import low\n")
    (pkg / "top.py").write_text("from albertkit.sub import mid\nimport albertkit.sub.low\n")
    assert import_graph(pkg)["albertkit.top"] == {"albertkit.sub.mid", "albertkit.sub.low"}
    assert import_cycles(pkg) == []  # a chain, no circle
    # a lazy import inside a function closes a circle of three modules
    (pkg / "sub" / "low.py").write_text("x = 1\n\n\ndef f():\n    from .. import top\n")
    assert import_cycles(pkg) == [["albertkit.sub.low", "albertkit.sub.mid", "albertkit.top"]]
    # and in a copy of albertkit itself: config's registry importing the config root
    copy = tmp_path / "copy" / "albertkit"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "config" / "registry.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _injected():\n    from albertkit.config.root import TrainerConfig\n")
    cycles = import_cycles(copy)
    assert len(cycles) == 1 and {"albertkit.config.registry", "albertkit.config.root"} \
        <= set(cycles[0]), cycles


BENCHMARKS = SRC.parents[1] / "benchmarks"


def cli_imports(root: Path) -> list[str]:
    """Imports of ``albertkit.cli`` under ``root``: the measurement scripts use the library's
    public modules, never a command's internals."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _imports(tree, "benchmarks." + path.stem, False):
            if target == "albertkit.cli" or target.startswith("albertkit.cli."):
                out.append(f"{path.relative_to(root.parent)}:{line}: imports {target}")
    return out


def test_measurement_scripts_import_no_cli_internals(tmp_path):
    assert sorted(BENCHMARKS.glob("bench_*.py")), "benchmarks/ moved: update BENCHMARKS"
    assert cli_imports(BENCHMARKS) == []
    # the check can fail: a script that reaches into a command module is found
    copy = tmp_path / "benchmarks"
    copy.mkdir()
    (copy / "bench_x.py").write_text("def main():\n    from albertkit.cli.benchmark import x\n")
    assert cli_imports(copy) == ["benchmarks/bench_x.py:2: imports albertkit.cli.benchmark"]


MAX_MODULE_LINES = 700


def test_no_module_over_700_lines():
    """A module a reader can hold in their head: split one that grows past 700 lines."""
    long = {p.relative_to(SRC).as_posix(): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_perf_does_not_import_plan():
    """plan turns perf's rates into hours and dollars: it may import perf, never the reverse,
    but for the deprecated names perf/__init__.py still hands out from albertkit.plan."""
    found = []
    for path in sorted((SRC / "perf").rglob("*.py")):
        module = _module_name(path, SRC)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [f"{module}:{line}" for line, target in _imports(tree, module, False)
                  if (target == "albertkit.plan" or target.startswith("albertkit.plan."))
                  and module != "albertkit.perf"]
    assert found == []
