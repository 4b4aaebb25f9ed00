"""GLUE-style sentence and sentence-pair data: TSV / CSV / JSONL readers, presets, features.

A record has ``text_a``, optionally ``text_b``, and a label (a class name, or a number for
regression). Columns are named in the config (``text_a``, ``text_b``, ``label``) or come from
a GLUE preset, which knows the column names of both the original GLUE TSV files (Wang et al.
2019, ``download_glue_data.py``) and the Hugging Face ``glue`` dataset exported as JSONL/CSV:

======  ===========================  =============================  ==================
task    text_a                       text_b                         label
======  ===========================  =============================  ==================
cola    sentence (TSV: column 3,     -                              label (column 1)
        the train/dev files have
        no header)
sst2    sentence                     -                              label
mrpc    #1 String / sentence1        #2 String / sentence2          Quality / label
qqp     question1                    question2                      is_duplicate/label
stsb    sentence1                    sentence2                      score / label (0-5)
mnli    sentence1 / premise          sentence2 / hypothesis         gold_label / label
qnli    question                     sentence                       label
rte     sentence1                    sentence2                      label
wnli    sentence1                    sentence2                      label
======  ===========================  =============================  ==================

Class labels are matched by name; a label that is a non-negative integer not among the names
is taken as an index into the preset's list (Hugging Face's ``glue`` stores MNLI/QNLI/RTE
labels as indices in the order given here). TSV files are read without quote processing, as
GLUE's own processors do (sentences contain quote characters).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from albertkit.errors import GlueDataError

Format = Literal["tsv", "csv", "jsonl"]


@dataclass(frozen=True)
class GluePreset:
    """Column names (candidates, first match wins), labels and the headline metric of a task."""

    text_a: tuple[str, ...]
    text_b: tuple[str, ...] | None
    label: tuple[str, ...]
    labels: tuple[str, ...] | None  # None = regression
    metric: str
    headerless: tuple[int, int] | None = None  # (text_a column, label column) without header

    @property
    def regression(self) -> bool:
        return self.labels is None


GLUE_PRESETS: dict[str, GluePreset] = {
    "cola": GluePreset(("sentence",), None, ("label",), ("0", "1"), "mcc", headerless=(3, 1)),
    "sst2": GluePreset(("sentence",), None, ("label",), ("0", "1"), "accuracy"),
    "mrpc": GluePreset(
        ("#1 String", "sentence1"),
        ("#2 String", "sentence2"),
        ("Quality", "label"),
        ("0", "1"),
        "f1",
    ),
    "qqp": GluePreset(("question1",), ("question2",), ("is_duplicate", "label"), ("0", "1"), "f1"),
    "stsb": GluePreset(("sentence1",), ("sentence2",), ("score", "label"), None, "pearson"),
    "mnli": GluePreset(
        ("sentence1", "premise"),
        ("sentence2", "hypothesis"),
        ("gold_label", "label"),
        ("entailment", "neutral", "contradiction"),
        "accuracy",
    ),
    "qnli": GluePreset(
        ("question",), ("sentence",), ("label",), ("entailment", "not_entailment"), "accuracy"
    ),
    "rte": GluePreset(
        ("sentence1",), ("sentence2",), ("label",), ("entailment", "not_entailment"), "accuracy"
    ),
    "wnli": GluePreset(("sentence1",), ("sentence2",), ("label",), ("0", "1"), "accuracy"),
}

# Without a preset or explicit names: the usual single-sentence / pair column names.
_DEFAULT_TEXT_A = ("sentence", "text", "sentence1", "question1", "premise", "question")
_DEFAULT_TEXT_B = ("sentence2", "question2", "hypothesis")
_DEFAULT_LABEL = ("label",)


@dataclass(frozen=True)
class TextExample:
    """One record: its text(s), raw label string and where it came from (``file:line``)."""

    text_a: str
    text_b: str | None
    label: str
    where: str


@dataclass(frozen=True)
class Columns:
    """The resolved column names (or indices for headerless TSV) of a file."""

    text_a: str | int
    text_b: str | int | None
    label: str | int


# --------------------------------------------------------------------------- reading
def detect_format(path: Path, fmt: str = "auto") -> Format:
    if fmt != "auto":
        return fmt  # type: ignore[return-value]
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".txt"):
        return "tsv"
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise GlueDataError(
        f"{path}: cannot tell the format from the extension {suffix!r}; "
        "set data.format to tsv, csv or jsonl"
    )


def _rows(path: Path, fmt: Format) -> Iterator[tuple[int, list[str] | dict[str, Any]]]:
    """(line number, row) pairs; TSV/CSV rows are lists (header included), JSONL dicts."""
    try:
        fh = path.open(encoding="utf-8-sig", newline="")  # -sig: MRPC's files start with a BOM
    except FileNotFoundError:
        raise GlueDataError(f"data file not found: {path}") from None
    with fh:
        try:
            if fmt == "jsonl":
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise GlueDataError(
                            f"{path}:{lineno}: malformed JSON: {e.msg} (column {e.colno})"
                        ) from None
                    if not isinstance(record, dict):
                        raise GlueDataError(
                            f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}"
                        )
                    yield lineno, record
                return
            if fmt == "tsv":
                reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            else:
                reader = csv.reader(fh)
            for row in reader:
                if row and any(cell.strip() for cell in row):
                    yield reader.line_num, row
        except UnicodeDecodeError as e:
            raise GlueDataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except csv.Error as e:
            raise GlueDataError(f"{path}: malformed {fmt.upper()}: {e}") from None


def _pick(names: Sequence[str], available: Sequence[str]) -> str | None:
    for name in names:
        if name in available:
            return name
    return None


def resolve_columns(
    header: Sequence[str],
    path: Path,
    preset: GluePreset | None,
    text_a: str | None,
    text_b: str | None,
    label: str | None,
    need_label: bool = True,
) -> Columns:
    """Column names from explicit settings, then the preset, then the usual defaults."""
    a_names = (text_a,) if text_a else (preset.text_a if preset else _DEFAULT_TEXT_A)
    l_names = (label,) if label else (preset.label if preset else _DEFAULT_LABEL)
    col_a = _pick(a_names, header)
    col_l = _pick(l_names, header)
    if col_a is None:
        raise GlueDataError(
            f"{path}: no text column {' / '.join(a_names)!s} (columns: "
            f"{list(header)}); set data.text_a"
        )
    if col_l is None and need_label:
        raise GlueDataError(
            f"{path}: no label column {' / '.join(l_names)!s} (columns: "
            f"{list(header)}); set data.label"
        )
    if text_b:
        col_b = _pick((text_b,), header)
        if col_b is None:
            raise GlueDataError(
                f"{path}: no column {text_b!r} for data.text_b (columns: {list(header)})"
            )
    elif preset is not None:
        col_b = _pick(preset.text_b, header) if preset.text_b else None
        if preset.text_b and col_b is None:
            raise GlueDataError(
                f"{path}: no second-sentence column "
                f"{' / '.join(preset.text_b)} (columns: {list(header)})"
            )
    else:
        col_b = None if text_a else _pick(_DEFAULT_TEXT_B, header)
    return Columns(col_a, col_b, col_l if col_l is not None else "")


def read_examples(
    path: str | Path,
    fmt: str = "auto",
    task: str | None = None,
    text_a: str | None = None,
    text_b: str | None = None,
    label: str | None = None,
) -> list[TextExample]:
    """Read a TSV/CSV/JSONL file of (text_a[, text_b], label) records.

    Example:
        >>> _ = Path("dev.tsv").write_text("sentence\\tlabel\\na gripping film .\\t1\\n"
        ...                                "dull and slow .\\t0\\n")
        >>> examples = read_examples("dev.tsv", task="sst2")  # SST-2's columns
        >>> len(examples), examples[0]
        (2, TextExample(text_a='a gripping film .', text_b=None, label='1', where='dev.tsv:2'))
    """
    path = Path(path)
    fmt_ = detect_format(path, fmt)
    preset = GLUE_PRESETS.get(task) if task else None
    if task and preset is None:
        raise GlueDataError(f"unknown GLUE task {task!r} (known: {sorted(GLUE_PRESETS)})")
    rows = _rows(path, fmt_)
    examples: list[TextExample] = []
    if fmt_ == "jsonl":
        cols = None
        for lineno, record in rows:
            where = f"{path}:{lineno}"
            if cols is None:
                cols = resolve_columns(list(record), path, preset, text_a, text_b, label)
            examples.append(_example(record, cols, where))
    else:
        first = next(rows, None)
        if first is None:
            raise GlueDataError(f"{path}: empty file (no header, no records)")
        lineno, header = first
        headerless = (
            preset is not None
            and preset.headerless is not None
            and fmt_ == "tsv"
            and not text_a
            and _pick(preset.text_a, header) is None
        )
        if headerless:
            # GLUE's CoLA train/dev files: source, label, original mark, sentence; no header.
            a_idx, l_idx = preset.headerless  # type: ignore[union-attr,misc]
            cols = Columns(a_idx, None, l_idx)
            data_rows = [(lineno, header), *rows]
            width = len(header)
        else:
            cols = resolve_columns(header, path, preset, text_a, text_b, label)
            index = {name: i for i, name in enumerate(header)}
            cols = Columns(
                index[cols.text_a],
                None if cols.text_b is None else index[cols.text_b],
                index[cols.label],
            )
            data_rows = rows
            width = len(header)
        for lineno, row in data_rows:
            where = f"{path}:{lineno}"
            if len(row) != width:
                raise GlueDataError(
                    f"{where}: {len(row)} fields, expected {width} "
                    f"(as in the {'first row' if headerless else 'header'})"
                )
            examples.append(_example(row, cols, where))
    if not examples:
        raise GlueDataError(f"{path}: no records")
    return examples


def _example(row: Any, cols: Columns, where: str) -> TextExample:
    def get(key: str | int, what: str) -> str:
        if isinstance(row, dict):
            if key not in row:
                raise GlueDataError(f"{where}: missing field {key!r} ({what})")
            value = row[key]
        else:
            value = row[key]  # type: ignore[index]
        if value is None:
            raise GlueDataError(f"{where}: field {key!r} ({what}) is null")
        return value if isinstance(value, str) else json.dumps(value)

    text_a = get(cols.text_a, "text_a")
    text_b = get(cols.text_b, "text_b") if cols.text_b is not None else None
    if not text_a.strip():
        raise GlueDataError(f"{where}: empty text in {cols.text_a!r}")
    return TextExample(text_a, text_b, get(cols.label, "label").strip(), where)


# --------------------------------------------------------------------------- labels
class LabelMap:
    """Class names <-> indices, or the identity on floats for regression.

    Args:
        labels: class names in index order, or None for regression.
    """

    def __init__(self, labels: Sequence[str] | None) -> None:
        self.labels = None if labels is None else [str(x) for x in labels]
        if self.labels is not None:
            if len(self.labels) < 2:
                raise GlueDataError(
                    f"a classification task needs at least 2 labels, got {self.labels}"
                )
            if len(set(self.labels)) != len(self.labels):
                raise GlueDataError(f"duplicate label names in {self.labels}")
        self._index = {name: i for i, name in enumerate(self.labels or [])}

    @property
    def regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    def encode(self, example: TextExample) -> float | int:
        raw = example.label
        if self.labels is None:
            try:
                value = float(raw)
            except ValueError:
                raise GlueDataError(
                    f"{example.where}: regression label {raw!r} is not a number"
                ) from None
            if not np.isfinite(value):
                raise GlueDataError(f"{example.where}: regression label {raw!r} is not finite")
            return value
        if raw in self._index:
            return self._index[raw]
        if raw.isdigit() and int(raw) < len(self.labels):
            return int(raw)  # an index, as in Hugging Face's glue exports
        raise GlueDataError(f"{example.where}: unknown label {raw!r} (labels: {self.labels})")

    @classmethod
    def infer(cls, examples: Sequence[TextExample]) -> LabelMap:
        """The sorted distinct labels of ``examples`` (numerically if all are integers)."""
        names = sorted({ex.label for ex in examples})
        if all(n.lstrip("-").isdigit() for n in names):
            names = sorted(names, key=int)
        return cls(names)


# --------------------------------------------------------------------------- features
def encode_examples(
    examples: Sequence[TextExample], tokenizer, label_map: LabelMap, max_seq_length: int
) -> dict[str, np.ndarray]:
    """``[CLS] a [SEP] (b [SEP])`` features, truncating the longer text first.

    Truncation is ``longest_first``: one token at a time from the longer of the two texts, as
    Google's ``_truncate_seq_pair``. Labels are int32 class indices, or float32 for regression.
    """
    labels = [label_map.encode(ex) for ex in examples]
    texts_a = [ex.text_a for ex in examples]
    pairs = [ex.text_b for ex in examples]
    has_b = [b is not None for b in pairs]
    if any(has_b) and not all(has_b):
        raise GlueDataError("some records have a second text and some do not")
    enc = tokenizer(
        texts_a,
        pairs if all(has_b) and has_b else None,
        truncation=True,
        max_length=max_seq_length,
        padding="max_length",
        return_token_type_ids=True,
        return_attention_mask=True,
    )
    return {
        "input_ids": np.asarray(enc["input_ids"], np.int32),
        "input_mask": np.asarray(enc["attention_mask"], np.int32),
        "segment_ids": np.asarray(enc["token_type_ids"], np.int32),
        "labels": np.asarray(labels, np.float32 if label_map.regression else np.int32),
    }
