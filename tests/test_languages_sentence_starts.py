"""Acceptance: in Japanese and Chinese data, segment B of a sentence-order pair starts at a
sentence start at a rate within 10 points of English (or above it), under the same rule.

ALBERT's sentence-order prediction swaps two runs of whole sentences; a segment B that starts
in the middle of a sentence (its sentence was not found, or the pair was cut at the front)
teaches less. ``prepare_pretraining_data`` (dynamic masking, so the records hold the unmasked
ids) runs on

* Japanese and Chinese: the hand-checked sets under ``tests/fixtures/languages/`` (one
  paragraph = one document),
* English: sentences of Python's own documentation (``pydoc_data.topics``), five to a
  document like the other two sets, as many documents as both together,

and counts the segments B whose first pieces are the first three pieces of one of the
corpus's true sentences, each tokenised on its own as prepare-data tokenises a sentence.
``pytest -s tests/test_languages_sentence_starts.py`` prints the rates (docs/data.md quotes
them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from albertkit.data.protobuf import decode_varint, fields
from albertkit.data.tfrecord import read_records
from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data

FIXTURES = Path(__file__).parent / "fixtures" / "languages"


def fixture_documents(code: str) -> list[list[str]]:
    docs, current = [], []
    text = (FIXTURES / f"sentences_{code}.txt").read_text(encoding="utf-8")
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if line.strip():
            current.append(line.strip())
        elif current:
            docs.append(current)
            current = []
    return docs


def english_documents(n_docs: int, per_doc: int = 5) -> list[list[str]]:
    from pydoc_data import topics

    from albertkit.data.sentences import split_sentences

    prose = [s for name in sorted(topics.topics)
             for s in split_sentences(topics.topics[name]) if 20 <= len(s) <= 300]
    return [prose[i : i + per_doc] for i in range(0, per_doc * n_docs, per_doc)]


def input_ids(record: bytes) -> list[int]:
    """The ``input_ids`` of a ``tf.train.Example``, read with the wire format alone:
    Example.features (1) -> map entries (key 1, Feature 2) -> int64_list (3) -> packed (1)."""
    [features] = [f.value for f in fields(record) if f.number == 1]
    for entry in fields(features):
        parts = {f.number: f.value for f in fields(entry.value)}
        if parts[1] == b"input_ids":
            [kind] = list(fields(parts[2]))
            [packed] = [f.value for f in fields(kind.value) if f.number == 1]
            values, i = [], 0
            while i < len(packed):
                v, i = decode_varint(packed, i)
                values.append(v)
            return values
    raise AssertionError("no input_ids in the record")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """language -> (its documents as sentences, corpus file, tokenizer trained on it)."""
    work = tmp_path_factory.mktemp("starts")
    ja, zh = fixture_documents("ja"), fixture_documents("zh")
    out = {}
    for code, docs in (("en", english_documents(len(ja) + len(zh))), ("ja", ja), ("zh", zh)):
        joiner = " " if code == "en" else ""
        lines = [joiner.join(d) for d in docs]
        corpus = work / f"{code}.txt"
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        chars = len(set("".join(lines)))
        tok = train_tokenizer([corpus], work / f"tok-{code}", TokenizerConfig(
            vocab_size=max(chars + 40, 400), num_threads=1, character_coverage=1.0,
            input_sentence_size=10**6, word_segmenter="none"))
        out[code] = (docs, corpus, tok)
    return out


def b_at_sentence_start(code, corpora, work: Path, seq_length: int) -> tuple[float, int]:
    """(share of segments B that start a true sentence, sentences prepare-data found)."""
    docs, corpus, tok = corpora[code]
    out = work / f"data-{code}"
    # English: Google's rule, its default; Japanese and Chinese: no segmenter (an optional
    # extra), the language is what this measures
    cfg = PretrainingDataConfig(inputs=[str(corpus)], language=code, seq_length=seq_length,
                                masking="dynamic", dupe_factor=5, num_shards=1, seed=1,
                                word_segmenter="whitespace" if code == "en" else "none")
    prepare_pretraining_data(cfg, tok, out, num_workers=1, progress=False, keep_work=True)
    found = len(np.load(out / ".work" / "tok-00000.sent.npy"))
    prefixes = {tuple(tok.encode(s)[:3]) for d in docs for s in d}
    hits = total = 0
    for record in read_records(next(out.glob("train-*.tfrecord"))):
        ids = input_ids(record)
        seps = [i for i, t in enumerate(ids) if t == tok.sep_id]
        b = ids[seps[0] + 1 : seps[1]]
        total += 1
        hits += tuple(b[:3]) in prefixes or any(tuple(b) == p for p in prefixes if len(p) < 3)
    return hits / max(total, 1), found


@pytest.mark.parametrize("seq_length", [128, 64])
def test_segments_b_start_sentences_like_english(corpora, tmp_path, seq_length):
    rates = {}
    for code in ("en", "ja", "zh"):
        rates[code], found = b_at_sentence_start(code, corpora, tmp_path, seq_length)
        if code != "en":
            assert found == sum(len(d) for d in corpora[code][0]) == 205, code
    print(f"\nseq {seq_length}, dupe factor 5: segments B at a sentence start: "
          + ", ".join(f"{c} {100 * r:.1f}%" for c, r in rates.items()))
    assert 0.2 < rates["en"] < 0.9  # front truncation keeps English away from both ends
    for code in ("ja", "zh"):
        assert rates[code] >= rates["en"] - 0.10, rates
