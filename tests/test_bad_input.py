"""Bad input across the CLI and the Python API (issue 8, item 6).

Every kind of garbage a user can feed albertkit must meet an error that names what is wrong
and where (file, line, field, value). On the command line that is one ``error: ...`` line
and a non-zero exit code, never a Python traceback (tracebacks only with ``--debug``), and a
refused run must not touch what an earlier run left behind.

Most cases call ``albertkit.cli.main`` in-process (fast); a few run ``python -m
albertkit.cli`` in a subprocess to prove what a real user sees.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from albertkit.cli import main
from albertkit.config import ConfigError, TrainerConfig
from albertkit.errors import CheckpointError
from albertkit.training.trainer import AlbertTrainer

VOCAB = 400  # pieces of the session tokenizer
MODEL = {"size": "tiny", "vocab_size": VOCAB, "hidden_size": 32, "embedding_size": 16,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
SEQ, PREDS = 32, 5
CONTEXT = "The quick brown fox jumps over the lazy dog near the river bank."


# ====================================================================== fixtures
@pytest.fixture(scope="session")
def tok_dir(tiny_tokenizer_dir) -> Path:
    """A 400-piece tokenizer directory (spiece.model + Hugging Face files)."""
    return tiny_tokenizer_dir(VOCAB)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    from pydoc_data import topics

    path = tmp_path_factory.mktemp("badcorpus") / "corpus.txt"
    names = sorted(topics.topics)[:30]
    path.write_text("\n".join(" ".join(topics.topics[n].split()) for n in names) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def shards(tmp_path_factory, tok_dir, corpus) -> Path:
    """Two static-masking training shards plus manifest.json, made with ``tok_dir``."""
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data

    out = tmp_path_factory.mktemp("badshards") / "data"
    cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=SEQ,
                                max_predictions_per_seq=PREDS, dupe_factor=1, num_shards=2)
    prepare_pretraining_data(cfg, tok_dir, out, num_workers=1, progress=False)
    return out


# ====================================================================== helpers
def raw_config(run_dir: Path, data: dict, **model) -> dict:
    return {
        "run_dir": str(run_dir),
        "model": {**MODEL, **model},
        "data": data,
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3},
        "runtime": {"micro_batch_size": 2, "global_batch_size": 2, "max_steps": 1,
                    "eval_every_steps": 0, "eval_steps": 1, "xla": False},
        "checkpoint": {"every_steps": 1},
        "logging": {"progress_bar": False, "tensorboard": False},
    }


def synthetic() -> dict:
    return {"kind": "synthetic", "seq_length": SEQ, "max_predictions_per_seq": PREDS,
            "num_examples": 8, "eval_examples": 0}


def tfrecord(*files: str | Path, **kw) -> dict:
    return {"kind": "tfrecord", "seq_length": SEQ, "max_predictions_per_seq": PREDS,
            "shuffle_buffer": 8, "train_files": [str(f) for f in files], **kw}


def write_config(tmp_path: Path, raw: dict, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    if raw.get("run_dir") == VALID["run_dir"]:  # never train into the working directory
        raw = {**raw, "run_dir": str(tmp_path / "run")}
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def assert_one_clean_error(err: str) -> str:
    """The single ``error: ...`` line of ``err``; no traceback, nothing after it but the
    ``--debug`` hint."""
    assert "Traceback" not in err, err
    assert 'File "' not in err, err
    lines = err.rstrip("\n").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(starts) == 1, err
    rest = lines[starts[0] + 1:]
    assert rest in ([], ["(run with --debug for a traceback)"]), err
    return lines[starts[0]]


def cli_error(capsys, argv: list[str]) -> str:
    """Run the CLI in-process; it must fail; return its one ``error:`` line."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse-style exits: a str code is printed by Python itself
        if isinstance(e.code, str):
            return assert_one_clean_error(e.code + "\n")
        rc = e.code
    assert rc not in (0, None)
    return assert_one_clean_error(capsys.readouterr().err)


def run_cli(*argv, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "albertkit.cli", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout)


def tree_digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


