"""`albertkit config schema|show|reference` and the generated docs/configuration.md."""

from __future__ import annotations

import argparse
import json
import typing
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from albertkit.cli import main
from albertkit.cli.config import (
    add_config_parser,
    config_reference,
    config_schema,
    extension_sections,
    show_config,
)
from albertkit.config import ConfigError, TrainerConfig
from albertkit.config.reference import SCHEMA_FILE, _annotation, _submodels, composed_model
from albertkit.data.demo import demo_config

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "configuration.md"
REGENERATE = "albertkit config reference --out docs/configuration.md"


def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="albertkit")
    add_config_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def _sections(model: type[BaseModel] | None = None, path: str = ""
              ) -> list[tuple[str, type[BaseModel]]]:
    """Every (dotted path, section model) of the config tree, variants of unions included
    (extension sections such as sagemaker: too)."""
    model = model or composed_model(extension_sections())
    out = [(path, model)]
    for name, info in model.model_fields.items():
        sub = _submodels(_annotation(info))
        if sub is not None:
            for m in sub[1]:
                out += _sections(m, f"{path}.{name}" if path else name)
    return out


# --------------------------------------------------------------------------- reference
def test_configuration_reference_is_up_to_date(builtins_only_registry):
    # albertkit's own reference: plugins installed here (CI installs the example) set aside
    assert REFERENCE.is_file(), f"docs/configuration.md is missing: run `{REGENERATE}`"
    current = REFERENCE.read_text(encoding="utf-8")
    assert current == config_reference(), (
        f"docs/configuration.md is stale (the config models changed): run `{REGENERATE}` "
        "where no plugin is installed (it documents installed plugins' kinds too; "
        "`pip uninstall albertkit-tagging` first in the .venv of scripts/test.sh)")


def test_reference_lists_every_section_and_field():
    text = config_reference()
    sections = _sections()
    assert len(sections) >= 20
    for path, model in sections:
        if path:
            assert f"`{path}" in text, path
        for name, info in model.model_fields.items():
            assert f"| `{name}` |" in text, f"{model.__name__}.{name}"
            if info.description:
                assert info.description.replace("|", "\\|") in text
    # types, defaults, bounds and required markers come from the models
    assert "| `learning_rate` | float (> 0.0) | `0.00176` |" in text
    assert "| `train_files` | list of string (at least 1 item) | **required** |" in text
    assert "| `precision` | one of `\"float32\"`, `\"mixed_float16\"`, `\"mixed_bfloat16\"` |" \
        in text
    assert "| `hidden_size` | `128` | `768` | `1024` | `2048` | `4096` |" in text  # presets


def test_every_config_field_has_a_description():
    missing = [f"{path or '<root>'}.{name}" for path, model in _sections()
               for name, info in model.model_fields.items() if not info.description]
    assert not missing, f"add description= to these Field(...)s: {missing}"


def test_reference_check_mode(tmp_path, capsys):
    out = tmp_path / "configuration.md"
    assert main(["config", "reference", "--out", str(out), "--check"]) == 1  # missing counts as stale
    assert main(["config", "reference", "--out", str(out)]) == 0
    assert out.read_text() == config_reference()
    assert main(["config", "reference", "--out", str(out), "--check"]) == 0
    out.write_text(out.read_text().replace("Peak learning rate", "Peak LR"))
    assert main(["config", "reference", "--out", str(out), "--check"]) == 1
    assert "stale" in capsys.readouterr().err


