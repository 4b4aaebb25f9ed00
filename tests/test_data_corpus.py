"""Corpus readers (layouts, globs, .gz, UTF-8 policy, chunking) and sentence splitting."""

from __future__ import annotations

import gzip

import pytest

from albertkit.data.corpus import (
    Chunk,
    ReadStats,
    expand_inputs,
    plan_chunks,
    read_chunk,
    read_documents,
)
from albertkit.data.sentences import split_sentences
from albertkit.errors import CorpusError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Dr. Smith paid $3.50 for it. "Why?" he asked. J. R. R. Tolkien agreed.',
            ["Dr. Smith paid $3.50 for it.", '"Why?" he asked.', "J. R. R. Tolkien agreed."],
        ),
        (
            "The U.S. Army was founded in 1775. It is large.",
            ["The U.S. Army was founded in 1775.", "It is large."],
        ),
        (
            "Pi is about 3.14159. That is, e.g. Archimedes knew it.",
            ["Pi is about 3.14159.", "That is, e.g. Archimedes knew it."],
        ),
        (
            "See Fig. 3 for details. Mr. Jones (born Jan. 5) came too! Did he?",
            ["See Fig. 3 for details.", "Mr. Jones (born Jan. 5) came too!", "Did he?"],
        ),
        ('She said "Stop." Then she left.', ['She said "Stop."', "Then she left."]),
        ("Wait... what happened? Nothing.", ["Wait... what happened?", "Nothing."]),
        (
            "It costs 10 vs. 20 i.e. Less. Version 3.11 is out. 2024 was a year.",
            ["It costs 10 vs. 20 i.e. Less.", "Version 3.11 is out.", "2024 was a year."],
        ),
        (
            "no capital after. the period keeps it together.",
            ["no capital after. the period keeps it together."],
        ),
        ("   ", []),
    ],
)
def test_sentence_splitter(text, expected):
    assert split_sentences(text) == expected


def test_document_per_line_globs_and_gz(tmp_path):
    (tmp_path / "a.txt").write_text("First doc. Second sentence.\n\nOther doc here.\n")
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write("Zipped doc. Two.\n")
    stats = ReadStats()
    docs = list(
        read_documents([str(tmp_path / "*.txt*")], input_format="document_per_line", stats=stats)
    )
    assert [d.sentences for d in docs] == [
        ["First doc.", "Second sentence."],
        ["Other doc here."],
        ["Zipped doc.", "Two."],
    ]
    assert stats.documents == 3 and stats.lines == 4
    assert docs[1].line == 3


def test_sentence_per_line(tmp_path):
    (tmp_path / "c.txt").write_text("s1\ns2\n\n\n s3 \n\ns4\n")
    docs = list(read_documents([tmp_path / "c.txt"], input_format="sentence_per_line"))
    assert [d.sentences for d in docs] == [["s1", "s2"], ["s3"], ["s4"]]


def test_bad_utf8_fail_and_skip(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"good line one.\nbad \xff\xfe line.\nfine again.\n")
    with pytest.raises(CorpusError, match=r"bad\.txt:2: invalid UTF-8"):
        list(read_documents([f], input_format="document_per_line"))
    stats = ReadStats()
    docs = list(
        read_documents([f], input_format="document_per_line", encoding_errors="skip", stats=stats)
    )
    assert len(docs) == 2 and stats.skipped_lines == 1
    assert stats.skipped_locations[0].startswith(f"{f}:2:")


def test_empty_binary_and_missing_files(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(CorpusError, match=r"empty\.txt: empty file"):
        list(read_documents([tmp_path / "empty.txt"], input_format="document_per_line"))
    (tmp_path / "blob.bin").write_bytes(b"text\n\x00\x01\x02\x03binary\n")
    with pytest.raises(CorpusError, match=r"blob\.bin:2: NUL byte"):
        list(read_documents([tmp_path / "blob.bin"], input_format="document_per_line"))
    with pytest.raises(CorpusError, match="matched no files"):
        expand_inputs([str(tmp_path / "nothing*.txt")])
    with pytest.raises(CorpusError, match="no such file"):
        expand_inputs([str(tmp_path / "missing.txt")])


@pytest.mark.parametrize("fmt", ["document_per_line", "sentence_per_line"])
def test_chunks_cover_every_document_once(tmp_path, fmt):
    lines = []
    for d in range(300):
        if fmt == "document_per_line":
            lines.append(f"Document {d} starts. It has text number {d}.")
        else:
            lines.extend([f"Doc {d} sentence one.", f"Doc {d} sentence two.", ""])
    f = tmp_path / "big.txt"
    f.write_text("\n".join(lines) + "\n")
    whole = [d.sentences for d in read_documents([f], input_format=fmt)]
    chunks = plan_chunks([f], fmt, target_bytes=1000)
    assert len(chunks) > 5
    assert chunks[0].start == 0 and chunks[-1].end == f.stat().st_size
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:], strict=False))
    parts = [d.sentences for c in chunks for d in read_chunk(c, fmt)]
    assert parts == whole


def test_error_line_numbers_inside_later_chunks(tmp_path):
    f = tmp_path / "late.txt"
    f.write_bytes(b"".join(b"Line number %d is fine.\n" % i for i in range(1, 200)) + b"bad \xff\n")
    chunks = plan_chunks([f], "document_per_line", target_bytes=500)
    with pytest.raises(CorpusError, match=r"late\.txt:200: invalid UTF-8"):
        for c in chunks:
            list(read_chunk(Chunk(c.path, c.start, c.end), "document_per_line"))
