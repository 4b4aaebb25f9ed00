"""N-gram whole-word masking (ALBERT), NumPy version; the TF version mirrors it step by step.

The rules are those of Google's ALBERT ``create_pretraining_data.py``
(``create_masked_lm_predictions`` with ``do_whole_word_mask=True``,
``favor_shorter_ngram=True``):

* candidates are all real tokens except control/special ones ([CLS], [SEP], <pad>,
  [MASK], <unk>): they are never masked;
* a *word* is a start piece plus the continuation pieces after it (Google's SentencePiece
  rule: a piece starts a word when it begins with "▁", is punctuation, or holds a
  character other than an English letter; ``Tokenizer.word_start_table``). For Japanese,
  Chinese and Thai the starts come from a word segmenter instead, so that a unit is every
  piece overlapping a segmenter's word (:mod:`albertkit.data.segmenters`); masking itself
  only sees ``word_starts``;
* the budget is ``min(max_predictions_per_seq, max(1, round(num_tokens * masked_lm_prob)))``
  tokens, ``num_tokens`` counting [CLS] and [SEP] as Google does;
* masked units are n-grams of whole words, n in 1..max_ngram with P(n) ∝ 1/n;
* each chosen token becomes [MASK] with ``mask_token_prob`` (0.8), a random ordinary token
  with ``random_token_prob`` (0.1), and stays itself otherwise (0.1).

How n-grams are chosen (the one place we differ in procedure, not in rules): Google walks
word positions in random order, draws n for each, and rejects n-grams that overlap earlier
ones, one Python step at a time. That loop cannot run inside ``tf.data``, and dynamic
masking must follow the same procedure as static masking. So both use:

1. cut the word sequence into consecutive spans with lengths drawn i.i.d. from P(n) ∝ 1/n
   (no overlaps by construction);
2. put the spans in uniformly random order and take the longest prefix whose token count
   fits the budget;
3. fill what is left of the budget with shorter n-grams, as Google shortens an n-gram that
   does not fit: for m = max_ngram-1 down to 1, the first m words of each span not yet
   taken, in the same order, skipping those too long for what is left (again a prefix).

Both procedures end up with more short n-grams than P(n) when the budget is small (the
last units must fit what is left); on seq-128 examples the realised n-gram shares of the two
agree within 0.03, and on seq-512 examples ours is within 0.03 of 1/n itself
(``tests/test_data_masking.py`` re-implements Google's loop as the reference). Unlike
Google's script (which draws n from NumPy's global, unseeded generator), every draw comes
from the generator passed in.

Random replacement tokens are drawn uniformly from the *ordinary* vocabulary (all ids but
the special ones); Google drew from the whole vocabulary, control symbols included.

Example:
    >>> info = VocabInfo(vocab_size=100, special_ids={"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4})
    >>> ids = np.array([2, 10, 11, 12, 3, 13, 14, 3])
    >>> out = mask_sequence(ids, word_starts=np.ones(8, bool), info=info, rules=MaskingConfig(),
    ...                     max_predictions=2, rng=np.random.default_rng(0))
    >>> len(out.positions) == 1   # round(8 * 0.15) = 1
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from albertkit.config import MaskingConfig

SPECIAL_NAMES = ("pad", "unk", "cls", "sep", "mask")


@dataclass(frozen=True)
class VocabInfo:
    """What masking needs to know about a vocabulary: its size and the special ids."""

    vocab_size: int
    special_ids: dict[str, int]
    special_table: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        missing = [n for n in SPECIAL_NAMES if n not in self.special_ids]
        if missing:
            raise ValueError(f"special_ids lacks {missing}; needs {list(SPECIAL_NAMES)}")
        bad = {k: v for k, v in self.special_ids.items() if not 0 <= v < self.vocab_size}
        if bad:
            raise ValueError(f"special_ids {bad} outside the vocabulary of size {self.vocab_size}")
        table = np.zeros(self.vocab_size, bool)
        table[list(self.special_ids.values())] = True
        object.__setattr__(self, "special_table", table)

    @property
    def mask_id(self) -> int:
        return self.special_ids["mask"]

    @property
    def sorted_special(self) -> list[int]:
        return sorted(set(self.special_ids.values()))

    def random_ordinary(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` ids uniform over the vocabulary minus the special ids."""
        specials = self.sorted_special
        r = rng.integers(0, self.vocab_size - len(specials), size=n)
        for s in specials:  # ascending: shift past each special id in turn
            r = r + (r >= s)
        return r


def default_max_predictions(seq_length: int, masked_lm_prob: float) -> int:
    """``ceil(masked_lm_prob x seq_length)``: 20 at 128, 77 at 512 (for 0.15)."""
    # round first: 0.15 * 20 is 3.0000000000000004 in floating point, not 4 masked tokens
    return max(1, math.ceil(round(masked_lm_prob * seq_length, 6)))


