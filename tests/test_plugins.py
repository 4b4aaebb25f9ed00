"""The registries of pluggable parts and the plugins found through entry points.

Each fake plugin is a real installed distribution, made in ``tmp_path``: a package plus a
``*.dist-info`` directory (METADATA, entry_points.txt) on ``sys.path``, so that
``importlib.metadata`` finds it exactly as it finds a pip-installed one.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from albertkit.cli.plugins import plugins_table
from albertkit.config import TASK_OF_KIND, ConfigError, TrainerConfig, registry
from albertkit.config.reference import json_schema, reference_markdown
from albertkit.errors import PluginError

SRC = Path(__file__).resolve().parents[1] / "src"

PLUGIN = '''
import types
from typing import Literal

from pydantic import Field

from albertkit.config.base import Section
from albertkit.config.registry import register_optimizer, register_size, register_task
from albertkit.config.sections import OptimizerSection


class RowsData(Section):
    """Rows of numbers, read by the rows task."""

    kind: Literal["rows"] = Field("rows", description="Selects rows of numbers.")
    rows: int = Field(..., gt=0, description="How many rows.")


class SgdConfig(OptimizerSection):
    """Plain SGD."""

    kind: Literal["sgd"] = Field("sgd", description="Selects SGD.")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="Momentum.")

    def build(self, total_steps):
        raise NotImplementedError


class RowsTask:
    log_keys = types.SimpleNamespace(train_lines=("loss",), eval=("loss",))

    @classmethod
    def for_data(cls, data, spec, **kwargs):
        return cls()


def register():
    register_task("rows_task", "{module}:RowsTask", data=[RowsData])
    register_optimizer(SgdConfig)
    register_size("mini", dict(hidden_size=64, num_attention_heads=2, num_hidden_layers=1,
                               intermediate_size=128, embedding_size=32, vocab_size=500))
'''


def make_distribution(site: Path, dist: str, module: str, code: str,
                      entry_point: str = "register", name: str | None = None,
                      version: str = "1.0") -> None:
    """An installed distribution ``dist`` with package ``module`` and one entry point."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(textwrap.dedent(code).replace("{module}", module))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\n{name or module} = {module}:{entry_point}\n")


@pytest.fixture
def fresh_registry(monkeypatch, tmp_path, builtins_only_registry):
    """The registry as albertkit starts it (built-ins only, plugins not yet looked for;
    plugins installed in the environment stay set aside); restored afterwards,
    TrainerConfig's validator included."""
    reg = builtins_only_registry
    reg.plugins_done = False
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    yield site
    for name in [m for m in sys.modules if m.startswith("fakeplug")]:
        del sys.modules[name]


def config(**sections) -> dict:
    return {"model": {"size": "tiny"}, "data": {"kind": "synthetic"}, **sections}


# --------------------------------------------------------------------------- built-ins
def test_built_ins_are_registered_through_the_registry(builtins_only_registry):
    assert list(registry.entries("task")) == ["pretraining", "squad", "classification",
                                              "multiple_choice"]
    assert list(registry.data_kinds()) == ["synthetic", "tfrecord", "demo",
                                           "user_pretraining", "squad", "classification",
                                           "user_classification", "multiple_choice"]
    assert list(registry.optimizer_kinds()) == ["lamb", "adamw"]
    assert registry.size_names() == ["tiny", "base", "large", "xlarge", "xxlarge"]
    assert list(registry.entries("word segmenter")) == ["fugashi", "jieba", "pythainlp"]
    for category in ("task", "data kind", "optimizer", "size", "word segmenter"):
        assert all(e.source.builtin for e in registry.entries(category).values())
    assert dict(TASK_OF_KIND) == {"synthetic": "pretraining", "tfrecord": "pretraining",
                                  "demo": "pretraining", "user_pretraining": "pretraining",
                                  "squad": "squad", "classification": "classification",
                                  "user_classification": "classification",
                                  "multiple_choice": "multiple_choice"}
    from albertkit.tasks import task_class

    assert task_class("squad").__name__ == "SquadTask"  # imported from the registered path
    lines = plugins_table()
    assert any(ln.split()[:3] == ["optimizer", "lamb", "albertkit"] for ln in lines)


