"""Tokenizer directories are replaced whole and never under prepared data; dataset
manifests that are damaged are reported with their file name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from albertkit.data.tokenizer import (
    MODEL_FILE,
    USERS_FILE,
    Tokenizer,
    TokenizerConfig,
    TokenizerError,
    datasets_using,
    train_tokenizer,
)
from fixtures.tiny_tokenizer import corpus_sentences

SENTENCES = corpus_sentences()


def _train(out: Path, vocab: int, **kw) -> Tokenizer:
    return train_tokenizer(None, out, TokenizerConfig(vocab_size=vocab, num_threads=1),
                           sentences=SENTENCES, **kw)


def _vocab_sizes(directory: Path) -> tuple[int, int]:
    """(pieces in spiece.model, pieces in tokenizer.json): equal in a consistent directory."""
    tok = Tokenizer.load(directory)
    hf = json.loads((directory / "tokenizer.json").read_text())
    return tok.vocab_size, len(hf["model"]["vocab"])


def test_retraining_replaces_the_directory_whole(tmp_path):
    out = tmp_path / "tok"
    _train(out, 300)
    assert _vocab_sizes(out) == (300, 300)
    _train(out, 400)
    assert _vocab_sizes(out) == (400, 400)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]  # no temporary left over


def test_a_kill_while_writing_leaves_the_old_tokenizer_whole(tmp_path, monkeypatch):
    """Fail while the new files are written (the moment a kill hits): the directory still
    holds the old vocabulary in both files."""
    import albertkit.data.tokenizer as tk

    out = tmp_path / "tok"
    _train(out, 300)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = tk.write_synced
    written = []

    def dying_write(path, data):
        written.append(Path(path).name)
        if Path(path).name == "tokenizer.json":
            raise KeyboardInterrupt("killed")
        real(path, data)

    monkeypatch.setattr(tk, "write_synced", dying_write)
    with pytest.raises(KeyboardInterrupt):
        _train(out, 400)
    assert MODEL_FILE in written  # the new spiece.model was already written ... elsewhere
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _vocab_sizes(out) == (300, 300)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]


def test_a_directory_that_is_not_a_tokenizer_is_never_replaced(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    with pytest.raises(TokenizerError, match=rf"^{project}: holds files that are not a "
                       r"tokenizer's \(notes\.txt\)"):
        _train(project, 300)
    assert (project / "notes.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A tokenizer directory and pretraining data prepared with it."""
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data

    root = tmp_path_factory.mktemp("prepared")
    tok_dir = root / "tok"
    _train(tok_dir, 300)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(" ".join(SENTENCES[i:i + 8]) for i in range(0, 400, 8)) + "\n")
    cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=32, max_predictions_per_seq=5,
                                dupe_factor=1, num_shards=1)
    prepare_pretraining_data(cfg, tok_dir, root / "data", num_workers=1, progress=False)
    return root


def test_tokenizer_used_by_prepared_data_is_not_replaced(prepared, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(prepared, root)
    tok_dir, data = root / "tok", root / "data"
    # the copied manifest names the original directory: point it at the copy
    m = json.loads((data / "manifest.json").read_text())
    m["tokenizer"]["path"] = str(tok_dir.resolve())
    (data / "manifest.json").write_text(json.dumps(m))
    (tok_dir / USERS_FILE).write_text(json.dumps({"datasets": [str(data.resolve())]}))
    assert datasets_using(tok_dir) == [data.resolve()]
    before = (tok_dir / MODEL_FILE).read_bytes()
    with pytest.raises(TokenizerError, match=rf"^{tok_dir}: prepared data uses this tokenizer "
                       rf"\({data.resolve()}: its manifest\.json names it\)"):
        _train(tok_dir, 400)
    assert (tok_dir / MODEL_FILE).read_bytes() == before
    # the data re-prepared elsewhere / deleted: the tokenizer is free again
    os.remove(data / "manifest.json")
    assert datasets_using(tok_dir) == []
    _train(tok_dir, 400)
    assert _vocab_sizes(tok_dir) == (400, 400)


def test_prepare_data_marks_its_tokenizer_and_overwrite_replaces(prepared, tmp_path):
    tok_dir, data = prepared / "tok", prepared / "data"
    listed = json.loads((tok_dir / USERS_FILE).read_text())["datasets"]
    assert str(data.resolve()) in listed
    assert datasets_using(tok_dir) == [data.resolve()]


def test_cli_refuses_and_overwrite_flag_replaces(prepared, tmp_path, capsys):
    import shutil

    from albertkit.cli import main

    tok_dir = tmp_path / "tok"
    shutil.copytree(prepared / "tok", tok_dir)
    data = prepared / "data"
    m = json.loads((data / "manifest.json").read_text())
    assert Path(m["tokenizer"]["path"]) == (prepared / "tok").resolve()
    # a second dataset naming the copied directory
    other = tmp_path / "data2"
    other.mkdir()
    m["tokenizer"]["path"] = str(tok_dir.resolve())
    (other / "manifest.json").write_text(json.dumps(m))
    (tok_dir / USERS_FILE).write_text(json.dumps({"datasets": [str(other.resolve())]}))
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES[:600]) + "\n")
    argv = ["train-tokenizer", str(corpus), "--out", str(tok_dir), "--vocab-size", "200",
            "--num-threads", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tok_dir}: prepared data uses this tokenizer"), err
    assert Tokenizer.load(tok_dir).vocab_size == 300
    assert main([*argv, "--overwrite"]) == 0
    assert _vocab_sizes(tok_dir) == (200, 200)


# ====================================================================== dataset manifests
def test_manifest_loader_names_the_file(tmp_path):
    from albertkit.data.manifest import read_manifest
    from albertkit.data.writer import DataPreparationError, load_manifest

    path = tmp_path / "manifest.json"
    path.write_text('{"masking": "static",')
    with pytest.raises(DataPreparationError, match=rf"^{path}: line 1, column 22: malformed "
                       "JSON in the dataset manifest"):
        load_manifest(tmp_path)
    path.write_text(json.dumps({"masking": "static", "seq_length": "long"}))
    with pytest.raises(ValueError, match=rf"^{path}: not a valid dataset manifest: "
                       "seq_length: Input should be a valid integer"):
        read_manifest(path)


def test_prepare_data_over_a_damaged_manifest(prepared, tmp_path):
    import shutil

    from albertkit.data.writer import (
        DataPreparationError,
        PretrainingDataConfig,
        prepare_pretraining_data,
    )

    data = tmp_path / "data"
    shutil.copytree(prepared / "data", data)
    (data / "manifest.json").write_text("{")
    cfg = PretrainingDataConfig(inputs=[str(prepared / "corpus.txt")], seq_length=32,
                                max_predictions_per_seq=5, dupe_factor=1, num_shards=1)
    with pytest.raises(DataPreparationError, match=rf"^{data / 'manifest.json'}: line 1, "
                       r".*--overwrite"):
        prepare_pretraining_data(cfg, prepared / "tok", data, num_workers=1, progress=False)
    m = prepare_pretraining_data(cfg, prepared / "tok", data, num_workers=1, progress=False,
                                 overwrite=True)
    assert m["examples"]["train"] > 0
