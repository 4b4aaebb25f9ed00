"""The language setting in prepare-data and train-tokenizer: recorded in the manifest, English
data keeps its identity, Japanese is split into its sentences, and bad input stops in one
line before anything is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from albertkit.cli import main
from albertkit.data.manifest import MANIFEST, manifest_language
from albertkit.data.tokenizer import Tokenizer, TokenizerConfig, train_tokenizer
from albertkit.data.writer import FORMAT, PretrainingDataConfig, prepare_pretraining_data
from albertkit.errors import LanguageError

FIXTURES = Path(__file__).parent / "fixtures" / "languages"
SEQ, PREDS = 32, 5


def japanese_documents() -> list[list[str]]:
    paras, current = [], []
    text = (FIXTURES / "sentences_ja.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if line.strip():
            current.append(line.strip())
        elif current:
            paras.append(current)
            current = []
    return [*paras, current] if current else paras


@pytest.fixture(scope="module")
def english(tmp_path_factory) -> Path:
    from pydoc_data import topics

    path = tmp_path_factory.mktemp("en") / "en.txt"
    names = sorted(topics.topics)[:30]
    path.write_text("\n".join(" ".join(topics.topics[n].split()) for n in names) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def japanese(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ja") / "ja.txt"
    path.write_text("\n".join("".join(p) for p in japanese_documents()) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ja_tok(japanese, tmp_path_factory) -> Tokenizer:
    out = tmp_path_factory.mktemp("ja-tok") / "tok"
    return train_tokenizer([japanese], out, TokenizerConfig(vocab_size=600, num_threads=1,
                                                            word_segmenter="none"))


def _config(path: Path, **settings) -> PretrainingDataConfig:
    return PretrainingDataConfig(inputs=[str(path)], seq_length=SEQ,
                                 max_predictions_per_seq=PREDS, dupe_factor=1, num_shards=1,
                                 **settings)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.tfrecord"))}


def test_english_data_keeps_its_identity(tmp_path, english, tiny_tokenizer_dir):
    tok = tiny_tokenizer_dir(400)
    out = tmp_path / "data"
    manifest = prepare_pretraining_data(_config(english), tok, out, num_workers=1,
                                        progress=False)
    assert manifest["language"]["code"] == "en" and manifest["language"]["detected"]
    # the plan is what albertkit hashed before it asked for a language: data prepared then
    # is found finished, not prepared again
    plan = {k: manifest[k] for k in ("format", "settings", "inputs", "tokenizer_sha256")}
    assert plan["format"] == FORMAT and "language" not in plan["settings"]
    assert hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest() \
        == manifest["plan_sha256"]
    old = dict(manifest)
    del old["language"]  # a manifest as albertkit wrote it before
    (out / MANIFEST).write_text(json.dumps(old), encoding="utf-8")
    shards = _files(out)
    again = prepare_pretraining_data(_config(english, language="en"), tok, out, num_workers=1,
                                     progress=False)
    assert manifest_language(again) == "en" and "language" not in again
    assert _files(out) == shards
    # given or detected, English gives the same bytes
    other = prepare_pretraining_data(_config(english, language="en"), tok, tmp_path / "other",
                                     num_workers=1, progress=False)
    assert _files(tmp_path / "other") == shards
    assert other["plan_sha256"] == manifest["plan_sha256"]


def test_japanese_data_is_split_into_its_sentences(tmp_path, japanese, ja_tok):
    lines: list[str] = []
    out = tmp_path / "data"
    manifest = prepare_pretraining_data(_config(japanese), ja_tok, out, num_workers=1,
                                        progress=False, keep_work=True, say=lines.append)
    assert lines == [f"language: {manifest_language(manifest)} (Hiragana 62%, Han 33%, "
                     "Katakana 5%)"]
    assert manifest["language"]["code"] == "ja"
    assert (manifest["tokenizer"]["lowercase"], manifest["tokenizer"]["keep_accents"]) == (
        False, True)
    assert Tokenizer.load(out / "tokenizer").language == "ja"  # the data's copy says so
    docs = japanese_documents()
    sentence_ends = np.load(out / ".work" / "tok-00000.sent.npy")
    assert len(sentence_ends) == sum(len(p) for p in docs)  # 205, one per line of the set
    # given instead of detected: the same preparation, found finished
    again = prepare_pretraining_data(_config(japanese, language="ja"), ja_tok, out,
                                     num_workers=1, progress=False)
    assert again == manifest


def test_a_corpus_in_another_language_stops_before_writing(tmp_path, japanese, ja_tok):
    with pytest.raises(LanguageError) as e:
        prepare_pretraining_data(_config(japanese, language="zh"), ja_tok, tmp_path / "d",
                                 num_workers=1, progress=False)
    assert "'zh' (Chinese) was given, but the corpus looks like 'ja' (Hiragana 62%, Han 33%, " \
           "Katakana 5%)" in str(e.value)
    assert not (tmp_path / "d").exists()


# ------------------------------------------------------------------ the command line
def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("command", ["train-tokenizer", "prepare-data"])
def test_cli_unknown_language(command, tmp_path, japanese, ja_tok, capsys):
    args = [command, str(japanese), "--out", str(tmp_path / "out"), "--language", "jp"]
    if command == "prepare-data":
        args += ["--tokenizer", str(ja_tok.model_file.parent)]
    assert main(args) == 2
    line = _one_error_line(capsys)
    assert line.startswith("error: --language: language 'jp' is not known; known: auto, ")
    assert " ja, " in line and " zh" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["train-tokenizer", "prepare-data"])
def test_cli_corpus_not_in_the_given_language(command, tmp_path, japanese, ja_tok, capsys):
    args = [command, str(japanese), "--out", str(tmp_path / "out"), "--language", "en",
            "--num-threads" if command == "train-tokenizer" else "--num-workers", "1"]
    if command == "prepare-data":
        args += ["--tokenizer", str(ja_tok.model_file.parent), "--no-progress"]
    assert main(args) == 2
    line = _one_error_line(capsys)
    assert line == ("error: language 'en' (English) was given, but the corpus looks like 'ja' "
                    "(Hiragana 62%, Han 33%, Katakana 5%); give --language ja or --language "
                    "auto, or check the input files")
    assert not (tmp_path / "out").exists()


def test_cli_prints_the_language_once(tmp_path, japanese, capsys):
    assert main(["train-tokenizer", str(japanese), "--out", str(tmp_path / "tok"),
                 "--vocab-size", "600", "--num-threads", "1", "--no-keep-accents",
                 "--word-segmenter", "none"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "language: ja (Hiragana 62%, Han 33%, Katakana 5%)"
    assert out[1].startswith("warning: keep_accents=false changes ")
    assert out[2].startswith("tokenizer: ")


# ------------------------------------------------------------------ pretraining, export, fine-tuning
@pytest.mark.slow
def test_the_language_travels_through_pretraining_export_and_finetuning(tmp_path, japanese,
                                                                        ja_tok):
    from albertkit.data.language import resolve_language
    from albertkit.training.export import export_run
    from albertkit.training.trainer import AlbertTrainer
    from conftest import make_tiny_config

    runtime = {"micro_batch_size": 2, "global_batch_size": 2, "max_steps": 2,
               "eval_every_steps": 0, "eager": True}
    data = tmp_path / "data"
    prepare_pretraining_data(_config(japanese), ja_tok, data, num_workers=1, progress=False)
    run = tmp_path / "pre"
    AlbertTrainer(make_tiny_config(
        run, model={"vocab_size": ja_tok.vocab_size},
        data={"kind": "tfrecord", "seq_length": SEQ, "max_predictions_per_seq": PREDS,
              "shuffle_buffer": 8, "train_files": [str(data / "train-*.tfrecord")]},
        runtime=runtime)).fit()
    assert Tokenizer.load(run / "tokenizer").language == "ja"
    exports = {fmt: export_run(run, tmp_path / fmt, format=fmt) for fmt in ("albertkit", "hf")}
    assert Tokenizer.load(exports["albertkit"] / "tokenizer").language == "ja"
    assert Tokenizer.load(exports["hf"]).language == "ja"
    tsv = tmp_path / "ja.tsv"
    tsv.write_text("sentence\tlabel\n" + "".join(
        f"{s}\t{i % 2}\n" for i, s in enumerate(japanese_documents()[0] * 2)), encoding="utf-8")
    ft = tmp_path / "ft"
    cfg = make_tiny_config(
        ft, model={"vocab_size": ja_tok.vocab_size, "load_from": str(exports["hf"])},
        data={"kind": "classification", "task": "sst2", "train_file": str(tsv),
              "max_seq_length": SEQ},
        runtime={**runtime, "micro_batch_size": 4, "global_batch_size": 4})
    assert cfg.data.language == "auto"
    AlbertTrainer(cfg).fit()
    tokenizer = Tokenizer.load(ft / "tokenizer")
    assert tokenizer.language == "ja"
    assert resolve_language(cfg.data.language, fallback=tokenizer.language).code == "ja"
    with pytest.raises(ValueError, match="pattern"):
        make_tiny_config(ft, data={"kind": "squad", "train_file": "t.json", "language": "JA"})