def test_the_plugins_command_lists_every_part(capsys, builtins_only_registry):
    from albertkit.cli import main

    assert main(["plugins"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 + 8 + 2 + 5 + 3 + 3 and all(ln.endswith("albertkit (built-in)") for ln in out)
    assert out[8].split()[:5] == ["data", "kind", "squad", "(trains", "squad)"]
    assert out[-1].split()[:3] == ["word", "segmenter", "pythainlp"]


# --------------------------------------------------------------------------- a plugin
def test_a_plugin_s_parts_are_part_of_the_typed_config(fresh_registry):
    validator, fields = TrainerConfig.__pydantic_validator__, dict(TrainerConfig.model_fields)
    make_distribution(fresh_registry, "albertkit-fakeplug", "fakeplug_ok", PLUGIN)
    cfg = TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 3},
                                         optimizer={"kind": "sgd", "momentum": 0.5},
                                         model={"size": "mini"}))
    assert (cfg.task, cfg.data.rows, cfg.optimizer.momentum) == ("rows_task", 3, 0.5)
    assert cfg.model.spec.hidden_size == 64
    # a round trip through YAML keeps the plugin's kinds
    assert TrainerConfig.from_dict(cfg.to_dict()).data == cfg.data
    # validation errors name the plugin's fields
    with pytest.raises(ConfigError, match=r"data\.rows: Input should be greater than 0 \(got 0\)"):
        TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 0}))
    with pytest.raises(ConfigError, match=r"optimizer\.momentum: Input should be less than 1"):
        TrainerConfig.from_dict(config(optimizer={"kind": "sgd", "momentum": 2}))
    # the schema and the reference list them
    schema = json_schema()
    assert {"RowsData", "SgdConfig"} <= set(schema["definitions"])
    assert "mini" in schema["definitions"]["ModelConfig"]["properties"]["size"]["enum"]
    reference = reference_markdown()
    assert "### `data` with `kind: rows`" in reference and "`optimizer` with `kind: sgd`" in reference
    assert "| `xxlarge` | `mini` |" in reference  # the size presets table
    # its task is built from the registered path; `albertkit plugins` names its source
    from albertkit.tasks import task_class

    assert task_class("rows_task").__module__ == "fakeplug_ok"
    assert any("rows_task" in ln and "albertkit-fakeplug 1.0" in ln for ln in plugins_table())
    # all of it without changing the config classes: the registry is read as they validate
    assert TrainerConfig.__pydantic_validator__ is validator
    assert TrainerConfig.model_fields == fields


def test_a_config_naming_an_unregistered_kind_lists_the_known_ones(fresh_registry):
    hint = "a plugin may be missing: pip install it or check `albertkit plugins`"
    with pytest.raises(ConfigError) as e:
        TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 3}))
    assert "'rows' found using 'kind' does not match any of the expected tags: 'synthetic'" \
        in str(e.value) and hint in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"optimizer: .*'sgd'.*expected tags: 'lamb', 'adamw'"):
        TrainerConfig.from_dict(config(optimizer={"kind": "sgd"}))
    with pytest.raises(ConfigError, match=r"model\.size: Input should be 'tiny', .*'xxlarge'; a "
                                          r"plugin may be missing.*\(got 'mini'\)"):
        TrainerConfig.from_dict(config(model={"size": "mini"}))
    with pytest.raises(PluginError, match=r"unknown data kind 'rows'; known: \['synthetic'"):
        registry.task_of_kind("rows")


# --------------------------------------------------------------------------- bad plugins
DUPLICATE = '''
from albertkit.config.data import SquadData
from albertkit.config.registry import register_size, register_task


def register():
    register_size("half", dict(hidden_size=64, num_attention_heads=2))
    register_task("my_squad", "x:Y", data=[SquadData])
'''


