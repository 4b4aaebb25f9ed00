"""The tf.data reader: values, determinism, per-worker sharding, dynamic masking, corrupt
shards, the synthetic source and the majority-token baseline."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from albertkit.data.pretraining_dataset import (  # noqa: E402
    build_pretraining_dataset,
    build_synthetic_dataset,
)
from albertkit.data.tfrecord import read_records  # noqa: E402
from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer  # noqa: E402
from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data, shard_files  # noqa: E402
from albertkit.errors import DatasetError  # noqa: E402
from albertkit.tasks.pretraining import MaskedTargetCounts  # noqa: E402

L, P = 64, 10


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from pydoc_data import topics

    root = tmp_path_factory.mktemp("pipe")
    corpus = root / "c.txt"
    names = sorted(topics.topics)[:12]
    corpus.write_text("\n".join(" ".join(topics.topics[n].split()) for n in names) + "\n")
    tok = train_tokenizer([corpus], root / "tok", TokenizerConfig(vocab_size=800, num_threads=1))
    out = {}
    for masking in ("static", "dynamic"):
        cfg = PretrainingDataConfig(
            inputs=[str(corpus)],
            seq_length=L,
            max_predictions_per_seq=P,
            dupe_factor=2,
            num_shards=4,
            masking=masking,
            seed=1,
        )
        prepare_pretraining_data(cfg, tok, root / masking, num_workers=1, progress=False)
        out[masking] = shard_files(root / masking)
    return root, tok, out


def _all(ds):
    return [{k: v.numpy() for k, v in b.items()} for b in ds]


def _key(batch, i):
    return batch["input_ids"][i].tobytes() + batch["segment_ids"][i].tobytes()


def test_static_values_equal_records(data):
    root, tok, files = data
    ds = build_pretraining_dataset(
        files["static"][:1],
        seq_length=L,
        max_predictions_per_seq=P,
        batch_size=4,
        repeat=False,
        training=False,
    )
    first = next(iter(ds))
    assert first["masked_lm_weights"].dtype == tf.float32
    assert all(first[k].dtype == tf.int32 for k in first if k != "masked_lm_weights")
    assert first["next_sentence_labels"].shape == (4,)
    recs = list(read_records(files["static"][0]))[:4]
    for i, rec in enumerate(recs):
        ex = tf.train.Example.FromString(rec).features.feature
        for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids"):
            np.testing.assert_array_equal(first[k][i].numpy(), ex[k].int64_list.value)
        np.testing.assert_array_equal(
            first["masked_lm_weights"][i].numpy(), ex["masked_lm_weights"].float_list.value
        )
        assert first["next_sentence_labels"][i] == ex["next_sentence_labels"].int64_list.value[0]


@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_same_seed_same_batches(data, masking, autograph_conversions):
    _, _, files = data
    kw = {
        "seq_length": L,
        "max_predictions_per_seq": P,
        "batch_size": 8,
        "masking": masking,
        "shuffle_buffer": 100,
    }
    a = _all(build_pretraining_dataset(files[masking], seed=5, **kw).take(6))
    b = _all(build_pretraining_dataset(files[masking], seed=5, **kw).take(6))
    c = _all(build_pretraining_dataset(files[masking], seed=6, **kw).take(6))
    for x, y in zip(a, b, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    assert any(
        not np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c, strict=True)
    )
    # resume by skipping consumed batches gives the same continuation
    d = _all(build_pretraining_dataset(files[masking], seed=5, **kw).skip(3).take(3))
    for x, y in zip(a[3:], d, strict=True):
        np.testing.assert_array_equal(x["input_ids"], y["input_ids"])
    # the reader and the masking are traced as written (no AutoGraph conversion)
    assert [name for name in autograph_conversions if name.startswith("albertkit.")] == []


@pytest.mark.parametrize(("n_files", "training"), [(4, True), (1, False), (4, False)])
def test_worker_shards_disjoint_and_covering(data, n_files, training):
    _, _, files = data
    kw = {
        "seq_length": L,
        "max_predictions_per_seq": P,
        "batch_size": 1,
        "repeat": False,
        "training": training,
        "shuffle_buffer": 10,
    }
    every = {_key(b, 0) for b in _all(build_pretraining_dataset(files["static"][:n_files], **kw))}
    parts = [
        [
            _key(b, 0)
            for b in _all(
                build_pretraining_dataset(
                    files["static"][:n_files], shard_index=i, num_shards=2, **kw
                )
            )
        ]
        for i in range(2)
    ]
    assert len(parts[0]) + len(parts[1]) == len(every)
    assert set(parts[0]).isdisjoint(parts[1])
    assert set(parts[0]) | set(parts[1]) == every


def test_dynamic_masking_rules_and_fresh_masks_each_epoch(data):
    root, tok, files = data
    one = files["dynamic"][:1]
    per_epoch = sum(1 for _ in read_records(one[0]))  # batches of one example: epochs align
    bs = 1
    # no manifest lookups needed by the caller: vocab and special ids come from manifest.json
    ds = build_pretraining_dataset(
        one,
        seq_length=L,
        max_predictions_per_seq=P,
        batch_size=bs,
        masking="dynamic",
        training=False,
        repeat=True,
        seed=3,
    )
    batches = _all(ds.take(2 * per_epoch))
    specials = list(tok.special_ids.values())
    changed = 0
    for i in range(per_epoch):
        e1, e2 = batches[i], batches[i + per_epoch]
        for b in (e1, e2):
            w = b["masked_lm_weights"] > 0
            assert not np.isin(b["masked_lm_ids"][w], specials).any()
            real = b["input_mask"].sum(1)
            assert all((b["masked_lm_positions"][r][w[r]] < real[r]).all() for r in range(bs))
        # same pairs underneath (restore the masked tokens) ...
        orig = []
        for b in (e1, e2):
            ids = b["input_ids"].copy()
            for r in range(bs):
                w = b["masked_lm_weights"][r] > 0
                ids[r, b["masked_lm_positions"][r][w]] = b["masked_lm_ids"][r][w]
            orig.append(ids)
        np.testing.assert_array_equal(orig[0], orig[1])
        # ... but fresh masks
        changed += not np.array_equal(e1["masked_lm_positions"], e2["masked_lm_positions"])
    assert changed >= 0.9 * per_epoch


def test_corrupt_and_truncated_shards_are_named(data, tmp_path):
    _, _, files = data
    src = files["static"][0]
    raw = bytearray(Path(src).read_bytes())
    # bit flip inside a record payload: reading fails and names the file
    bad_dir = tmp_path / "flip"
    bad_dir.mkdir()
    flipped = bad_dir / "train-00000-of-00001.tfrecord"
    raw2 = bytearray(raw)
    raw2[len(raw2) // 2] ^= 0x40
    flipped.write_bytes(bytes(raw2))
    ds = build_pretraining_dataset(
        [str(flipped)],
        seq_length=L,
        max_predictions_per_seq=P,
        batch_size=2,
        repeat=False,
        training=False,
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="train-00000-of-00001.tfrecord"):
        _all(ds)
    # truncated file next to its manifest: refused when the dataset is built
    trunc_dir = tmp_path / "trunc"
    shutil.copytree(src.rsplit("/", 1)[0], trunc_dir)
    name = src.rsplit("/", 1)[1]
    (trunc_dir / name).write_bytes(bytes(raw[:-50]))
    with pytest.raises(DatasetError, match=name):
        build_pretraining_dataset(
            [str(trunc_dir / name)], seq_length=L, max_predictions_per_seq=P, batch_size=2
        )


def test_manifest_mismatch_is_an_error(data):
    _, _, files = data
    with pytest.raises(DatasetError, match="seq_length"):
        build_pretraining_dataset(
            files["static"], seq_length=128, max_predictions_per_seq=P, batch_size=2
        )
    with pytest.raises(DatasetError, match="masking"):
        build_pretraining_dataset(
            files["static"],
            seq_length=L,
            max_predictions_per_seq=P,
            batch_size=2,
            masking="dynamic",
        )


def test_synthetic_dataset_structure(autograph_conversions):
    kw = {
        "vocab_size": 500,
        "seq_length": 32,
        "max_predictions_per_seq": 6,
        "batch_size": 8,
        "num_examples": 32,
        "seed": 1,
    }
    a = _all(build_synthetic_dataset(**kw).take(6))
    b = _all(build_synthetic_dataset(**kw).take(6))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x["input_ids"], y["input_ids"])
    for x in a:
        assert x["input_ids"].shape == (8, 32) and x["masked_lm_ids"].shape == (8, 6)
        assert x["next_sentence_labels"].shape == (8,)
        w = x["masked_lm_weights"] > 0
        assert w.sum(1).min() >= 1
        assert (x["input_ids"][:, 0] == 2).all()
        assert not np.isin(x["masked_lm_ids"][w], [0, 1, 2, 3, 4]).any()
    assert not np.array_equal(a[0]["masked_lm_positions"], a[4]["masked_lm_positions"])  # epoch 2
    assert [name for name in autograph_conversions if name.startswith("albertkit.")] == []


def test_masked_lm_baseline_counts_targets(data):
    _, _, files = data
    ds = build_pretraining_dataset(
        files["static"],
        seq_length=L,
        max_predictions_per_seq=P,
        batch_size=4,
        repeat=False,
        training=False,
    )
    counts = MaskedTargetCounts(800)  # the fixture tokenizer's vocabulary
    for batch in ds:
        counts.add(batch)
    base = counts.baseline()
    ids = np.concatenate([b["masked_lm_ids"][b["masked_lm_weights"] > 0] for b in _all(ds)])
    counts = np.bincount(ids)
    assert base["targets"] == len(ids)
    assert base["accuracy"] == pytest.approx(counts.max() / len(ids))
    assert base["token_id"] == int(counts.argmax())
