"""Entity-level scores: seqeval's, on a case checked by hand, and what the task reports."""

from __future__ import annotations

import json

import numpy as np
import pytest
from albertkit_tagging.data import decode_tags
from albertkit_tagging.task import TaggingTask, entity_scores

from albertkit.config import TrainerConfig
from albertkit.data import TokenizerConfig, train_tokenizer
from albertkit.distributed import build_distributor


def test_entity_f1_on_a_hand_checked_case():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O"],
            ["B-ORG", "I-ORG", "O", "B-PER", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG", "O"],   # PER right; LOC tagged as ORG
                 ["B-ORG", "O", "O", "B-PER", "B-LOC"]]   # ORG cut short; PER right; extra LOC
    # By hand: gold entities PER, LOC, ORG, PER (4); predicted PER, ORG, ORG, PER, LOC (5);
    # exact matches (type and span): the two PER (2). P = 2/5, R = 2/4, F1 = 2PR/(P+R) = 4/9.
    scores = entity_scores(gold, predicted)
    assert scores["precision"] == pytest.approx(2 / 5)
    assert scores["recall"] == pytest.approx(2 / 4)
    assert scores["f1"] == pytest.approx(4 / 9)
    assert scores["f1_PER"] == pytest.approx(1.0)
    assert scores["f1_LOC"] == 0.0 and scores["f1_ORG"] == 0.0
    # token accuracy would call this a good tagger: 7 of 10 tags right
    right = sum(g == p for gs, ps in zip(gold, predicted, strict=True)
                for g, p in zip(gs, ps, strict=True))
    assert right == 7


def test_the_task_reports_seqeval_over_its_decoded_tags(tmp_path):
    rows = [{"tokens": ["Ann", "Lee", "met", "Bob", "in", "Rome", "."],
             "tags": ["B-PER", "I-PER", "O", "B-PER", "O", "B-LOC", "O"]},
            {"tokens": ["Acme", "Corp", "hired", "Ann", "."],
             "tags": ["B-ORG", "I-ORG", "O", "B-PER", "O"]}] * 3
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    train_tokenizer(None, tmp_path / "tok",
                    TokenizerConfig(vocab_size=33, lowercase=False, num_threads=1),
                    sentences=[" ".join(r["tokens"]) for r in rows] * 4)
    cfg = TrainerConfig.from_dict({
        "run_dir": str(tmp_path / "run"),
        "model": {"size": "tagger-small", "vocab_size": 100, "num_hidden_layers": 1},
        "data": {"kind": "bio_tagging", "train_file": str(data), "eval_file": str(data),
                 "tokenizer": str(tmp_path / "tok"), "max_seq_length": 48},
        "runtime": {"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 1}})
    assert cfg.task == "tagging"
    task = TaggingTask.for_data(cfg.data, cfg.model.spec, micro_batch_size=4)
    model = task.build_model()
    result = task.evaluate(model, None, task.datasets(cfg, build_distributor(cfg.distributed)), cfg, None)
    enc = task.eval_encoded()
    predicted = decode_tags(task.predict(model, enc.arrays), enc, task.labels)
    expected = entity_scores([list(r["tags"]) for r in rows], predicted)
    assert {k: result[k] for k in expected} == expected
    assert result["sentences"] == 6.0
    mask = enc.arrays["label_mask"] > 0
    assert mask.sum() == sum(len(r["tokens"]) for r in rows)
    assert 0.0 <= result["accuracy"] <= 1.0 and np.isfinite(result["loss"])
