"""A plugin travels with a SageMaker job (``sagemaker.plugins``), or the job is refused.

The plugin is a real source directory made here (pyproject.toml, one module, an entry point),
built into a wheel by pip offline with the environment's setuptools, exactly as a submission
builds it. "Installed where you submit" is that wheel installed with ``--target`` into a
temporary directory put on ``sys.path``; the virtual environment is never touched. The
whole job (the wheel uploaded with the source, installed by a fresh container process) is in
``test_sagemaker_job.py``, against moto.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import test_plugins
from albertkit.cli import main as cli_main
from albertkit.config import ConfigError, TrainerConfig, registry
from albertkit.errors import PluginError
from albertkit.sagemaker.shipping import (
    PLUGIN_WHEEL_DIR,
    albertkit_requirements,
    build_dependency_wheels,
    build_wheels,
    install_shipped_plugins,
    read_plugin_source,
    unmet_requirements,
)
from test_plugins import PLUGIN, config

fresh_registry = test_plugins.fresh_registry  # the registry as albertkit starts it
SRC = Path(__file__).resolve().parents[1] / "src"
DIST = "albertkit-fakeship"
MODULE = "fakeplug_ship"
WHEEL = "albertkit_fakeship-0.1-py3-none-any.whl"
ROLE = "arn:aws:iam::123456789012:role/albertkit-sagemaker"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"

PYPROJECT = f'''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{DIST}"
version = "0.1"
description = "A fake albertkit plugin made by a test."

[project.entry-points."albertkit.plugins"]
{MODULE} = "{MODULE}:register"

[tool.setuptools]
py-modules = ["{MODULE}"]
'''


def make_plugin_source(directory: Path) -> Path:
    """A plugin's source directory, as its author keeps it."""
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    (directory / f"{MODULE}.py").write_text(textwrap.dedent(PLUGIN).replace("{module}", MODULE))
    return directory


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """(source directory, its wheel, a directory where the wheel is installed)."""
    root = tmp_path_factory.mktemp("plugin")
    source = make_plugin_source(root / "albertkit-fakeship")
    (wheel,) = build_wheels([source], root / "code" / PLUGIN_WHEEL_DIR)
    saved = list(sys.path)
    site = install_shipped_plugins(root / "code", root / "submitter-site")
    sys.path[:] = saved
    return source, wheel, site


def rows_config(**sagemaker) -> TrainerConfig:
    sm = {"role_arn": ROLE, "image_uri": IMAGE, "output_path": "s3://bucket/albertkit",
          **sagemaker}
    return TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 3}, sagemaker=sm,
                                          runtime={"max_steps": 10}))


def test_the_plugin_builds_into_a_wheel_and_the_source_tree_stays_clean(plugin):
    source, wheel, site = plugin
    assert wheel.name == WHEEL
    assert sorted(p.name for p in source.iterdir()) == [f"{MODULE}.py", "pyproject.toml"]
    assert read_plugin_source(source).distribution == DIST
    # installed with --target: the module and its metadata (entry point included), nothing else
    info = site / "albertkit_fakeship-0.1.dist-info"
    assert (site / f"{MODULE}.py").is_file()
    assert f"{MODULE} = {MODULE}:register" in (info / "entry_points.txt").read_text()


def test_the_installed_wheel_gives_the_config_its_plugin_kind(plugin, fresh_registry, monkeypatch,
                                                              tmp_path):
    _, wheel, _ = plugin
    code = tmp_path / "code"
    (code / PLUGIN_WHEEL_DIR).mkdir(parents=True)
    (code / PLUGIN_WHEEL_DIR / wheel.name).write_bytes(wheel.read_bytes())
    assert "rows" not in registry.entries("data kind")  # nothing parsed yet: not looked for
    target = install_shipped_plugins(code, tmp_path / "target")
    assert target == tmp_path / "target" and sys.path[0] == str(target)
    cfg = TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 3}))
    assert (cfg.task, cfg.data.rows) == ("rows_task", 3)
    assert registry.entries("data kind")["rows"].source.distribution == DIST
    assert install_shipped_plugins(tmp_path / "no-code") is None  # nothing shipped


