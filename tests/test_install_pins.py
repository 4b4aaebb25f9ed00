"""The test environment's pins (scripts/test-constraints.txt) and how uv is told where pip
installs from (scripts/uv_args.py)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "scripts" / "test-constraints.txt"


def _pins() -> dict[str, str]:
    pins = {}
    for n, line in enumerate(PINS.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line.strip())
        assert m, f"{PINS.name}:{n}: expected NAME==VERSION, got {line!r}"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"{PINS.name}:{n}: {name} pinned twice"
        pins[name] = m.group(2)
    return pins


def _pins_outside_ranges(pins: dict[str, str], requirements: list[str]) -> list[str]:
    bad = []
    for text in requirements:
        req = Requirement(text)
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is not None and not req.specifier.contains(pinned, prereleases=True):
            bad.append(f"{req.name}=={pinned} outside {req.specifier}")
    return bad


def test_every_pin_is_inside_pyprojects_range_and_every_direct_dependency_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    pins = _pins()
    assert not _pins_outside_ranges(pins, requirements)
    unpinned = [r for r in requirements if canonicalize_name(Requirement(r).name) not in pins]
    assert not unpinned, f"not in {PINS.name}: {unpinned}"
    # albertkit and Horovod come from elsewhere (the checkout; scripts/build_horovod.sh)
    assert "albertkit" not in pins and "horovod" not in pins
    # the check can fail
    assert _pins_outside_ranges({"scipy": "2.0"}, ["scipy>=1.11,<2"]) == [
        "scipy==2.0 outside <2,>=1.11"]


def _uv_args():
    spec = importlib.util.spec_from_file_location("uv_args", ROOT / "scripts" / "uv_args.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pips_sources_become_uvs_options():
    uv_args = _uv_args()
    listing = "\n".join([
        "global.cert='/etc/ssl/certs/ca.crt'",
        "global.constraint='/etc/xdg/pip/constraints.txt'",
        "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'",
        "global.find-links='/opt/old'",
        ":env:.find-links='/opt/wheels'",       # a variable overrides the file, as in pip
        ":env:.default-timeout='180'",
        "install.no-compile='true'",             # not a source: not passed on
    ])
    settings = uv_args.pip_settings(listing)
    assert uv_args.uv_options(settings) == [
        "--extra-index-url", "file:///opt/a/simple", "--extra-index-url", "file:///opt/b/simple",
        "--find-links", "/opt/wheels", "--constraint", "/etc/xdg/pip/constraints.txt"]
    assert uv_args.uv_environment(settings) == [
        "SSL_CERT_FILE=/etc/ssl/certs/ca.crt", "UV_HTTP_TIMEOUT=180"]
    assert uv_args.uv_options(uv_args.pip_settings("")) == []
