"""Multiple-choice data: RACE / SWAG / JSON Lines readers, per-choice features, a synthetic set.

An example is an optional context, a question and N >= 2 choices, one of them right. Each
choice becomes one encoder sequence (the layout of google-research/albert ``race_utils.py``
and of transformers' ``AlbertForMultipleChoice``)::

    [CLS] context [SEP] question choice [SEP]      segment ids 0 ... 0 1 ... 1
    [CLS] question [SEP] choice [SEP]              (no context, as JGLUE's JCommonsenseQA)

A context too long for ``max_seq_length`` is cut at its end, never the question or the
choice (``run_race.py`` does the same); a question and choice that alone do not fit are an
error naming the record. Features are ``[examples, C, max_seq_length]`` arrays plus a
``choice_mask`` ``[examples, C]``: an example with fewer than C choices is padded with empty
choices whose mask is 0, and the task gives their scores -inf before the softmax, so a
padded choice never gets probability (and a batch of RACE and JCommonsenseQA examples
shares one shape).

Readers (``read_multiple_choice``), each row checked with one error line naming file and line
(for RACE also the question's number in its article): a label out of range, fewer than two
choices, an empty choice, more choices than ``num_choices``.

* ``race``: JSON objects ``{"article", "questions", "options", "answers", "id"}``, one per
  file (RACE's own layout, a directory read recursively) or one per line (JSON Lines). A
  question with a blank ``_`` has each option written into the blank (as ``run_race.py``);
  otherwise the question is followed by the option.
* ``swag``: SWAG's CSV (``sent1`` the context, ``sent2`` the start of each ending,
  ``ending0`` ... ``endingK``, ``label``).
* ``jsonl``: ``{"context", "question", "choices", "label"}`` per line (``context`` optional;
  ``choice0``, ``choice1``, ... instead of ``choices``, as JGLUE's JCommonsenseQA files).
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.errors import DatasetError

log = logging.getLogger(__name__)

RACE_ANSWERS = "ABCD"  # RACE's answer letters (run_race.py: label = ord(answer) - ord("A"))
_JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson", ".txt")


@dataclass(frozen=True)
class MultipleChoiceExample:
    """One question: its context (may be empty), question, choices, right choice, origin."""

    context: str
    question: str
    choices: tuple[str, ...]
    label: int
    where: str  # file:line (RACE: file:line question i)


# --------------------------------------------------------------------------- reading
def detect_format(path: Path, fmt: str = "auto") -> str:
    """``race``, ``swag`` or ``jsonl`` for ``path`` (``fmt`` unless it is ``auto``)."""
    if fmt != "auto":
        return fmt
    if path.is_dir():
        return "race"
    if path.suffix.lower() == ".csv":
        return "swag"
    if not path.is_file():
        raise DatasetError(f"{path}: no such file or directory")
    with _open(path) as fh:
        for line in fh:
            if line.strip():
                try:
                    first = json.loads(line)
                except json.JSONDecodeError:
                    raise DatasetError(f"{path}:1: not JSON; set data.format to race, swag "
                                       "or jsonl") from None
                return "race" if isinstance(first, dict) and "article" in first else "jsonl"
    raise DatasetError(f"{path}: empty file")


def read_multiple_choice(path: str | os.PathLike, fmt: str = "auto",
                         num_choices: int | None = None) -> list[MultipleChoiceExample]:
    """Every example of ``path`` in layout ``fmt`` (see the module docstring).

    Args:
        path: a file, or a directory of RACE article files.
        fmt: ``auto``, ``race``, ``swag`` or ``jsonl``.
        num_choices: the most choices an example may have (None: any number).

    Example:
        >>> row = {"question": "Which is a colour?", "choices": ["red", "four"], "label": 0}
        >>> _ = Path("mc.jsonl").write_text(json.dumps(row) + "\\n")
        >>> read_multiple_choice("mc.jsonl")[0]
        MultipleChoiceExample(context='', question='Which is a colour?', choices=('red', \
'four'), label=0, where='mc.jsonl:1')
    """
    path = Path(path)
    fmt = detect_format(path, fmt)
    if fmt == "race":
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        if not files:
            raise DatasetError(f"{path}: no RACE files in the directory")
        examples = [ex for f in files for ex in _read_race(f)]
    elif fmt == "swag":
        examples = list(_read_swag(path))
    elif fmt == "jsonl":
        examples = list(_read_jsonl(path))
    else:
        raise DatasetError(f"data.format={fmt!r}: expected auto, race, swag or jsonl")
    if not examples:
        raise DatasetError(f"{path}: no examples")
    if num_choices is not None:
        for ex in examples:
            if len(ex.choices) > num_choices:
                raise DatasetError(f"{ex.where}: {len(ex.choices)} choices, more than "
                                   f"data.num_choices={num_choices}")
    return examples


def _open(path: Path):
    try:
        return path.open(encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DatasetError(f"{path}: is a directory (only RACE data is a directory)") from None


def _json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; a file holding one pretty-printed
    object (not one per line) is read whole, as line 1."""
    with _open(path) as fh:
        try:
            text = fh.read()
        except UnicodeDecodeError as e:
            raise DatasetError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.splitlines()
    try:
        parsed = [(n, json.loads(line)) for n, line in enumerate(lines, 1) if line.strip()]
    except json.JSONDecodeError:
        try:
            parsed = [(1, json.loads(text))]  # one object over several lines
        except json.JSONDecodeError:
            for n, line in enumerate(lines, 1):  # name the first bad line
                if line.strip():
                    try:
                        json.loads(line)
                    except json.JSONDecodeError as e:
                        raise DatasetError(f"{path}:{n}: not JSON ({e.msg})") from None
            raise
    for n, obj in parsed:
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
        yield n, obj


