"""Tags of Japanese text, given per word or per character, mapped to pieces through the
tokenizer's offsets (``spaced=False``)."""

from __future__ import annotations

import numpy as np
import pytest
from albertkit_tagging.config import BioTaggingData
from albertkit_tagging.data import Sentence, decode_tags, encode

from albertkit.data import TokenizerConfig, piece_spans, train_tokenizer

TEXT = ["東京でガスが漏れた。", "大阪の山田さんはジャガイモを食べます。", "京都の祭りに行った。",
        "山田さんは東京から京都まで新幹線で行った。", "ガスの会社は大阪にあります。"]
WORDS = [  # MeCab/UniDic words, tagged by hand
    (["東京", "で", "ガス", "が", "漏れ", "た", "。"],
     ["B-LOC", "O", "O", "O", "O", "O", "O"]),
    (["大阪", "の", "山田", "さん", "は", "ジャガイモ", "を", "食べ", "ます", "。"],
     ["B-LOC", "O", "B-PER", "O", "O", "O", "O", "O", "O", "O"]),
    (["山田", "さん", "は", "東京", "から", "京都", "まで", "新幹線", "で", "行っ", "た", "。"],
     ["B-PER", "O", "O", "B-LOC", "O", "B-LOC", "O", "O", "O", "O", "O", "O"]),
]
LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    # pieces learnt inside MeCab's words (the albertkit[ja] extra): no piece crosses a word
    return train_tokenizer(None, tmp_path_factory.mktemp("tok") / "tok",
                           TokenizerConfig(vocab_size=55, keep_accents=True, num_threads=1,
                                           word_segmenter="fugashi"),
                           sentences=TEXT * 5)


def _per_character(words, tags):
    chars, out = [], []
    for word, tag in zip(words, tags, strict=True):
        for i, ch in enumerate(word):
            chars.append(ch)
            out.append(tag if i == 0 or tag == "O" else "I-" + tag[2:])
    return chars, out


@pytest.mark.parametrize("per", ["word", "character"])
def test_tags_go_to_the_first_piece_overlapping_each_word(tokenizer, per):
    sentences = [Sentence(*map(tuple, w if per == "word" else _per_character(*w)))
                 for w in WORDS]
    enc = encode(sentences, tokenizer, LABELS, 32, spaced=False)
    for row, s in enumerate(sentences):
        text = "".join(s.tokens)
        ids, spans = piece_spans(tokenizer, text)
        # the sentence is encoded as raw text, the way pretraining saw it: no "▁" per word
        assert enc.arrays["input_ids"][row, 1 : 1 + len(ids)].tolist() == ids
        assert ids == tokenizer.encode(text)
        at = 0
        for word, tag, pos in zip(s.tokens, s.tags, enc.word_positions[row], strict=True):
            start, end = at, at + len(word)
            at = end
            ps, pe = spans[pos - 1]
            assert ps < end and pe > start  # the piece overlaps the word ...
            earlier = [i for i, (a, b) in enumerate(spans) if a < b and b <= start]
            assert pos - 1 > max(earlier, default=-1)  # ... and is the first that does
            if enc.arrays["label_mask"][row, pos]:
                assert LABELS[enc.arrays["labels"][row, pos]] in (tag, "O", "B-" + tag[2:])
    # word tags with pieces inside words: each word has a piece of its own, so the gold
    # tags come back exactly through the positions
    if per == "word":
        logits = np.zeros((*enc.arrays["input_ids"].shape, len(LABELS)))
        for row in range(len(sentences)):
            for t in range(32):
                logits[row, t, enc.arrays["labels"][row, t]] = 1.0
        assert decode_tags(logits, enc, LABELS) == [list(s.tags) for s in sentences]
        n_words = sum(len(s.tokens) for s in sentences)
        assert enc.arrays["label_mask"].sum() == n_words


def test_words_past_the_length_have_no_position(tokenizer):
    s = Sentence(*map(tuple, WORDS[2]))
    enc = encode([s], tokenizer, LABELS, 8, spaced=False)
    where = enc.word_positions[0]
    first_piece = tokenizer.id_to_piece(int(enc.arrays["input_ids"][0, where[0]]))
    assert first_piece.lstrip("\u2581") and where[-1] == -1  # a bare "▁" takes no tag
    assert max(where) <= 6 and enc.arrays["input_ids"][0, 7] == tokenizer.sep_id
    assert BioTaggingData(train_file="x.jsonl", spaced=False).spaced is False
