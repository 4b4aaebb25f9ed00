"""Every example config validates; every example script runs in its tiny mode.

Configs: each file under ``examples/configs/`` (``.yaml``, ``.yml``, ``.json``) must load as
a ``TrainerConfig``, round-trip through YAML unchanged, and pass the JSON Schema that
editors use. Validation never checks that data files exist, so configs that name data made
by another step (``prepare-data``, a download) validate too. A config that is *meant* to
be rejected (a deliberately broken example in a guide) goes into ``EXPECTED_INVALID`` with
the reason; the test then checks that it really is rejected, so the list cannot rot.

Scripts: each ``examples/**/*.py`` not starting with ``_`` must accept ``--tiny`` and finish
quickly in that mode (``examples/plugins/`` holds packages, with their own tests, not scripts). It runs in a fresh temporary working directory (examples must not
depend on the current directory) with ``ALBERTKIT_EXAMPLE_OUT`` naming a scratch directory
it may write to.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from albertkit.cli.config import config_schema
from albertkit.config import ConfigError, TrainerConfig
from albertkit.sagemaker.config import SageMakerConfig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")

# file name (relative to examples/configs) -> why it must fail validation
EXPECTED_INVALID: dict[str, str] = {}

# Configs with a `sagemaker:` section are loaded as `albertkit launch` loads them: with the
# values their header says to export (ALBERTKIT_SM_*, from the infra stack) as defaults.
LAUNCH_ENV = {
    "ALBERTKIT_SM_BUCKET": "albertkit-123456789012-us-east-1",
    "ALBERTKIT_SM_ROLE_ARN": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
    "ALBERTKIT_SM_IMAGE_URI": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest",
    "ALBERTKIT_SM_OUTPUT_PATH": "s3://albertkit-data-123456789012/output",
    "ALBERTKIT_SM_SUBNETS": "subnet-0123456789abcdef0",
    "ALBERTKIT_SM_SECURITY_GROUP_IDS": "sg-0123456789abcdef0",
}

SCRIPT_TIMEOUT_S = 600


def _configs() -> list[Path]:
    return sorted(p for p in (EXAMPLES / "configs").rglob("*")
                  if p.suffix in CONFIG_SUFFIXES and p.is_file())


def _scripts() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*.py")
                  if not p.name.startswith("_") and "configs" not in p.parts
                  and "plugins" not in p.relative_to(EXAMPLES).parts)


CONFIGS = _configs()
SCRIPTS = _scripts()


def _rel(path: Path) -> str:
    return str(path.relative_to(EXAMPLES / "configs"))


def _load(path: Path) -> TrainerConfig:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if isinstance(raw, dict) and raw.get("sagemaker") is not None:
        from albertkit.sagemaker.defaults import load_launch_config, sagemaker_defaults_from_env

        return load_launch_config(path, [], sagemaker_defaults_from_env(LAUNCH_ENV))
    return TrainerConfig.from_yaml(path)


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(config_schema())


def test_examples_exist():
    assert len(CONFIGS) >= 2, "examples/configs/ holds no configs"
    unknown = set(EXPECTED_INVALID) - {_rel(p) for p in CONFIGS}
    assert not unknown, f"EXPECTED_INVALID names configs that do not exist: {unknown}"


@pytest.mark.parametrize("path", CONFIGS, ids=_rel)
def test_example_config_validates(path: Path, schema_validator):
    name = _rel(path)
    if name in EXPECTED_INVALID:
        with pytest.raises(ConfigError):
            _load(path)
        return
    cfg = _load(path)
    # YAML round trip: what the run directory stores loads back as the same config (the
    # training part: a sagemaker: section is never written into run directories)
    stored = TrainerConfig.model_validate(yaml.safe_load(cfg.to_yaml()))
    assert stored.model_dump() == cfg.model_dump()
    assert stored.extension_section("sagemaker") is None
    # derived values exist for the config's own replica count (SageMaker) or one process
    replicas = 1
    sm = SageMakerConfig.from_trainer_config(cfg)
    if sm is not None and cfg.distributed.backend != "single":
        replicas = sm.replicas
    cfg.runtime.accumulation_steps(replicas)
    # editors validate with the JSON Schema: it must accept every shipped config
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
              for e in schema_validator.iter_errors(raw)]
    assert not errors, f"{name} fails the JSON Schema: {errors}"


@pytest.mark.parametrize("path", CONFIGS, ids=_rel)
def test_example_config_has_a_header_comment(path: Path):
    if path.suffix == ".json":
        return
    first = path.read_text(encoding="utf-8").lstrip().splitlines()[0]
    assert first.startswith("#"), f"{_rel(path)}: start with a comment saying what it is for"


_SCRIPT_PARAMS = [pytest.param(p, id=str(p.relative_to(EXAMPLES)), marks=pytest.mark.slow)
                  for p in SCRIPTS] or [pytest.param(None, id="no-example-scripts-yet")]


@pytest.mark.parametrize("script", _SCRIPT_PARAMS)
def test_example_script_runs_tiny(script: Path | None, tmp_path: Path):
    if script is None:  # nothing to run yet; discovery itself is checked below
        assert not _scripts()
        return
    assert "--tiny" in script.read_text(encoding="utf-8"), f"{script} must accept --tiny"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "ALBERTKIT_EXAMPLE_OUT": str(tmp_path),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    work = tmp_path / "cwd"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(script), "--tiny"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
    assert proc.returncode == 0, (
        f"{script.relative_to(ROOT)} --tiny exited {proc.returncode}\n"
        f"--- stdout (tail)\n{proc.stdout[-3000:]}\n--- stderr (tail)\n{proc.stderr[-3000:]}")


def test_script_discovery(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "x.py").write_text("")
    (tmp_path / "_helper.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "plugins" / "pkg").mkdir(parents=True)
    for name in ("a.py", "sub/b.py", "plugins/pkg/c.py"):
        (tmp_path / name).write_text("")
    found = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py")
                   if not p.name.startswith("_") and "configs" not in p.relative_to(tmp_path).parts
                   and "plugins" not in p.relative_to(tmp_path).parts)
    assert found == ["a.py", "sub/b.py"]
