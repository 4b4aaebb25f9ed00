"""Tagged sentences: reading them and aligning word tags to word pieces (the batches the
trainer asks for are albertkit's, :class:`albertkit.data.ExampleData`).

Alignment: a sentence becomes ``[CLS] pieces of word 1 ... pieces of word n [SEP]``, each
word encoded on its own (SentencePiece marks its start, so this is how the sentence would be
split anyway). A word's tag is the label of its *first* piece; the other pieces, [CLS],
[SEP] and padding get ``label_mask`` 0 and count in neither the loss nor the metrics. A word
that yields no piece, or that falls past ``max_seq_length``, has no position: evaluation
predicts ``O`` for it, so the entity F1 is always over every word of the file.

Text written without spaces (Japanese, Chinese, Thai; ``spaced=False``): the words, or the
characters when the tags are given per character, are joined without spaces and the
sentence is encoded once, as pretraining saw such text. A word's tag goes to the first
piece that overlaps its characters (the tokenizer's offsets,
:func:`albertkit.data.piece_spans`); a word whose first characters share a piece with the
word before it shares that piece's position (and its prediction).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from albertkit.errors import DatasetError

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")
FEATURES = (*MODEL_INPUTS, "labels", "label_mask")


@dataclass(frozen=True)
class Sentence:
    """One tagged sentence: its words and their BIO tags."""

    tokens: tuple[str, ...]
    tags: tuple[str, ...]


# --------------------------------------------------------------------------- reading
def read_sentences(path: str | Path, format: str = "auto") -> list[Sentence]:
    """The sentences of a JSONL or CoNLL file; a bad line raises ``DatasetError`` naming
    the file and line."""
    path = Path(path)
    if format == "auto":
        format = "jsonl" if path.suffix in (".jsonl", ".json") else "conll"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DatasetError(f"{path}: cannot read the tagging file ({e.strerror})") from None
    rows = _jsonl(path, text) if format == "jsonl" else _conll(path, text)
    sentences = []
    for line, tokens, tags in rows:
        if len(tokens) != len(tags):
            raise DatasetError(f"{path}:{line}: {len(tokens)} tokens but {len(tags)} tags")
        for tag in tags:
            if tag != "O" and not (tag[:2] in ("B-", "I-") and len(tag) > 2):
                raise DatasetError(f"{path}:{line}: tag {tag!r} is not O, B-TYPE or I-TYPE")
        sentences.append(Sentence(tuple(tokens), tuple(tags)))
    if not sentences:
        raise DatasetError(f"{path}: no sentences")
    return sentences


def _jsonl(path: Path, text: str) -> Iterator[tuple[int, list[str], list[str]]]:
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            tokens, tags = row["tokens"], row["tags"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise DatasetError(f"{path}:{n}: not a {{\"tokens\": [...], \"tags\": [...]}} "
                               f"object ({type(e).__name__}: {e})") from None
        if not (isinstance(tokens, list) and isinstance(tags, list)
                and all(isinstance(x, str) for x in tokens + tags)):
            raise DatasetError(f"{path}:{n}: tokens and tags must be lists of strings")
        yield n, tokens, tags


def _conll(path: Path, text: str) -> Iterator[tuple[int, list[str], list[str]]]:
    tokens: list[str] = []
    tags: list[str] = []
    start = 1
    for n, line in enumerate([*text.splitlines(), ""], 1):
        parts = line.split()
        if not parts:
            if tokens:
                yield start, tokens, tags
            tokens, tags, start = [], [], n + 1
            continue
        if parts[0] == "-DOCSTART-":
            continue
        if len(parts) < 2:
            raise DatasetError(f"{path}:{n}: expected 'token TAG', got {line.strip()!r}")
        tokens.append(parts[0])
        tags.append(parts[-1])


def infer_labels(sentences: Sequence[Sentence]) -> list[str]:
    """``O``, then for each entity type (sorted) its ``B-`` and ``I-`` tag."""
    types = sorted({tag[2:] for s in sentences for tag in s.tags if tag != "O"})
    return ["O", *(f"{p}-{t}" for t in types for p in ("B", "I"))]


# --------------------------------------------------------------------------- features
@dataclass
class Encoded:
    """Feature arrays ``[N, L]`` plus, per sentence, the position of each word's first
    piece (-1: the word has none inside the sequence)."""

    arrays: dict[str, np.ndarray]
    word_positions: list[list[int]]
    sentences: list[Sentence]


def encode(sentences: Sequence[Sentence], tokenizer, labels: Sequence[str],
           max_seq_length: int, spaced: bool = True) -> Encoded:
    """Token ids, masks and first-piece labels for ``sentences`` (``tokenizer`` is an
    :class:`albertkit.data.Tokenizer`); ``spaced=False``: words joined without spaces and
    mapped through the tokenizer's offsets."""
    if not spaced:
        return _encode_unspaced(sentences, tokenizer, labels, max_seq_length)
    index = {tag: i for i, tag in enumerate(labels)}
    n, length = len(sentences), max_seq_length
    ids = np.full((n, length), tokenizer.pad_id, np.int32)
    mask = np.zeros((n, length), np.int32)
    label_ids = np.zeros((n, length), np.int32)
    label_mask = np.zeros((n, length), np.float32)
    positions: list[list[int]] = []
    for row, sentence in enumerate(sentences):
        pieces = [tokenizer.cls_id]
        where = []
        for word, tag in zip(sentence.tokens, sentence.tags, strict=True):
            if tag not in index:
                raise DatasetError(f"tag {tag!r} is not one of the labels {list(labels)}")
            word_ids = tokenizer.encode(word)
            if not word_ids or len(pieces) + len(word_ids) > length - 1:
                where.append(-1)
                continue
            where.append(len(pieces))
            label_ids[row, len(pieces)] = index[tag]
            label_mask[row, len(pieces)] = 1.0
            pieces += word_ids
        pieces.append(tokenizer.sep_id)
        ids[row, : len(pieces)] = pieces
        mask[row, : len(pieces)] = 1
        positions.append(where)
    arrays = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
              "labels": label_ids, "label_mask": label_mask}
    return Encoded(arrays, positions, list(sentences))