# ====================================================================== config files
VALID = {
    "run_dir": "runs/x",
    "model": {"size": "tiny"},
    "data": {"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5},
    "optimizer": {"kind": "lamb"},
    "runtime": {"max_steps": 10, "micro_batch_size": 2, "global_batch_size": 2, "xla": False},
}


def _set(dotted: str, value):
    def edit(raw: dict) -> dict:
        raw = json.loads(json.dumps(raw))
        *parents, leaf = dotted.split(".")
        node = raw
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
        return raw
    return edit


# (id, file contents: bytes or an edit of VALID, extra CLI args, pattern of the message)
CONFIG_CASES = [
    ("malformed_yaml", b"model: {size: tiny\nruntime: [1, 2\n", [],
     r"cfg\.yaml: line 2, column \d+: malformed YAML"),
    ("not_a_mapping", b"- model\n- data\n", [], r"cfg\.yaml: top level must be a mapping, got list"),
    ("not_utf8", b"run_dir: caf\xe9\n", [], r"cfg\.yaml: not UTF-8 text"),
    ("unknown_key", _set("runtime.max_stepz", 5), [],
     r"cfg\.yaml: invalid configuration: runtime\.max_stepz: Extra inputs are not permitted"),
    ("unknown_data_key", _set("data.seq_len", 64), [],
     r"invalid configuration: data\.seq_len: Extra inputs are not permitted \(got 64\)"),
    ("wrong_type_int", _set("runtime.max_steps", "ten"), [],
     r"runtime\.max_steps: Input should be a valid integer.*\(got 'ten'\)"),
    ("wrong_type_bool", _set("runtime.eager", "sometimes"), [],
     r"runtime\.eager: Input should be a valid boolean.*\(got 'sometimes'\)"),
    ("wrong_remat_choice", _set("runtime.remat", "sometimes"), [],
     r"runtime\.remat: should be selective, full or none \(or true = full, false = none\) "
     r"\(got 'sometimes'\)$"),
    ("wrong_xla_choice", _set("runtime.xla", "sometimes"), [],
     r"runtime\.xla: should be auto, true or false \(got 'sometimes'\)$"),
    ("unknown_kind", _set("data.kind", "synthetc"), [],
     r"data: Input tag 'synthetc' found using 'kind' does not match any of the expected tags"),
    ("missing_kind", lambda raw: {**raw, "data": {"seq_length": 32}}, [],
     r"invalid configuration: data: missing 'kind', which selects the section's type$"),
    ("missing_data", lambda raw: {k: v for k, v in raw.items() if k != "data"}, [],
     r"invalid configuration: data: Field required"),
    ("unknown_choice", _set("model.size", "huge"), [],
     r"model\.size: Input should be 'tiny', 'base'.*\(got 'huge'\)"),
    ("zero_batch", _set("runtime.micro_batch_size", 0), [],
     r"runtime\.micro_batch_size: Input should be greater than 0 \(got 0\)"),
    ("negative_hidden", _set("model.hidden_size", -32), [],
     r"model\.hidden_size: Input should be greater than 0 \(got -32\)"),
    ("zero_seq_length", _set("data.seq_length", 0), [],
     r"data\.seq_length: Input should be greater than 8 \(got 0\)"),
    ("negative_every_steps", _set("checkpoint.every_steps", -5), [],
     r"checkpoint\.every_steps: Input should be greater than 0 \(got -5\)"),
    ("indivisible_batch", _set("runtime.global_batch_size", 3), [],
     r"runtime\.global_batch_size=3 is not divisible by runtime\.micro_batch_size=2"),
    ("seq_beyond_positions", _set("data.seq_length", 1024), [],
     r"data sequence length 1024 exceeds model\.max_position_embeddings=\d+"),
    ("override_wrong_type", None, ["--set", "optimizer.learning_rate=fast"],
     r"optimizer\.learning_rate: Input should be a valid number.*\(got 'fast'\)"),
    ("override_negative", None, ["--set", "runtime.max_steps=-1"],
     r"runtime\.max_steps: Input should be greater than 0 \(got -1\)"),
    ("override_without_value", None, ["--set", "runtime.max_steps"],
     r"override 'runtime\.max_steps' must look like key\.path=value"),
    ("override_into_a_value", None, ["--set", "model.size.x=1"],
     r"override 'model\.size\.x=1': model\.size is a value, not a section"),
]


def _write_case(tmp_path: Path, contents) -> Path:
    path = tmp_path / "cfg.yaml"
    if isinstance(contents, bytes):
        path.write_bytes(contents)
    else:
        raw = contents(VALID) if contents else VALID
        if raw.get("run_dir") == VALID["run_dir"]:  # never train into the working directory
            raw = {**raw, "run_dir": str(tmp_path / "run")}
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("contents,args,pattern", [c[1:] for c in CONFIG_CASES],
                         ids=[c[0] for c in CONFIG_CASES])
def test_config_errors_cli(tmp_path, capsys, contents, args, pattern):
    path = _write_case(tmp_path, contents)
    line = cli_error(capsys, ["pretrain", "--config", path, *args])
    assert line.startswith("error: ")
    assert re.search(pattern, line), line


@pytest.mark.parametrize("contents,args,pattern", [c[1:] for c in CONFIG_CASES],
                         ids=[c[0] for c in CONFIG_CASES])
def test_config_errors_api(tmp_path, contents, args, pattern):
    path = _write_case(tmp_path, contents)
    overrides = [args[1]] if args else []
    with pytest.raises(ConfigError, match=pattern):
        TrainerConfig.from_yaml(path, overrides)


def test_several_config_problems_are_all_named_one_per_line(tmp_path, capsys):
    raw = _set("runtime.micro_batch_size", 0)(_set("model.bogus", 1)(VALID))
    path = write_config(tmp_path, raw)
    assert main(["pretrain", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: {path}: invalid configuration:\n" in err
    assert "\n  runtime.micro_batch_size: Input should be greater than 0 (got 0)\n" in err
    assert "\n  model.bogus: Extra inputs are not permitted (got 1)\n" in err


def test_missing_config_file(tmp_path, capsys):
    line = cli_error(capsys, ["pretrain", "--config", tmp_path / "nope.yaml"])
    assert line == f"error: config file not found: {tmp_path / 'nope.yaml'}"
    with pytest.raises(ConfigError, match="config file not found: .*nope.yaml"):
        TrainerConfig.from_yaml(tmp_path / "nope.yaml")


def test_trainer_wants_a_validated_config():
    with pytest.raises(TypeError, match="AlbertTrainer expects a TrainerConfig, got dict"):
        AlbertTrainer(VALID)  # type: ignore[arg-type]


def test_config_of_the_wrong_task(tmp_path, capsys, tok_dir):
    path = write_config(tmp_path, raw_config(tmp_path / "run", synthetic()))
    line = cli_error(capsys, ["finetune", "squad", "--config", path])
    assert line == (f"error: {path}: data.kind='synthetic' is a pretraining config, "
                    "not squad")
    # without a family, finetune takes any fine-tuning task, but not pretraining
    line = cli_error(capsys, ["finetune", "--config", path])
    assert line == (f"error: {path}: data.kind='synthetic' is a pretraining config: run it "
                    "with `albertkit pretrain`")


# ====================================================================== pretraining data
def test_missing_and_unmatched_tfrecord_files(tmp_path, capsys):
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", tfrecord(tmp_path / "no.tfrecord")))
    line = cli_error(capsys, ["pretrain", "-c", cfg])
    assert line == f"error: pretraining file '{tmp_path / 'no.tfrecord'}' does not exist"
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", tfrecord(tmp_path / "d/*.tfrecord")))
    line = cli_error(capsys, ["pretrain", "-c", cfg])
    assert line == f"error: pattern '{tmp_path / 'd/*.tfrecord'}' matched no files"


def test_truncated_shard_next_to_its_manifest(tmp_path, capsys, shards):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(shards, data)
    shard = data / "train-00001-of-00002.tfrecord"
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:-40])
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", tfrecord(data / "train-*.tfrecord")))
    line = cli_error(capsys, ["pretrain", "-c", cfg])
    assert line == f"error: corrupt shard {shard}: {size - 40} bytes, manifest says {size}"


@pytest.mark.parametrize("damage", ["truncated", "not_an_object", "no_tokenizer", "bad_shard"])
def test_damaged_dataset_manifest_is_named(tmp_path, capsys, shards, damage):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(shards, data)
    path = data / "manifest.json"
    text = path.read_text()
    manifest = json.loads(text)
    if damage == "truncated":
        path.write_text(text[: len(text) // 2])
        want = rf"error: {path}: line \d+, column \d+: malformed JSON in the dataset manifest"
    elif damage == "not_an_object":
        path.write_text("[1, 2]")
        want = rf"error: {path}: not a valid dataset manifest: <top level>: "
    elif damage == "no_tokenizer":
        del manifest["tokenizer"]
        path.write_text(json.dumps(manifest))
        want = rf"error: {path}: not a valid dataset manifest: tokenizer: Field required"
    else:
        manifest["shards"][0]["file"] = "../../etc/hostname"
        path.write_text(json.dumps(manifest))
        want = (rf"error: {path}: not a valid dataset manifest: shards\.0\.file="
                r"'\.\./\.\./etc/hostname' is not a file name")
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", tfrecord(data / "train-*.tfrecord")))
    line = cli_error(capsys, ["pretrain", "-c", cfg])
    assert re.match(want, line), line


def test_garbage_shard_without_manifest(tmp_path, capsys):
    bad = tmp_path / "garbage.tfrecord"
    bad.write_bytes(b"this is not a TFRecord file at all\n" * 8)
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", tfrecord(bad)))
    line = cli_error(capsys, ["pretrain", "-c", cfg])
    assert line == f"error: corrupt shard: {bad}: corrupt record length at byte 0"


def _payload_flipped_shard(shards: Path, tmp_path: Path) -> Path:
    """A shard (no manifest next to it) whose first record's payload has one flipped bit:
    its framing is intact, so only reading the records (CRC check) can find it."""
    raw = bytearray((shards / "train-00000-of-00002.tfrecord").read_bytes())
    raw[12 + 20] ^= 0x40  # 8-byte length + 4-byte length CRC, then the payload
    bad = tmp_path / "flipped" / "train.tfrecord"
    bad.parent.mkdir()
    bad.write_bytes(bytes(raw))
    return bad


def test_corrupt_record_payload_names_the_shard_in_process(tmp_path, capsys, shards):
    bad = _payload_flipped_shard(shards, tmp_path)
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", tfrecord(bad)))
    line = cli_error(capsys, ["pretrain", "-c", cfg])
    assert line.startswith("error: InvalidArgumentError: ")
    assert "corrupt or truncated TFRecord shard" in line and str(bad) in line
    assert "{{" not in line and "[Op:" not in line, line  # TF's node noise is gone
    assert not list((tmp_path / "r" / "checkpoints").glob("ckpt-*"))  # nothing trained on it


@pytest.mark.parametrize("what", ["seq_length", "masking"])
def test_data_prepared_with_other_settings(tmp_path, capsys, shards, what):
    data = tfrecord(shards / "train-*.tfrecord")
    if what == "seq_length":
        data["seq_length"] = 48
        expected = f"error: seq_length=48 but the files were prepared with seq_length={SEQ}"
    else:
        data["masking"] = "dynamic"
        expected = "error: masking='dynamic' but"
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", data))
    assert cli_error(capsys, ["pretrain", "-c", cfg]).startswith(expected)


def test_tokenizer_larger_than_model_vocab_pretraining(tmp_path, capsys, shards):
    """Token ids >= vocab_size would index past the embedding table (silently on GPU)."""
    raw = raw_config(tmp_path / "r", tfrecord(shards / "train-*.tfrecord"), vocab_size=300)
    cfg = write_config(tmp_path, raw)
    line = cli_error(capsys, ["pretrain", "-c", cfg])
    assert line == (f"error: data.train_files: {shards / 'manifest.json'} says the data's "
                    f"tokenizer has {VOCAB} tokens but model.vocab_size=300")
    with pytest.raises(ConfigError, match=f"has {VOCAB} tokens but model.vocab_size=300"):
        AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    assert not list((tmp_path / "r" / "checkpoints").glob("ckpt-*"))


def test_missing_tokenizer_of_pretraining_data(tmp_path, capsys, shards):
    raw = raw_config(tmp_path / "r", tfrecord(shards / "train-*.tfrecord",
                                              tokenizer=str(tmp_path / "no_tok")))
    line = cli_error(capsys, ["pretrain", "-c", write_config(tmp_path, raw)])
    assert line == f"error: tokenizer directory not found: {tmp_path / 'no_tok'}"


def test_too_few_synthetic_examples_for_a_batch(tmp_path, capsys):
    data = {**synthetic(), "num_examples": 1}
    line = cli_error(capsys, ["pretrain", "-c",
                              write_config(tmp_path, raw_config(tmp_path / "r", data))])
    assert line == "error: num_examples=1 is less than one batch of 2"


# ====================================================================== corpus / tokenizer
def _prepare(tmp_path, tok, *inputs, extra=()):
    return ["prepare-data", *inputs, "--tokenizer", tok, "--out", tmp_path / "out",
            "--seq-length", str(SEQ), "--max-predictions-per-seq", str(PREDS),
            "--dupe-factor", "1", "--num-workers", "1", "--no-progress", *extra]


def _train_tok(tmp_path, *inputs, vocab="100"):
    return ["train-tokenizer", *inputs, "--out", tmp_path / "tok", "--vocab-size", vocab,
            "--num-threads", "1"]


def test_empty_corpus(tmp_path, capsys, tok_dir):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert cli_error(capsys, _prepare(tmp_path, tok_dir, empty)) == f"error: {empty}: empty file"
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert not list((tmp_path / "out").glob("*.tfrecord"))
    assert cli_error(capsys, _train_tok(tmp_path, empty)) == f"error: {empty}: empty file"
    assert not (tmp_path / "tok" / "spiece.model").exists()


def test_blank_corpus_has_no_documents(tmp_path, capsys, tok_dir):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n   \n")
    line = cli_error(capsys, _prepare(tmp_path, tok_dir, blank))
    assert line.startswith("error: no documents left after filtering: 3 lines read from "
                           "1 file(s)")


def test_non_utf8_corpus(tmp_path, capsys, tok_dir):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"A perfectly fine first line of text.\nCaf\xe9 au lait is not UTF-8.\n")
    want = f"error: {bad}:2: invalid UTF-8"
    assert cli_error(capsys, _prepare(tmp_path, tok_dir, bad)).startswith(want)
    assert not (tmp_path / "out" / "manifest.json").exists()
    # SentencePiece used to wrap this in "INTERNAL: ... At: corpus.py(216)"; now it is ours
    line = cli_error(capsys, _train_tok(tmp_path, bad))
    assert line.startswith(want) and "At:" not in line and "SentencePiece" not in line
    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
    from albertkit.errors import CorpusError

    with pytest.raises(CorpusError, match=r"latin1\.txt:2: invalid UTF-8"):
        train_tokenizer([bad], tmp_path / "tok2", TokenizerConfig(vocab_size=100, num_threads=1))


def test_truncated_gz_corpus(tmp_path, capsys, tok_dir, corpus):
    import gzip

    packed = gzip.compress(corpus.read_bytes() * 20)
    bad = tmp_path / "corpus.txt.gz"
    bad.write_bytes(packed[: len(packed) // 2])
    want = f"error: {bad}: truncated gzip file"
    assert cli_error(capsys, _prepare(tmp_path, tok_dir, bad)).startswith(want)
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert cli_error(capsys, _train_tok(tmp_path, bad)).startswith(want)


def test_corpus_line_longer_than_the_limit(tmp_path, capsys, tok_dir, corpus):
    long = tmp_path / "long.txt"
    long.write_text("fine first line.\n" + "word " * 3000 + "\n")
    want = f"error: {long}:2: line longer than max_line_bytes=4096 (--max-line-bytes)"
    line = cli_error(capsys, [*_prepare(tmp_path, tok_dir, long), "--max-line-bytes", "4096"])
    assert line.startswith(want), line
    line = cli_error(capsys, [*_train_tok(tmp_path, long), "--max-line-bytes", "4096"])
    assert line.startswith(want), line


def test_missing_corpus_and_tokenizer(tmp_path, capsys, tok_dir, corpus):
    missing = tmp_path / "missing.txt"
    assert cli_error(capsys, _prepare(tmp_path, tok_dir, missing)) == \
        f"error: input '{missing}': no such file"
    assert cli_error(capsys, _train_tok(tmp_path, missing)) == \
        f"error: input '{missing}': no such file"
    assert cli_error(capsys, _prepare(tmp_path, tmp_path / "no_tok", corpus)) == \
        f"error: tokenizer '{tmp_path / 'no_tok'}': no such file or directory"


def test_broken_tokenizer_directories(tmp_path, capsys, corpus):
    empty_dir = tmp_path / "empty_tok"
    empty_dir.mkdir()
    line = cli_error(capsys, _prepare(tmp_path, empty_dir, corpus))
    assert line == f"error: {empty_dir}: no spiece.model in this tokenizer directory"
    junk = tmp_path / "junk_tok"
    junk.mkdir()
    (junk / "spiece.model").write_bytes(b"\x00\x01 definitely not a protobuf")
    line = cli_error(capsys, _prepare(tmp_path, junk, corpus))
    assert line.startswith(f"error: {junk / 'spiece.model'}: not a SentencePiece model")


@pytest.mark.parametrize("argv_tail,pattern", [
    (["--seq-length", "0"], r"--seq-length: Input should be greater than 8 \(got 0\)"),
    (["--dupe-factor", "-1"], r"--dupe-factor: Input should be greater than 0 \(got -1\)"),
    (["--max-predictions-per-seq", "40"],
     r"max_predictions_per_seq=40 exceeds seq_length=32"),
    (["--masked-lm-prob", "1.5"], r"--masked-lm-prob: Input should be less than 1 \(got 1\.5\)"),
])
def test_prepare_data_bad_numbers(tmp_path, capsys, tok_dir, corpus, argv_tail, pattern):
    line = cli_error(capsys, _prepare(tmp_path, tok_dir, corpus, extra=argv_tail))
    assert re.search(pattern, line), line


class _FullDisk:
    """A file handle whose writes fail like a full disk."""

    def __init__(self, fh):
        self._fh = fh

    def write(self, data):
        raise OSError(28, "No space left on device")

    def __getattr__(self, name):
        return getattr(self._fh, name)


def test_disk_full_while_writing_shards_then_resume(tmp_path, capsys, monkeypatch, tok_dir,
                                                    corpus):
    """The second of three shards hits a full disk: the error names the shard, nothing
    incomplete looks finished, and the same command afterwards resumes to the full result."""
    import albertkit.data.tfrecord as tfrecord_mod

    real_init = tfrecord_mod.RecordWriter.__init__

    def init(self, path):
        real_init(self, path)
        if "train-00001-" in str(path):
            self._fh = _FullDisk(self._fh)

    monkeypatch.setattr(tfrecord_mod.RecordWriter, "__init__", init)
    argv = _prepare(tmp_path, tok_dir, corpus, extra=["--num-shards", "3"])
    out = tmp_path / "out"
    line = cli_error(capsys, argv)
    assert line == ("error: [Errno 28] No space left on device: "
                    f"'{out / 'train-00001-of-00003.tfrecord'}'")
    assert not (out / "manifest.json").exists()
    assert sorted(p.name for p in out.glob("*.tfrecord")) == ["train-00000-of-00003.tfrecord"]
    assert not list(out.glob(".*.tmp"))
    monkeypatch.setattr(tfrecord_mod.RecordWriter, "__init__", real_init)
    assert main([str(a) for a in argv]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["shards"]) == 3
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    line = cli_error(capsys, ["prepare-data", corpus, "--tokenizer", tok_dir,
                              "--out", blocker / "out", "--no-progress"])
    assert line.startswith("error: [Errno 20] Not a directory: ") and str(blocker) in line


def test_train_tokenizer_bad_vocab_sizes(tmp_path, capsys, corpus):
    line = cli_error(capsys, _train_tok(tmp_path, corpus, vocab="-5"))
    assert line == "error: --vocab-size: Input should be greater than 16 (got -5)"
    line = cli_error(capsys, _train_tok(tmp_path, corpus, vocab="900000"))
    assert line.startswith("error: vocab_size=900000 does not fit this corpus")


# ====================================================================== SQuAD
def squad_json(**edit) -> dict:
    qa = {"id": "q1", "question": "What jumps?", "is_impossible": False,
          "answers": [{"text": "fox", "answer_start": 16}]}
    para = {"context": CONTEXT, "qas": [qa]}
    for key, value in edit.items():
        target = para if key == "context" else qa if key in qa else qa["answers"][0]
        if value is None:
            del target[key]
        else:
            target[key] = value
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": [para]}]}


WHERE = r"data\[0\]\.paragraphs\[0\]\.qas\[0\] \(id=q1\)"
SQUAD_CASES = [
    ("missing_question", {"question": None}, rf"{WHERE}: missing field 'question'"),
    ("missing_answers", {"answers": None}, rf"{WHERE}: missing field 'answers'"),
    ("missing_context", {"context": None}, r"data\[0\]\.paragraphs\[0\]: missing field 'context'"),
    ("missing_answer_start", {"answer_start": None},
     rf"{WHERE}\.answers\[0\]: missing field 'answer_start'"),
    ("offset_past_end", {"answer_start": 500},
     rf"{WHERE}\.answers\[0\]: answer_start=500 with text length 3 lies outside the context "
     rf"\({len(CONTEXT)} characters\)"),
    ("offset_negative", {"answer_start": -2}, rf"{WHERE}\.answers\[0\]: answer_start=-2 "),
    ("offset_wrong_text", {"answer_start": 4},
     rf"{WHERE}\.answers\[0\]: answer text 'fox' does not match the context at "
     r"answer_start=4 \('qui'\)"),
    ("offset_as_string", {"answer_start": "16"},
     rf"{WHERE}\.answers\[0\]: field 'answer_start' must be int, got str '16'"),
    ("impossible_with_answers", {"is_impossible": True},
     rf"{WHERE}: is_impossible=true but 'answers' is not empty"),
]


def squad_config(tmp_path: Path, train_file: Path, tok_dir: Path, **model) -> Path:
    data = {"kind": "squad", "version": "2.0", "train_file": str(train_file),
            "tokenizer": str(tok_dir), "max_seq_length": 48, "doc_stride": 16,
            "max_query_length": 12}
    return write_config(tmp_path, raw_config(tmp_path / "run", data, **model))


@pytest.mark.parametrize("edit,pattern", [c[1:] for c in SQUAD_CASES],
                         ids=[c[0] for c in SQUAD_CASES])
def test_squad_json_api(tmp_path, edit, pattern):
    from albertkit.data.squad import read_squad
    from albertkit.errors import SquadFormatError

    path = tmp_path / "train.json"
    path.write_text(json.dumps(squad_json(**edit)))
    with pytest.raises(SquadFormatError, match=rf"train\.json: {pattern}"):
        read_squad(path, "2.0")


@pytest.mark.parametrize("case", ["missing_question", "missing_context", "offset_past_end",
                                  "offset_wrong_text"])
def test_squad_json_cli(tmp_path, capsys, tok_dir, case):
    edit, pattern = next((e, p) for name, e, p in SQUAD_CASES if name == case)
    path = tmp_path / "train.json"
    path.write_text(json.dumps(squad_json(**edit)))
    line = cli_error(capsys, ["finetune", "squad", "-c", squad_config(tmp_path, path, tok_dir)])
    assert re.fullmatch(rf"error: {path}: {pattern}.*", line), line


def test_squad_malformed_and_missing_files(tmp_path, capsys, tok_dir):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "v2.0",\n "data": [}\n')
    line = cli_error(capsys, ["finetune", "squad", "-c", squad_config(tmp_path, bad, tok_dir)])
    assert line.startswith(f"error: {bad}: line 2, column 11: malformed JSON")
    not_squad = tmp_path / "list.json"
    not_squad.write_text("[1, 2]")
    line = cli_error(capsys, ["finetune", "squad", "-c",
                              squad_config(tmp_path, not_squad, tok_dir)])
    assert line.startswith(f"error: {not_squad}: expected a JSON object with a 'data' list")
    missing = tmp_path / "missing.json"
    line = cli_error(capsys, ["finetune", "squad", "-c",
                              squad_config(tmp_path, missing, tok_dir)])
    assert line == f"error: SQuAD file not found: {missing}"


def test_squad_tokenizer_missing_or_larger_than_model(tmp_path, capsys, tok_dir):
    good = tmp_path / "train.json"
    good.write_text(json.dumps(squad_json()))
    line = cli_error(capsys, ["finetune", "squad", "-c",
                              squad_config(tmp_path, good, tmp_path / "no_tok")])
    assert line == f"error: tokenizer directory not found: {tmp_path / 'no_tok'}"
    line = cli_error(capsys, ["finetune", "squad", "-c",
                              squad_config(tmp_path, good, tok_dir, vocab_size=100)])
    assert line == f"error: data.tokenizer={tok_dir} has {VOCAB} tokens but model.vocab_size=100"


def test_squad_file_asking_for_too_many_windows(tmp_path, capsys, tok_dir):
    """A few KB (one long context, many questions) must not build features without bound."""
    long_context = " ".join([CONTEXT] * 60)
    path = tmp_path / "train.json"
    path.write_text(json.dumps(squad_json(context=long_context)))
    cfg = squad_config(tmp_path, path, tok_dir)
    line = cli_error(capsys, ["finetune", "squad", "-c", cfg,
                              "--set", "data.max_windows_per_example=8"])
    assert re.fullmatch(rf"error: {path}: {WHERE}: the \d+-token context needs \d+ windows of "
                        r"max_seq_length=48 every doc_stride=16 tokens, more than "
                        r"data\.max_windows_per_example=8; .*", line), line
    line = cli_error(capsys, ["finetune", "squad", "-c", cfg,
                              "--set", "data.max_windows_per_example=1000",
                              "--set", "data.max_total_windows=8"])
    assert re.fullmatch(rf"error: {path}: more than data\.max_total_windows=8 windows of 48 "
                        r"tokens \(reached at question 1 of 1, .*", line), line


# ====================================================================== GLUE-style files
def glue_config(tmp_path: Path, train_file: Path, tok_dir: Path, **model) -> Path:
    data = {"kind": "classification", "task": "sst2", "train_file": str(train_file),
            "tokenizer": str(tok_dir), "max_seq_length": 32}
    return write_config(tmp_path, raw_config(tmp_path / "run", data, **model))


GLUE_CASES = [
    ("empty", b"", "{f}: empty file (no header, no records)"),
    ("header_only", b"sentence\tlabel\n", "{f}: no records"),
    ("unknown_label", b"sentence\tlabel\na fine film\t1\na dull film\t0\nmeh\tpositive\n",
     "{f}:4: unknown label 'positive' (labels: ['0', '1'])"),
    ("missing_field", b"sentence\tlabel\na fine film\t1\na dull film\n",
     "{f}:3: 1 fields, expected 2 (as in the header)"),
    ("no_label_column", b"sentence\tscore\na fine film\t1\n", "{f}: no label column"),
    ("not_utf8", b"sentence\tlabel\na fine film\t1\nna\xefve\t0\n", "{f}: not UTF-8 text"),
]


@pytest.mark.parametrize("content,expected", [c[1:] for c in GLUE_CASES],
                         ids=[c[0] for c in GLUE_CASES])
def test_glue_file_problems(tmp_path, capsys, tok_dir, content, expected):
    from albertkit.data.glue import GLUE_PRESETS, LabelMap, read_examples
    from albertkit.errors import GlueDataError

    path = tmp_path / "train.tsv"
    path.write_bytes(content)
    want = expected.format(f=path)
    with pytest.raises(GlueDataError) as info:
        labels = LabelMap(GLUE_PRESETS["sst2"].labels)  # labels are checked when encoded
        [labels.encode(example) for example in read_examples(path, task="sst2")]
    assert str(info.value).startswith(want)
    if content in (b"", GLUE_CASES[2][1]):  # two of them through the CLI as well
        line = cli_error(capsys, ["finetune", "glue", "-c", glue_config(tmp_path, path, tok_dir)])
        assert line.startswith(f"error: {want}"), line


def test_glue_missing_file_and_vocab_mismatch(tmp_path, capsys, tok_dir):
    missing = tmp_path / "missing.tsv"
    line = cli_error(capsys, ["finetune", "glue", "-c", glue_config(tmp_path, missing, tok_dir)])
    assert line == f"error: data file not found: {missing}"
    good = tmp_path / "train.tsv"
    good.write_text("sentence\tlabel\na fine film\t1\na dull film\t0\n")
    line = cli_error(capsys, ["finetune", "glue", "-c",
                              glue_config(tmp_path, good, tok_dir, vocab_size=64)])
    assert line == f"error: data.tokenizer={tok_dir} has {VOCAB} tokens but model.vocab_size=64"


# ====================================================================== checkpoints
@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> tuple[Path, dict]:
    """A finished one-step run (hidden 32) with its checkpoint."""
    root = tmp_path_factory.mktemp("badckpt")
    raw = raw_config(root / "run", synthetic())
    raw["runtime"]["eager"] = True  # one step: no graph to trace
    AlbertTrainer(TrainerConfig.model_validate(raw)).fit()
    return root / "run", raw


def test_checkpoint_from_a_different_model_size(tmp_path, capsys, small_run):
    run, raw = small_run
    before = tree_digest(run / "checkpoints")
    bigger = json.loads(json.dumps(raw))
    bigger["model"]["hidden_size"] = 64
    cfg = write_config(tmp_path, bigger)
    ckpt = run / "checkpoints" / "ckpt-00000001"
    want = (f"error: {ckpt}: checkpoint is for a different model (checkpoint vs config: "
            "{'hidden_size': (32, 64)}); use a new run_dir for a different model")
    assert cli_error(capsys, ["pretrain", "-c", cfg]) == want
    assert cli_error(capsys, ["evaluate", "-c", cfg]) == want
    with pytest.raises(CheckpointError, match="different model"):
        AlbertTrainer(TrainerConfig.model_validate(bigger)).fit()
    assert tree_digest(run / "checkpoints") == before  # the refused runs lost nothing


def test_load_from_problems(tmp_path, capsys, small_run):
    run, raw = small_run
    nowhere = json.loads(json.dumps(raw))
    nowhere["run_dir"] = str(tmp_path / "new")
    nowhere["model"]["load_from"] = str(tmp_path / "nowhere")
    line = cli_error(capsys, ["pretrain", "-c", write_config(tmp_path, nowhere)])
    assert line == (f"error: model.load_from={tmp_path / 'nowhere'}: neither an albertkit run "
                    "directory (model_spec.json) nor a Hugging Face directory (config.json)")
    clash = json.loads(json.dumps(nowhere))
    clash["model"]["load_from"] = str(run)
    clash["model"]["hidden_size"] = 64
    line = cli_error(capsys, ["pretrain", "-c", write_config(tmp_path, clash)])
    assert line == f"error: model.hidden_size=64 disagrees with model.load_from={run} " \
                   "(hidden_size=32)"
    line = cli_error(capsys, ["export", tmp_path / "not_a_run", tmp_path / "out"])
    assert line == f"error: {tmp_path / 'not_a_run'}: not an albertkit run (no config.yaml)"


# ====================================================================== real processes
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_subprocess_config_error_has_no_traceback_unless_debug(tmp_path):
    path = _write_case(tmp_path, CONFIG_CASES[0][1])
    done = run_cli("pretrain", "--config", path)
    assert done.returncode == 2
    line = assert_one_clean_error(done.stderr)
    assert line.startswith(f"error: {path}: line 2, column")
    debug = run_cli("--debug", "pretrain", "--config", path)
    assert debug.returncode != 0
    assert "Traceback (most recent call last)" in debug.stderr
    assert "albertkit.errors.ConfigError" in debug.stderr


def test_subprocess_data_commands(tmp_path, tok_dir):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"A perfectly fine first line of text.\nCaf\xe9 au lait.\n")
    done = run_cli(*_prepare(tmp_path, tok_dir, bad))
    assert done.returncode == 2
    assert assert_one_clean_error(done.stderr).startswith(f"error: {bad}:2: invalid UTF-8")
    done = run_cli(*_train_tok(tmp_path, tmp_path / "none.txt"))
    assert done.returncode == 2
    assert assert_one_clean_error(done.stderr) == \
        f"error: input '{tmp_path / 'none.txt'}': no such file"


@pytest.mark.slow  # ~8 s alone (TensorFlow import + model build), 20+ s on a busy machine
def test_subprocess_corrupt_shard_during_training(tmp_path, shards):
    """A TensorFlow runtime error (from inside tf.data) reaches the user as one line."""
    bad = _payload_flipped_shard(shards, tmp_path)
    cfg = write_config(tmp_path, raw_config(tmp_path / "r", tfrecord(bad)))
    done = run_cli("pretrain", "--config", cfg)
    assert done.returncode == 2, done.stderr[-2000:]
    line = assert_one_clean_error(done.stderr)
    assert str(bad) in line and "corrupt or truncated TFRecord shard" in line