def broken_reason(caplog, ep_name: str) -> str:
    """The one reason ``registry.broken_plugins()`` gives for ``ep_name``, checked to be the
    warning that was logged when the plugin was skipped."""
    [broken] = [b for b in registry.broken_plugins() if b.entry_point == ep_name]
    assert "\n" not in broken.reason
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"{broken.reason} (plugin skipped)"]
    return broken.reason


def test_a_kind_a_built_in_owns_is_refused_and_nothing_is_half_registered(fresh_registry,
                                                                          caplog):
    make_distribution(fresh_registry, "albertkit-dup", "fakeplug_dup", DUPLICATE, version="0.3")
    TrainerConfig.from_dict(config())  # uses none of its parts: runs, the plugin skipped
    assert broken_reason(caplog, "fakeplug_dup") == (
        "data kind 'squad' is registered twice: by albertkit (built-in) and by plugin "
        "'fakeplug_dup' (albertkit-dup 0.3)")
    assert "half" not in registry.size_names() and "my_squad" not in registry.entries("task")
    # a config naming a part it had claimed stops in one line with the plugin's reason
    with pytest.raises(ConfigError) as e:
        TrainerConfig.from_dict(config(model={"size": "half"}))
    assert "\n" not in str(e.value) and str(e.value).endswith(
        "it belongs to a plugin that failed to load: data kind 'squad' is registered twice: by "
        "albertkit (built-in) and by plugin 'fakeplug_dup' (albertkit-dup 0.3) (got 'half')")


def test_two_plugins_claiming_one_kind_name_both(fresh_registry, caplog):
    make_distribution(fresh_registry, "albertkit-fakeplug", "fakeplug_a", PLUGIN)
    make_distribution(fresh_registry, "other-rows", "fakeplug_b", PLUGIN, version="2.1")
    cfg = TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 3}))
    assert broken_reason(caplog, "fakeplug_b") == (
        "task 'rows_task' is registered twice: by plugin 'fakeplug_a' (albertkit-fakeplug 1.0) "
        "and by plugin 'fakeplug_b' (other-rows 2.1)")
    # the first plugin is whole and serves the config, the second left nothing behind
    assert cfg.task == "rows_task"
    assert registry.entries("data kind")["rows"].source.distribution == "albertkit-fakeplug"
    assert registry.entries("optimizer")["sgd"].value.__module__ == "fakeplug_a"


def test_a_plugin_that_fails_to_import_is_named_with_its_distribution(fresh_registry, caplog):
    make_distribution(fresh_registry, "albertkit-broken", "fakeplug_broken",
                      "import numpy_that_is_not_there\n", version="0.9")
    TrainerConfig.from_dict(config())
    reason = ("albertkit plugin 'fakeplug_broken' of albertkit-broken 0.9 failed to import "
              "(fakeplug_broken:register): ModuleNotFoundError: No module named "
              "'numpy_that_is_not_there'")
    assert broken_reason(caplog, "fakeplug_broken") == reason
    TrainerConfig.model_validate(config())  # tried once: no second warning
    assert len(caplog.records) == 1
    # which kinds it would own is unknown: a config naming an unknown kind names it
    with pytest.raises(ConfigError) as e:
        TrainerConfig.from_dict(config(data={"kind": "rows"}))
    assert "\n" not in str(e.value) and str(e.value).endswith(
        f"{registry.PLUGIN_HINT}; plugins that failed to load: {reason}")


def test_a_plugin_whose_registration_fails_registers_nothing(fresh_registry, caplog):
    code = PLUGIN.replace("def register():", "def register():\n    register_size('early', {})\n"
                          "    raise RuntimeError('no GPU\\nhere')\n\ndef _unused():")
    make_distribution(fresh_registry, "albertkit-fails", "fakeplug_fails", code)
    TrainerConfig.from_dict(config())
    assert broken_reason(caplog, "fakeplug_fails") == (
        "plugin 'fakeplug_fails' (albertkit-fails 1.0): registration failed: RuntimeError: "
        "no GPU here")
    assert "early" not in registry.size_names()


