"""Small inputs must not ask for unbounded memory: every bound is checked before the
allocation it guards, and its error names the file or field and the limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albertkit.data.squad import SquadFormatError, convert_examples, load_tokenizer, read_squad
from fixtures.tiny_tokenizer import build_tiny_tokenizer

SMALL = dict(max_seq_length=48, doc_stride=12, max_query_length=16)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return load_tokenizer(build_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tok"))


# ====================================================================== SQuAD windows
def _long_squad(tmp_path: Path, words: int, questions: int) -> Path:
    """One long context asked about many times: a few KB that ask for many windows."""
    context = " ".join(["the fox jumps over the lazy dog"] * (words // 7))
    qas = [{"id": f"q{i}", "question": "What jumps?", "is_impossible": False,
            "answers": [{"text": "fox", "answer_start": 4}]} for i in range(questions)]
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [
        {"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    return path


def test_windows_per_question_are_bounded_before_features_exist(tmp_path, tokenizer,
                                                                 monkeypatch):
    path = _long_squad(tmp_path, words=2000, questions=2)
    examples = read_squad(path, "2.0")
    import albertkit.data.squad as squad

    built = []
    monkeypatch.setattr(squad, "_max_context", lambda *a: built.append(1) or None)
    with pytest.raises(SquadFormatError) as e:
        convert_examples(examples, tokenizer, **SMALL, max_windows_per_example=50)
    msg = str(e.value)
    assert msg.startswith(f"{path}: data[0].paragraphs[0].qas[0] (id=q0): the ")
    assert "data.max_windows_per_example=50" in msg and "doc_stride=12" in msg
    assert not built  # refused before the first window was built


def test_total_windows_are_bounded(tmp_path, tokenizer):
    path = _long_squad(tmp_path, words=140, questions=40)
    examples = read_squad(path, "2.0")
    per_question = len(convert_examples(examples[:1], tokenizer, **SMALL))
    assert per_question > 1
    limit = per_question * 10 + 1
    with pytest.raises(SquadFormatError, match=rf"^{path}: more than "
                       rf"data\.max_total_windows={limit} windows of 48 tokens \(reached at "
                       r"question 11 of 40"):
        convert_examples(examples, tokenizer, **SMALL, max_total_windows=limit, source=str(path))
    # exactly at the limit is fine
    feats = convert_examples(examples[:10], tokenizer, **SMALL, max_total_windows=limit - 1)
    assert len(feats) == limit - 1


def test_default_limits_are_generous_for_real_squad(tokenizer):
    """The defaults never refuse ordinary data (the fixtures' contexts need a few windows)."""
    from albertkit.config import SquadData

    fixture = Path(__file__).parent / "fixtures" / "squad_v2_small.json"
    d = SquadData(train_file=fixture, tokenizer=".")
    assert d.max_windows_per_example == 64 and d.max_total_windows == 1_000_000
    feats = convert_examples(read_squad(fixture, "2.0"), tokenizer, **SMALL)
    assert len(feats) > 0
