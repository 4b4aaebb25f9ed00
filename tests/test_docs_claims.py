"""What the documentation says about the code, checked against the code.

Prose drifts when the code moves and nobody rereads the page. These are the claims a
machine can check:

* the layering sentence in docs/concepts.md ("N imports reach up on purpose") against the
  exemptions of the layer test (``EXEMPT`` in tests/test_layers.py);
* the table of public modules in docs/api-policy.md against the ``__all__`` lists
  (tests/public_api.txt, which tests/test_public_api.py keeps equal to the code);
* README's "What is where" table against the files under src/albertkit, and README as a
  front door (at most 110 lines, no dated measurement log);
* the docstring examples in src/albertkit import only public names (the same rule
  tests/test_public_api.py applies to the examples and the documentation's code blocks);
* the commands the current docs name for benchmark scripts name scripts that exist, and
  docs/performance.md's current table is the one ``benchmarks/bench_targets.py`` writes.

Each check is a function of the text it reads that returns one readable line per wrong
claim; beside each test on the real files, a test feeds it a planted wrong claim and
asserts that it is reported, so a check that can no longer fail is noticed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from test_layers import EXEMPT
from test_public_api import PUBLIC_MODULES, private_imports

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "albertkit"
TICKED = re.compile(r"`([^`\n]+)`")
MODULE = re.compile(r"albertkit(?:\.\w+)*")


def _read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def _paragraph(text: str, at: int) -> str:
    """The block of lines around offset ``at``, between blank lines."""
    start = text.rfind("\n\n", 0, at)
    end = text.find("\n\n", at)
    return text[start + 2 if start >= 0 else 0: end if end >= 0 else len(text)]


def _section(text: str, heading: str) -> str:
    """The text under the Markdown heading ``heading`` up to the next heading of its level."""
    level = heading.split(" ")[0]
    match = re.search(rf"^{re.escape(heading)}\s*$", text, re.M)
    if match is None:
        return ""
    rest = text[match.end():]
    end = re.search(rf"^{level} ", rest, re.M)
    return rest[: end.start() if end else len(rest)]


def _table_rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown tables in ``text``, as stripped cells (header and
    separator rows left out)."""
    rows, previous = [], ""
    for line in text.splitlines():
        # the first row of a table is its header; the separator row is no row either
        if (line.startswith("|") and previous.startswith("|")
                and not re.fullmatch(r"\|[-:| ]+\|", line.strip())):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        previous = line if line.startswith("|") else ""
    return rows