@pytest.mark.parametrize("call, message", [
    ("register_size('huge', dict(hidden_size=100, num_attention_heads=3))",
     "size 'huge': hidden_size=100 is not divisible by num_attention_heads=3"),
    ("register_optimizer(int)", "optimizer config <class 'int'> is not a pydantic model class"),
    ("register_task('a b', 'x:Y')", "task name 'a b' is not an identifier"),
    ("register_task('t', 'no_colon')", "task 't': 'no_colon' is not a 'module:Class' path"),
    ("register_optimizer(type('C', (OptimizerSection,), {'__annotations__': {'kind': "
     "Literal['c']}, 'kind': 'c'}))",
     "optimizer 'c': C has no build(total_steps) and names no builder ('module:function')"),
])
def test_invalid_registrations_are_refused(fresh_registry, caplog, call, message):
    code = ("from typing import Literal\n\nfrom albertkit.config.registry import *\n"
            "from albertkit.config import OptimizerSection\n\n"
            f"def register():\n    {call}\n")
    make_distribution(fresh_registry, "albertkit-bad", "fakeplug_bad", code)
    TrainerConfig.from_dict(config())
    assert broken_reason(caplog, "fakeplug_bad") == \
        f"plugin 'fakeplug_bad' (albertkit-bad 1.0): {message}"


def test_an_entry_point_must_name_a_function(fresh_registry, caplog):
    make_distribution(fresh_registry, "albertkit-notfn", "fakeplug_notfn", "register = 3\n")
    TrainerConfig.from_dict(config())
    assert "fakeplug_notfn:register is not a function" in broken_reason(caplog, "fakeplug_notfn")


# --------------------------------------------------------------------------- choosing plugins
def test_the_plugins_a_process_and_a_config_load(fresh_registry, monkeypatch, capsys):
    from albertkit.cli import main

    make_distribution(fresh_registry, "albertkit-fakeplug", "fakeplug_ok", PLUGIN)
    make_distribution(fresh_registry, "albertkit-broken", "fakeplug_broken",
                      "import numpy_that_is_not_there\n", version="0.9")
    # ALBERTKIT_PLUGINS (read by the command line) leaves the broken one out: never imported
    monkeypatch.setenv("ALBERTKIT_PLUGINS", "albertkit_fakeplug")
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(ln.split()[:2] == ["data", "kind"] and "rows" in ln for ln in out)
    [left_out] = [ln for ln in out if ln.split()[:3] == ["left", "out", "fakeplug_broken"]]
    assert left_out.endswith("plugin 'fakeplug_broken' (albertkit-broken 0.9): not in "
                             "ALBERTKIT_PLUGINS")
    assert registry.broken_plugins() == [] and "fakeplug_broken" not in sys.modules
    monkeypatch.delenv("ALBERTKIT_PLUGINS")
    registry.limit_plugins(None)
    # a config's plugins: loads only the plugins it names, by entry point or distribution
    cfg = TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 1},
                                         plugins=["Albertkit-FakePlug"]))
    assert cfg.plugins == ["Albertkit-FakePlug"] and cfg.to_dict()["plugins"] == cfg.plugins
    assert registry.broken_plugins() == []
    with pytest.raises(ConfigError, match=r"<root>: data kind 'rows' comes from plugin "
                                          r"'fakeplug_ok' \(albertkit-fakeplug 1\.0\), which "
                                          r"plugins=\[\] does not name$"):
        TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 1}, plugins=[]))
    with pytest.raises(ConfigError, match=r"plugins: \['nope'\] is not an installed albertkit "
                                          r"plugin; installed: \['albertkit-broken', "):
        TrainerConfig.from_dict(config(plugins=["nope"]))
    assert registry.broken_plugins() == []
    # without a choice, every plugin loads: the broken one is listed with its reason
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1].split()[:2] == ["broken", "fakeplug_broken"]
    assert out[-1].endswith("failed to import (fakeplug_broken:register): ModuleNotFoundError: "
                            "No module named 'numpy_that_is_not_there'")


