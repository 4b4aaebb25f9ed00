"""examples/slurm/: every script is valid bash, says what it does, names a config that
exists, and its #SBATCH lines use options sbatch knows (with the values they need)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "examples" / "slurm"
SCRIPTS = sorted(p for p in SLURM.iterdir() if p.suffix in (".sbatch", ".sh"))
SBATCH = [p for p in SCRIPTS if p.suffix == ".sbatch"]

# sbatch's long options used by the examples: name -> a pattern its value must match (None:
# the option takes no value)
KNOWN = {
    "job-name": r"[\w.%-]+",
    "nodes": r"\d+(-\d+)?",
    "ntasks": r"\d+",
    "ntasks-per-node": r"\d+",
    "gpus-per-node": r"([\w]+:)?\d+",
    "gpus-per-task": r"([\w]+:)?\d+",
    "cpus-per-task": r"\d+",
    "mem": r"\d+[KMGT]?",
    "time": r"(\d+-)?\d+(:\d\d){0,2}",
    "signal": r"(B:)?(USR1|USR2|TERM|INT|HUP)@\d+",
    "requeue": None,
    "exclusive": None,
    "open-mode": r"append|truncate",
    "output": r"\S+",
    "error": r"\S+",
    "partition": r"[\w,-]+",
    "account": r"[\w-]+",
}
SBATCH_LINE = re.compile(r"^#SBATCH\s+--([a-z-]+)(?:=(\S+))?\s*$")
CONFIG_REF = re.compile(r"examples/configs/[\w./-]+\.yaml")


def test_the_examples_are_there():
    names = {p.name for p in SCRIPTS}
    assert {"pretrain_horovod.sbatch", "pretrain_horovod_gloo.sbatch",
            "pretrain_multiworker.sbatch", "finetune_squad.sbatch", "hyperpod_pretrain.sbatch", "pretrain_container.sbatch",
            "setup_venv_on_shared_storage.sh"} <= names
    assert not list(SLURM.rglob("*.py")), "tests/test_examples.py runs every .py with --tiny"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_is_valid_bash_with_a_header(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    header = [ln for ln in lines[1:6] if ln.startswith("# ")]
    assert len(header) >= 3, f"{script.name}: no header comment saying what it does"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_names_configs_that_exist(script):
    refs = CONFIG_REF.findall(script.read_text())
    assert refs, f"{script.name} names no config under examples/configs/"
    for ref in refs:
        assert (ROOT / ref).is_file(), f"{script.name}: {ref} does not exist"


@pytest.mark.parametrize("script", SBATCH, ids=lambda p: p.name)
def test_sbatch_options_are_known(script):
    seen = {}
    in_header = True
    for n, line in enumerate(script.read_text().splitlines(), 1):
        if not line.startswith("#") and line.strip():
            in_header = False  # sbatch reads #SBATCH only before the first command
        if not line.startswith("#SBATCH"):
            continue
        assert in_header, f"{script.name}:{n}: #SBATCH after the first command is ignored"
        match = SBATCH_LINE.match(line)
        assert match, f"{script.name}:{n}: not '#SBATCH --option[=value]': {line!r}"
        key, value = match.groups()
        assert key in KNOWN, f"{script.name}:{n}: unknown sbatch option --{key}"
        pattern = KNOWN[key]
        if pattern is None:
            assert value is None, f"{script.name}:{n}: --{key} takes no value"
        else:
            assert value is not None and re.fullmatch(pattern, value), (
                f"{script.name}:{n}: bad value for --{key}: {value!r}")
        seen[key] = value
    # every job can be stopped before its time limit and requeued
    assert "requeue" in seen and seen.get("signal", "").startswith("USR1@"), script.name
    assert "time" in seen, script.name
