"""albertkit plugins that travel with a SageMaker job, and the check that none is missing.

A config may take its data kind, task, optimizer or model size from a plugin (a distribution
with an ``albertkit.plugins`` entry point, :mod:`albertkit.config.registry`). The container
parses the config too, so the plugin must be there as well, in one of two ways:

* ``sagemaker.plugins``: the plugin's source directory (with a ``pyproject.toml``). At
  submission it is built into a wheel (``pip wheel --no-deps --no-build-isolation``, offline,
  with the build backend installed where you submit), and its dependencies that albertkit
  does not itself depend on (which the image therefore may lack) into wheels of their own
  (``pip wheel``, from where pip installs where you submit); all are uploaded with the job's
  source in ``albertkit_plugins/``. In the container the entry point installs every wheel
  found there (``pip install --no-deps --no-index --target``) before it parses the config,
  then checks that every requirement each plugin declares is met, so a missing dependency
  stops the job at once in one line, not at its first evaluation;
* ``sagemaker.image_plugins``: the distribution's name, when the training image already has
  it installed.

:func:`plugin_problems` is the check (called by ``check_job``): a plugin part whose
distribution is neither shipped nor declared refuses the job before any AWS call.

Example:
    >>> distribution_key("Albertkit_Tagging"), distribution_key("albertkit.tagging")
    ('albertkit-tagging', 'albertkit-tagging')
"""

from __future__ import annotations

import importlib
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from albertkit.config.registry import Entry, plugin_parts
from albertkit.errors import PluginError

if TYPE_CHECKING:
    from albertkit.config import TrainerConfig
    from albertkit.sagemaker.config import SageMakerConfig

log = logging.getLogger("albertkit")

PLUGIN_WHEEL_DIR = "albertkit_plugins"  # inside the job's uploaded source (the code channel)
# what a source-tree copy leaves out before the build (a build must not write into the tree)
_NOT_SOURCE = ("__pycache__", "*.pyc", ".git", ".venv", "build", "dist", "*.egg-info")
_PIP_QUIET = ["--disable-pip-version-check", "--no-input", "--quiet"]


def distribution_key(name: str) -> str:
    """A distribution name as packaging compares them: lower case, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PluginSource:
    """A plugin's source directory and the distribution it builds (``[project].name``)."""

    directory: Path
    distribution: str


def read_plugin_source(directory: str | Path) -> PluginSource:
    """The distribution ``directory`` builds, read from its ``pyproject.toml``.

    Raises ``PluginError`` naming the directory or file when there is nothing to build."""
    directory = Path(directory)
    pyproject = directory / "pyproject.toml"
    if not directory.is_dir():
        raise PluginError(f"{directory} is not a directory (a plugin's source directory, with "
                          "a pyproject.toml)")
    if not pyproject.is_file():
        raise PluginError(f"{directory} has no pyproject.toml, so it cannot be built into a "
                          "wheel")
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project") or {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise PluginError(f"{pyproject}: not valid TOML: {e}") from None
    name = project.get("name")
    if not isinstance(name, str) or not name:
        raise PluginError(f"{pyproject}: no [project] name, so the distribution it builds is "
                          "unknown")
    return PluginSource(directory, name)


def _refusal(parts: list[Entry], distribution: str | None) -> str:
    named = " and ".join(f"{e.category} {e.name!r}" for e in parts)
    verb = "comes" if len(parts) == 1 else "come"
    if distribution is None:  # registered by a call in the submitting process
        return (f"{named} {verb} from {parts[0].source}, which a SageMaker job cannot repeat: "
                "package it as a plugin (an albertkit.plugins entry point) and add its source "
                "directory to sagemaker.plugins, or install it in the image and name it in "
                "sagemaker.image_plugins")
    return (f"{named} {verb} from the plugin distribution {distribution}, which the job neither "
            "ships nor finds in its image: add the plugin's source directory to "
            f"sagemaker.plugins, or add {distribution!r} to sagemaker.image_plugins if "
            "sagemaker.image_uri's image has it installed")