def test_the_container_entry_point_reads_albertkit_plugins(fresh_registry, tmp_path):
    from albertkit.sagemaker import entrypoint, plan, submit
    from test_sagemaker_entrypoint import opt_ml, tiny_config

    root, environ = opt_ml(tmp_path, submit.to_sagemaker(tiny_config()))
    (root / "input" / "data" / "code" / plan.CONFIG_FILE).write_text("{not json")
    environ["ALBERTKIT_PLUGINS"] = "tagging, albertkit-fakeplug"
    assert entrypoint.main([], environ, root) == 2  # the config stops it, after the edge
    assert registry._REGISTRY.allowed == {"tagging", "albertkit-fakeplug"}


@pytest.mark.slow
def test_a_broken_plugin_beside_a_working_one(fresh_registry, tmp_path, capsys):
    """The acceptance case: the working plugin's config trains from the command line, and
    `albertkit plugins` shows the broken one with its one-line reason."""
    from albertkit.cli import main

    make_distribution(fresh_registry, "albertkit-fakeplug", "fakeplug_ok", PLUGIN)
    make_distribution(fresh_registry, "albertkit-broken", "fakeplug_broken",
                      "import numpy_that_is_not_there\n", version="0.9")
    path = tmp_path / "mini.yaml"
    path.write_text(
        "model: {size: mini}\n"  # the working plugin's size
        "data: {kind: synthetic, seq_length: 32, max_predictions_per_seq: 4, num_examples: 8}\n"
        "runtime: {micro_batch_size: 4, global_batch_size: 4, max_steps: 2, eval_every_steps: 0}\n"
        f"run_dir: {tmp_path / 'run'}\n"
        "logging: {progress_bar: false, tensorboard: false}\n")
    assert main(["pretrain", "--config", str(path)]) == 0
    assert (tmp_path / "run" / "summary.json").is_file()
    assert main(["plugins"]) == 1
    broken = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("broken")]
    assert len(broken) == 1 and broken[0].split()[1] == "fakeplug_broken"
    assert broken[0].endswith("ModuleNotFoundError: No module named 'numpy_that_is_not_there'")


# --------------------------------------------------------------------------- optimizers
BUILDER = '''
from typing import Literal

from pydantic import Field

from albertkit.config import OptimizerSection
from albertkit.config.registry import register_optimizer


class PlainSgd(OptimizerSection):
    """SGD: no moment estimates, so no beta_1/beta_2/epsilon."""

    builder = "{module}:build"
    kind: Literal["plain_sgd"] = Field("plain_sgd", description="Selects plain SGD.")


def build(config, total_steps):
    return ("built", config.kind, config.learning_rate, total_steps)


def register():
    register_optimizer(PlainSgd)
'''


def test_an_optimizer_carries_its_own_fields_and_names_its_builder(fresh_registry):
    make_distribution(fresh_registry, "albertkit-sgd", "fakeplug_sgd", BUILDER)
    cfg = TrainerConfig.from_dict(config(optimizer={"kind": "plain_sgd", "learning_rate": 0.5}))
    assert cfg.optimizer.build(total_steps=7) == ("built", "plain_sgd", 0.5, 7)
    assert not {"beta_1", "beta_2", "epsilon"} & set(type(cfg.optimizer).model_fields)
    with pytest.raises(ConfigError, match=r"optimizer\.beta_1: Extra inputs are not permitted"):
        TrainerConfig.from_dict(config(optimizer={"kind": "plain_sgd", "beta_1": 0.9}))
    # LAMB and AdamW keep theirs, and name their builders by path
    assert {"beta_1", "beta_2", "epsilon"} <= set(registry.optimizer_kinds()["adamw"].model_fields)
    assert registry.optimizer_kinds()["lamb"].builder == "albertkit.optimizers.from_config:lamb"


