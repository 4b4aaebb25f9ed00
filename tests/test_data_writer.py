"""Pretraining example creation and sharded writing: SOP semantics, TFRecord format,
determinism (seed, process count), resume after interruption, bad inputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from albertkit.data import writer as writer_mod
from albertkit.data.instances import create_pairs, truncated_lengths
from albertkit.data.tfrecord import count_records, encode_example, read_records
from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data
from albertkit.errors import CorpusError, DataPreparationError


def _corpus_text() -> str:
    from pydoc_data import topics

    names = sorted(topics.topics)[:40]
    return "\n".join(" ".join(topics.topics[n].split()) for n in names) + "\n"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("writer")
    corpus = root / "corpus.txt"
    corpus.write_text(_corpus_text(), encoding="utf-8")
    tok = train_tokenizer([corpus], root / "tok", TokenizerConfig(vocab_size=1000, num_threads=1))
    return root, corpus, tok


def _cfg(corpus, **kw):
    base = {
        "inputs": [str(corpus)],
        "seq_length": 64,
        "max_predictions_per_seq": 10,
        "dupe_factor": 2,
        "num_shards": 3,
        "eval_fraction": 0.1,
        "seed": 3,
    }
    return PretrainingDataConfig(**{**base, **kw})


def _hashes(out: Path) -> dict[str, str]:
    return {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(out.glob("*.tfrecord"))
    }


def _no_complete_output(out: Path) -> None:
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("*.tfrecord"))


# ------------------------------------------------------------------ SOP pairs
def test_sop_pairs_balanced_and_really_swapped():
    rng = np.random.default_rng(0)
    table = np.ones(100_000, bool)
    labels = []
    for _ in range(1200):
        # sentence k of a document holds increasing ids, so order is visible in the tokens
        lens = rng.integers(1, 30, rng.integers(1, 12))
        ids = np.arange(10, 10 + lens.sum())
        doc = np.split(ids, np.cumsum(lens)[:-1])
        for p in create_pairs(
            doc,
            seq_length=48,
            short_seq_prob=0.1,
            word_start_table=table,
            cls_id=2,
            sep_id=3,
            rng=rng,
        ):
            ids_, seg = p.input_ids, p.segment_ids
            assert ids_[0] == 2 and ids_[-1] == 3 and len(ids_) <= 48
            sep = int(np.flatnonzero(ids_ == 3)[0])
            a, b = ids_[1:sep], ids_[sep + 1 : -1]
            assert len(a) >= 1 and len(b) >= 1
            np.testing.assert_array_equal(seg, [0] * (sep + 1) + [1] * (len(ids_) - sep - 1))
            assert np.all(np.diff(a) == 1) or len(a) == 1  # contiguous text (one cut per side)
            if p.sop_label == 0:
                assert a.max() < b.min()
            else:
                assert a.min() > b.max()
            labels.append(p.sop_label)
    labels = np.array(labels)
    assert len(labels) > 2500
    assert abs(labels.mean() - 0.5) < 0.03  # s.d. of the mean < 0.01


def test_truncation_matches_google_loop():
    rng = np.random.default_rng(1)
    for _ in range(5000):
        a, b, m = int(rng.integers(1, 80)), int(rng.integers(1, 80)), int(rng.integers(2, 100))
        la, lb = a, b
        while la + lb > m:
            if la > lb:
                la -= 1
            else:
                lb -= 1
        assert truncated_lengths(a, b, m) == (la, lb)


def test_short_seq_prob_makes_short_targets():
    rng = np.random.default_rng(2)
    table = np.ones(1000, bool)
    doc = [np.full(20, 7) for _ in range(50)]
    lens = [
        len(p.input_ids)
        for _ in range(300)
        for p in create_pairs(
            doc,
            seq_length=128,
            short_seq_prob=0.5,
            word_start_table=table,
            cls_id=2,
            sep_id=3,
            rng=rng,
        )
    ]
    short = np.mean(np.array(lens) < 100)
    assert 0.2 < short < 0.8


# ------------------------------------------------------------------ TFRecord format
def test_tfrecord_roundtrip_exact(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from albertkit.data.tfrecord import RecordWriter

    rng = np.random.default_rng(0)
    feats = [
        {
            "ids": rng.integers(0, 2**40, 50),
            "small": rng.integers(0, 3, 7),
            "w": rng.standard_normal(5).astype(np.float32),
            "one": np.array([1]),
        }
        for _ in range(20)
    ]
    with RecordWriter(tmp_path / "x.tfrecord") as w:
        for f in feats:
            w.write(encode_example(f))
    assert count_records(tmp_path / "x.tfrecord") == 20
    assert len(list(read_records(tmp_path / "x.tfrecord"))) == 20
    spec = {
        "ids": tf.io.FixedLenFeature([50], tf.int64),
        "small": tf.io.FixedLenFeature([7], tf.int64),
        "w": tf.io.FixedLenFeature([5], tf.float32),
        "one": tf.io.FixedLenFeature([1], tf.int64),
    }
    got = list(
        tf.data.TFRecordDataset(str(tmp_path / "x.tfrecord")).map(
            lambda r: tf.io.parse_single_example(r, spec)
        )
    )
    assert len(got) == 20
    for f, g in zip(feats, got, strict=True):
        for k in f:
            np.testing.assert_array_equal(g[k].numpy(), f[k])


# ------------------------------------------------------------------ preparation
def test_static_shards_are_consistent(setup, tmp_path):
    tf = pytest.importorskip("tensorflow")
    root, corpus, tok = setup
    m = prepare_pretraining_data(_cfg(corpus), tok, tmp_path / "out", num_workers=1, progress=False)
    assert m["masking"] == "static" and m["tokenizer"]["sha256"] == tok.sha256
    assert {s["split"] for s in m["shards"]} == {"train", "eval"}
    specials = list(tok.special_ids.values())
    n = 0
    for s in m["shards"]:
        path = tmp_path / "out" / s["file"]
        assert count_records(path) == s["examples"]
        for rec in read_records(path):
            ex = tf.train.Example.FromString(rec).features.feature
            ids = np.array(ex["input_ids"].int64_list.value)
            mask = np.array(ex["input_mask"].int64_list.value)
            seg = np.array(ex["segment_ids"].int64_list.value)
            pos = np.array(ex["masked_lm_positions"].int64_list.value)
            lab = np.array(ex["masked_lm_ids"].int64_list.value)
            w = np.array(ex["masked_lm_weights"].float_list.value)
            t = int(mask.sum())
            assert len(ids) == 64 and len(pos) == 10 and len(w) == 10
            np.testing.assert_array_equal(mask, [1] * t + [0] * (64 - t))
            assert ids[0] == tok.cls_id and ids[t - 1] == tok.sep_id
            seps = np.flatnonzero(ids[:t] == tok.sep_id)
            assert len(seps) == 2
            np.testing.assert_array_equal(seg[:t], [0] * (seps[0] + 1) + [1] * (t - seps[0] - 1))
            assert not seg[t:].any() and not ids[t:].any()
            k = int(w.sum())
            assert set(w[:k]) <= {1.0} and not w[k:].any() and not pos[k:].any()
            assert np.all(pos[:k] < t) and np.all(np.diff(pos[:k]) > 0)
            assert not np.isin(lab[:k], specials).any()
            assert ex["next_sentence_labels"].int64_list.value[0] in (0, 1)
            n += 1
    assert n == sum(m["examples"].values())


def test_same_seed_same_bytes_and_process_count_does_not_matter(setup, tmp_path):
    root, corpus, tok = setup
    a = prepare_pretraining_data(_cfg(corpus), tok, tmp_path / "a", num_workers=1, progress=False)
    b = prepare_pretraining_data(_cfg(corpus), tok, tmp_path / "b", num_workers=2, progress=False)
    assert _hashes(tmp_path / "a") == _hashes(tmp_path / "b")
    assert [s["sha256"] for s in a["shards"]] == [s["sha256"] for s in b["shards"]]
    prepare_pretraining_data(
        _cfg(corpus, seed=4), tok, tmp_path / "c", num_workers=1, progress=False
    )
    assert _hashes(tmp_path / "a") != _hashes(tmp_path / "c")
    # finished output: returned at once, files untouched
    mtimes = {f: f.stat().st_mtime_ns for f in (tmp_path / "a").glob("*.tfrecord")}
    again = prepare_pretraining_data(
        _cfg(corpus), tok, tmp_path / "a", num_workers=1, progress=False
    )
    assert again == a
    assert mtimes == {f: f.stat().st_mtime_ns for f in (tmp_path / "a").glob("*.tfrecord")}
    with pytest.raises(DataPreparationError, match="seq_length"):
        prepare_pretraining_data(_cfg(corpus, seq_length=128), tok, tmp_path / "a", progress=False)
    prepare_pretraining_data(
        _cfg(corpus, seq_length=128),
        tok,
        tmp_path / "a",
        progress=False,
        num_workers=1,
        overwrite=True,
    )


def test_interrupted_run_resumes_without_complete_looking_shard(setup, tmp_path, monkeypatch):
    root, corpus, tok = setup
    fresh = prepare_pretraining_data(
        _cfg(corpus), tok, tmp_path / "fresh", num_workers=1, progress=False
    )
    real = writer_mod.encode_examples
    out = tmp_path / "out"

    def flaky(feats):
        if (out / "train-00000-of-00003.tfrecord").exists():  # the second shard dies
            raise KeyboardInterrupt
        return real(feats)

    monkeypatch.setattr(writer_mod, "encode_examples", flaky)
    with pytest.raises(KeyboardInterrupt):
        prepare_pretraining_data(_cfg(corpus), tok, out, num_workers=1, progress=False)
    assert not (out / "manifest.json").exists()
    finished = sorted(f.name for f in out.glob("*.tfrecord"))
    assert finished == ["train-00000-of-00003.tfrecord"]  # only the shard that completed
    assert not list(out.glob(".*.tmp"))
    first_mtime = (out / finished[0]).stat().st_mtime_ns
    monkeypatch.setattr(writer_mod, "encode_examples", real)
    m = prepare_pretraining_data(_cfg(corpus), tok, out, num_workers=1, progress=False)
    assert (out / finished[0]).stat().st_mtime_ns == first_mtime  # skipped, not rewritten
    assert _hashes(out) == _hashes(tmp_path / "fresh")
    assert m["examples"] == fresh["examples"]


def test_dynamic_shards_hold_unmasked_pairs(setup, tmp_path):
    tf = pytest.importorskip("tensorflow")
    root, corpus, tok = setup
    m = prepare_pretraining_data(
        _cfg(corpus, masking="dynamic"), tok, tmp_path / "d", num_workers=1, progress=False
    )
    table = tok.word_start_table()
    rec = next(read_records(tmp_path / "d" / m["shards"][0]["file"]))
    ex = tf.train.Example.FromString(rec).features.feature
    assert "masked_lm_positions" not in ex
    ids = np.array(ex["input_ids"].int64_list.value)
    t = int(np.sum(ex["input_mask"].int64_list.value))
    assert tok.mask_id not in ids
    np.testing.assert_array_equal(
        np.array(ex["token_boundary"].int64_list.value)[:t], table[ids[:t]]
    )


@pytest.mark.parametrize("case", ["empty", "binary", "bad_utf8", "filtered"])
def test_bad_inputs_name_the_problem_and_leave_nothing_complete(setup, tmp_path, case):
    root, corpus, tok = setup
    f = tmp_path / "in.txt"
    kw = {}
    if case == "empty":
        f.write_bytes(b"")
        err, pattern = CorpusError, r"in\.txt: empty file"
    elif case == "binary":
        f.write_bytes(b"A fine line of text.\n" + bytes(range(256)) * 4)
        err, pattern = CorpusError, r"in\.txt:2: NUL byte"
    elif case == "bad_utf8":
        f.write_bytes(b"Good line of text here.\nBroken \xc3\x28 line.\n")
        err, pattern = CorpusError, r"in\.txt:2: invalid UTF-8"
    else:
        f.write_text("Short.\nTiny.\n")
        kw = {"min_document_tokens": 50}
        err, pattern = (
            DataPreparationError,
            r"no documents left after filtering.*min_document_tokens=50",
        )
    out = tmp_path / "out"
    with pytest.raises(err, match=pattern):
        prepare_pretraining_data(_cfg(f, **kw), tok, out, num_workers=1, progress=False)
    _no_complete_output(out)


def test_skip_policy_counts_bad_lines(setup, tmp_path):
    root, corpus, tok = setup
    f = tmp_path / "mixed.txt"
    f.write_bytes(corpus.read_bytes() + b"Broken \xff line.\n")
    m = prepare_pretraining_data(
        _cfg(f, encoding_errors="skip"), tok, tmp_path / "o", num_workers=1, progress=False
    )
    assert m["read"]["skipped_lines"] == 1
    assert m["read"]["skipped_locations"][0].startswith(f"{f.resolve()}:")
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["read"]["skipped_lines"] == 1


def test_cli_commands(setup, tmp_path, capsys):
    import argparse

    from albertkit.cli.data import add_prepare_data_parser, add_train_tokenizer_parser

    root, corpus, tok = setup
    parser = argparse.ArgumentParser(prog="albertkit")
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_tokenizer_parser(sub)
    add_prepare_data_parser(sub)
    args = parser.parse_args(
        [
            "train-tokenizer",
            str(corpus),
            "--out",
            str(tmp_path / "tok"),
            "--vocab-size",
            "600",
            "--num-threads",
            "1",
        ]
    )
    assert args.func(args) == 0
    args = parser.parse_args(
        [
            "prepare-data",
            str(corpus),
            "--tokenizer",
            str(tmp_path / "tok"),
            "--out",
            str(tmp_path / "d"),
            "--seq-length",
            "64",
            "--max-predictions-per-seq",
            "10",
            "--dupe-factor",
            "1",
            "--num-workers",
            "1",
            "--no-progress",
            "--masking",
            "dynamic",
        ]
    )
    assert args.func(args) == 0
    assert (tmp_path / "d" / "manifest.json").is_file()
    args = parser.parse_args(
        [
            "prepare-data",
            str(tmp_path / "missing.txt"),
            "--tokenizer",
            str(tmp_path / "tok"),
            "--out",
            str(tmp_path / "e"),
            "--no-progress",
        ]
    )
    assert args.func(args) == 2
    assert "missing.txt" in capsys.readouterr().err
    args = parser.parse_args(
        ["train-tokenizer", str(corpus), "--out", str(tmp_path / "t2"), "--vocab-size", "90000"]
    )
    assert args.func(args) == 2
    assert "vocab_size=90000" in capsys.readouterr().err
