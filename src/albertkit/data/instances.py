"""Sentence-order pairs from one document, with the semantics of Google's ALBERT
``create_instances_from_document``.

* The target length is ``seq_length - 3`` (room for [CLS], [SEP], [SEP]); with probability
  ``short_seq_prob`` it is drawn uniformly from ``2 .. seq_length - 3`` instead, once per
  document (so pretraining also sees short inputs, as fine-tuning will).
* Sentences are gathered into a chunk until the target is reached or the document ends;
  a random split point ``a_end`` in ``1 .. len(chunk) - 1`` makes segment A (sentences
  before) and B (after).
* SOP: with probability 0.5 A and B are swapped; the label is 1 for swapped, 0 for in order
  (``next_sentence_labels`` in the feature format, as in Google's files).
* The longer segment is truncated one token at a time, from the front or the back with
  probability 0.5 each, until the pair fits (``truncate_seq_pair``). The number of front
  cuts is drawn as one binomial, which is the same distribution without the per-token loop.

Deviation, on purpose: when a chunk holds a single sentence, Google pairs it with text from
a *random other document* and labels it 1 (a left-over of BERT's next-sentence task). That
makes label 1 partly mean "different document", which SOP is meant to avoid, and needs every
document in memory at once. albertkit instead splits that sentence at a random word start
(any position if it has no inner word start) and then applies the same swap rule; a
sentence of one token is skipped.

Word starts come either from a table over piece ids (``word_start_table``: Google's rule on
the pieces, or all pieces for single-piece masking) or per position of each sentence
(``word_starts``: from a word segmenter, :mod:`albertkit.data.segmenters`). Each pair
carries them per position (``PairExample.word_starts``, what masking and the dynamic files'
``token_boundary`` use); with a table they are ``table[input_ids]``, [CLS] and [SEP]
included, and with per-sentence starts [CLS] and [SEP] count as word starts.

Example:
    >>> rng = np.random.default_rng(0)
    >>> doc = [np.array([10, 11, 12]), np.array([13, 14]), np.array([15, 16, 17])]
    >>> pairs = create_pairs(doc, seq_length=16, short_seq_prob=0.0,
    ...                      word_start_table=np.ones(20, bool), cls_id=2, sep_id=3, rng=rng)
    >>> int(pairs[0].input_ids[0]), bool(pairs[0].input_ids[-1] == 3)
    (2, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class PairExample:
    """``[CLS] A [SEP] B [SEP]`` (unpadded), segment ids, the SOP label and, per position,
    whether the piece starts a word."""

    input_ids: np.ndarray
    segment_ids: np.ndarray
    sop_label: int
    word_starts: np.ndarray


def truncated_lengths(len_a: int, len_b: int, max_tokens: int) -> tuple[int, int]:
    """Final lengths after Google's loop (cut the longer one; on a tie cut B)."""
    excess = len_a + len_b - max_tokens
    if excess <= 0:
        return len_a, len_b
    gap = abs(len_a - len_b)
    if gap >= excess:
        return (len_a - excess, len_b) if len_a > len_b else (len_a, len_b - excess)
    rest = excess - gap
    level = min(len_a, len_b)
    return level - rest // 2, level - (rest + 1) // 2


def _cut(length: int, keep: int, rng: np.random.Generator) -> slice:
    removed = length - keep
    if removed <= 0:
        return slice(0, length)
    front = int(rng.binomial(removed, 0.5))
    return slice(front, front + keep)


def create_pairs(
    document: Sequence[np.ndarray],
    *,
    seq_length: int,
    short_seq_prob: float,
    cls_id: int,
    sep_id: int,
    rng: np.random.Generator,
    word_start_table: np.ndarray | None = None,
    word_starts: Sequence[np.ndarray] | None = None,
) -> list[PairExample]:
    """All SOP pairs of one document (a list of tokenised sentences); word starts from
    ``word_start_table`` (per piece id) or ``word_starts`` (per sentence, per position)."""
    if (word_start_table is None) == (word_starts is None):
        raise ValueError("create_pairs: give word_start_table or word_starts (one of them)")
    if word_starts is None:
        word_starts = [word_start_table[s] for s in document]
        special = (bool(word_start_table[cls_id]), bool(word_start_table[sep_id]))
    else:
        special = (True, True)
    max_tokens = seq_length - 3
    target = max_tokens
    if rng.random() < short_seq_prob:
        target = int(rng.integers(2, max_tokens + 1))
    out: list[PairExample] = []
    chunk: list[int] = []  # sentence indices
    length = 0
    n = len(document)
    for i, sentence in enumerate(document):
        chunk.append(i)
        length += len(sentence)
        if i < n - 1 and length < target:
            continue
        if len(chunk) >= 2:
            a_end = int(rng.integers(1, len(chunk)))
            tokens_a = np.concatenate([document[j] for j in chunk[:a_end]])
            tokens_b = np.concatenate([document[j] for j in chunk[a_end:]])
            starts_a = np.concatenate([word_starts[j] for j in chunk[:a_end]])
            starts_b = np.concatenate([word_starts[j] for j in chunk[a_end:]])
        else:
            only, only_starts = document[chunk[0]], np.asarray(word_starts[chunk[0]], bool)
            if len(only) < 2:
                chunk, length = [], 0
                continue
            inner = np.flatnonzero(only_starts[1:]) + 1
            cut = (
                int(inner[rng.integers(len(inner))])
                if len(inner)
                else int(rng.integers(1, len(only)))
            )
            tokens_a, tokens_b = only[:cut], only[cut:]
            starts_a, starts_b = only_starts[:cut], only_starts[cut:]
        label = 0
        if rng.random() < 0.5:
            tokens_a, tokens_b = tokens_b, tokens_a
            starts_a, starts_b = starts_b, starts_a
            label = 1
        keep_a, keep_b = truncated_lengths(len(tokens_a), len(tokens_b), max_tokens)
        cut_a = _cut(len(tokens_a), keep_a, rng)
        cut_b = _cut(len(tokens_b), keep_b, rng)
        tokens_a, starts_a = tokens_a[cut_a], starts_a[cut_a]
        tokens_b, starts_b = tokens_b[cut_b], starts_b[cut_b]
        ids = np.concatenate([[cls_id], tokens_a, [sep_id], tokens_b, [sep_id]]).astype(np.int32)
        starts = np.concatenate(
            [[special[0]], starts_a, [special[1]], starts_b, [special[1]]]).astype(bool)
        segment_ids = np.zeros(len(ids), np.int32)
        segment_ids[len(tokens_a) + 2 :] = 1
        out.append(PairExample(ids, segment_ids, label, starts))
        chunk, length = [], 0
    return out