# --------------------------------------------------------------------------- SageMaker
def test_a_sagemaker_job_refuses_a_plugin_it_would_not_have(fresh_registry, caplog):
    from albertkit.sagemaker.submit import to_sagemaker

    make_distribution(fresh_registry, "albertkit-fakeplug", "fakeplug_sm", PLUGIN)
    sm = {"role_arn": "arn:aws:iam::123456789012:role/r", "output_path": "s3://bucket/albertkit",
          "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"}
    cfg = TrainerConfig.from_dict(config(data={"kind": "rows", "rows": 3}, sagemaker=sm,
                                         runtime={"max_steps": 10}))
    with pytest.raises(ConfigError) as e:
        to_sagemaker(cfg)  # what `albertkit launch --dry-run` calls before it prints
    assert str(e.value) == (
        "SageMaker job refused:\n  data kind 'rows' and task 'rows_task' come from the plugin "
        "distribution albertkit-fakeplug, which the job neither ships nor finds in its image: "
        "add the plugin's source directory to sagemaker.plugins, or add 'albertkit-fakeplug' "
        "to sagemaker.image_plugins if sagemaker.image_uri's image has it installed")
    with caplog.at_level(logging.WARNING, logger="albertkit"):
        # declared in the image (names compare as packaging does)
        plan = to_sagemaker(cfg, image_plugins=["Albertkit_FakePlug"]).plan()
    assert caplog.records == []
    metrics = [m["Name"] for m in plan["AlgorithmSpecification"]["MetricDefinitions"]]
    assert metrics == ["train:loss", "eval:loss"]  # from the plugin task's log keys
    with caplog.at_level(logging.WARNING, logger="albertkit"):
        to_sagemaker(TrainerConfig.from_dict(config(sagemaker=sm))).plan()
    assert caplog.records == []  # built-in parts only: nothing is missing


def test_a_part_registered_outside_any_plugin_cannot_travel(fresh_registry):
    from albertkit.sagemaker.submit import to_sagemaker

    make_distribution(fresh_registry, "albertkit-fakeplug", "fakeplug_direct", PLUGIN)
    TrainerConfig.from_dict(config())  # the plugin loads (its task is what the kind trains)

    class LinesData(BaseModel):
        kind: Literal["lines"] = "lines"

    registry.register_data(LinesData, task="rows_task")
    sm = {"role_arn": "arn:aws:iam::123456789012:role/r", "output_path": "s3://bucket/albertkit",
          "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest",
          "image_plugins": ["albertkit-fakeplug"]}
    cfg = TrainerConfig.from_dict(config(data={"kind": "lines"}, sagemaker=sm))
    with pytest.raises(ConfigError) as e:
        to_sagemaker(cfg)
    assert str(e.value).splitlines()[1:] == [
        "  data kind 'lines' comes from a register_* call outside any plugin, which a SageMaker "
        "job cannot repeat: package it as a plugin (an albertkit.plugins entry point) and add "
        "its source directory to sagemaker.plugins, or install it in the image and name it in "
        "sagemaker.image_plugins"]


# --------------------------------------------------------------------------- laziness
def test_import_albertkit_loads_no_plugin_and_no_tensorflow(tmp_path):
    site = tmp_path / "site"
    marker = tmp_path / "imported"
    make_distribution(site, "albertkit-spy", "fakeplug_spy",
                      f"open({str(marker)!r}, 'w').close()\n\ndef register():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(site)])}
    check = ("import sys, albertkit; from albertkit.config import TrainerConfig; "
             "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", check], env=env, check=True)
    subprocess.run([sys.executable, "-m", "albertkit.cli", "--help"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    assert not marker.exists()
    parse = ("from albertkit.config import TrainerConfig; "
             "TrainerConfig.from_dict({'data': {'kind': 'synthetic'}})")
    subprocess.run([sys.executable, "-c", parse], env=env, check=True)
    assert marker.exists()  # the first parse loads it


def test_task_of_kind_finds_a_plugin_s_kind_before_any_parse(fresh_registry):
    make_distribution(fresh_registry, "albertkit-fakeplug", "fakeplug_view", PLUGIN)
    assert TASK_OF_KIND.get("rows") == "rows_task"  # what `albertkit report` reads
    assert TASK_OF_KIND.get("nothing") is None