def plugin_problems(trainer_config: TrainerConfig, sm: SageMakerConfig) -> list[str]:
    """Why the job would not have its plugins, one line each (empty: nothing is missing).

    Every ``sagemaker.plugins`` directory must be buildable (a ``pyproject.toml`` with a
    ``[project]`` name), and every part of the config a plugin provides must come from a
    distribution shipped there or named in ``sagemaker.image_plugins``."""
    problems: list[str] = []
    shipped: dict[str, Path] = {}
    for i, directory in enumerate(sm.plugins):
        try:
            source = read_plugin_source(directory)
        except PluginError as e:
            problems.append(f"sagemaker.plugins[{i}]: {e}")
            continue
        key = distribution_key(source.distribution)
        if key in shipped:
            problems.append(f"sagemaker.plugins[{i}]: {directory} builds {source.distribution}, "
                            f"as {shipped[key]} does already")
        shipped[key] = Path(directory)
    present = set(shipped) | {distribution_key(n) for n in sm.image_plugins}
    cfg = trainer_config
    missing: dict[str | None, list[Entry]] = {}
    for entry in plugin_parts(cfg.data.kind, cfg.optimizer.kind, cfg.model.size):
        dist = entry.source.distribution
        if dist is None or distribution_key(dist) not in present:
            missing.setdefault(dist, []).append(entry)
    problems += [_refusal(parts, dist) for dist, parts in missing.items()]
    return problems


# --------------------------------------------------------------------------- submission side
def build_wheels(directories: Sequence[str | Path], out: str | Path,
                 python: str = sys.executable) -> list[Path]:
    """Build each plugin source directory into a wheel in ``out`` (offline, no dependencies,
    the build backend taken from ``python``'s environment); returns the wheels.

    Each directory is copied first, so the build writes nothing into the user's tree."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wheels: list[Path] = []
    for directory in directories:
        source = read_plugin_source(directory)
        with tempfile.TemporaryDirectory(prefix="albertkit-plugin-build-") as tmp:
            tree = Path(tmp) / "src"
            shutil.copytree(source.directory, tree, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
            built = Path(tmp) / "wheel"
            cmd = [python, "-m", "pip", "wheel", *_PIP_QUIET, "--no-deps",
                   "--no-build-isolation", "--no-index", "--wheel-dir", str(built), str(tree)]
            _pip(cmd, f"building the plugin in {source.directory} into a wheel")
            found = sorted(built.glob("*.whl"))
            if len(found) != 1:
                raise PluginError(f"building {source.directory} made {len(found)} wheels, not 1")
            wheels.append(Path(shutil.copy2(found[0], out / found[0].name)))
        log.info("plugin %s built: %s", source.distribution, wheels[-1].name)
    return wheels


def albertkit_requirements() -> set[str]:
    """albertkit and the distributions it needs to run (its installed requirements,
    recursively, extras left out): a training image has them all, so a plugin's dependency
    among them need not travel."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import InvalidRequirement, Requirement

    seen: set[str] = {"albertkit"}  # the image runs albertkit itself, of course
    todo = ["albertkit"]
    while todo:
        name = todo.pop()
        try:
            required = requires(name) or []
        except PackageNotFoundError:
            continue
        for text in required:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra's, or another platform's
            key = distribution_key(req.name)
            if key not in seen:
                seen.add(key)
                todo.append(req.name)
    return seen


