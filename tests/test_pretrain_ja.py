"""A tiny Japanese pretraining run beats the unigram baseline on held-out text: the recipe of
docs/howto/other-languages.md ("A tiny run that beats the baseline"), shortened to 300 steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albertkit.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CONFIG = ROOT / "examples" / "configs" / "pretrain_tiny_ja.yaml"


def _japanese_corpus() -> str:
    """The ChatterBot corpus's Japanese and the tests' hand-written Japanese sentences, one
    sentence per line, a blank line between documents (as the how-to's shell lines build it)."""
    parts = [
        (FIXTURES / "languages" / "chatterbot_ja.txt").read_text(encoding="utf-8"),
        "".join(line for line in (FIXTURES / "languages" / "sentences_ja.txt")
                .read_text(encoding="utf-8").splitlines(keepends=True)
                if not line.startswith("#")),
        (FIXTURES / "words" / "ja.txt").read_text(encoding="utf-8"),
    ]
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


@pytest.mark.slow
def test_tiny_japanese_run_beats_the_unigram_baseline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus" / "ja-chat.txt"
    corpus.parent.mkdir()
    corpus.write_text(_japanese_corpus(), encoding="utf-8")
    assert main(["train-tokenizer", str(corpus), "--input-format", "sentence_per_line",
                 "--language", "ja", "--out", "tokenizer-ja-chat", "--vocab-size", "1200",
                 "--character-coverage", "0.995"]) == 0
    assert main(["prepare-data", str(corpus), "--input-format", "sentence_per_line",
                 "--tokenizer", "tokenizer-ja-chat", "--out", "data/ja-chat",
                 "--seq-length", "128", "--max-predictions-per-seq", "20",
                 "--masking", "dynamic", "--dupe-factor", "10", "--eval-fraction", "0.1",
                 "--eval-dupe-factor", "10", "--seed", "0", "--num-workers", "1",
                 "--no-progress"]) == 0
    manifest = json.loads((tmp_path / "data" / "ja-chat" / "manifest.json").read_text())
    assert manifest["language"]["code"] == "ja"
    assert manifest["word_segmentation"]["segmenter"] == "fugashi"  # whole-word masking
    assert main(["pretrain", "--config", str(CONFIG), "--set", "runtime.max_steps=300",
                 "--set", "runtime.eval_every_steps=300",
                 "--set", "checkpoint.every_steps=300"]) == 0
    summary = json.loads((tmp_path / "runs" / "pretrain-tiny-ja" / "summary.json").read_text())
    ev = summary["eval"]
    assert summary["status"] == "completed" and summary["step"] == 300
    assert ev["eval_batches"] == 8  # every held-out batch was scored
    # held-out masked-token accuracy above always answering the most frequent target
    assert ev["mlm_accuracy"] > ev["mlm_baseline_accuracy"] > 0
    assert ev["mlm_accuracy_over_baseline"] > 1.0
