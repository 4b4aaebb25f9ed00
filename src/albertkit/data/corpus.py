"""Raw-text corpus readers: files and globs, ``.gz``, two document layouts, UTF-8 policy.

Layouts (``input_format``):

* ``document_per_line``: every non-blank line is one document (one article per line, as
  the reference system's docs asked); sentences are found by the splitter of the corpus's
  ``language`` (each document by its own script:
  :class:`albertkit.data.sentences.SentenceSplitting`; English: the rules of
  :func:`albertkit.data.sentences.split_sentences`).
* ``sentence_per_line``: one sentence per line, blank lines between documents (the layout
  of Google's ``create_pretraining_data.py``).

Bad bytes (invalid UTF-8, NUL bytes of binary data) are reported with file and line. The
``encoding_errors`` policy decides: ``fail`` raises :class:`CorpusError` at the first bad
line; ``skip`` drops the line and counts it in :class:`ReadStats` (the first few locations
are kept for the report). Empty files are always an error: an empty shard of a corpus is
almost always a failed download or export.

Large uncompressed files are cut into byte ranges at line (or blank-line) boundaries so
several processes can read and tokenize one file; see :func:`plan_chunks`.

Example (two documents, one sentence per line, in a gzip file):
    >>> with gzip.open("part-0.txt.gz", "wt", encoding="utf-8") as f:
    ...     _ = f.write("The first sentence.\\nThe second one.\\n\\nA new document.\\nIts end.\\n")
    >>> stats = ReadStats()
    >>> docs = list(read_documents(["part-*.txt.gz"], input_format="sentence_per_line",
    ...                            stats=stats))
    >>> [(doc.line, doc.sentences) for doc in docs]
    [(1, ['The first sentence.', 'The second one.']), (4, ['A new document.', 'Its end.'])]
    >>> stats.lines, stats.documents, stats.skipped_lines
    (5, 2, 0)
"""

from __future__ import annotations

import glob
import gzip
import itertools
import os
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from albertkit.data.sentences import SentenceSplitting
from albertkit.errors import CorpusError

InputFormat = Literal["document_per_line", "sentence_per_line"]
EncodingErrors = Literal["fail", "skip"]

_MAX_REPORTED = 20
# Longest line read by default. Lines are read in pieces of at most this size, so a one-line
# file (a 10 MB .gz can hold 10 GB of one line) is refused after reading this much instead
# of becoming one huge string. Whole Wikipedia articles as one line stay far below it.
DEFAULT_MAX_LINE_BYTES = 8 << 20
_SCAN_BYTES = 1 << 20  # piece size when a line is only skipped
SAMPLE_CHARS = 2_000_000  # read to decide a corpus's language


@dataclass
class Document:
    """One document: where it starts and its sentences (raw text, not yet normalised)."""

    source: str
    line: int
    sentences: list[str]


@dataclass
class ReadStats:
    """What a read saw; merged across chunks and processes."""

    lines: int = 0
    documents: int = 0
    skipped_lines: int = 0
    skipped_locations: list[str] = field(default_factory=list)

    def merge(self, other: ReadStats) -> None:
        self.lines += other.lines
        self.documents += other.documents
        self.skipped_lines += other.skipped_lines
        room = _MAX_REPORTED - len(self.skipped_locations)
        self.skipped_locations.extend(other.skipped_locations[: max(room, 0)])

    def to_dict(self) -> dict:
        return {
            "lines": self.lines,
            "documents": self.documents,
            "skipped_lines": self.skipped_lines,
            "skipped_locations": list(self.skipped_locations),
        }

    @classmethod
    def from_dict(cls, d: dict) -> ReadStats:
        return cls(d["lines"], d["documents"], d["skipped_lines"], list(d["skipped_locations"]))


@dataclass(frozen=True)
class Chunk:
    """A byte range ``[start, end)`` of one input file (``end=-1``: to the end)."""

    path: str
    start: int = 0
    end: int = -1


def expand_inputs(patterns: Iterable[str | os.PathLike]) -> list[Path]:
    """Expand files, directories (all files inside) and globs into a sorted, unique list.

    Raises:
        CorpusError: a pattern that matches nothing, or no files at all.
    """
    out: list[Path] = []
    seen: set[Path] = set()
    for pattern in patterns:
        p = str(pattern)
        if os.path.isdir(p):
            matches = sorted(str(q) for q in Path(p).rglob("*") if q.is_file())
        elif glob.has_magic(p):
            matches = sorted(q for q in glob.glob(p, recursive=True) if os.path.isfile(q))
        elif os.path.isfile(p):
            matches = [p]
        else:
            raise CorpusError(f"input {p!r}: no such file")
        if not matches:
            raise CorpusError(f"input pattern {p!r} matched no files")
        for m in matches:
            path = Path(m).resolve()
            if path not in seen:
                seen.add(path)
                out.append(path)
    if not out:
        raise CorpusError("no input files given")
    return out