def _wheel_requires(wheel: str | Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel's metadata."""
    import zipfile
    from email.parser import Parser

    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(z.read(name).decode("utf-8"))
    return metadata.get_all("Requires-Dist") or []


def build_dependency_wheels(wheels: Sequence[str | Path], out: str | Path,
                            python: str = sys.executable, pip_args: Sequence[str] = (),
                            provided: set[str] | None = None) -> list[Path]:
    """Wheels of what the plugin ``wheels`` depend on, recursively, into ``out``, except the
    distributions in ``provided`` (default :func:`albertkit_requirements`: the image has
    those; they are not even fetched) and the plugins themselves. A dependency installed
    where you submit is taken at that version (the one you tested with); the others as pip
    finds them, from where pip installs (``pip_args`` adds sources, e.g. ``--find-links``).
    Sdists are built as pip builds them."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import InvalidRequirement, Requirement

    out = Path(out)
    provided = albertkit_requirements() if provided is None else provided
    done = {distribution_key(Path(w).name.split("-")[0]) for w in wheels} | set(provided)
    done.add("albertkit")  # never a plugin's dependency to ship: the image runs it
    todo = [text for w in wheels for text in _wheel_requires(w)]
    kept: list[Path] = []
    while todo:
        try:
            req = Requirement(todo.pop(0))
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = distribution_key(req.name)
        if key in done:
            continue
        done.add(key)
        wanted = str(req)
        try:
            here = version(req.name)
            if not req.specifier or req.specifier.contains(here, prereleases=True):
                wanted = f"{req.name}=={here}"
        except PackageNotFoundError:
            pass
        with tempfile.TemporaryDirectory(prefix="albertkit-plugin-deps-") as tmp:
            cmd = [python, "-m", "pip", "wheel", *_PIP_QUIET, "--no-deps", *pip_args,
                   "--wheel-dir", tmp, wanted]
            _pip(cmd, f"building the plugins' dependency {wanted} into a wheel")
            (wheel,) = Path(tmp).glob("*.whl")
            out.mkdir(parents=True, exist_ok=True)
            kept.append(Path(shutil.copy2(wheel, out / wheel.name)))
        todo += _wheel_requires(kept[-1])
    if kept:
        log.info("plugin dependencies shipped with the job: %s",
                 ", ".join(w.name for w in kept))
    return kept


# --------------------------------------------------------------------------- container side
def install_shipped_plugins(code_dir: str | Path, target: str | Path | None = None,
                            python: str = sys.executable) -> Path | None:
    """Install the wheels shipped in ``code_dir/albertkit_plugins`` into ``target`` (default:
    a new temporary directory, one per process, so the ranks of a host never share one) and
    put it first on ``sys.path``. Call it before the first config is parsed: the registry
    looks for plugins once, then. Returns ``target``, or None when no wheel was shipped."""
    wheels = sorted((Path(code_dir) / PLUGIN_WHEEL_DIR).glob("*.whl"))
    if not wheels:
        return None
    target = Path(target) if target is not None else Path(
        tempfile.mkdtemp(prefix="albertkit-plugins-"))
    dependencies = sorted((Path(code_dir) / PLUGIN_WHEEL_DIR / "deps").glob("*.whl"))
    cmd = [python, "-m", "pip", "install", *_PIP_QUIET, "--no-deps", "--no-index",
           "--target", str(target), *map(str, wheels), *map(str, dependencies)]
    _pip(cmd, "installing the plugins shipped with the job")
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    log.info("plugins installed from the job's source: %s", ", ".join(w.name for w in wheels))
    unmet = unmet_requirements(target)
    if unmet:
        raise PluginError("the plugins shipped with the job need what this image does not have: "
                          + "; ".join(unmet) + " (ship them: albertkit builds a plugin's "
                          "dependencies into the job when pip can get them where you submit; "
                          "or install them in the image)")
    return target


def unmet_requirements(target: str | Path) -> list[str]:
    """Each requirement of a distribution installed in ``target`` that nothing on
    ``sys.path`` meets, as ``"<plugin> needs <requirement> (<what is there>)"``."""
    from importlib.metadata import PackageNotFoundError, distributions, version

    from packaging.requirements import InvalidRequirement, Requirement

    unmet: list[str] = []
    for dist in distributions(path=[str(target)]):
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = version(req.name)
            except PackageNotFoundError:
                unmet.append(f"{dist.metadata['Name']} needs {req} (not installed)")
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                unmet.append(f"{dist.metadata['Name']} needs {req} ({req.name} {have} is)")
    return unmet


def _pip(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        last = " | ".join(said[-3:]) or f"exit code {done.returncode}"
        raise PluginError(f"{what} failed: pip said: {last}")
