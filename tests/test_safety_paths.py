"""Command-line paths reach the config as the strings the user typed.

``--run-dir`` used to be turned into a ``run_dir=<value>`` override and parsed as YAML:
``runs/x #tmp`` became ``runs/x`` (another run's folder: trained in, resumed from, pruned),
``on`` became ``True`` and ``0123`` the octal number 83.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from albertkit.cli import build_parser
from albertkit.cli.train import load_config
from albertkit.config import TrainerConfig, apply_overrides

TRICKY = ["runs/x #tmp", "on", "0123", "null", "[a, b]", "runs/{x}: y", "1e3"]


@pytest.fixture()
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "cfg.yaml"
    raw = {"run_dir": "runs/from-file", "model": {"size": "tiny"},
           "data": {"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 4}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [["pretrain"], ["finetune", "glue"], ["evaluate"]])
@pytest.mark.parametrize("run_dir", TRICKY)
def test_run_dir_flag_is_set_verbatim(config_file, command, run_dir):
    args = build_parser().parse_args([*command, "--config", str(config_file),
                                      "--run-dir", run_dir])
    cfg = load_config(args)
    assert cfg.run_dir == Path(run_dir)
    assert str(cfg.run_dir) == run_dir


def test_distributed_flag_is_set_too(config_file):
    args = build_parser().parse_args(["pretrain", "--config", str(config_file),
                                      "--distributed", "horovod", "--run-dir", "r"])
    cfg = load_config(args)
    assert cfg.distributed.backend == "horovod" and cfg.run_dir == Path("r")


def test_typed_values_win_over_text_overrides_and_are_never_parsed(config_file):
    cfg = TrainerConfig.from_yaml(config_file, ["run_dir=elsewhere"],
                                  values={"run_dir": "runs/x #tmp"})
    assert cfg.run_dir == Path("runs/x #tmp")
    # text overrides keep their YAML meaning (documented for --set)
    assert apply_overrides({}, ["a.b=0x10"]) == {"a": {"b": 16}}
    assert apply_overrides({}, [], {"a.b": "0x10"}) == {"a": {"b": "0x10"}}


def test_export_reads_a_run_whose_name_yaml_would_mangle(tmp_path, monkeypatch):
    """``load_run_model`` sets the run directory it was given, whatever its name."""
    import albertkit.training.export as export

    run = tmp_path / "0123 #x"
    run.mkdir()
    raw = {"run_dir": "somewhere/else", "model": {"size": "tiny"},
           "data": {"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 4}}
    (run / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    seen = {}

    class Stop(Exception):
        pass

    def fake_from_yaml(path, overrides=None, values=None):
        cfg = TrainerConfig.from_dict(yaml.safe_load(Path(path).read_text()), overrides,
                                      values=values)
        seen["run_dir"] = cfg.run_dir
        raise Stop

    monkeypatch.setattr(export.TrainerConfig, "from_yaml", fake_from_yaml)
    with pytest.raises(Stop):
        export.load_run_model(run)
    assert seen["run_dir"] == run
