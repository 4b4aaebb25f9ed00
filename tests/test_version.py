"""The version is written once (albertkit.__version__) and agrees everywhere it is shown."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import albertkit
from albertkit.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_cli_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"albertkit {albertkit.__version__}"


def test_pyproject_reads_the_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "albertkit.__version__"}


def test_changelog_newest_release_is_the_package_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.MULTILINE)
    assert headings[0] == ("Unreleased", "")
    releases = [(tuple(int(p) for p in v.split(".")), date) for v, date in headings[1:]]
    assert releases, "CHANGELOG.md names no release"
    assert releases[0][0] == tuple(int(p) for p in albertkit.__version__.split("."))
    # newest first, each with a date, versions and dates both descending
    assert all(date for _, date in releases)
    assert releases == sorted(releases, reverse=True)
