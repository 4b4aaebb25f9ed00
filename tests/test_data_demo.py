"""The built-in demo corpus: English prose from Python itself, disjoint held-out documents,
cached preparation."""

from __future__ import annotations

import pytest

from albertkit.config import DemoData
from albertkit.data.demo import prepare_demo_data


@pytest.mark.slow
def test_demo_data_disjoint_cached_and_readable(tmp_path, monkeypatch):
    cfg = DemoData(vocab_size=1000, dupe_factor=1, seq_length=64, max_predictions_per_seq=10)
    files = prepare_demo_data(cfg, tmp_path, seed=0, progress=False, num_workers=1)
    assert files.vocab_size == 1000 and (files.tokenizer_dir / "spiece.model").is_file()
    assert files.train_files and files.eval_files
    docs = {}
    for split in ("train", "eval"):
        text = (tmp_path / "corpus" / f"{split}.txt").read_text(encoding="utf-8")
        docs[split] = {d for d in text.split("\n\n") if d.strip()}
    assert len(docs["train"]) > 1000 and len(docs["eval"]) >= 50
    assert docs["train"].isdisjoint(docs["eval"])
    assert sum(len(d) for d in docs["train"]) > 600_000  # far above 0.3 MB (overfitted)
    # the second call reuses everything: it reads no corpus, trains no tokenizer, writes no
    # example (each would raise here) and touches no file
    import albertkit.data.demo as demo

    written = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    for step in ("stdlib_documents", "train_tokenizer", "prepare_pretraining_data"):
        monkeypatch.setattr(demo, step, lambda *a, _name=step, **k: pytest.fail(f"{_name} ran"))
    again = prepare_demo_data(cfg, tmp_path, seed=0, progress=False)
    assert again == files
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == written
    monkeypatch.undo()

    tf = pytest.importorskip("tensorflow")
    from albertkit.data.pretraining_dataset import build_pretraining_dataset
    from albertkit.tasks.pretraining import MaskedTargetCounts

    ds = build_pretraining_dataset(
        files.eval_files,
        seq_length=64,
        max_predictions_per_seq=10,
        batch_size=16,
        masking=cfg.masking,
        repeat=False,
        training=False,
    )
    counts = MaskedTargetCounts(files.vocab_size)
    for batch in ds:
        counts.add(batch)
    base = counts.baseline()
    assert 0.0 < base["accuracy"] < 0.2 and base["targets"] > 500
    labels = tf.concat([b["next_sentence_labels"] for b in ds], 0).numpy()
    assert 0.4 < labels.mean() < 0.6


class _Prepared(Exception):
    pass


@pytest.mark.parametrize(("data_seed", "expected"), [(None, 7), (3, 3)])
def test_demo_data_seed_defaults_to_runtime_seed(monkeypatch, tmp_path, data_seed, expected):
    """data.seed fixes the corpus split, tokenizer and examples while runtime.seed varies."""
    from types import SimpleNamespace

    import albertkit.data.demo as demo
    from albertkit.tasks.pretraining import PretrainingData

    seeds = []

    def fake_prepare(cfg, out, seed, **kw):
        seeds.append(seed)
        raise _Prepared

    monkeypatch.setattr(demo, "prepare_demo_data", fake_prepare)
    overrides = ["runtime.seed=7"] + ([] if data_seed is None else [f"data.seed={data_seed}"])
    cfg = demo.demo_config(tmp_path / "run", overrides=overrides)
    task = SimpleNamespace(spec=SimpleNamespace(vocab_size=3000))
    with pytest.raises(_Prepared):
        PretrainingData(cfg, task, distributor=None)
    assert seeds == [expected]
