"""An export never deletes what it did not write; a weight index cannot reach outside its folder."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from albertkit.cli import main
from albertkit.models import hf
from albertkit.training.export import export_run, load_run_model
from albertkit.training.trainer import AlbertTrainer
from conftest import make_tiny_config


def config(run_dir):
    return make_tiny_config(
        run_dir,
        data={"num_examples": 64, "eval_examples": 0},
        optimizer={"kind": "lamb", "learning_rate": 1e-2},
        runtime={"global_batch_size": 4, "max_steps": 4, "eval_every_steps": 0},
        checkpoint={"every_steps": 2, "keep_last": 3},
        logging={"tensorboard": False},
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("trained") / "runs" / "p"
    AlbertTrainer(config(run)).fit()
    return run


@pytest.fixture
def runs(trained, tmp_path):
    """A copy of the trained run at ``runs/p`` beside another run ``runs/q``."""
    shutil.copytree(trained.parent, tmp_path / "runs")
    (tmp_path / "runs" / "q").mkdir()
    (tmp_path / "runs" / "q" / "notes.txt").write_text("another run")
    return tmp_path / "runs"


def snapshot(root):
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*")
                  if p.is_file())


@pytest.mark.parametrize("fmt", ["hf", "albertkit"])
@pytest.mark.parametrize("where,message", [
    ("runs", "above the run directory"),
    ("runs/p", "is the run directory"),
    ("runs/p/export", "inside the run directory"),
])
def test_export_into_or_above_the_run_is_refused(runs, fmt, where, message):
    before = snapshot(runs)
    with pytest.raises(ValueError, match=message):
        export_run(runs / "p", runs.parent / where, format=fmt, overwrite=True)
    assert snapshot(runs) == before  # the sibling run and the run's history are all there


@pytest.mark.parametrize("fmt", ["hf", "albertkit"])
def test_export_to_the_working_directory_or_above_is_refused(runs, tmp_path, monkeypatch, fmt):
    work = tmp_path / "work" / "here"
    work.mkdir(parents=True)
    (work / "mine.txt").write_text("keep me")
    monkeypatch.chdir(work)
    for target in (".", "..", str(work)):
        with pytest.raises(ValueError, match="working directory"):
            export_run(runs / "p", target, format=fmt, overwrite=True)
    assert (work / "mine.txt").read_text() == "keep me"


@pytest.mark.parametrize("fmt", ["hf", "albertkit"])
def test_non_empty_out_dir_needs_overwrite_and_a_previous_export(runs, tmp_path, fmt):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    with pytest.raises(FileExistsError, match="not empty"):
        export_run(runs / "p", foreign, format=fmt)
    with pytest.raises(FileExistsError, match="not a previous albertkit export"):
        export_run(runs / "p", foreign, format=fmt, overwrite=True)
    assert [p.name for p in foreign.iterdir()] == ["thesis.tex"]

    out = export_run(runs / "p", tmp_path / "out", format=fmt)
    marker = json.loads((out / hf.EXPORT_MARKER).read_text())
    assert marker["format"] == fmt
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_run(runs / "p", out, format=fmt)
    (out / "stale.txt").write_text("from the previous export")
    export_run(runs / "p", out, format=fmt, overwrite=True)
    assert not (out / "stale.txt").exists() and (out / hf.EXPORT_MARKER).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers

    empty = tmp_path / "empty"
    empty.mkdir()
    export_run(runs / "p", empty, format=fmt)  # an empty directory needs no overwrite
    assert (empty / hf.EXPORT_MARKER).is_file()


@pytest.mark.parametrize("fmt", ["hf", "albertkit"])
def test_failed_swap_keeps_the_previous_export(runs, tmp_path, monkeypatch, fmt):
    out = export_run(runs / "p", tmp_path / "out", format=fmt)
    before = snapshot(out)

    def failing(real):
        def rename(src, dst, *args, **kwargs):
            # the rename of the finished temporary directory onto out_dir fails (crash, signal)
            if str(src).endswith(".tmp") and os.fspath(dst) == os.fspath(out):
                raise OSError(5, "Input/output error")
            return real(src, dst, *args, **kwargs)
        return rename

    monkeypatch.setattr(os, "replace", failing(os.replace))
    monkeypatch.setattr(os, "rename", failing(os.rename))
    with pytest.raises(OSError, match="Input/output"):
        export_run(runs / "p", out, format=fmt, overwrite=True)
    monkeypatch.undo()
    assert snapshot(out) == before


def test_cli_export_overwrite_flag(runs, tmp_path, capsys):
    out = tmp_path / "hf"
    assert main(["export", str(runs / "p"), str(out)]) == 0
    capsys.readouterr()
    assert main(["export", str(runs / "p"), str(out)]) == 2
    err = capsys.readouterr().err
    assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1
    assert "--overwrite" in err and "Traceback" not in err
    assert main(["export", "--overwrite", str(runs / "p"), str(out)]) == 0
    assert main(["export", "--overwrite", str(runs / "p"), str(runs)]) == 2
    assert "above the run directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- safetensors index
@pytest.mark.parametrize("escape", ["relative", "absolute"])
def test_index_names_are_confined_to_the_model_folder(runs, tmp_path, escape):
    _, model = load_run_model(runs / "p")
    elsewhere = hf.export_to_hf(model, tmp_path / "elsewhere")
    victim = tmp_path / "victim"
    victim.mkdir()
    shutil.copy(elsewhere / hf.CONFIG_FILE, victim / hf.CONFIG_FILE)
    target = ("../elsewhere/model.safetensors" if escape == "relative"
              else str(elsewhere / "model.safetensors"))
    names = [name for name, _ in hf.read_safetensors(elsewhere / "model.safetensors")]
    (victim / hf.WEIGHTS_INDEX_FILE).write_text(json.dumps(
        {"metadata": {}, "weight_map": dict.fromkeys(names, target)}))
    with pytest.raises(ValueError, match="absolute or contains '..'") as err:
        hf.load_hf_weights(model, victim)
    assert hf.WEIGHTS_INDEX_FILE in str(err.value)

    # a symbolic link inside the folder that points out of it is refused as well
    (victim / "shard.safetensors").symlink_to(elsewhere / "model.safetensors")
    (victim / hf.WEIGHTS_INDEX_FILE).write_text(json.dumps(
        {"metadata": {}, "weight_map": dict.fromkeys(names, "shard.safetensors")}))
    with pytest.raises(ValueError, match="resolves outside"):
        hf.load_hf_weights(model, victim)

    # shards that really are inside the folder still load
    shutil.copy(elsewhere / "model.safetensors", victim / "model-00001-of-00001.safetensors")
    (victim / "shard.safetensors").unlink()
    (victim / hf.WEIGHTS_INDEX_FILE).write_text(json.dumps(
        {"metadata": {}, "weight_map": dict.fromkeys(names, "model-00001-of-00001.safetensors")}))
    assert hf.load_hf_weights(model, victim) == []
