"""SQuAD v1.1 / v2.0: the official JSON reader and the conversion to model features.

Reader: the official format (``{"version", "data": [{"title", "paragraphs": [{"context",
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}``).
Every problem is an error naming the file, the record path (``data[a].paragraphs[p].qas[q]``)
and the question id.

Features follow Google's BERT/ALBERT ``run_squad.py``: ``[CLS] question [SEP] context-window
[SEP]`` with segment ids 0 / 1, the question truncated to ``max_query_length`` tokens, long
contexts cut into windows of ``max_seq_length - len(question) - 3`` tokens that start every
``doc_stride`` tokens. Unlike the original (whitespace split + WordPiece + a character map),
answers are mapped to tokens through the tokenizer's character offsets: the token holding the
answer's first character and the last token that starts before its end. A
window that does not contain the whole answer, and every unanswerable (v2.0) question, points
at ``[CLS]`` (position 0). For post-processing, each feature keeps the character span of every
context token and whether the token has its maximal context in this window (a token seen in
several windows is only used where it has the most words around it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.errors import SquadFormatError
from albertkit.fileio import read_json

log = logging.getLogger(__name__)

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "start_positions", "end_positions")
# Bounds on the windows a file may ask for (the config's data.max_windows_per_example and
# data.max_total_windows). SQuAD 2.0's training set needs about 132,000 windows at 384/128
# and no question more than a dozen; a window costs about _WINDOW_KB KB of features.
DEFAULT_MAX_WINDOWS_PER_EXAMPLE = 64
DEFAULT_MAX_TOTAL_WINDOWS = 1_000_000
_WINDOW_KB = 11


@dataclass(frozen=True)
class SquadAnswer:
    """One gold answer: its text and the character offset where it starts in the context."""

    text: str
    start: int

    @property
    def end(self) -> int:  # exclusive
        return self.start + len(self.text)


@dataclass
class SquadExample:
    """One question about one context.

    Attributes:
        qid: the question id (keys of ``predictions.json``).
        question: the question text.
        context: the paragraph.
        answers: gold answers (empty for an unanswerable v2.0 question).
        is_impossible: v2.0's "no answer in the context" flag.
        where: ``file: data[a].paragraphs[p].qas[q]`` for messages.
    """

    qid: str
    question: str
    context: str
    answers: list[SquadAnswer]
    is_impossible: bool = False
    where: str = ""


# --------------------------------------------------------------------------- reading
def read_squad_json(path: str | Path) -> dict[str, Any]:
    """Parse a SQuAD JSON file; malformed JSON is an error naming file, line and column."""
    path = Path(path)
    raw = read_json(path, "SQuAD file", SquadFormatError)
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), list):
        raise SquadFormatError(
            f"{path}: expected a JSON object with a 'data' list (the official SQuAD format)"
        )
    return raw


def _get(record: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(record, Mapping):
        raise SquadFormatError(f"{where}: expected an object, got {type(record).__name__}")
    if name not in record:
        raise SquadFormatError(f"{where}: missing field {name!r}")
    value = record[name]
    # bool is an int subclass; an answer_start of `true` is still wrong
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SquadFormatError(
            f"{where}: field {name!r} must be {names}, got {type(value).__name__} {value!r:.60}"
        )
    return value


def parse_squad(raw: Mapping[str, Any], version: str, source: str = "<data>") -> list[SquadExample]:
    """Validate a parsed SQuAD JSON object and return its questions.

    Args:
        raw: the parsed file (``{"data": [...]}``).
        version: ``"1.1"`` (every question answerable) or ``"2.0"`` (``is_impossible``).
        source: the file name used in messages.
    """
    if version not in ("1.1", "2.0"):
        raise SquadFormatError(f"unknown SQuAD version {version!r} (expected '1.1' or '2.0')")
    examples: list[SquadExample] = []
    seen: dict[str, str] = {}
    for a, article in enumerate(_get(raw, "data", list, source)):
        for p, para in enumerate(_get(article, "paragraphs", list, f"{source}: data[{a}]")):
            pwhere = f"{source}: data[{a}].paragraphs[{p}]"
            context = _get(para, "context", str, pwhere)
            for q, qa in enumerate(_get(para, "qas", list, pwhere)):
                where = f"{pwhere}.qas[{q}]"
                qid = str(_get(qa, "id", (str, int), where))
                where = f"{where} (id={qid})"
                if qid in seen:
                    raise SquadFormatError(
                        f"{where}: duplicate question id, first seen at {seen[qid]}"
                    )
                seen[qid] = where
                question = _get(qa, "question", str, where)
                impossible = bool(qa.get("is_impossible", False))
                if not isinstance(qa.get("is_impossible", False), bool):
                    raise SquadFormatError(
                        f"{where}: field 'is_impossible' must be true/false, "
                        f"got {qa['is_impossible']!r}"
                    )
                answers = [
                    _answer(ans, context, f"{where}.answers[{i}]")
                    for i, ans in enumerate(_get(qa, "answers", list, where))
                ]
                if impossible and version == "1.1":
                    raise SquadFormatError(
                        f"{where}: is_impossible=true in a SQuAD v1.1 dataset "
                        "(set data.version: '2.0')"
                    )
                if impossible and answers:
                    raise SquadFormatError(
                        f"{where}: is_impossible=true but 'answers' is not "
                        "empty (put them in 'plausible_answers')"
                    )
                if not impossible and not answers:
                    raise SquadFormatError(
                        f"{where}: no answers (an unanswerable v2.0 question "
                        "needs is_impossible=true)"
                    )
                examples.append(SquadExample(qid, question, context, answers, impossible, where))
    return examples


def _answer(record: Any, context: str, where: str) -> SquadAnswer:
    text = _get(record, "text", str, where)
    start = _get(record, "answer_start", int, where)
    if not text.strip():
        raise SquadFormatError(f"{where}: empty answer text")
    if start < 0 or start + len(text) > len(context):
        raise SquadFormatError(
            f"{where}: answer_start={start} with text length {len(text)} lies outside the "
            f"context ({len(context)} characters)"
        )
    found = context[start : start + len(text)]
    if found != text:
        raise SquadFormatError(
            f"{where}: answer text {text!r:.60} does not match the context at answer_start="
            f"{start} ({found!r:.60})"
        )
    return SquadAnswer(text, start)


def read_squad(path: str | Path, version: str) -> list[SquadExample]:
    """Read and validate an official SQuAD v1.1/v2.0 JSON file.

    Example:
        >>> import json
        >>> qas = [{"id": "q1", "question": "What does it train?", "is_impossible": False,
        ...         "answers": [{"text": "ALBERT models", "answer_start": 17}]},
        ...        {"id": "q2", "question": "Who wrote it?", "is_impossible": True, "answers": []}]
        >>> paragraph = {"context": "albertkit trains ALBERT models.", "qas": qas}
        >>> squad = {"version": "v2.0", "data": [{"title": "Kit", "paragraphs": [paragraph]}]}
        >>> _ = Path("dev-v2.0.json").write_text(json.dumps(squad))
        >>> examples = read_squad("dev-v2.0.json", version="2.0")
        >>> [(e.qid, e.is_impossible, [a.text for a in e.answers]) for e in examples]
        [('q1', False, ['ALBERT models']), ('q2', True, [])]
    """
    return parse_squad(read_squad_json(path), version, source=str(path))


def _special_ids(tokenizer) -> tuple[int, int, int]:
    ids = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
    if any(i is None for i in ids):
        raise ValueError("the tokenizer lacks [CLS], [SEP] or <pad> tokens")
    return ids  # type: ignore[return-value]


# --------------------------------------------------------------------------- features
@dataclass
class SquadFeatures:
    """Model inputs for a list of examples, one row per window (columnar NumPy).

    Attributes:
        arrays: ``FEATURE_NAMES`` -> int32 arrays ``[N, L]`` (positions ``[N]``).
        example_index: ``[N]`` index of each window's example in ``examples``.
        token_spans: ``[N, L, 2]`` int32 character span of each context token in its
            example's context; ``-1`` for question, special and padding tokens.
        max_context: ``[N, L]`` bool, the token has its maximal context in this window.
        examples: the examples the windows came from.

    ``token_spans``/``max_context`` are only needed to post-process predictions; training
    features are built without them (``with_spans=False``: shape ``[0, L, 2]`` / ``[0, L]``).
    """

    arrays: dict[str, np.ndarray]
    example_index: np.ndarray
    token_spans: np.ndarray
    max_context: np.ndarray
    examples: list[SquadExample] = field(repr=False)

    def __len__(self) -> int:
        return int(self.example_index.shape[0])

    def answer_text(self, row: int, start: int, end: int) -> str:
        """Context text covered by token positions ``start..end`` (inclusive) of window ``row``."""
        ctx = self.examples[int(self.example_index[row])].context
        return ctx[self.token_spans[row, start, 0] : self.token_spans[row, end, 1]]


def _windows(n_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of the context windows, as Google's ``run_squad.py`` cuts them."""
    spans, start = [], 0
    while True:
        length = min(n_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length >= n_tokens:
            return spans
        start += min(length, stride)


def _max_context(spans: Sequence[tuple[int, int]], n_tokens: int) -> np.ndarray:
    """For each context token, the window where ``min(left, right) + 0.01 * length`` is best."""
    best = np.full(n_tokens, -1, np.int64)
    best_score = np.full(n_tokens, -np.inf)
    for w, (start, length) in enumerate(spans):
        pos = np.arange(start, start + length)
        score = np.minimum(pos - start, start + length - 1 - pos) + 0.01 * length
        better = score > best_score[pos]  # strict: the first window wins ties, as in Google's
        best_score[pos[better]] = score[better]
        best[pos[better]] = w
    return best


def _char_to_token_span(spans: np.ndarray, start: int, end: int) -> tuple[int, int] | None:
    """Inclusive token range covering characters ``[start, end)``; None if no token does.

    SentencePiece may emit a lone "▁" piece before a word; with trimmed offsets it claims the
    word's first character too. Of the tokens covering ``start`` the last one is taken, so a
    window that begins right after such a "▁" still holds the whole answer.
    """
    nonempty = spans[:, 1] > spans[:, 0]
    covering = np.nonzero(nonempty & (spans[:, 0] <= start) & (spans[:, 1] > start))[0]
    first = covering[-1:] if len(covering) else np.nonzero(nonempty & (spans[:, 1] > start))[0]
    last = np.nonzero(nonempty & (spans[:, 0] < end))[0]
    if not len(first) or not len(last) or last[-1] < first[0]:
        return None
    return int(first[0]), int(last[-1])


def _plan_windows(
    examples: Sequence[SquadExample],
    ctx_of: Mapping[str, tuple[list[int], np.ndarray]],
    q_ids: Sequence[Sequence[int]],
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    max_per_example: int | None,
    max_total: int | None,
    source: str,
) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """Each example's truncated question and window spans, checked against the limits
    before a single feature array exists."""
    plans = []
    total = 0
    for ei, ex in enumerate(examples):
        n_doc = len(ctx_of[ex.context][0])
        query = list(q_ids[ei][:max_query_length])
        max_doc = max_seq_length - len(query) - 3
        if max_doc <= 0:
            raise ValueError(
                f"max_seq_length={max_seq_length} leaves no room for the context after a "
                f"{len(query)}-token question"
            )
        # the count first, from arithmetic alone: a context of millions of tokens must not
        # build its span list before being refused
        n = _window_count(n_doc, max_doc, doc_stride)
        if max_per_example is not None and n > max_per_example:
            raise SquadFormatError(
                f"{ex.where or source}: the {n_doc}-token context needs {n} windows of "
                f"max_seq_length={max_seq_length} every doc_stride={doc_stride} tokens, more "
                f"than data.max_windows_per_example={max_per_example}; shorten the context "
                "or raise the limit"
            )
        total += n
        if max_total is not None and total > max_total:
            raise SquadFormatError(
                f"{source}: more than data.max_total_windows={max_total} windows of "
                f"{max_seq_length} tokens (reached at question {ei + 1} of {len(examples)}, "
                f"{ex.where}); each takes about {_WINDOW_KB} KB: split the file or raise "
                "the limit"
            )
        windows = _windows(n_doc, max_doc, doc_stride)
        plans.append((query, windows))
    return plans


def _window_count(n_tokens: int, max_tokens: int, stride: int) -> int:
    """``len(_windows(n_tokens, max_tokens, stride))`` without building the list."""
    if n_tokens <= max_tokens:
        return 1
    step = min(max_tokens, stride)
    return 1 + -(-(n_tokens - max_tokens) // step)


def convert_squad_examples(
    examples: Sequence[SquadExample],
    tokenizer,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    progress: bool = False,
    with_spans: bool = True,
    max_windows_per_example: int | None = DEFAULT_MAX_WINDOWS_PER_EXAMPLE,
    max_total_windows: int | None = DEFAULT_MAX_TOTAL_WINDOWS,
    source: str = "<examples>",
) -> SquadFeatures:
    """Tokenize and window ``examples`` (see the module docstring for the layout).

    Gold positions come from each example's first answer (SQuAD training sets have one).
    ``with_spans=False`` skips the post-processing arrays (3 KB per 384-token window).

    Every question gets its own windows over its context, so a small file with a long
    context and many questions asks for a great many windows (about 8-11 KB each). They are
    counted before any is built: more than ``max_windows_per_example`` for one question or
    ``max_total_windows`` in all is a :class:`SquadFormatError` naming the record (or
    ``source``) and the limit (``None`` = no limit).
    """
    from tqdm.auto import tqdm

    cls_id, sep_id, pad_id = _special_ids(tokenizer)
    contexts = list(dict.fromkeys(ex.context for ex in examples))
    ctx_enc = tokenizer(contexts, add_special_tokens=False, return_offsets_mapping=True)
    ctx_of = {
        c: (ids, np.asarray(off, np.int64).reshape(-1, 2))
        for c, ids, off in zip(
            contexts, ctx_enc["input_ids"], ctx_enc["offset_mapping"], strict=True
        )
    }
    q_ids = tokenizer([ex.question for ex in examples], add_special_tokens=False)["input_ids"]

    L = max_seq_length
    plans = _plan_windows(
        examples, ctx_of, q_ids, L, doc_stride, max_query_length,
        max_windows_per_example, max_total_windows, source,
    )
    rows: dict[str, list] = {k: [] for k in FEATURE_NAMES}
    example_index, token_spans, max_ctx = [], [], []
    unmappable = 0
    for ei, ex in enumerate(
        tqdm(
            examples, desc="SQuAD features", unit="question", disable=not progress, mininterval=2.0
        )
    ):
        doc_ids, doc_spans = ctx_of[ex.context]
        query, windows = plans[ei]
        best_window = _max_context(windows, len(doc_ids))
        gold = None
        if ex.answers and not ex.is_impossible:
            ans = ex.answers[0]
            gold = _char_to_token_span(doc_spans, ans.start, ans.end)
            if gold is None:
                unmappable += 1
        offset = len(query) + 2  # [CLS] question [SEP]
        for w, (start, length) in enumerate(windows):
            ids = [cls_id, *query, sep_id, *doc_ids[start : start + length], sep_id]
            n = len(ids)
            input_ids = np.full(L, pad_id, np.int32)
            input_ids[:n] = ids
            mask = np.zeros(L, np.int32)
            mask[:n] = 1
            segments = np.zeros(L, np.int32)
            segments[offset:n] = 1
            spans = np.full((L, 2), -1, np.int32)
            spans[offset : offset + length] = doc_spans[start : start + length]
            is_max = np.zeros(L, bool)
            is_max[offset : offset + length] = best_window[start : start + length] == w
            s_pos = e_pos = 0
            if gold is not None and gold[0] >= start and gold[1] < start + length:
                s_pos, e_pos = gold[0] - start + offset, gold[1] - start + offset
            for k, v in zip(FEATURE_NAMES, (input_ids, mask, segments, s_pos, e_pos), strict=True):
                rows[k].append(v)
            example_index.append(ei)
            if with_spans:
                token_spans.append(spans)
                max_ctx.append(is_max)
    if unmappable:
        log.warning("%d answers cover no token after tokenization; they point at [CLS]", unmappable)
    arrays = {k: np.asarray(v, np.int32) for k, v in rows.items()}
    if not example_index:
        arrays = {
            k: np.zeros((0, L) if k in FEATURE_NAMES[:3] else (0,), np.int32) for k in FEATURE_NAMES
        }
    return SquadFeatures(
        arrays=arrays,
        example_index=np.asarray(example_index, np.int64),
        token_spans=np.asarray(token_spans, np.int32).reshape(-1, L, 2),
        max_context=np.asarray(max_ctx, bool).reshape(-1, L),
        examples=list(examples),
    )
