"""benchmarks/sentence_starts.py: segments B start at a sentence start in Japanese and Chinese
at least as often as in English (within 10 points) under the same rule."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("sentence_starts")


def test_record_parser_reads_what_the_writer_wrote(script):
    from albertkit.data.tfrecord import encode_example

    record = encode_example({"input_ids": [[2, 300, 3, 0]], "segment_ids": [[0, 0, 1, 1]]})
    assert script.int64_features(record) == {"input_ids": [2, 300, 3, 0],
                                             "segment_ids": [0, 0, 1, 1]}


def test_japanese_and_chinese_segments_start_sentences_like_english(script, tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert script.main(["--seq-length", "128", "--dupe-factor", "2", "--json", str(out)]) == 0
    rows = {r["language"]: r for r in json.loads(out.read_text(encoding="utf-8"))}
    english = rows["en"]["b_at_sentence_start"]
    assert 0.2 < english < 0.9  # front truncation keeps English away from both ends
    for code in ("ja", "zh"):
        assert rows[code]["sentences_found"] == rows[code]["sentences"] == 205
        assert rows[code]["b_at_sentence_start"] >= english - 0.10, rows
    assert "ja: " in capsys.readouterr().out
