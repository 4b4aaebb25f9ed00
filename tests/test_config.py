"""Config round trips, rejection of bad input, cross-field rules, overrides, presets."""

from __future__ import annotations

import json

import pytest

from albertkit.config import ConfigError, TrainerConfig, apply_overrides
from albertkit.config.sizes import SIZES

BASE = {"model": {"size": "tiny"}, "data": {"kind": "synthetic"}}


def make(**sections):
    raw = json.loads(json.dumps(BASE))
    for k, v in sections.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, dict) else v
    return TrainerConfig.from_dict(raw)


def test_yaml_and_json_round_trip(tmp_path):
    cfg = make(optimizer={"kind": "adamw", "learning_rate": 5e-4,
                          "schedule": {"warmup_steps": 10}},
               runtime={"micro_batch_size": 8, "global_batch_size": 32, "max_steps": 50,
                        "precision": "mixed_bfloat16"})
    cfg.to_yaml(tmp_path / "c.yaml")
    cfg.to_json(tmp_path / "c.json")
    assert TrainerConfig.from_yaml(tmp_path / "c.yaml") == cfg
    assert TrainerConfig.from_json(tmp_path / "c.json") == cfg
    assert cfg.runtime.accumulation_steps() == 4
    assert cfg.runtime.accumulation_steps(replicas=2) == 2


def test_unknown_key_named(tmp_path):
    with pytest.raises(ConfigError, match=r"runtime\.max_stepz"):
        make(runtime={"max_stepz": 3})


def test_wrong_type_named():
    with pytest.raises(ConfigError, match=r"runtime\.micro_batch_size.*'many'"):
        make(runtime={"micro_batch_size": "many"})


def test_boolean_is_boolean():
    with pytest.raises(ConfigError, match=r"runtime\.xla"):
        make(runtime={"xla": "maybe"})


@pytest.mark.parametrize("value", [0, -4])
def test_non_positive_sizes_rejected(value):
    with pytest.raises(ConfigError, match="micro_batch_size"):
        make(runtime={"micro_batch_size": value})


def test_global_batch_not_divisible():
    with pytest.raises(ConfigError, match=r"global_batch_size=30 is not divisible by "
                                          r"runtime\.micro_batch_size=8"):
        make(runtime={"micro_batch_size": 8, "global_batch_size": 30})


def test_global_batch_not_divisible_by_replicas():
    cfg = make(runtime={"micro_batch_size": 8, "global_batch_size": 24})
    with pytest.raises(ConfigError, match="replicas=2"):
        cfg.runtime.accumulation_steps(replicas=2)


def test_warmup_longer_than_training():
    with pytest.raises(ConfigError, match=r"warmup_steps=200 exceeds runtime\.max_steps=100"):
        make(optimizer={"kind": "lamb", "schedule": {"warmup_steps": 200}},
             runtime={"max_steps": 100})


def test_predictions_longer_than_sequence():
    with pytest.raises(ConfigError, match=r"max_predictions_per_seq=200 exceeds "
                                          r"data\.seq_length=128"):
        make(data={"kind": "synthetic", "seq_length": 128, "max_predictions_per_seq": 200})


def test_sequence_longer_than_positions():
    with pytest.raises(ConfigError, match="max_position_embeddings=512"):
        make(data={"kind": "synthetic", "seq_length": 1024})


def test_heads_must_divide_hidden():
    with pytest.raises(ConfigError, match="hidden_size=129 is not divisible"):
        make(model={"size": "tiny", "hidden_size": 129})


def test_unknown_data_kind():
    with pytest.raises(ConfigError, match="data"):
        make(data={"kind": "parquet"})


def test_malformed_yaml_names_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("model:\n  size: tiny\n data: [\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*line \d+"):
        TrainerConfig.from_yaml(p)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        TrainerConfig.from_yaml(tmp_path / "nope.yaml")


def test_dotted_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    make().to_yaml(p)
    cfg = TrainerConfig.from_yaml(p, ["optimizer.learning_rate=1e-3", "runtime.xla=false",
                                      "model.hidden_size=256", "model.num_attention_heads=4"])
    assert cfg.optimizer.learning_rate == pytest.approx(1e-3)
    assert cfg.runtime.xla is False
    assert cfg.model.spec.hidden_size == 256
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides({}, ["novalue"])
    with pytest.raises(ConfigError, match="model.size is a value"):
        apply_overrides({"model": {"size": "tiny"}}, ["model.size.x=1"])