def test_a_wheel_pip_cannot_install_fails_in_one_line(tmp_path):
    code = tmp_path / "code"
    (code / PLUGIN_WHEEL_DIR).mkdir(parents=True)
    (code / PLUGIN_WHEEL_DIR / WHEEL).write_bytes(b"not a zip file")
    with pytest.raises(PluginError, match=r"^installing the plugins shipped with the job "
                                          r"failed: pip said: .+"):
        install_shipped_plugins(code, tmp_path / "target")


def test_a_plugin_the_job_would_not_have_is_refused_with_the_fix(plugin, fresh_registry,
                                                                 monkeypatch, capsys, tmp_path):
    from albertkit.sagemaker.submit import to_sagemaker

    source, _, site = plugin
    monkeypatch.syspath_prepend(str(site))  # installed where the job is submitted
    refusal = (
        "SageMaker job refused:\n  data kind 'rows' and task 'rows_task' come from the plugin "
        f"distribution {DIST}, which the job neither ships nor finds in its image: add the "
        f"plugin's source directory to sagemaker.plugins, or add '{DIST}' to "
        "sagemaker.image_plugins if sagemaker.image_uri's image has it installed")
    with pytest.raises(ConfigError) as e:
        to_sagemaker(rows_config(), env_defaults={})
    assert str(e.value) == refusal
    # albertkit launch --dry-run says the same and prints no request
    path = tmp_path / "job.json"
    path.write_text(json.dumps(rows_config().to_dict() | {"sagemaker": {
        "role_arn": ROLE, "image_uri": IMAGE, "output_path": "s3://bucket/albertkit"}}))
    assert cli_main(["launch", "--config", str(path), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {refusal}\n"
    # either setting fixes it
    to_sagemaker(rows_config(plugins=[str(source)]), env_defaults={}).plan()
    to_sagemaker(rows_config(image_plugins=[DIST]), env_defaults={}).plan()
    assert cli_main(["launch", "--config", str(path), "--dry-run",
                     "--set", f"sagemaker.image_plugins=[{DIST}]"]) == 0
    # the plugin's data kind names no sequence length: the dry run says why it has no cost
    # estimate and still prints the request
    out, err = capsys.readouterr()
    assert json.loads(out)["TrainingJobName"]
    assert ("estimate: none: data: kind 'rows' gives no seq_length or max_seq_length, which "
            "the plan needs to size the step\n") in err


def test_a_plugins_directory_that_cannot_be_built_is_refused(plugin, fresh_registry, monkeypatch,
                                                             tmp_path):
    from albertkit.sagemaker.submit import to_sagemaker

    source, _, site = plugin
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "bare").mkdir()
    (tmp_path / "nameless").mkdir()
    (tmp_path / "nameless" / "pyproject.toml").write_text("[project]\nversion = '1'\n")
    twice = tmp_path / "copy"
    twice.mkdir()
    (twice / "pyproject.toml").write_text(f"[project]\nname = '{DIST.replace('-', '_')}'\n")
    dirs = [str(tmp_path / "missing"), str(tmp_path / "bare"), str(tmp_path / "nameless"),
            str(source), str(twice)]
    with pytest.raises(ConfigError) as e:
        to_sagemaker(rows_config(plugins=dirs), env_defaults={})
    assert str(e.value).splitlines()[1:] == [
        f"  sagemaker.plugins[0]: {tmp_path}/missing is not a directory (a plugin's source "
        "directory, with a pyproject.toml)",
        f"  sagemaker.plugins[1]: {tmp_path}/bare has no pyproject.toml, so it cannot be built "
        "into a wheel",
        f"  sagemaker.plugins[2]: {tmp_path}/nameless/pyproject.toml: no [project] name, so the "
        "distribution it builds is unknown",
        f"  sagemaker.plugins[4]: {twice} builds albertkit_fakeship, as {source} does already"]


def test_image_plugins_must_be_distribution_names():
    from albertkit.sagemaker.config import SageMakerConfig

    with pytest.raises(ValueError, match=r"image_plugins\.0"):
        SageMakerConfig(image_plugins=["pip install x"])


def test_a_plugin_that_does_not_build_names_its_directory_and_pip_s_words(tmp_path):
    broken = make_plugin_source(tmp_path / "broken")
    text = (broken / "pyproject.toml").read_text()
    (broken / "pyproject.toml").write_text(
        text.replace('"setuptools.build_meta"', '"no_such_backend_module"'))
    with pytest.raises(PluginError) as e:
        build_wheels([broken], tmp_path / "out")
    assert str(e.value).startswith(
        f"building the plugin in {broken} into a wheel failed: pip said: ")
    assert list((tmp_path / "out").iterdir()) == []


# --------------------------------------------------------------------------- dependencies
DEP_PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "albertkit-fakedep"
version = "1.2"

[tool.setuptools]
py-modules = ["fakedep_mod"]
'''


@pytest.fixture(scope="module")
def plugin_with_a_dependency(tmp_path_factory):
    """(a plugin wheel that requires albertkit-fakedep>=1.0, a find-links dir with that
    dependency's wheel); both built offline here."""
    root = tmp_path_factory.mktemp("withdep")
    dep = root / "albertkit-fakedep"
    dep.mkdir()
    (dep / "pyproject.toml").write_text(textwrap.dedent(DEP_PYPROJECT))
    (dep / "fakedep_mod.py").write_text("ANSWER = 42\n")
    links = root / "links"
    build_wheels([dep], links)
    source = root / "albertkit-fakeship"
    make_plugin_source(source)
    text = (source / "pyproject.toml").read_text()
    (source / "pyproject.toml").write_text(text.replace(
        'description = "A fake albertkit plugin made by a test."',
        'description = "A fake albertkit plugin made by a test."\n'
        'dependencies = ["albertkit", "albertkit-fakedep>=1.0", "numpy>=1"]'))
    (wheel,) = build_wheels([source], root / "code" / PLUGIN_WHEEL_DIR)
    return wheel, links


def test_a_plugins_dependencies_travel_except_what_albertkit_needs(plugin_with_a_dependency,
                                                                   plugin, tmp_path):
    wheel, links = plugin_with_a_dependency
    offline = ["--no-index", "--find-links", str(links)]
    # numpy is one of albertkit's own requirements: the image has it, it does not travel
    needed = albertkit_requirements()
    assert {"albertkit", "numpy", "tensorflow"} <= needed
    shipped = build_dependency_wheels([wheel], tmp_path / "deps", pip_args=offline)
    assert [w.name for w in shipped] == ["albertkit_fakedep-1.2-py3-none-any.whl"]
    # what the image is declared to have stays home too
    assert build_dependency_wheels([wheel], tmp_path / "none", pip_args=offline,
                                   provided={"albertkit-fakedep", "numpy"}) == []
    # a plugin without requirements asks pip nothing (no index needed)
    _, plain, _ = plugin
    assert build_dependency_wheels([plain], tmp_path / "plain", pip_args=["--no-index"]) == []


def test_the_container_installs_the_dependencies_or_stops_naming_the_missing_one(
        plugin_with_a_dependency, tmp_path):
    wheel, links = plugin_with_a_dependency
    code = tmp_path / "code"
    (code / PLUGIN_WHEEL_DIR / "deps").mkdir(parents=True)
    (code / PLUGIN_WHEEL_DIR / wheel.name).write_bytes(wheel.read_bytes())
    # without its dependency: one line naming the plugin and the requirement, before training
    saved = list(sys.path)
    try:
        with pytest.raises(PluginError) as e:
            install_shipped_plugins(code, tmp_path / "t1")
        assert str(e.value).startswith(
            "the plugins shipped with the job need what this image does not have: "
            "albertkit-fakeship needs albertkit-fakedep>=1.0 (not installed)")
        assert "\n" not in str(e.value)
    finally:
        sys.path[:] = saved
    # with it (shipped in albertkit_plugins/deps): installed beside the plugin, importable
    (dep_wheel,) = links.glob("*.whl")
    (code / PLUGIN_WHEEL_DIR / "deps" / dep_wheel.name).write_bytes(dep_wheel.read_bytes())
    try:
        target = install_shipped_plugins(code, tmp_path / "t2")
        assert unmet_requirements(target) == []
        import fakedep_mod

        assert fakedep_mod.ANSWER == 42
    finally:
        sys.path[:] = saved
        sys.modules.pop("fakedep_mod", None)