@lru_cache(maxsize=8)
def ngram_cdf(max_ngram: int) -> np.ndarray:
    """Cumulative P(n) ∝ 1/n for n = 1..max_ngram."""
    p = 1.0 / np.arange(1, max_ngram + 1)
    c = np.cumsum(p / p.sum())
    c[-1] = 1.0
    return c


def num_to_predict(num_tokens: int, masked_lm_prob: float, max_predictions: int) -> int:
    """Google's budget; ``np.rint`` rounds half to even like Python 3's ``round``."""
    return int(min(max_predictions, max(1, int(np.rint(num_tokens * masked_lm_prob)))))


@dataclass
class MaskedSequence:
    """Result of :func:`mask_sequence`; ``span_words`` (words per chosen n-gram) is for tests."""

    input_ids: np.ndarray
    positions: np.ndarray
    labels: np.ndarray
    span_words: np.ndarray


def mask_sequence(
    ids: np.ndarray,
    *,
    word_starts: np.ndarray,
    info: VocabInfo,
    rules: MaskingConfig,
    max_predictions: int,
    rng: np.random.Generator,
) -> MaskedSequence:
    """Mask one unpadded sequence (``[CLS] A [SEP] B [SEP]``).

    Args:
        ids: token ids, real tokens only (no padding).
        word_starts: per position, True when the piece starts a word.
        info: vocabulary size and special ids.
        rules: masking probabilities and max n-gram.
        max_predictions: ``max_predictions_per_seq``.
        rng: the generator every random choice comes from.
    """
    ids = np.asarray(ids)
    n_tok = len(ids)
    cand = ~info.special_table[ids]
    prev = np.concatenate([[False], cand[:-1]])
    starts = cand & (np.asarray(word_starts, bool) | ~prev)
    cand_pos = np.flatnonzero(cand)
    n_words = int(starts.sum())
    budget = num_to_predict(n_tok, rules.masked_lm_prob, max_predictions)
    empty = np.zeros(0, np.int64)
    if n_words == 0:
        return MaskedSequence(ids.copy(), empty, empty, empty)
    word_of = np.cumsum(starts) - 1
    word_tokens = np.bincount(word_of[cand_pos], minlength=n_words)
    word_cum = np.concatenate([[0], np.cumsum(word_tokens)])

    # 1. spans of 1..max_ngram words, lengths i.i.d. with P(n) ∝ 1/n
    span_len = np.searchsorted(ngram_cdf(rules.max_ngram), rng.random(n_words), side="right") + 1
    span_start = np.cumsum(span_len) - span_len
    k = int(np.searchsorted(span_start, n_words))  # spans that start inside the sequence
    span_start = span_start[:k]
    span_end = np.minimum(span_start + span_len[:k], n_words)
    span_tokens = word_cum[span_end] - word_cum[span_start]

    # 2. random order, longest prefix that fits
    order = rng.permutation(k)
    cum = np.cumsum(span_tokens[order])
    n_full = int(np.searchsorted(cum, budget, side="right"))
    taken = np.zeros(k, np.int64)  # words taken from the start of each span
    taken[order[:n_full]] = (span_end - span_start)[order[:n_full]]
    left = budget - (int(cum[n_full - 1]) if n_full else 0)
    # 3. shorter n-grams: the first m words of the following spans, m = max_ngram-1 .. 1
    for m in range(rules.max_ngram - 1, 0, -1):
        if left <= 0:
            break
        rest = order[taken[order] == 0]
        tok_m = word_cum[np.minimum(span_start + m, span_end)] - word_cum[span_start]
        rest = rest[tok_m[rest] <= left]
        n_take = int(np.searchsorted(np.cumsum(tok_m[rest]), left, side="right"))
        pick = rest[:n_take]
        taken[pick] = np.minimum(m, (span_end - span_start)[pick])
        left -= int(tok_m[pick].sum())

    sel = taken > 0
    opens = np.bincount(span_start[sel], minlength=n_words + 1)
    closes = np.bincount(span_start[sel] + taken[sel], minlength=n_words + 1)
    word_chosen = np.cumsum(opens[:n_words] - closes[:n_words]) > 0
    positions = cand_pos[word_chosen[word_of[cand_pos]]]

    out = ids.copy()
    u = rng.random(len(positions))
    to_mask = u < rules.mask_token_prob
    to_random = ~to_mask & (u < rules.mask_token_prob + rules.random_token_prob)
    out[positions[to_mask]] = info.mask_id
    out[positions[to_random]] = info.random_ordinary(rng, int(to_random.sum()))
    return MaskedSequence(
        out, positions.astype(np.int64), ids[positions].astype(np.int64), taken[sel]
    )