def test_presets_match_the_paper():
    expect = {"base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096),
              "xlarge": (24, 2048, 16, 8192), "xxlarge": (12, 4096, 64, 16384)}
    for size, (layers, hidden, heads, ffn) in expect.items():
        spec = make(model={"size": size}).model.spec
        assert (spec.num_hidden_layers, spec.hidden_size, spec.num_attention_heads,
                spec.intermediate_size) == (layers, hidden, heads, ffn)
        assert spec.vocab_size == 30000 and spec.embedding_size == 128
    assert set(SIZES) == {"tiny", "base", "large", "xlarge", "xxlarge"}


def test_every_field_overridable():
    spec = make(model={"size": "base", "num_hidden_groups": 2, "inner_group_num": 2,
                       "hidden_act": "relu", "pre_layer_norm": True}).model.spec
    assert (spec.num_hidden_groups, spec.inner_group_num, spec.hidden_act,
            spec.pre_layer_norm) == (2, 2, "relu", True)


# --------------------------------------------------------------------------- extension sections
def test_extension_section_is_kept_raw_and_never_written(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: {size: tiny}\ndata: {kind: synthetic}\n"
                    "sagemaker: {instance_count: 2, inputs: {train: {kind: s3, uri: s3://b/x}}}\n")
    cfg = TrainerConfig.from_yaml(path, ["sagemaker.instance_type=ml.g5.xlarge",
                                         "sagemaker.spot=true"])
    assert cfg.extension_section("sagemaker") == {
        "instance_count": 2, "inputs": {"train": {"kind": "s3", "uri": "s3://b/x"}},
        "instance_type": "ml.g5.xlarge", "spot": True}
    # the config's own outputs (run directories, exports) never carry it
    assert "sagemaker" not in cfg.to_dict() and "sagemaker" not in cfg.model_dump()
    assert "sagemaker" not in cfg.to_yaml() and "sagemaker" not in cfg.to_json()
    # a copy of the config keeps it; handing it out does not let callers change it
    assert cfg.model_copy(update={"run_dir": tmp_path}).extension_section("sagemaker")["spot"]
    cfg.extension_section("sagemaker")["spot"] = False
    assert cfg.extension_section("sagemaker")["spot"] is True
    # the section is unvalidated here: the package that owns it checks it
    assert TrainerConfig.from_dict({**BASE, "sagemaker": {"no_such_key": 1}}).extension_section(
        "sagemaker") == {"no_such_key": 1}
    # an override alone creates it; none at all (or null) means no section
    assert make().extension_section("sagemaker") is None
    assert TrainerConfig.from_dict(BASE, ["sagemaker.instance_count=3"]).extension_section(
        "sagemaker") == {"instance_count": 3}
    assert TrainerConfig.from_dict({**BASE, "sagemaker": None}).extension_section("sagemaker") is None
    with pytest.raises(KeyError, match="not an extension section"):
        cfg.extension_section("runtime")
    # the old name still works, and says it is deprecated
    with pytest.warns(DeprecationWarning, match="use extension_section"):
        assert cfg.plugin_section("sagemaker") == cfg.extension_section("sagemaker")


def test_extension_section_must_be_a_mapping():
    with pytest.raises(ConfigError, match=r"sagemaker: Input should be a valid dictionary"):
        TrainerConfig.from_dict({**BASE, "sagemaker": [1, 2]})
    # the typed sections are still validated next to an extension section
    with pytest.raises(ConfigError, match=r"runtime\.max_stepz"):
        TrainerConfig.from_dict({**BASE, "runtime": {"max_stepz": 1}, "sagemaker": {}})


def test_config_package_does_not_import_sagemaker():
    import subprocess
    import sys

    code = ("import sys, albertkit.config, albertkit.config.reference; "
            "print(sorted(m for m in sys.modules if m.startswith('albertkit.sagemaker')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("given, mode", [(None, "selective"), ("full", "full"), ("none", "none"),
                                         (True, "full"), (False, "none")])
def test_remat_default_and_legacy_booleans(given, mode):
    """runtime.remat defaults to selective; albertkit 0.1's booleans mean full / none."""
    from albertkit.config.sections import RuntimeConfig

    cfg = RuntimeConfig() if given is None else RuntimeConfig(remat=given)
    assert cfg.remat == mode
