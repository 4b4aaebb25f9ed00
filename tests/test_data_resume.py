"""Position-addressable input streams: a stream started at a resume position equals the
uninterrupted stream element by element (static and dynamic masking, shuffled, sharded over
2 ranks, across epoch boundaries), for pretraining records, the synthetic source and
fine-tuning features; 0.1 checkpoints still resume their 0.1 stream."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from albertkit.data.pretraining_dataset import (  # noqa: E402
    build_pretraining_dataset,
    build_synthetic_dataset,
)
from albertkit.data.stream import RecordLayout, locate  # noqa: E402
from albertkit.data.tfrecord import count_records  # noqa: E402

L, P = 32, 5


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three shards of unequal size per masking mode (so ranks own epochs of different length)."""
    from pydoc_data import topics

    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
    from albertkit.data.writer import (
        PretrainingDataConfig,
        prepare_pretraining_data,
        shard_files,
    )

    root = tmp_path_factory.mktemp("resume")
    corpus = root / "c.txt"
    names = sorted(topics.topics)[:6]
    corpus.write_text("\n".join(" ".join(topics.topics[n].split()) for n in names) + "\n")
    tok = train_tokenizer([corpus], root / "tok", TokenizerConfig(vocab_size=400, num_threads=1))
    out = {}
    for masking in ("static", "dynamic"):
        cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=L, max_predictions_per_seq=P,
                                    dupe_factor=1, num_shards=3, masking=masking, seed=1)
        prepare_pretraining_data(cfg, tok, root / masking, num_workers=1, progress=False)
        out[masking] = shard_files(root / masking)
    return out


def _rows(ds, n_batches):
    """The first ``n_batches`` batches, as one list of per-example feature tuples."""
    rows = []
    for b in ds.take(n_batches):
        b = {k: v.numpy() for k, v in b.items()}
        for i in range(len(b["input_ids"])):
            rows.append(tuple(b[k][i].tobytes() for k in sorted(b)))
    return rows