# ------------------------------------------------------------------ the layering sentence
NUMBERS = {"no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
REACH_UP = re.compile(r"\b([A-Za-z]+)\s+imports?\s+reach(?:es)?\s+up\s+on\s+purpose")


def layering_claims(doc: str, exempt: Iterable[tuple[str, str]]) -> list[str]:
    """Where the paragraph "N imports reach up on purpose" disagrees with ``exempt`` (the
    layer test's ``(importer, imported)`` pairs; ``(module, "*")`` exempts a whole module,
    which is how the package root re-exports the API). The number counts the upward
    imports, the paragraph names both ends of each in backticks (`albertkit.x.y`), says
    "package root" when the root is exempt, and names no other albertkit module."""
    exempt = sorted(exempt)
    match = REACH_UP.search(doc)
    if match is None:
        return ["no sentence says how many imports reach up ('<N> imports reach up on "
                "purpose')"]
    paragraph = _paragraph(doc, match.start())
    upward = [(a, b) for a, b in exempt if b != "*"]
    whole = [a for a, b in exempt if b == "*"]
    problems = []
    said = match.group(1).lower()
    if NUMBERS.get(said) != len(upward):
        problems.append(f"says {said} imports reach up; the layer test exempts "
                        f"{len(upward)}: " + ", ".join(f"{a} -> {b}" for a, b in upward))
    named = {t for t in TICKED.findall(paragraph) if MODULE.fullmatch(t)}
    for a, b in upward:
        problems += [f"does not name `{end}` (exempt: {a} -> {b})"
                     for end in (a, b) if end not in named]
    if whole and "package root" not in paragraph:
        problems.append(f"does not say that the package root is exempt ({', '.join(whole)})")
    ends = {end for pair in exempt for end in pair}
    problems += [f"names `{t}`, which no exemption of the layer test involves"
                 for t in sorted(named - ends)]
    return problems


def test_the_layering_sentence_matches_the_layer_test():
    assert layering_claims(_read("docs/concepts.md"), EXEMPT) == []


def test_the_layering_check_finds_a_wrong_count_and_a_missing_module():
    exempt = {("albertkit", "*"), ("albertkit.training.trainer", "albertkit.sagemaker"),
              ("albertkit.models.encoder_layer", "albertkit.training.export")}
    good = ("Besides the package root, two imports reach up on purpose: `albertkit.training."
            "trainer` imports `albertkit.sagemaker`; `albertkit.models.encoder_layer` imports "
            "`albertkit.training.export`.\n\nNext paragraph: `albertkit.cli`.")
    assert layering_claims(good, exempt) == []
    # the drift this check was written for: the count of a previous state of the code,
    # one convenience not named, one named that is no longer exempt
    planted = ("Three imports reach up on purpose: the package root re-exports; "
               "`albertkit.training.trainer` imports `albertkit.sagemaker`; "
               "`albertkit.config.sections` imports `albertkit.optimizers`.")
    assert layering_claims(planted, exempt) == [
        "says three imports reach up; the layer test exempts 2: albertkit.models."
        "encoder_layer -> albertkit.training.export, albertkit.training.trainer -> "
        "albertkit.sagemaker",
        "does not name `albertkit.models.encoder_layer` (exempt: albertkit.models."
        "encoder_layer -> albertkit.training.export)",
        "does not name `albertkit.training.export` (exempt: albertkit.models.encoder_layer "
        "-> albertkit.training.export)",
        "names `albertkit.config.sections`, which no exemption of the layer test involves",
        "names `albertkit.optimizers`, which no exemption of the layer test involves",
    ]
    assert layering_claims(good.replace("Besides the package root, two", "Two"), exempt) == [
        "does not say that the package root is exempt (albertkit)"]
    assert layering_claims("No such sentence.", exempt) != []


# ------------------------------------------------------------------- api-policy.md's table
def public_names() -> dict[str, set[str]]:
    """module -> the names in its ``__all__``, from tests/public_api.txt (which
    tests/test_public_api.py keeps equal to the code), every public module included."""
    names: dict[str, set[str]] = {m: set() for m in PUBLIC_MODULES}
    for line in _read("tests/public_api.txt").splitlines():
        if line and not line.startswith("#"):
            module, name = line.split(":")
            names.setdefault(module, set()).add(name)
    return names


IDENTIFIER = re.compile(r"([A-Za-z_]\w*)(?:\(.*\))?")


def api_policy_claims(doc: str, public: Mapping[str, set[str]]) -> list[str]:
    """Where the table of public modules under "## What is public" disagrees with
    ``public`` (module -> its ``__all__``): a public module without a row, a row for a
    module that is not public, or a row that names (in backticks) a name its module does not
    export. A row names at least one of its module's names, so that each row's claim
    about what the module holds can be checked."""
    rows = [r for r in _table_rows(_section(doc, "## What is public"))
            if r and MODULE.fullmatch(r[0].strip("`"))]
    problems, seen = [], []
    for cells in rows:
        module, held = cells[0].strip("`"), " ".join(cells[1:])
        if module in seen:
            problems.append(f"`{module}` has two rows")
        seen.append(module)
        if module not in public:
            problems.append(f"a row for `{module}`, which is not a public module")
            continue
        names = [m.group(1) for t in TICKED.findall(held) if (m := IDENTIFIER.fullmatch(t))]
        problems += [f"the `{module}` row names `{n}`, which is not in its __all__"
                     for n in names if n not in public[module]]
        if not names:
            problems.append(f"the `{module}` row names none of its public names")
    problems += [f"no row for `{m}`" for m in sorted(public) if m not in seen]
    return problems


def test_the_api_policy_table_matches_the_public_api():
    assert api_policy_claims(_read("docs/api-policy.md"), public_names()) == []


def test_the_api_policy_check_finds_a_missing_row_and_a_wrong_claim():
    public = {"albertkit": {"AlbertTrainer"}, "albertkit.distributed": {"Distributor"},
              "albertkit.doctor": {"DoctorReport"}}
    doc = ("# P\n\n## What is public\n\n| module | what it holds |\n|---|---|\n"
           "| `albertkit` | `AlbertTrainer` |\n"
           "| `albertkit.distributed` | the `Distributor` interface and its backends "
           "`SingleProcess`, `Horovod` |\n"
           "| `albertkit.gone` | `Thing` |\n"
           "| `albertkit.cli` | the `albertkit` command |\n\n## Versions\n\n"
           "| `albertkit.doctor` | (another section: not the table) |\n")
    assert api_policy_claims(doc, public) == [
        "the `albertkit.distributed` row names `SingleProcess`, which is not in its __all__",
        "the `albertkit.distributed` row names `Horovod`, which is not in its __all__",
        "a row for `albertkit.gone`, which is not a public module",
        "a row for `albertkit.cli`, which is not a public module",
        "no row for `albertkit.doctor`",
    ]
    public["albertkit.cli"] = {"main"}
    assert "the `albertkit.cli` row names `albertkit`, which is not in its __all__" in \
        api_policy_claims(doc, public)
    assert "the `albertkit` row names none of its public names" in api_policy_claims(
        doc.replace("| `AlbertTrainer` |", "| the trainer |"), public)


# -------------------------------------------------------------- README's "What is where"
PATHLIKE = re.compile(r"[\w*.-]+(?:/[\w*.-]*)*")
SUFFIXES = (".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".txt", "/")


def _paths(cell: str, base: str) -> list[str]:
    """The repository paths a table cell names in backticks: a path with a slash is from
    the repository's root; a bare file name (`step.py`) is in ``base``."""
    out = []
    for token in TICKED.findall(cell):
        if not PATHLIKE.fullmatch(token):
            continue
        if "/" in token.rstrip("/") or (token.endswith("/") and not base):
            out.append(token)
        elif token.endswith(SUFFIXES):
            out.append(f"{base}/{token}" if base else token)
    return out


def layout_claims(readme: str, root: Path) -> list[str]:
    """Where README's "What is where" table disagrees with the tree under ``root``: a path
    it names that does not exist (in either column; a bare file name in the second column is
    looked for in the row's first directory), or a package or public top-level module of
    src/albertkit that no row names in its first column."""
    rows = _table_rows(_section(readme, "## What is where"))
    if not rows:
        return ["no 'What is where' table"]
    named, problems = set(), []
    for cells in rows:
        first = _paths(cells[0], "")
        for i, path in enumerate(first):  # `src/albertkit/errors.py`, `fileio.py`
            if "/" not in path.rstrip("/") and i:
                first[i] = f"{Path(first[i - 1]).parent.as_posix()}/{path}"
        named |= {p.rstrip("/") for p in first}
        home = next((p.rstrip("/") for p in first if p.endswith("/")), None)
        home = home or (Path(first[0]).parent.as_posix() if first else "")
        for path in first + _paths(" ".join(cells[1:]), home):
            if not any(root.glob(path.rstrip("/"))):
                problems.append(f"`{path}` (row {cells[0]}) does not exist")
    src = root / "src" / "albertkit"
    wanted = sorted(
        p.relative_to(root).as_posix() for p in src.iterdir()
        if ((p / "__init__.py").is_file()
            or (p.suffix == ".py" and not p.name.startswith("_"))))
    problems += [f"no row names `{p}{'/' if (root / p).is_dir() else ''}`"
                 for p in wanted if p not in named]
    return problems


def test_the_readme_layout_table_matches_the_tree():
    assert layout_claims(_read("README.md"), ROOT) == []


def test_the_layout_check_finds_a_missing_package_and_a_stale_path(tmp_path):
    for path in ("src/albertkit/__init__.py", "src/albertkit/_lazy.py", "src/albertkit/errors.py",
                 "src/albertkit/fileio.py", "src/albertkit/distributed/__init__.py",
                 "src/albertkit/distributed/cluster.py", "src/albertkit/doctor/__init__.py",
                 "benchmarks/bench_a.py", "docs/concepts.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).touch()
    readme = ("# x\n\n## What is where\n\n| path | what |\n|---|---|\n"
              "| `src/albertkit/errors.py`, `fileio.py` | errors, `atomic_write` |\n"
              "| `src/albertkit/distributed/` | backends; `cluster.py`, `requeue.py` (Slurm) |\n"
              "| `benchmarks/` | `bench_*.py`, `benchlib/` |\n"
              "| `docs/` | guides; `docs/concepts.md` explains the layers |\n\n## Next\n")
    assert layout_claims(readme, tmp_path) == [
        "`src/albertkit/distributed/requeue.py` (row `src/albertkit/distributed/`) does not "
        "exist",
        "`benchmarks/benchlib/` (row `benchmarks/`) does not exist",
        "no row names `src/albertkit/doctor/`",
    ]
    (tmp_path / "src/albertkit/distributed/requeue.py").touch()
    (tmp_path / "benchmarks/benchlib").mkdir()
    fixed = readme.replace("| `docs/` |", "| `src/albertkit/doctor/` | the doctor |\n| `docs/` |")
    assert layout_claims(fixed, tmp_path) == []
    (tmp_path / "src/albertkit/errors.py").unlink()
    assert layout_claims(fixed, tmp_path) == [
        "`src/albertkit/errors.py` (row `src/albertkit/errors.py`, `fileio.py`) does not exist"]


# ------------------------------------------------------------------ README, front door
README_MAX_LINES = 110
DATED = re.compile(r"\b\d{1,2}:\d{2}(?:-\d{1,2}:\d{2})? UTC\b|\bcommit [0-9a-f]{7,40}\b")


def front_door_claims(readme: str) -> list[str]:
    """README is a front door: at most ``README_MAX_LINES`` lines, and no dated
    measurement log (a clock time in UTC or a commit; those go to CHANGELOG.md)."""
    problems = [f"{n}: dated: {m.group(0)!r}" for n, line in enumerate(readme.splitlines(), 1)
                for m in DATED.finditer(line)]
    lines = len(readme.splitlines())
    if lines > README_MAX_LINES:
        problems.append(f"{lines} lines, more than {README_MAX_LINES}")
    return problems


def test_the_readme_is_a_front_door():
    assert front_door_claims(_read("README.md")) == []


def test_the_front_door_check_finds_a_dated_log():
    planted = ("# x\n\nCI took 22.0 minutes (7 December 2026, 19:04-19:26 UTC, commit "
               "c50c0cb).\n" + "line\n" * 110)
    assert front_door_claims(planted) == ["3: dated: '19:04-19:26 UTC'",
                                          "3: dated: 'commit c50c0cb'", "113 lines, more than 110"]


# ----------------------------------------------------------------- docstring examples
EXAMPLE_LINE = re.compile(r"^\s*(?:>>>|\.\.\.) ?(.*)$", re.M)


def docstring_private_imports(source: str, where: str) -> list[str]:
    """The imports of private albertkit modules or names in the ``>>>`` examples of a
    module's source (see ``private_imports``)."""
    code = "\n".join(EXAMPLE_LINE.findall(source))
    return private_imports(code, where)


def test_docstring_examples_import_only_public_names():
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 100, "src/albertkit moved"
    found = [line for path in files for line in docstring_private_imports(
        path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert found == [], "import these from the public places:\n" + "\n".join(found)


def test_the_docstring_check_finds_a_private_import():
    source = ('"""Example:\n    >>> from albertkit.config.sizes import SIZES, AlbertSpec\n'
              '    >>> from albertkit.config import AlbertSpec\n"""\n'
              "from albertkit.data.tfrecord import RecordWriter  # the code itself may\n")
    assert docstring_private_imports(source, "m.py") == [
        "m.py: from albertkit.config.sizes import SIZES",
        "m.py: from albertkit.config.sizes import AlbertSpec",
    ]


# --------------------------------------------------------------- benchmark commands
BENCH_SCRIPT = re.compile(r"\bbenchmarks/(\w+\.py)\b")
HISTORY = ("CHANGELOG.md", "docs/performance-log.md", "docs/memory-log.md")


def missing_scripts(text: str, where: str, root: Path) -> list[str]:
    """``benchmarks/<script>.py`` named in ``text`` that is not in ``root``/benchmarks."""
    return [f"{where}: benchmarks/{name} does not exist"
            for name in sorted(set(BENCH_SCRIPT.findall(text)))
            if not (root / "benchmarks" / name).is_file()]


def test_the_current_docs_name_benchmark_scripts_that_exist():
    # the dated logs and the changelog tell history, and may name a script since removed
    pages = ["README.md", "benchmarks/README.md",
             *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").rglob("*.md")))]
    found = [line for page in pages if page not in HISTORY
             for line in missing_scripts(_read(page), page, ROOT)]
    assert found == []


def test_the_script_check_finds_a_removed_script(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "bench_targets.py").touch()
    text = "`python benchmarks/bench_targets.py --out D` then `python benchmarks/bench_old.py`"
    assert missing_scripts(text, "p.md", tmp_path) == ["p.md: benchmarks/bench_old.py does not exist"]


def _bench_targets():
    # a script, not a package: loaded by path (its dataclasses need the sys.modules entry)
    import importlib.util

    name = "bench_targets"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def current_table_claims(doc: str, header: str, command: str) -> list[str]:
    """Where docs/performance.md's "Current results" disagrees with the benchmark that
    writes its table: the section names ``command``, and the first table after it has
    ``header``, the header of the table the command writes."""
    section = _section(doc, "## Current results")
    at = section.find(command)
    if at < 0:
        return [f"'Current results' does not name `{command}`"]
    table = next((line for line in section[at:].splitlines() if line.startswith("|")), None)
    if table is None:
        return [f"'Current results' has no table after `{command}`"]
    return [] if table == header else [f"the table is not the benchmark's: {table}"]


def test_the_current_performance_table_is_the_one_the_benchmark_writes():
    targets = _bench_targets()
    header = targets.format_current({}).splitlines()[0]
    assert current_table_claims(_read("docs/performance.md"), header,
                                "python benchmarks/bench_targets.py --out") == []


def test_the_performance_table_check_finds_a_hand_made_table():
    header = "| shape | seq/s |"
    command = "python benchmarks/bench_targets.py --out"
    doc = (f"## Current results\n\n| other | table |\n|---|---|\n\n`{command} D` writes:\n\n"
           f"{header}\n|---|---|\n| base | 1 |\n\n## Next\n\n{command}\n")
    assert current_table_claims(doc, header, command) == []
    assert current_table_claims(doc.replace(header, "| shape | seq/s | by hand |"), header,
                                command) == [
        "the table is not the benchmark's: | shape | seq/s | by hand |"]
    assert current_table_claims(doc.replace("bench_targets.py --out D", "bench_other.py"),
                                header, command) == [
        f"'Current results' does not name `{command}`"]
