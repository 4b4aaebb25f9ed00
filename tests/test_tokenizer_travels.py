"""The tokenizer travels with the data and the model: prepared data keeps a copy, pretraining
takes it from there, every export carries it, fine-tuning from an export needs no other,
and a tokenizer that does not belong to the data or the model is refused."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from albertkit.config import ConfigError
from albertkit.data.tokenizer import USERS_FILE, Tokenizer
from albertkit.data.tokenizer_match import (
    TokenizerIdentity,
    find_data_tokenizer,
    model_tokenizer_dir,
)
from albertkit.errors import DatasetError
from conftest import make_tiny_config

VOCAB = 1000
SEQ, PREDS = 32, 5
FIXTURES = Path(__file__).parent / "fixtures"
SST2 = str(FIXTURES / "sst2_small.tsv")


def tokenizer_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def tok(tiny_tokenizer_dir) -> Path:
    return tiny_tokenizer_dir(VOCAB)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from fixtures.tiny_tokenizer import corpus_sentences

    lines = corpus_sentences()[:480]
    docs = [" ".join(lines[i:i + 4]) for i in range(0, len(lines), 4)]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    return path


def prepare(corpus: Path, tok, out: Path) -> dict:
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data

    cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=SEQ,
                                max_predictions_per_seq=PREDS, dupe_factor=1, num_shards=1)
    return prepare_pretraining_data(cfg, tok, out, num_workers=1, progress=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory, corpus, tok) -> Path:
    out = tmp_path_factory.mktemp("prepared") / "data"
    prepare(corpus, tok, out)
    return out


# ----------------------------------------------------------------- tokenizers that differ
@pytest.fixture(scope="module")
def other_tokenizers(tmp_path_factory, tiny_tokenizer_dir, tok) -> dict[str, Path]:
    """Tokenizers that do not belong to ``tok``'s data or models, by the field that differs."""
    root = tmp_path_factory.mktemp("others")
    # same vocabulary and ids, another normalisation: only the hash differs
    cased = root / "cased"
    shutil.copytree(tok, cased, ignore=shutil.ignore_patterns(USERS_FILE))
    config = json.loads((cased / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is True
    (cased / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    # same size, [MASK] moved to another id (a Hugging Face directory with tokenizer.json only)
    moved = root / "moved_mask"
    moved.mkdir()
    spec = json.loads((tok / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    vocab[4], vocab[5] = vocab[5], vocab[4]
    (moved / "tokenizer.json").write_text(json.dumps(spec))
    return {"vocab_size": tiny_tokenizer_dir(VOCAB + 100), "special_ids": moved,
            "sha256": cased}


def test_the_other_tokenizers_differ_in_one_field_each(other_tokenizers, tok):
    ours = TokenizerIdentity.of(tok)
    for field, path in other_tokenizers.items():
        diff = ours.differences(TokenizerIdentity.of(path))
        assert len(diff) == 1 and diff[0].startswith(field), (field, diff)


# ----------------------------------------------------------------- prepared data
def test_prepared_data_keeps_a_copy_of_its_tokenizer(data, tok):
    manifest = json.loads((data / "manifest.json").read_text())
    record = manifest["tokenizer"]
    assert record["copy"] == "tokenizer" and record["path"] == str(tok.resolve())
    copy = data / "tokenizer"
    assert Tokenizer.load(copy).sha256 == record["sha256"] == Tokenizer.load(tok).sha256
    source = tokenizer_files(tok)
    source.pop(USERS_FILE)  # which datasets use the original: not part of the tokenizer
    assert tokenizer_files(copy) == source
    found = find_data_tokenizer([str(data / "train-00000-of-00001.tfrecord")])
    assert found.directory == copy and found.manifest == data / "manifest.json"


def test_data_without_a_copy_uses_the_recorded_path_and_gets_one_again(tmp_path, data, tok,
                                                                       corpus):
    old = tmp_path / "old"
    shutil.copytree(data, old)
    shutil.rmtree(old / "tokenizer")
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["tokenizer"]["copy"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    files = [str(old / "train-00000-of-00001.tfrecord")]
    assert find_data_tokenizer(files).directory == Path(manifest["tokenizer"]["path"])

    # preparing the same data again adds the copy (the shards are not written again)
    before = (old / "train-00000-of-00001.tfrecord").stat().st_mtime_ns
    again = prepare(corpus, tok, old)
    assert again["tokenizer"]["copy"] == "tokenizer"
    assert (old / "train-00000-of-00001.tfrecord").stat().st_mtime_ns == before
    assert find_data_tokenizer(files).directory == old / "tokenizer"

    # neither the copy nor the recorded path: nothing found, and the reason is given
    shutil.rmtree(old / "tokenizer")
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["tokenizer"]["path"] = str(tmp_path / "gone")
    (old / "manifest.json").write_text(json.dumps(manifest))
    found = find_data_tokenizer(files)
    assert found.directory is None
    assert str(old / "tokenizer") in found.problem and str(tmp_path / "gone") in found.problem


def test_a_replaced_copy_is_refused(tmp_path, data, other_tokenizers):
    bad = tmp_path / "bad"
    shutil.copytree(data, bad)
    shutil.rmtree(bad / "tokenizer")
    shutil.copytree(other_tokenizers["sha256"], bad / "tokenizer")
    with pytest.raises(DatasetError, match=re.escape(
            f"{bad / 'tokenizer'}: holds another tokenizer than {bad / 'manifest.json'} "
            "records (differs in sha256")):
        find_data_tokenizer([str(bad / "train-00000-of-00001.tfrecord")])


# ----------------------------------------------------------------- pretraining
def pretrain_config(run_dir: Path, data: Path, model: dict | None = None, **extra):
    return make_tiny_config(
        run_dir, model={"vocab_size": VOCAB, **(model or {})},
        data={"kind": "tfrecord", "seq_length": SEQ, "max_predictions_per_seq": PREDS,
              "shuffle_buffer": 8, "train_files": [str(data / "train-*.tfrecord")], **extra},
        runtime={"micro_batch_size": 2, "global_batch_size": 2, "max_steps": 2,
                 "eval_every_steps": 0})


@pytest.mark.parametrize("field", ["vocab_size", "special_ids", "sha256"])
def test_pretraining_refuses_a_tokenizer_the_data_was_not_made_with(tmp_path, data, tok,
                                                                    other_tokenizers, field):
    from albertkit.tasks.pretraining import records_tokenizer

    other = other_tokenizers[field]
    cfg = pretrain_config(tmp_path / "run", data, tokenizer=str(other))
    with pytest.raises(ConfigError) as caught:
        records_tokenizer(cfg, [str(data / "train-00000-of-00001.tfrecord")])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"data.tokenizer={other} is not the tokenizer the data was "
                              f"prepared with ({data / 'manifest.json'} records it): "
                              f"{other} vs {tok.resolve()} differ in {field} ("), message
    # the same tokenizer given by hand is fine
    cfg = pretrain_config(tmp_path / "run", data, tokenizer=str(tok))
    assert records_tokenizer(cfg, [str(data / "train-00000-of-00001.tfrecord")]) == tok


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, data) -> Path:
    """A tiny pretraining run on ``data`` that names no tokenizer (two steps)."""
    from albertkit.training.trainer import AlbertTrainer

    run = tmp_path_factory.mktemp("pre") / "run"
    AlbertTrainer(pretrain_config(run, data)).fit()
    return run


@pytest.fixture(scope="module")
def exports(tmp_path_factory, pretrained) -> dict[str, Path]:
    from albertkit.training.export import export_run

    root = tmp_path_factory.mktemp("exports")
    return {fmt: export_run(pretrained, root / fmt, format=fmt) for fmt in ("albertkit", "hf")}


def test_pretraining_keeps_the_datas_tokenizer_and_every_export_carries_it(pretrained, data,
                                                                         exports):
    assert json.loads((pretrained / "summary.json").read_text())["step"] == 2
    copy = tokenizer_files(data / "tokenizer")
    assert tokenizer_files(pretrained / "tokenizer") == copy
    assert tokenizer_files(exports["albertkit"] / "tokenizer") == copy
    hf = tokenizer_files(exports["hf"])
    for name in ("spiece.model", "tokenizer.json", "tokenizer_config.json"):
        assert hf[name] == copy[name], name
    for source in (pretrained, *exports.values()):
        assert TokenizerIdentity.of(model_tokenizer_dir(source)).differences(
            TokenizerIdentity.of(data / "tokenizer")) == []


def test_an_export_of_a_run_without_tokenizer_says_so(tmp_path, caplog):
    from albertkit.tasks import build_task
    from albertkit.training.builders import resolve_spec
    from albertkit.training.export import export_run
    from albertkit.training.trainer import AlbertTrainer

    run = tmp_path / "synthetic"
    AlbertTrainer(make_tiny_config(run, runtime={"max_steps": 1, "micro_batch_size": 2,
                                                 "global_batch_size": 2})).fit()
    out = export_run(run, tmp_path / "ak", format="albertkit")
    assert not (out / "tokenizer").exists() and model_tokenizer_dir(out) is None
    assert "the export carries no tokenizer" in caplog.text
    cfg = finetune_config(tmp_path / "ft", out, vocab_size=101)
    with pytest.raises(ConfigError, match=re.escape(
            f"data.tokenizer is not set and model.load_from={out} carries no tokenizer")):
        build_task(cfg, resolve_spec(cfg))


# ----------------------------------------------------------------- fine-tuning
def finetune_config(run_dir: Path, load_from: Path, vocab_size: int = VOCAB, **data):
    return make_tiny_config(
        run_dir, model={"vocab_size": vocab_size, "load_from": str(load_from)},
        data={"kind": "classification", "task": "sst2", "train_file": SST2,
              "max_seq_length": SEQ, **data},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 2,
                 "eval_every_steps": 0})


@pytest.mark.parametrize("fmt", ["albertkit", "hf"])
def test_finetuning_from_an_export_takes_its_tokenizer(tmp_path, exports, data, fmt):
    from albertkit.training.export import export_run, load_run_model
    from albertkit.training.trainer import AlbertTrainer

    run = tmp_path / "ft"
    cfg = finetune_config(run, exports[fmt])
    assert cfg.data.tokenizer is None
    trainer = AlbertTrainer(cfg).fit()
    assert trainer.summary["step"] == 2
    # the run keeps the export's tokenizer files (not the export's weights or config)
    assert tokenizer_files(run / "tokenizer") == {
        k: v for k, v in tokenizer_files(data / "tokenizer").items()
        if fmt == "albertkit" or (exports["hf"] / k).is_file()}
    # and the fine-tuned run exports (and loads) without naming a tokenizer either
    _, model = load_run_model(run)
    assert type(model).__name__ == "AlbertForSequenceClassification"
    out = export_run(run, tmp_path / "ft-hf", format="hf")
    assert (out / "tokenizer.json").read_bytes() == (data / "tokenizer" / "tokenizer.json"
                                                      ).read_bytes()


@pytest.mark.parametrize("field", ["vocab_size", "special_ids", "sha256"])
@pytest.mark.parametrize("fmt", ["albertkit", "hf"])
def test_finetuning_refuses_a_tokenizer_of_another_model(tmp_path, exports, other_tokenizers,
                                                        fmt, field):
    from albertkit.tasks import build_task
    from albertkit.training.builders import resolve_spec

    other = other_tokenizers[field]
    cfg = finetune_config(tmp_path / "ft", exports[fmt], tokenizer=str(other))
    own = model_tokenizer_dir(exports[fmt])
    with pytest.raises(ConfigError) as caught:
        build_task(cfg, resolve_spec(cfg))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"data.tokenizer={other} does not belong to model.load_from="
                              f"{exports[fmt]}: {other} vs {own} differ in {field} ("), message
    # the export's own tokenizer, named by hand, is fine
    cfg = finetune_config(tmp_path / "ft", exports[fmt], tokenizer=str(own))
    assert build_task(cfg, resolve_spec(cfg)).data.tokenizer == own


def test_the_trainer_refuses_before_training(tmp_path, exports, other_tokenizers):
    from albertkit.training.trainer import AlbertTrainer

    cfg = finetune_config(tmp_path / "ft", exports["albertkit"],
                          tokenizer=str(other_tokenizers["vocab_size"]))
    with pytest.raises(ConfigError, match=r"differ in vocab_size \(1100 vs 1000\)"):
        AlbertTrainer(cfg).fit()
    assert not (tmp_path / "ft" / "checkpoints").exists() or not any(
        (tmp_path / "ft" / "checkpoints").iterdir())


def test_finetuning_needs_a_tokenizer_from_somewhere(tmp_path):
    with pytest.raises(ConfigError, match=r"data\.tokenizer is not set and there is no "
                       r"model\.load_from to take it from"):
        make_tiny_config(tmp_path, data={"kind": "squad", "train_file": "train.json",
                                         "max_seq_length": SEQ, "max_query_length": 8,
                                         "doc_stride": 8})


def test_continued_pretraining_refuses_data_of_another_tokenizer(tmp_path, exports, corpus,
                                                                 data, other_tokenizers):
    from albertkit.tasks.pretraining import records_tokenizer

    other_data = tmp_path / "other"
    prepare(corpus, other_tokenizers["sha256"], other_data)
    files = [str(other_data / "train-00000-of-00001.tfrecord")]
    source = exports["albertkit"]
    cfg = pretrain_config(tmp_path / "run", other_data, model={"load_from": str(source)})
    with pytest.raises(ConfigError, match=re.escape(
            f"the data's tokenizer ({other_data / 'manifest.json'}) does not belong to "
            f"model.load_from={source}: {other_tokenizers['sha256'].resolve()} vs "
            f"{source / 'tokenizer'} differ in sha256 (")):
        records_tokenizer(cfg, files)
    # data made with the model's own tokenizer continues it
    cfg = pretrain_config(tmp_path / "run", data, model={"load_from": str(source)})
    assert records_tokenizer(cfg, [str(data / "train-00000-of-00001.tfrecord")]) == \
        data / "tokenizer"


# ----------------------------------------------------------------- SageMaker model artifact
@pytest.mark.slow  # trains and exports in a container laid out in a temporary directory
def test_the_sagemaker_model_artifact_carries_the_tokenizer(tmp_path, data, tok):
    from albertkit.sagemaker import entrypoint as ep
    from albertkit.sagemaker.plan import CONFIG_FILE

    root = tmp_path / "opt" / "ml"
    channel = root / "input" / "data" / "train"
    shutil.copytree(data, channel)
    # on the training host the tokenizer's original directory does not exist
    manifest = json.loads((channel / "manifest.json").read_text())
    manifest["tokenizer"]["path"] = "/nowhere/tokenizer"
    (channel / "manifest.json").write_text(json.dumps(manifest))
    code = root / "input" / "data" / "code"
    code.mkdir(parents=True)
    raw = pretrain_config(tmp_path / "local", Path("data/pretrain")).to_dict()
    raw["sagemaker"] = {"inputs": {"train": {"kind": "s3", "uri": "s3://bkt/data",
                                             "path_in_config": "data/pretrain"}}}
    (code / CONFIG_FILE).write_text(json.dumps(raw))
    environ = {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1", "SM_NUM_GPUS": "0",
               "SM_MODEL_DIR": str(root / "model"), "SM_CHANNEL_TRAIN": str(channel),
               "SM_OUTPUT_DATA_DIR": str(root / "output" / "data"),
               "SM_SOURCE_DIR": str(code)}
    assert ep.main([], environ, root) == 0
    model = root / "model"  # what SageMaker packs into model.tar.gz
    copy = tokenizer_files(data / "tokenizer")
    assert tokenizer_files(model / "albertkit" / "tokenizer") == copy
    for name in ("spiece.model", "tokenizer.json", "tokenizer_config.json"):
        assert (model / "hf" / name).read_bytes() == copy[name], name