@pytest.mark.parametrize("masking", ["static", "dynamic"])
@pytest.mark.parametrize(("n_files", "shuffle_buffer"), [(3, 6), (1, 5)])
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_restored_stream_equals_uninterrupted(shards, masking, n_files, shuffle_buffer):
    """3 files over 2 ranks: by file; 1 file: record-level sharding. Both over 3+ epochs."""
    files = shards[masking][:n_files]
    counts = [count_records(f) for f in files]
    batch = 2
    for rank in range(2):
        kw = {"seq_length": L, "max_predictions_per_seq": P, "batch_size": batch,
              "masking": masking, "shuffle_buffer": shuffle_buffer, "seed": 4,
              "shard_index": rank, "num_shards": 2}
        epoch = RecordLayout.for_worker(files, counts, rank, 2).epoch_length
        n = (3 * epoch) // batch + 1  # into the fourth epoch
        straight = _rows(build_pretraining_dataset(files, **kw), n)
        # resume positions: early, mid-window, just before and after an epoch boundary, late
        starts = sorted({1, 3, epoch // batch, epoch // batch + 1, (2 * epoch) // batch, n - 1})
        for start in starts:
            resumed = _rows(build_pretraining_dataset(files, start_batch=start, **kw),
                            n - start)
            assert resumed == straight[start * batch:], (rank, start)
        if masking == "static":  # (dynamic masks differ per epoch by design)
            # each epoch is a permutation of the rank's records, a different one each time
            epochs = [straight[e * epoch:(e + 1) * epoch] for e in range(3)]
            assert sorted(epochs[0]) == sorted(epochs[1]) == sorted(epochs[2])
            assert len(set(epochs[0])) == epoch and epochs[0] != epochs[1]


def test_two_ranks_are_disjoint_and_cover_each_epoch(shards):
    files = shards["static"]
    counts = [count_records(f) for f in files]
    kw = {"seq_length": L, "max_predictions_per_seq": P, "batch_size": 1, "shuffle_buffer": 4,
          "repeat": False}
    every = set(_rows(build_pretraining_dataset(files, training=False, **kw), sum(counts)))
    parts = [_rows(build_pretraining_dataset(files, shard_index=r, num_shards=2, **kw),
                   sum(counts)) for r in range(2)]
    assert len(parts[0]) + len(parts[1]) == len(every) == sum(counts)
    assert set(parts[0]) | set(parts[1]) == every


def test_locate_names_epoch_window_file_and_record(shards):
    files = shards["static"]
    counts = [count_records(f) for f in files]
    layout = RecordLayout.for_worker(files, counts, 0, 1)
    where = locate(layout, 2 * sum(counts) + 13, window=5, seed=4)
    assert (where.epoch, where.window, where.offset) == (2, 2, 3)
    assert where.file in files and 0 <= where.record < counts[files.index(where.file)]


def test_version_1_stream_is_the_old_one_skipped(shards):
    """A 0.1 checkpoint resumes the 0.1 stream: the same batches as skipping it."""
    files = shards["dynamic"]
    kw = {"seq_length": L, "max_predictions_per_seq": P, "batch_size": 2, "masking": "dynamic",
          "shuffle_buffer": 6, "seed": 4, "stream_version": 1}
    skipped = _rows(build_pretraining_dataset(files, **kw).skip(7), 5)
    assert _rows(build_pretraining_dataset(files, start_batch=7, **kw), 5) == skipped


def test_synthetic_source_starts_at_its_position():
    kw = {"vocab_size": 97, "seq_length": 16, "max_predictions_per_seq": 3, "batch_size": 2,
          "num_examples": 10, "seed": 2, "num_shards": 2}
    for rank in range(2):
        straight = _rows(build_synthetic_dataset(shard_index=rank, **kw), 12)
        for start in (1, 5, 11):
            resumed = _rows(build_synthetic_dataset(shard_index=rank, start_batch=start, **kw),
                            12 - start)
            assert resumed == straight[start * 2:]


def test_finetune_stream_restores_and_covers_each_epoch():
    from albertkit.data import ExampleData
    from albertkit.distributed.single import SingleProcess

    class Rank(SingleProcess):
        def __init__(self, rank):
            self.rank, self.size = rank, 2

        def shard(self, ds):
            return ds.shard(2, self.rank)

    arrays = {"x": np.arange(13, dtype=np.int32)}
    seen = []
    for rank in range(2):
        data = ExampleData(arrays, None, micro_batch_size=3, seed=7, distributor=Rank(rank))
        straight = [b["x"].numpy() for b in itertools.islice(data.train(0, accum=2), 6)]
        for start in (2, 4, 6, 8):  # micro-batches consumed: whole steps of accum=2
            resumed = [b["x"].numpy()
                       for b in itertools.islice(data.train(start, accum=2), 6 - start // 2)]
            for a, b in zip(straight[start // 2:], resumed, strict=True):
                np.testing.assert_array_equal(a, b)
        seen.append(np.concatenate([s.ravel() for s in straight]))
    # global element g goes to rank g % 2: the first 13 elements are epoch 0, a permutation
    merged = np.empty(len(seen[0]) * 2, np.int32)
    merged[0::2], merged[1::2] = seen[0], seen[1]
    assert sorted(merged[:13]) == list(range(13)) == sorted(merged[13:26])
    assert list(merged[:13]) != list(merged[13:26])


def _as_v01(ckpt_dir: Path) -> None:
    """Rewrite a checkpoint's state.json as albertkit 0.1 wrote it (no data_position)."""
    import hashlib

    state_file = ckpt_dir / "state.json"
    state = json.loads(state_file.read_text())
    for key in ("data_position", "shuffle_buffer"):
        state.pop(key, None)
    state_file.write_text(json.dumps(state, indent=2))
    manifest = json.loads((ckpt_dir / "MANIFEST.json").read_text())
    data = state_file.read_bytes()
    manifest["files"]["state.json"] = {"sha256": hashlib.sha256(data).hexdigest(),
                                       "bytes": len(data)}
    (ckpt_dir / "MANIFEST.json").write_text(json.dumps(manifest, indent=2))


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_v01_checkpoint_resumes_the_old_way(tmp_path, caplog, tiny_config):
    from albertkit.training.checkpoint import CheckpointManager
    from albertkit.training.trainer import AlbertTrainer

    def cfg(run_dir):
        return tiny_config(run_dir, runtime={"max_steps": 6},
                                checkpoint={"every_steps": 2, "keep_last": 5})

    straight = AlbertTrainer(cfg(tmp_path / "a")).fit()
    AlbertTrainer(cfg(tmp_path / "b")).fit(until_step=3)
    manager = CheckpointManager(tmp_path / "b" / "checkpoints")
    _as_v01(manager.list()[-1])
    with caplog.at_level(logging.INFO, logger="albertkit"):
        resumed = AlbertTrainer(cfg(tmp_path / "b")).fit()
    assert "written by albertkit 0.1" in caplog.text and "6 consumed micro-batches" in caplog.text
    assert resumed.summary["resumed_from_step"] == 3
    # the run goes on with the 0.1 stream, and says so in its later checkpoints
    assert manager.latest().state["data_position"] == {"format": 1, "consumed_micro_batches": 12}
    # the synthetic source reads the same stream in both versions: the same final weights
    from safetensors.numpy import load_file

    wa = load_file(str(CheckpointManager(tmp_path / "a" / "checkpoints").latest().path
                       / "model.safetensors"))
    wb = load_file(str(manager.latest().path / "model.safetensors"))
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
    assert straight.summary["step"] == resumed.summary["step"] == 6