def _encode_unspaced(sentences: Sequence[Sentence], tokenizer, labels: Sequence[str],
                     max_seq_length: int) -> Encoded:
    from albertkit.data import piece_spans

    index = {tag: i for i, tag in enumerate(labels)}
    n, length = len(sentences), max_seq_length
    ids = np.full((n, length), tokenizer.pad_id, np.int32)
    mask = np.zeros((n, length), np.int32)
    label_ids = np.zeros((n, length), np.int32)
    label_mask = np.zeros((n, length), np.float32)
    positions: list[list[int]] = []
    for row, sentence in enumerate(sentences):
        for tag in sentence.tags:
            if tag not in index:
                raise DatasetError(f"tag {tag!r} is not one of the labels {list(labels)}")
        words = [tokenizer.normalize(w) for w in sentence.tokens]
        text = "".join(words)
        if tokenizer.normalize(text) != text:  # a word with inner spaces: keep them as one
            text = tokenizer.normalize(text)
        piece_ids, spans = piece_spans(tokenizer, text)
        piece_ids = piece_ids[: length - 2]
        where = []
        at = k = 0  # next character to look for a word at; first piece that may overlap it
        for word, tag in zip(words, sentence.tags, strict=True):
            found = text.find(word, at) if word else -1
            if found < 0:
                where.append(-1)
                continue
            start, end = found, found + len(word)
            at = end
            while k < len(piece_ids) and (spans[k][1] <= start or spans[k][0] == spans[k][1]):
                k += 1
            if k == len(piece_ids) or spans[k][0] >= end:
                where.append(-1)  # past max_seq_length
                continue
            first = k
            where.append(first + 1)
            if not label_mask[row, first + 1]:  # a shared piece keeps the first word's tag
                label_ids[row, first + 1] = index[tag]
                label_mask[row, first + 1] = 1.0
        pieces = [tokenizer.cls_id, *piece_ids, tokenizer.sep_id]
        ids[row, : len(pieces)] = pieces
        mask[row, : len(pieces)] = 1
        positions.append(where)
    arrays = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
              "labels": label_ids, "label_mask": label_mask}
    return Encoded(arrays, positions, list(sentences))


def decode_tags(logits: np.ndarray, encoded: Encoded, labels: Sequence[str]) -> list[list[str]]:
    """Each sentence's predicted tag per word: the arg-max at its first piece (``O`` for a
    word without a position)."""
    best = np.asarray(logits).argmax(axis=-1)
    return [[labels[best[row, p]] if p >= 0 else "O" for p in where]
            for row, where in enumerate(encoded.word_positions)]