def _open_binary(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115  (closed by the caller's with-block)


# A damaged .gz shows up only while it is read, as one of these (none names the file).
_GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def _gzip_error(path: str, e: BaseException) -> CorpusError:
    if isinstance(e, EOFError):
        what = "truncated gzip file (the compressed stream ends early)"
    else:
        what = f"damaged gzip file ({e})"
    return CorpusError(f"{path}: {what}; download or compress it again")


def _skip_line(fh) -> tuple[bool, bool]:
    """Read past the rest of the current line in bounded pieces: (read anything, blank)."""
    got, blank = False, True
    while True:
        piece = fh.readline(_SCAN_BYTES)
        if not piece:
            return got, blank
        got = True
        blank = blank and not piece.strip()
        if piece.endswith(b"\n"):
            return got, blank


def plan_chunks(
    files: Sequence[str | os.PathLike], input_format: InputFormat, target_bytes: int = 32 << 20
) -> list[Chunk]:
    """Cut inputs into chunks of about ``target_bytes`` that never split a document.

    ``.gz`` files are one chunk each (a gzip stream cannot be entered in the middle).
    """
    chunks: list[Chunk] = []
    for f in files:
        path = str(f)
        size = os.path.getsize(path)
        if size == 0:
            raise CorpusError(f"{path}: empty file")
        if path.endswith(".gz") or size <= target_bytes:
            chunks.append(Chunk(path))
            continue
        cuts = [0]
        with open(path, "rb") as fh:
            pos = target_bytes
            while pos < size:
                fh.seek(pos)
                _skip_line(fh)  # finish the line we landed in
                if input_format == "sentence_per_line":
                    while True:  # a document ends at a blank line
                        got, blank = _skip_line(fh)
                        if not got or blank:
                            break
                cut = fh.tell()
                if cut >= size:
                    break
                if cut > cuts[-1]:
                    cuts.append(cut)
                pos = cut + target_bytes
        cuts.append(size)
        chunks.extend(Chunk(path, a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    return chunks


def _line_number_base(path: str, start: int) -> int:
    """1-based number of the line that starts at byte ``start`` (counted only when needed)."""
    if start == 0:
        return 1
    n = 0
    with open(path, "rb") as fh:
        remaining = start
        while remaining > 0:
            block = fh.read(min(remaining, 8 << 20))
            if not block:
                break
            n += block.count(b"\n")
            remaining -= len(block)
    return n + 1


def _bounded_lines(fh, path: str, max_line_bytes: int, line_base) -> Iterator[bytes]:
    """The lines of ``fh``; a line longer than ``max_line_bytes`` is an error raised after
    reading at most that much of it. ``line_base()`` gives the number of the first line."""
    n = 0
    while True:
        try:
            raw = fh.readline(max_line_bytes + 1)
        except _GZIP_ERRORS as e:
            raise _gzip_error(path, e) from None
        if not raw:
            return
        n += 1
        if len(raw) > max_line_bytes and not (
            len(raw) == max_line_bytes + 1 and raw.endswith(b"\n")
        ):
            raise CorpusError(
                f"{path}:{line_base() + n - 1}: line longer than max_line_bytes="
                f"{max_line_bytes} (--max-line-bytes); is this one huge line or binary data? "
                "Split it into lines (documents or sentences) or raise the limit"
            )
        yield raw


def _iter_lines(
    chunk: Chunk,
    encoding_errors: EncodingErrors,
    stats: ReadStats,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[int, str]]:
    """Decoded lines of a chunk with their 1-based line numbers in the file."""
    base: int | None = None
    with _open_binary(chunk.path) as fh:
        if chunk.start:
            fh.seek(chunk.start)
        pos = chunk.start
        rel = 0
        any_bytes = False
        for raw in _bounded_lines(
            fh, chunk.path, max_line_bytes, lambda: _line_number_base(chunk.path, chunk.start)
        ):
            if chunk.end >= 0 and pos >= chunk.end:
                break
            pos += len(raw)
            any_bytes = True
            rel += 1
            stats.lines += 1
            problem = None
            if b"\x00" in raw:
                problem = "NUL byte (binary data?)"
            else:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    problem = f"invalid UTF-8 ({e.reason} at column {e.start + 1})"
            if problem is not None:
                if base is None:
                    base = _line_number_base(chunk.path, chunk.start)
                where = f"{chunk.path}:{base + rel - 1}"
                if encoding_errors == "fail":
                    raise CorpusError(
                        f"{where}: {problem}; set encoding_errors='skip' to drop such lines"
                    )
                stats.skipped_lines += 1
                if len(stats.skipped_locations) < _MAX_REPORTED:
                    stats.skipped_locations.append(f"{where}: {problem}")
                yield -1, ""  # a dropped line still ends nothing: callers ignore it
                continue
            if base is None and chunk.start == 0:
                base = 1
            yield rel, text
        if not any_bytes and chunk.start == 0:
            raise CorpusError(f"{chunk.path}: empty file")


def read_chunk(
    chunk: Chunk,
    input_format: InputFormat,
    encoding_errors: EncodingErrors = "fail",
    stats: ReadStats | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    language: str = "en",
) -> Iterator[Document]:
    """Documents of one chunk (sentences split for ``language``, a resolved code). Line numbers in ``Document.line`` are relative to the chunk
    start when the chunk does not start the file (exact numbers are only computed for
    error messages, which always carry the absolute line). A line longer than
    ``max_line_bytes`` is a :class:`CorpusError`, raised before more of it is read."""
    stats = stats if stats is not None else ReadStats()
    lines = _iter_lines(chunk, encoding_errors, stats, max_line_bytes)
    if input_format == "document_per_line":
        split_sentences = SentenceSplitting(language)
        for rel, text in lines:
            if rel < 0:
                continue
            sents = split_sentences(text)
            if sents:
                stats.documents += 1
                yield Document(chunk.path, rel, sents)
    elif input_format == "sentence_per_line":
        sents: list[str] = []
        first = 0
        for rel, text in lines:
            if rel < 0:
                continue
            line = " ".join(text.split())
            if line:
                if not sents:
                    first = rel
                sents.append(line)
            elif sents:
                stats.documents += 1
                yield Document(chunk.path, first, sents)
                sents = []
        if sents:
            stats.documents += 1
            yield Document(chunk.path, first, sents)
    else:
        raise CorpusError(
            f"input_format={input_format!r} is not one of 'document_per_line', 'sentence_per_line'"
        )


def read_documents(
    files: Iterable[str | os.PathLike],
    *,
    input_format: InputFormat,
    encoding_errors: EncodingErrors = "fail",
    stats: ReadStats | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    language: str = "en",
) -> Iterator[Document]:
    """All documents of the given files/globs, in sorted file order."""
    for path in expand_inputs(files):
        if path.stat().st_size == 0:
            raise CorpusError(f"{path}: empty file")
        yield from read_chunk(
            Chunk(str(path)), input_format, encoding_errors, stats, max_line_bytes, language
        )


def sample_lines(
    files: Iterable[str | os.PathLike],
    *,
    max_chars: int = SAMPLE_CHARS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[str]:
    """Raw text lines for language detection: about ``max_chars`` characters, taken in turn
    from the start of every input file (so a corpus of many files is sampled across them).

    Undecodable bytes are replaced (detection counts letters; reading proper reports them).
    """
    paths = expand_inputs(files)
    per_file = max(max_chars // max(len(paths), 1), 1)
    for path in paths:
        taken = 0
        with _open_binary(str(path)) as fh:
            try:
                for raw in _bounded_lines(fh, str(path), max_line_bytes, lambda: 1):
                    text = raw.decode("utf-8", errors="replace")
                    yield text
                    taken += len(text)
                    if taken >= per_file:
                        break
            except _GZIP_ERRORS as e:
                raise _gzip_error(str(path), e) from None


def sample_corpus(
    inputs: Iterable[str | os.PathLike] | None,
    sentences: Iterable[str] | None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[list[str], Iterable[str] | None]:
    """About ``SAMPLE_CHARS`` characters of a corpus given as files (``inputs``) or as
    ``sentences``, and those ``sentences`` still whole (an iterator is read only once)."""
    if sentences is None:
        return list(sample_lines(inputs or [], max_chars=SAMPLE_CHARS,
                                 max_line_bytes=max_line_bytes)), None
    it = iter(sentences)
    head: list[str] = []
    seen = 0
    for text in it:
        head.append(text)
        seen += len(text)
        if seen >= SAMPLE_CHARS:
            break
    return head, itertools.chain(head, it)