# --------------------------------------------------------------------------- schema
@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = config_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_schema_is_draft07_for_the_yaml_language_server():
    schema = config_schema()
    text = json.dumps(schema)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert "$defs" not in text and '"discriminator"' not in text
    assert "# yaml-language-server: $schema=" in schema["description"]
    # every $ref resolves, and no $ref has siblings (draft-07 would ignore them)
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "$ref" in node:
                assert set(node) == {"$ref"}, node
                name = node["$ref"].removeprefix("#/definitions/")
                assert name in schema["definitions"], node["$ref"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    # descriptions reach the editor's hover text
    runtime = schema["definitions"]["RuntimeConfig"]["properties"]
    assert runtime["micro_batch_size"]["description"].startswith("Sequences one replica")


GOOD = [
    {"data": {"kind": "synthetic"}},
    demo_config(run_dir="runs/x").to_dict(),
    {"model": {"size": "tiny", "hidden_act": "gelu"}, "data": {"kind": "squad",
     "train_file": "t.json", "tokenizer": "tok"}, "optimizer": {"kind": "adamw"}},
    {"data": {"kind": "classification", "task": "mrpc", "train_file": "t.tsv",
              "tokenizer": "tok", "labels": ["0", "1"]}, "optimizer": {"kind": "lamb",
     "schedule": {"warmup_fraction": 0.1}, "clip_norm": None}},
    # fine-tuning data may leave its tokenizer to model.load_from
    {"model": {"load_from": "pre"}, "data": {"kind": "squad", "train_file": "t.json"}},
]
BAD = [
    {"data": {"kind": "synthetic"}, "runtime": {"max_stepz": 3}},           # misspelt key
    {"data": {"seq_length": 64}},                                           # no kind
    {"data": {"kind": "synthetic"}, "runtime": {"precision": "fp16"}},       # bad enum
    {"data": {"kind": "synthetic"}, "runtime": {"xla": "maybe"}},            # not a bool
    {"data": {"kind": "synthetic"}, "runtime": {"micro_batch_size": 0}},     # bound
    {"data": {"kind": "tfrecord", "train_files": []}},                      # min length
    {"data": {"kind": "squad", "train_file": "t.json"}},                    # required field
    {"model": {"load_from": None},                                          # ... without
     "data": {"kind": "classification", "train_file": "t.tsv"}},            # load_from
    {},                                                                     # data required
]


@pytest.mark.parametrize("raw", GOOD)
def test_schema_accepts_what_the_loader_accepts(raw, validator):
    TrainerConfig.model_validate(raw)
    errors = [e.message for e in validator.iter_errors(raw)]
    assert not errors


@pytest.mark.parametrize("raw", BAD)
def test_schema_rejects_what_the_loader_rejects(raw, validator):
    with pytest.raises(ConfigError):
        TrainerConfig.from_dict(raw)
    assert list(validator.iter_errors(raw)), raw


def test_schema_command_writes_the_schema(tmp_path, capsys):
    out = tmp_path / SCHEMA_FILE
    args = _cli(["config", "schema", "--out", str(out)])
    assert args.func(args) == 0
    assert json.loads(out.read_text()) == config_schema()
    assert f"# yaml-language-server: $schema={out}" in capsys.readouterr().err
    args = _cli(["config", "schema"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "albertkit TrainerConfig"


# --------------------------------------------------------------------------- show
def _tiny_config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({
        "model": {"size": "tiny", "hidden_size": 256, "num_attention_heads": 4},
        "data": {"kind": "synthetic", "seq_length": 64}, "optimizer": {"kind": "lamb"},
        "runtime": {"micro_batch_size": 8, "global_batch_size": 32}}))
    return path


def test_show_prints_a_loadable_resolved_config_and_the_model(tmp_path, capsys):
    path = _tiny_config(tmp_path)
    args = _cli(["config", "show", "--config", str(path), "--set", "runtime.max_steps=7",
                 "--set", "optimizer.learning_rate=3e-4"])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    expected = TrainerConfig.from_yaml(path, ["runtime.max_steps=7",
                                              "optimizer.learning_rate=3e-4"])
    assert TrainerConfig.model_validate(yaml.safe_load(text)) == expected
    loaded = yaml.safe_load(text)
    assert loaded["runtime"]["seed"] == 0 and loaded["logging"]["log_every_steps"] == 10
    assert list(loaded["data"])[0] == "kind"
    # the resolved architecture: the tiny preset with the two overrides
    assert "#   hidden_size: 256" in text and "#   num_attention_heads: 4" in text
    assert "#   num_hidden_layers: 2" in text and "#   vocab_size: 3000" in text
    assert "#   accumulation_steps (1 replica): 4" in text
    assert "#   task: pretraining" in text


def test_show_json_and_unreadable_load_from(tmp_path, capsys):
    path = _tiny_config(tmp_path)
    args = _cli(["config", "show", "-c", str(path), "--format", "json",
                 "--set", f"model.load_from={tmp_path / 'missing'}"])
    assert args.func(args) == 0
    view = json.loads(capsys.readouterr().out)
    cfg = TrainerConfig.from_yaml(path)
    assert view["model_spec"] == cfg.model.spec.model_dump(mode="json")
    assert view["derived"]["task"] == "pretraining"
    assert any("load_from" in n for n in view["notes"])


def test_show_reports_config_errors_with_the_field(tmp_path):
    path = _tiny_config(tmp_path)
    with pytest.raises(ConfigError, match=r"runtime.max_stepz"):
        TrainerConfig.from_yaml(path, ["runtime.max_stepz=3"])
    assert main(["config", "show", "--config", str(path), "--set", "runtime.max_stepz=3"]) == 2


def test_show_text_is_stable_for_a_given_config():
    cfg = TrainerConfig.model_validate({"model": {"size": "tiny"}, "data": {"kind": "synthetic"}})
    text = show_config(cfg, "x.yaml")
    assert text.startswith("# resolved configuration of x.yaml")
    assert text == show_config(cfg, "x.yaml")
    assert typing.get_args(typing.Literal["yaml", "json"])  # both formats exist
    assert json.loads(show_config(cfg, fmt="json"))["config"]["model"]["size"] == "tiny"


def test_show_resolves_sagemaker_configs_like_launch(capsys):
    from albertkit.sagemaker.defaults import sagemaker_defaults_from_env

    path = ROOT / "examples" / "configs" / "sagemaker_pretrain_base.yaml"
    env = sagemaker_defaults_from_env({
        "ALBERTKIT_SM_BUCKET": "albertkit-123456789012-us-east-1",
        "ALBERTKIT_SM_ROLE_ARN": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
        "ALBERTKIT_SM_SUBNETS": "subnet-0123456789abcdef0",
        "ALBERTKIT_SM_SECURITY_GROUP_IDS": "sg-0123456789abcdef0"})
    parser = argparse.ArgumentParser(prog="albertkit")
    add_config_parser(parser.add_subparsers(dest="command", required=True), env)
    args = parser.parse_args(["config", "show", "-c", str(path), "--format", "json"])
    assert args.func(args) == 0
    view = json.loads(capsys.readouterr().out)
    sm = view["config"]["sagemaker"]
    assert sm["subnets"] == ["subnet-0123456789abcdef0"] and sm["instance_count"] == 8
    # 8 x ml.p4d.24xlarge with Horovod: 64 replicas -> 4096 / (32 x 64) = 2 accumulation steps
    assert view["derived"]["sagemaker_replicas"] == 64
    assert view["derived"]["accumulation_steps (64 replicas)"] == 2
    # without the environment the same file is incomplete, and says what is missing
    args = _cli(["config", "show", "-c", str(path)])
    with pytest.raises(ConfigError, match="subnets"):
        args.func(args)