def _text(value: Any, where: str, what: str, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise DatasetError(f"{where}: {what} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise DatasetError(f"{where}: {what} is empty")
    return value


def _example(context: Any, question: Any, choices: Any, label: Any,
             where: str) -> MultipleChoiceExample:
    """The checked example (the one place each bad-row rule is enforced)."""
    if not isinstance(choices, list | tuple):
        raise DatasetError(f"{where}: choices must be a list, got {type(choices).__name__}")
    if len(choices) < 2:
        raise DatasetError(f"{where}: {len(choices)} choice(s); an example needs at least 2")
    texts = tuple(_text(c, where, f"choice {i}", allow_empty=False)
                  for i, c in enumerate(choices))
    if isinstance(label, str) and label.strip().lstrip("-").isdigit():
        label = int(label)
    if isinstance(label, bool) or not isinstance(label, int):
        raise DatasetError(f"{where}: label {label!r} is not an integer choice index")
    if not 0 <= label < len(texts):
        raise DatasetError(f"{where}: label {label} is out of range for {len(texts)} choices "
                           f"(0-{len(texts) - 1})")
    return MultipleChoiceExample(_text(context, where, "context"),
                                 _text(question, where, "question"), texts, label, where)


def _read_race(path: Path) -> Iterator[MultipleChoiceExample]:
    for n, obj in _json_objects(path):
        where = f"{path}:{n}"
        for key in ("article", "questions", "options", "answers"):
            if key not in obj:
                raise DatasetError(f"{where}: missing field {key!r} (a RACE object has "
                                   "article, questions, options, answers)")
        questions, options, answers = obj["questions"], obj["options"], obj["answers"]
        if not (isinstance(questions, list) and isinstance(options, list)
                and isinstance(answers, list)) or not len(questions) == len(options) \
                == len(answers):
            raise DatasetError(f"{where}: questions, options and answers must be lists of one "
                               "length")
        for i, (question, opts, answer) in enumerate(zip(questions, options, answers,
                                                         strict=True)):
            at = f"{where} question {i + 1}"
            question = _text(question, at, "question")
            if not isinstance(answer, str) or answer.strip() not in RACE_ANSWERS \
                    or len(answer.strip()) != 1:
                raise DatasetError(f"{at}: answer {answer!r} is not one of "
                                   f"{', '.join(RACE_ANSWERS)}")
            label = RACE_ANSWERS.index(answer.strip())
            if isinstance(opts, list) and "_" in question \
                    and all(isinstance(o, str) and o.strip() for o in opts):
                # a cloze question: each option goes into the blank (run_race.py)
                opts, question = [question.replace("_", o) for o in opts], ""
            yield _example(obj["article"], question, opts, label, at)


def _read_swag(path: Path) -> Iterator[MultipleChoiceExample]:
    with _open(path) as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
            if header is None:
                raise DatasetError(f"{path}: empty file")
            endings = sorted((h for h in header if h.startswith("ending") and h[6:].isdigit()),
                             key=lambda h: int(h[6:]))
            missing = [c for c in ("sent1", "sent2", "label") if c not in header]
            if missing or not endings:
                raise DatasetError(f"{path}:1: a SWAG CSV needs the columns sent1, sent2, "
                                   f"ending0 ..., label; missing {missing or ['ending0']}")
            col = {name: i for i, name in enumerate(header)}
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    raise DatasetError(f"{where}: {len(row)} fields, expected {len(header)} "
                                       "(as in the header)")
                yield _example(row[col["sent1"]], row[col["sent2"]],
                               [row[col[e]] for e in endings], row[col["label"]].strip(), where)
        except UnicodeDecodeError as e:
            raise DatasetError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except csv.Error as e:
            raise DatasetError(f"{path}:{reader.line_num}: malformed CSV: {e}") from None


def _read_jsonl(path: Path) -> Iterator[MultipleChoiceExample]:
    for n, obj in _json_objects(path):
        where = f"{path}:{n}"
        if "choices" in obj:
            choices = obj["choices"]
        else:  # JCommonsenseQA: choice0 .. choice4
            keys = sorted((k for k in obj if k.startswith("choice") and k[6:].isdigit()),
                          key=lambda k: int(k[6:]))
            if not keys:
                raise DatasetError(f"{where}: no 'choices' list (nor choice0, choice1, ...)")
            choices = [obj[k] for k in keys]
        for key in ("question", "label"):
            if key not in obj:
                raise DatasetError(f"{where}: missing field {key!r}")
        yield _example(obj.get("context", ""), obj["question"], choices, obj["label"], where)


# --------------------------------------------------------------------------- features
def encode_multiple_choice(examples: Sequence[MultipleChoiceExample], tokenizer,
                           max_seq_length: int, num_choices: int | None = None
                           ) -> tuple[dict[str, np.ndarray], int]:
    """Per-choice features of ``examples`` and how many had their context cut.

    Returns ``input_ids``, ``input_mask``, ``segment_ids`` ``[n, C, max_seq_length]``,
    ``choice_mask`` ``[n, C]`` and ``labels`` ``[n]`` (int32), with ``C = num_choices`` or
    the most choices of any example.

    Raises:
        DatasetError: naming the example whose question and choice alone exceed the length.
    """
    most = max(len(ex.choices) for ex in examples)
    c = num_choices or most
    if most > c:
        raise DatasetError(f"an example has {most} choices, more than num_choices={c}")
    contexts = sorted({ex.context for ex in examples if ex.context.strip()})
    seconds = [_second(ex, choice) for ex in examples for choice in ex.choices]
    firsts = [ex.question for ex in examples if not ex.context.strip()]
    tokenized = _token_ids(tokenizer, contexts + seconds + firsts)
    context_ids = dict(zip(contexts, tokenized[: len(contexts)], strict=True))
    second_ids = iter(tokenized[len(contexts): len(contexts) + len(seconds)])
    first_ids = iter(tokenized[len(contexts) + len(seconds):])
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    n, length = len(examples), max_seq_length
    ids = np.full((n, c, length), pad, np.int32)
    mask = np.zeros((n, c, length), np.int32)
    segments = np.zeros((n, c, length), np.int32)
    choice_mask = np.zeros((n, c), np.int32)
    labels = np.zeros((n,), np.int32)
    truncated = 0
    for i, ex in enumerate(examples):
        has_context = bool(ex.context.strip())
        first = context_ids[ex.context] if has_context else next(first_ids)
        cut = False
        for j in range(len(ex.choices)):
            second = next(second_ids)
            room = length - 3 - len(second)
            if room < 0 or (not has_context and len(first) > room):
                what = "question and choice" if has_context else "question, choice"
                raise DatasetError(
                    f"{ex.where}: choice {j}: the {what} take {len(second) + (0 if has_context else len(first))} "
                    f"tokens; data.max_seq_length={length} leaves {length - 3} (only the "
                    "context is ever cut)")
            if len(first) > room:  # the context: cut at its end (run_race.py)
                cut = True
            tokens = [cls, *first[:room], sep, *second, sep]
            k = len(first[:room]) + 2
            ids[i, j, : len(tokens)] = tokens
            mask[i, j, : len(tokens)] = 1
            segments[i, j, k: len(tokens)] = 1
            choice_mask[i, j] = 1
        truncated += cut
        labels[i] = ex.label
    return ({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
             "choice_mask": choice_mask, "labels": labels}, truncated)


def _second(ex: MultipleChoiceExample, choice: str) -> str:
    """The second segment of a choice's sequence: question and choice, or the choice alone
    when the question is the first segment (no context) or was filled in (RACE cloze)."""
    if not ex.context.strip() or not ex.question.strip():
        return choice
    return f"{ex.question} {choice}"


def _token_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    return list(tokenizer(texts, add_special_tokens=False)["input_ids"])


# --------------------------------------------------------------------------- synthetic set
SYNTHETIC_WORDS = (
    "apple", "river", "stone", "cloud", "maple", "tiger", "silver", "garden", "window",
    "candle", "harbor", "violin", "pepper", "castle", "meadow", "rocket", "falcon", "lantern",
    "marble", "summer", "winter", "copper", "forest", "island", "pillow", "ribbon", "saddle",
    "thunder", "velvet", "walnut", "anchor", "basket", "cactus", "dragon", "engine", "feather",
)


def synthetic_examples(count: int, seed: int, num_choices: int = 4,
                       context_fraction: float = 0.25) -> list[MultipleChoiceExample]:
    """A learnable multiple-choice set: the right choice repeats the word the question names.

    Each question names one word (``like apple ?``); the right choice is that word, every
    other choice a word the question does not name. ``context_fraction`` of the examples
    carry a context of three further words (noise, never a choice), the others none; chance
    is ``1 / num_choices``.
    """
    rng = np.random.default_rng(seed)
    words = SYNTHETIC_WORDS
    out = []
    for i in range(count):
        picked = [words[k] for k in rng.permutation(len(words))]
        asked, others = picked[0], picked[1:]
        label = int(rng.integers(num_choices))
        choices = others[:num_choices]
        choices[label] = asked
        context = (" ".join(others[num_choices: num_choices + 3]) + " ."
                   if rng.random() < context_fraction else "")
        out.append(MultipleChoiceExample(context, f"like {asked} ?", tuple(choices), label,
                                         f"synthetic:{seed}:{i}"))
    return out


def write_jsonl(examples: Sequence[MultipleChoiceExample], path: str | os.PathLike) -> Path:
    """Write ``examples`` as the generic JSON Lines layout (atomically)."""
    from albertkit.fileio import write_synced

    path = Path(path)
    lines = [json.dumps({"context": ex.context, "question": ex.question,
                         "choices": list(ex.choices), "label": ex.label}) for ex in examples]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_synced(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def write_synthetic_multiple_choice(out_dir: str | os.PathLike, train: int = 10000,
                                    eval: int = 400, seed: int = 0, num_choices: int = 4,
                                    vocab_size: int = 75) -> Path:
    """Write ``train.jsonl``, ``dev.jsonl`` (another seed, so held out) and a tokenizer
    trained on their text (``tokenizer/``) into ``out_dir``; returns ``out_dir``.

    The tokenizer keeps every word of the set whole (one piece), checked here: a word cut
    into letters in the choice but not in the question would hide the match to learn (a few
    hundred training examples are enough text for that; a few dozen are not).

    Example:
        >>> out = write_synthetic_multiple_choice("mc-data", train=400, eval=8)
        >>> sorted(p.name for p in out.iterdir())
        ['dev.jsonl', 'tokenizer', 'train.jsonl']
    """
    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer

    out = Path(out_dir)
    train_set = synthetic_examples(train, seed, num_choices)
    eval_set = synthetic_examples(eval, seed + 1, num_choices)
    write_jsonl(train_set, out / "train.jsonl")
    write_jsonl(eval_set, out / "dev.jsonl")
    sentences = [f"like {w} ?" for w in SYNTHETIC_WORDS] + [
        f"{ex.context} {ex.question} {' '.join(ex.choices)}" for ex in train_set]
    tokenizer = train_tokenizer(None, out / "tokenizer",
                                TokenizerConfig(vocab_size=vocab_size, num_threads=1, seed=seed),
                                sentences=sentences, overwrite=True)
    cut = [w for w in SYNTHETIC_WORDS if len(tokenizer.encode(w)) != 1]
    if cut:
        raise DatasetError(f"vocab_size={vocab_size}: the synthetic set's tokenizer cuts "
                           f"{cut} into several pieces; raise vocab_size")
    return out
