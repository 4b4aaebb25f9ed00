"""SQuAD reading, feature conversion and post-processing on the hand-written fixtures."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import numpy as np
import pytest

from albertkit.cli.finetune import add_evaluate_squad_parser
from albertkit.data.finetune import load_hf_tokenizer
from albertkit.data.squad import (
    convert_squad_examples,
    parse_squad,
    read_squad,
    read_squad_json,
)
from albertkit.errors import SquadFormatError
from albertkit.tasks import squad_metrics as sm
from albertkit.tasks.squad import postprocess_squad

FIXTURES = Path(__file__).parent / "fixtures"
V1 = FIXTURES / "squad_v1_small.json"
V2 = FIXTURES / "squad_v2_small.json"


@pytest.fixture(scope="session")
def tokenizer(tiny_tokenizer_dir):
    return load_hf_tokenizer(tiny_tokenizer_dir())


# --------------------------------------------------------------------------- reading
def test_read_fixtures():
    v1 = read_squad(V1, "1.1")
    v2 = read_squad(V2, "2.0")
    assert len(v1) == 24 and not any(e.is_impossible for e in v1)
    assert sum(e.is_impossible for e in v2) == 6 and len(v2) == 18
    lh2 = next(e for e in v1 if e.qid == "lh2")
    assert [a.text for a in lh2.answers] == [
        "the engineer Margaret Ellison",
        "Margaret Ellison",
        "Ellison",
    ]
    for ex in v1 + v2:
        for a in ex.answers:
            assert ex.context[a.start : a.end] == a.text


def _write(tmp_path, obj, name="bad.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def _v1_copy():
    return copy.deepcopy(read_squad_json(V1))


def test_malformed_json_names_file_line_and_column(tmp_path):
    path = _write(tmp_path, '{"version": "1.1",\n "data": [\n  {"paragraphs": [}\n ]}')
    with pytest.raises(SquadFormatError, match=r"bad\.json: line 3, column 19: malformed JSON"):
        read_squad(path, "1.1")
    with pytest.raises(SquadFormatError, match="data' list"):
        read_squad(_write(tmp_path, {"version": "1.1"}), "1.1")


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda d: d["data"][1]["paragraphs"][0]["qas"][2].pop("question"),
            r"data\[1\]\.paragraphs\[0\]\.qas\[2\] \(id=cn3\): missing field 'question'",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0].pop("context"),
            r"data\[0\]\.paragraphs\[0\]: missing field 'context'",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].pop("answer_start"),
            r"qas\[0\] \(id=lh1\)\.answers\[0\]: missing field 'answer_start'",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(
                answer_start=10_000
            ),
            r"\(id=lh1\)\.answers\[0\]: answer_start=10000 .* outside the context",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=-1),
            r"\(id=lh1\)\.answers\[0\]: answer_start=-1 .* outside the context",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=45),
            r"\(id=lh1\)\.answers\[0\]: answer text '1847' does not match the context",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(
                answer_start="44"
            ),
            r"\(id=lh1\)\.answers\[0\]: field 'answer_start' must be int, got str",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][1].update(id="lh1"),
            r"qas\[1\] \(id=lh1\): duplicate question id",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][1].update(answers=[]),
            r"\(id=lh2\): no answers",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][1].update(is_impossible=True),
            r"\(id=lh2\): is_impossible=true in a SQuAD v1.1 dataset",
        ),
    ],
)
def test_bad_records_are_named(tmp_path, mutate, message):
    data = _v1_copy()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(SquadFormatError, match=message) as err:
        read_squad(path, "1.1")
    assert str(path) in str(err.value)


def test_v2_impossible_with_answers_is_an_error():
    data = copy.deepcopy(read_squad_json(V2))
    data["data"][0]["paragraphs"][0]["qas"][2]["answers"] = [{"text": "1847", "answer_start": 44}]
    with pytest.raises(SquadFormatError, match=r"\(id=lh3\): is_impossible=true but"):
        parse_squad(data, "2.0", "v2.json")


# --------------------------------------------------------------------------- features
SMALL = dict(max_seq_length=48, doc_stride=12, max_query_length=16)


def _doc_window(feats, row):
    """(first, last) context-token span indices of a window, from its token spans."""
    ctx = np.nonzero(feats.token_spans[row, :, 0] >= 0)[0]
    return ctx[0], ctx[-1]


@pytest.mark.parametrize("path, version", [(V1, "1.1"), (V2, "2.0")])
def test_gold_positions_reproduce_the_answers(tokenizer, path, version):
    """Every answerable question: the span at the gold positions is the gold answer (after
    normalisation) in every window that holds it; windows holding only part of the answer
    (cut by the doc stride) and unanswerable questions point at [CLS]."""
    examples = read_squad(path, version)
    feats = convert_squad_examples(examples, tokenizer, **SMALL)
    starts, ends = feats.arrays["start_positions"], feats.arrays["end_positions"]
    found = {ex.qid: 0 for ex in examples if not ex.is_impossible}
    split_windows = 0
    for row in range(len(feats)):
        ex = feats.examples[feats.example_index[row]]
        if ex.is_impossible:
            assert starts[row] == ends[row] == 0
            continue
        ans = ex.answers[0]
        first, last = _doc_window(feats, row)
        win_start = feats.token_spans[row, first, 0]
        win_end = feats.token_spans[row, last, 1]
        inside = win_start <= ans.start and ans.end <= win_end
        overlaps = ans.start < win_end and win_start < ans.end
        if inside:
            assert 0 < starts[row] <= ends[row]
            text = feats.answer_text(row, starts[row], ends[row])
            assert sm.normalize_answer(text) == sm.normalize_answer(ans.text), (ex.qid, text)
            found[ex.qid] += 1
        else:
            assert starts[row] == ends[row] == 0, ex.qid
            split_windows += overlaps
    assert all(found.values()), [q for q, n in found.items() if not n]
    assert split_windows > 0, "the fixtures should contain answers cut by a window boundary"
    # the layout: [CLS] question [SEP] context [SEP], segment 1 from the context on
    ids, seg, mask = (feats.arrays[k] for k in ("input_ids", "segment_ids", "input_mask"))
    assert (ids[:, 0] == tokenizer.cls_token_id).all()
    for row in range(len(feats)):
        first, last = _doc_window(feats, row)
        assert ids[row, first - 1] == ids[row, last + 1] == tokenizer.sep_token_id
        assert (seg[row, :first] == 0).all() and (seg[row, first : last + 2] == 1).all()
        assert mask[row, : last + 2].all() and not mask[row, last + 2 :].any()


def test_windows_cover_the_context_and_max_context_is_unique(tokenizer):
    examples = read_squad(V1, "1.1")
    feats = convert_squad_examples(examples, tokenizer, **SMALL)
    for ei, ex in enumerate(examples):
        rows = np.nonzero(feats.example_index == ei)[0]
        n_tokens = len(tokenizer(ex.context, add_special_tokens=False)["input_ids"])
        owner = {}
        covered = set()
        for row in rows:
            ctx = np.nonzero(feats.token_spans[row, :, 0] >= 0)[0]
            # a token is identified by its character span and id (a lone "▁" shares the
            # span of the piece after it)
            spans = [
                (*s, i)
                for s, i in zip(
                    feats.token_spans[row, ctx].tolist(),
                    feats.arrays["input_ids"][row, ctx].tolist(),
                    strict=True,
                )
            ]
            covered.update(spans)
            for pos, span in zip(ctx, spans, strict=True):
                if feats.max_context[row, pos]:
                    assert span not in owner, "a token is max-context in two windows"
                    owner[span] = row
        assert len(covered) == n_tokens and set(owner) == covered
    # question truncation: never more than max_query_length question tokens
    first_ctx = (feats.token_spans[:, :, 0] >= 0).argmax(axis=1)
    assert (first_ctx - 2 <= SMALL["max_query_length"]).all()


def test_default_window_sizes_keep_one_window_per_question(tokenizer):
    examples = read_squad(V1, "1.1")
    feats = convert_squad_examples(examples, tokenizer)  # 384 / 128 / 64
    assert len(feats) == len(examples)
    assert feats.arrays["input_ids"].shape == (len(examples), 384)
    assert all(v.dtype == np.int32 for v in feats.arrays.values())


# --------------------------------------------------------------------------- post-processing
def _oracle_logits(feats, version_2):
    """Logits peaked at the gold positions (and at [CLS] for windows without the answer)."""
    n, L = feats.arrays["input_ids"].shape
    rng = np.random.default_rng(0)
    start = rng.normal(0, 0.1, (n, L))
    end = rng.normal(0, 0.1, (n, L))
    rows = np.arange(n)
    start[rows, feats.arrays["start_positions"]] += 10.0
    end[rows, feats.arrays["end_positions"]] += 10.0
    if not version_2:  # v1.1 never predicts [CLS]; keep its logit low
        start[:, 0] -= 20.0
        end[:, 0] -= 20.0
    return start, end


@pytest.mark.parametrize("path, version", [(V1, "1.1"), (V2, "2.0")])
def test_postprocess_oracle_logits_score_100(tokenizer, tmp_path, path, version, capsys):
    v2 = version == "2.0"
    examples = read_squad(path, version)
    # Windows of ~45 context tokens, stride 16: answers appear in several windows. (With
    # SMALL's ~29-token windows a few answers have their start token's maximal context in
    # a window that cuts the answer, and the max-context rule then rightly skips them.)
    feats = convert_squad_examples(
        examples, tokenizer, max_seq_length=64, doc_stride=16, max_query_length=16
    )
    assert len(feats) > 3 * len(examples)
    start, end = _oracle_logits(feats, v2)
    preds = postprocess_squad(feats, start, end, v2, n_best_size=5, max_answer_length=30)
    raw = read_squad_json(path)
    result = sm.evaluate(raw, preds.predictions, preds.null_odds)
    assert result[("exact" if v2 else "exact_match")] == 100.0
    for ex in examples:
        entries = preds.nbest[ex.qid]
        assert len(entries) <= 5 + v2
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
        scores = [e["start_logit"] + e["end_logit"] for e in entries]
        assert scores == sorted(scores, reverse=True)
        assert set(entries[0]) == {"text", "probability", "start_logit", "end_logit"}
        if v2:
            assert (preds.null_odds[ex.qid] > 0) == ex.is_impossible
    if v2:
        assert result["best_exact"] == 100.0
    files = preds.write(tmp_path)
    assert set(files) == ({"predictions", "nbest", "null_odds"} if v2 else {"predictions", "nbest"})
    assert json.loads(files["predictions"].read_text()) == preds.predictions

    # the standalone command reads exactly these files
    parser = argparse.ArgumentParser()
    add_evaluate_squad_parser(parser.add_subparsers())
    argv = ["evaluate-squad", str(path), str(files["predictions"])]
    if v2:
        argv += ["--na-prob-file", str(files["null_odds"])]
    args = parser.parse_args(argv)
    args.func(args)
    printed = json.loads(capsys.readouterr().out)
    assert printed == result


def test_postprocess_limits(tokenizer):
    examples = read_squad(V1, "1.1")[:3]
    feats = convert_squad_examples(examples, tokenizer, **SMALL)
    n, L = feats.arrays["input_ids"].shape
    start, end = np.zeros((n, L)), np.zeros((n, L))
    # the best raw pair is start at the last context token, end at the first: invalid
    for row in range(n):
        first, last = _doc_window(feats, row)
        start[row, last] = 5.0
        end[row, first] = 5.0
        start[row, first] = 1.0
        end[row, last] = 1.0
    preds = postprocess_squad(feats, start, end, False, n_best_size=3, max_answer_length=2)
    for ex in examples:
        for entry in preds.nbest[ex.qid]:
            n_tokens = len(tokenizer(entry["text"], add_special_tokens=False)["input_ids"])
            assert n_tokens <= 3  # at most 2 tokens (re-tokenising may add a "▁")
        assert len(preds.nbest[ex.qid]) <= 3
    with pytest.raises(ValueError, match="does not match"):
        postprocess_squad(feats, start[:1], end[:1], False)
