"""The README's Python quick start runs as written (in a temporary working directory)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_readme_python_block_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no Python block"
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # noqa: S102 - our own README
    assert (tmp_path / "exported-hf" / "model.safetensors").is_file()
    assert namespace["trainer"].summary["step"] == 20


def test_readme_first_commands_are_the_scripts_ci_runs():
    head = (ROOT / "README.md").read_text().split("## ")[0]
    assert "bash scripts/demo.sh" in head and "bash scripts/test.sh" in head
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
