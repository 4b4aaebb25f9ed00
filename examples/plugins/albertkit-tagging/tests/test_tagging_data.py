"""Reading tagged files, word-piece alignment, the batch order and the synthetic data set."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from albertkit_tagging.data import (
    Sentence,
    decode_tags,
    encode,
    infer_labels,
    read_sentences,
)
from albertkit_tagging.example import entity_strings, make_dataset

from albertkit.data import Tokenizer, TokenizerConfig, train_tokenizer
from albertkit.errors import DatasetError

ROWS = [
    {"tokens": ["Alice", "Abbott", "visited", "Port", "Elston", "."],
     "tags": ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"]},
    {"tokens": ["Acme", "Corp", "grew", "."], "tags": ["B-ORG", "I-ORG", "O", "O"]},
]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    words = ["Alice Abbott visited Port Elston .", "Acme Corp grew .",
             "the cat sat on the mat .", "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz"]
    path = tmp_path_factory.mktemp("tok") / "tok"
    train_tokenizer(None, path, TokenizerConfig(vocab_size=68, lowercase=False, num_threads=1),
                    sentences=words * 5)
    return path


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir) -> Tokenizer:
    return Tokenizer.load(tokenizer_dir)


def test_jsonl_and_conll_read_the_same_sentences(tmp_path):
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    conll = tmp_path / "s.conll"
    conll.write_text("-DOCSTART- O\n\n" + "\n\n".join(
        "\n".join(f"{t} NNP {g}" for t, g in zip(r["tokens"], r["tags"], strict=True))
        for r in ROWS) + "\n")
    expected = [Sentence(tuple(r["tokens"]), tuple(r["tags"])) for r in ROWS]
    assert read_sentences(jsonl) == expected
    assert read_sentences(conll) == expected
    assert infer_labels(expected) == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


@pytest.mark.parametrize(("text", "message"), [
    ('{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["b"]}\n', "s.jsonl:2: not a"),
    ('{"tokens": ["a", "b"], "tags": ["O"]}\n', "s.jsonl:1: 2 tokens but 1 tags"),
    ('{"tokens": ["a"], "tags": ["PER"]}\n', "s.jsonl:1: tag 'PER' is not O, B-TYPE or I-TYPE"),
])
def test_a_bad_line_is_named_with_file_and_line(tmp_path, text, message):
    path = tmp_path / "s.jsonl"
    path.write_text(text)
    with pytest.raises(DatasetError, match=message):
        read_sentences(path)


def test_only_the_first_piece_of_each_word_carries_its_label(tokenizer):
    sentence = Sentence(("Alice", "Abbott", "grew"), ("B-PER", "I-PER", "O"))
    labels = ["O", "B-PER", "I-PER"]
    enc = encode([sentence], tokenizer, labels, max_seq_length=24)
    a = enc.arrays
    pieces = [tokenizer.encode(w) for w in sentence.tokens]
    assert all(len(p) >= 1 for p in pieces) and any(len(p) > 1 for p in pieces)
    starts = np.cumsum([1] + [len(p) for p in pieces])[:-1]  # after [CLS]
    assert enc.word_positions == [list(starts)]
    assert a["input_ids"][0, 0] == tokenizer.cls_id
    assert a["input_ids"][0, starts[-1] + len(pieces[-1])] == tokenizer.sep_id
    assert np.flatnonzero(a["label_mask"][0]).tolist() == list(starts)
    assert a["labels"][0, starts].tolist() == [1, 2, 0]
    assert a["input_mask"][0].sum() == 2 + sum(map(len, pieces))
    # decoding reads the arg-max at the first pieces only
    logits = np.zeros((1, 24, 3))
    logits[0, starts, [1, 2, 0]] = 1.0
    logits[0, starts[0] + 1, 0] = 5.0  # a later piece of word 1: ignored
    assert decode_tags(logits, enc, labels) == [["B-PER", "I-PER", "O"]]


def test_a_word_past_the_sequence_has_no_position_and_is_predicted_o(tokenizer):
    sentence = Sentence(("Alice",) * 20, ("B-PER",) * 20)
    enc = encode([sentence], tokenizer, ["O", "B-PER"], max_seq_length=10)
    where = enc.word_positions[0]
    assert -1 in where and where[0] == 1
    tags = decode_tags(np.ones((1, 10, 2)) * [0.0, 1.0], enc, ["O", "B-PER"])[0]
    assert [t for t, p in zip(tags, where, strict=True) if p < 0] == ["O"] * where.count(-1)
    assert enc.arrays["label_mask"][0].sum() == len(where) - where.count(-1)


def test_the_task_s_batches_resume_where_they_stopped(tokenizer_dir, tmp_path):
    # the task's data is albertkit's ExampleData: step-sized batches from any position
    from albertkit_tagging.config import BioTaggingData
    from albertkit_tagging.task import TaggingTask

    from albertkit.config import AlbertSpec, DistributedConfig, RuntimeConfig
    from albertkit.distributed import build_distributor

    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS * 3))  # 6 sentences
    data = BioTaggingData(train_file=path, tokenizer=tokenizer_dir, max_seq_length=16)
    spec = AlbertSpec(vocab_size=100, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    task = TaggingTask(spec, data, micro_batch_size=2)
    cfg = SimpleNamespace(runtime=RuntimeConfig(seed=3))
    batches = task.datasets(cfg, build_distributor(DistributedConfig()))
    straight = [b["input_ids"].numpy() for b in islice(batches.train(0, accum=3), 4)]
    assert straight[0].shape == (3, 2, 16)  # [accumulation, micro_batch, sequence]
    resumed = [b["input_ids"].numpy() for b in islice(batches.train(6, accum=3), 2)]
    np.testing.assert_array_equal(np.stack(resumed), np.stack(straight[2:]))
    # one step of 6 is one epoch: every sentence once
    epoch = straight[0].reshape(6, 16)
    encoded = task.encoded(task.train_sentences).arrays["input_ids"]
    assert sorted(map(tuple, epoch.tolist())) == sorted(map(tuple, encoded.tolist()))


def test_the_synthetic_set_is_deterministic_and_dev_names_are_unseen():
    train, dev = make_dataset(seed=0, train=400, dev=100)
    assert (train, dev) == make_dataset(seed=0, train=400, dev=100)
    assert not entity_strings(train) & entity_strings(dev)
    kinds = {tag[2:] for row in dev for tag in row["tags"] if tag != "O"}
    assert kinds == {"PER", "LOC", "ORG"}
    assert len(entity_strings(dev)) > 100  # many distinct names, not a handful


def test_two_models_in_one_process_have_the_same_variable_paths():
    from albertkit_tagging.config import TAGGER_SMALL
    from albertkit_tagging.model import AlbertForTokenClassification

    from albertkit.config import AlbertSpec

    spec = AlbertSpec(**{**TAGGER_SMALL, "num_hidden_layers": 1})
    paths = []
    for _ in range(2):
        model = AlbertForTokenClassification(spec, 3)
        model.build_for(8)
        paths.append([v.path for v in model.variables])
    assert paths[0] == paths[1]
    assert "albert_for_token_classification/dropout/seed_generator/seed_generator_state" \
        in paths[0]
