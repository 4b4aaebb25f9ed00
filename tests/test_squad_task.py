"""SquadTask: loss against NumPy, evaluation files, data pipeline, and end-to-end learning."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
V1 = FIXTURES / "squad_v1_small.json"
V2 = FIXTURES / "squad_v2_small.json"


@pytest.fixture(scope="session")
def tok_dir(tiny_tokenizer_dir):
    # 2500 pieces: all but one question fit one 160-token window with their context
    return tiny_tokenizer_dir(2500)


def _cfg(tok_dir, tmp_path, version, seq=160, steps=300, **runtime):
    from albertkit.config import TrainerConfig

    data = V1 if version == "1.1" else V2
    return TrainerConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            # A wide embedding (128) makes matching question words to context words easy from
            # scratch: with 32 some seeds sit for hundreds of steps on a plateau where one
            # answer per paragraph is predicted whatever the question.
            "model": {
                "size": "tiny",
                "vocab_size": 2500,
                "hidden_size": 64,
                "embedding_size": 128,
                "intermediate_size": 256,
                "num_attention_heads": 2,
                "max_position_embeddings": 256,
            },
            "data": {
                "kind": "squad",
                "version": version,
                "train_file": str(data),
                "eval_file": str(data),
                "tokenizer": str(tok_dir),
                "max_seq_length": seq,
                "doc_stride": 32,
                "max_query_length": 24,
            },
            "optimizer": {
                "kind": "adamw",
                "learning_rate": 1e-3,
                "weight_decay": 0.0,
                "schedule": {"warmup_fraction": 0.1},
            },
            "runtime": {
                "micro_batch_size": 16,
                "global_batch_size": 16,
                "max_steps": steps,
                "eval_every_steps": 0,
                "xla": True,
                **runtime,
            },
            "checkpoint": {"every_steps": 10_000},
            "logging": {"progress_bar": False, "tensorboard": False, "log_every_steps": 100},
        }
    )


def test_loss_matches_numpy_and_pipeline_resumes(tok_dir, tmp_path):
    from albertkit.distributed.single import SingleProcess
    from albertkit.tasks import build_task

    cfg = _cfg(tok_dir, tmp_path, "2.0", seq=64, micro_batch_size=4, global_batch_size=8)
    task = build_task(cfg, cfg.model.spec)
    assert task.best_metric == ("best_f1", True)
    model = task.build_model()
    data = task.datasets(cfg, SingleProcess())
    first = list(itertools.islice(data.train(skip_micro_batches=0, accum=2), 3))
    assert first[0]["input_ids"].shape == (2, 4, 64)
    assert {k: v.dtype.name for k, v in first[0].items()} == dict.fromkeys(
        ("input_ids", "input_mask", "segment_ids", "start_positions", "end_positions"), "int32"
    )
    # resuming after 2 micro-batches continues with the same examples
    resumed = next(iter(data.train(skip_micro_batches=2, accum=2)))
    np.testing.assert_array_equal(resumed["input_ids"], first[1]["input_ids"])

    batch = {k: v[0] for k, v in first[0].items()}
    loss, stats = task.loss_and_stats(model, batch, training=False)
    out = model(batch)
    ce = []
    for name, pos in (("start_logits", "start_positions"), ("end_logits", "end_positions")):
        z = out[name].numpy().astype(np.float64)
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        ce.append(-logp[np.arange(4), batch[pos].numpy()])
    expected = np.mean((ce[0] + ce[1]) / 2)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    metrics = task.metrics({k: float(v) for k, v in stats.items()})
    assert metrics["loss"] == pytest.approx(expected, rel=1e-5)
    assert set(metrics) == {"loss", "start_accuracy", "end_accuracy", "span_accuracy"}


def test_evaluate_writes_official_files(tok_dir, tmp_path):
    from albertkit.tasks import build_task
    from albertkit.tasks import squad_metrics as sm

    cfg = _cfg(tok_dir, tmp_path, "2.0", seq=64)
    task = build_task(cfg, cfg.model.spec)
    model = task.build_model()
    result = task.evaluate(model, None, None, cfg, tmp_path / "run")
    assert {
        "exact",
        "f1",
        "HasAns_exact",
        "NoAns_exact",
        "best_exact",
        "best_exact_thresh",
        "best_f1",
        "best_f1_thresh",
    } <= set(result)
    out = tmp_path / "run" / "squad_eval"
    preds = json.loads((out / "predictions.json").read_text())
    odds = json.loads((out / "null_odds.json").read_text())
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert (
        set(preds)
        == set(odds)
        == set(nbest)
        == {
            e["id"]
            for a in json.loads(V2.read_text())["data"]
            for p in a["paragraphs"]
            for e in p["qas"]
        }
    )
    assert json.loads((out / "eval_results.json").read_text()) == result
    # the written predictions score exactly `exact`/`f1` with the official metric
    rescored = sm.evaluate_squad_files(V2, out / "predictions.json")
    assert rescored["exact"] == pytest.approx(result["exact"])
    assert rescored["f1"] == pytest.approx(result["f1"])


@pytest.mark.slow
@pytest.mark.parametrize("version, steps", [("1.1", 500), ("2.0", 300)])
def test_squad_learns_its_training_set(tok_dir, tmp_path, version, steps):
    """End to end through the trainer: EM >= 90 on its own (hand-made) training data."""
    from albertkit.training.trainer import AlbertTrainer

    trainer = AlbertTrainer(_cfg(tok_dir, tmp_path, version, steps=steps)).fit()
    result = trainer.summary["eval"]
    em = result["exact_match" if version == "1.1" else "exact"]
    assert em >= 90.0, result
    if version == "2.0":
        assert result["best_exact"] >= em and result["NoAns_total"] == 6
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["best"]["metric"] == ("f1" if version == "1.1" else "best_f1")
    assert (tmp_path / "run" / "squad_eval" / "predictions.json").is_file()


def test_pipeline_shards_disjointly_and_reshuffles():
    from albertkit.data import ExampleData
    from albertkit.data.finetune import padded_batches
    from albertkit.distributed.single import SingleProcess

    class Rank(SingleProcess):
        def __init__(self, rank):
            self.rank, self.size = rank, 2

        def shard(self, ds):
            return ds.shard(2, self.rank)

    arrays = {
        "input_ids": np.arange(24, dtype=np.int32).reshape(12, 2) * [1, 0],
        "labels": np.arange(12, dtype=np.int32),
    }
    seen = []
    for rank in (0, 1):
        data = ExampleData(lambda: arrays, None, micro_batch_size=3, seed=7,
                           distributor=Rank(rank))
        batches = list(itertools.islice(data.train(0, accum=1), 4))  # two epochs
        labels = np.concatenate([b["labels"].numpy().ravel() for b in batches])
        np.testing.assert_array_equal(
            np.concatenate([b["input_ids"].numpy()[0, :, 0] for b in batches]), labels * 2
        )
        seen.append(labels)
    epoch1 = np.concatenate([seen[0][:6], seen[1][:6]])
    epoch2 = np.concatenate([seen[0][6:], seen[1][6:]])
    assert sorted(epoch1) == sorted(epoch2) == list(range(12))  # disjoint, complete
    assert list(epoch1) != list(epoch2)  # reshuffled
    batches = padded_batches({"x": np.ones((5, 2))}, 4)
    assert [rows for _, rows in batches] == [4, 1] and batches[1][0]["x"].shape == (4, 2)
    assert batches[1][0]["x"][1:].sum() == 0
