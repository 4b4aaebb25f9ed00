"""Sentences per language: hand-checked Japanese and Chinese sets, documents split by their
own script, and sentence splitting as a registry part."""

from __future__ import annotations

from pathlib import Path

import pytest

from albertkit.config import registry
from albertkit.config.registry import register_sentence_splitter, sentence_splitter_for
from albertkit.data.corpus import read_documents
from albertkit.data.sentences import (
    PunctuationSplitter,
    PysbdSplitter,
    RulesSplitter,
    SentenceSplitting,
    split_sentences,
)
from albertkit.errors import PluginError

FIXTURES = Path(__file__).parent / "fixtures" / "languages"


def paragraphs(name: str) -> list[list[str]]:
    """The hand-checked sentences of a fixture, by paragraph."""
    out: list[list[str]] = []
    current: list[str] = []
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def recovered(split, paras: list[list[str]], joiner: str) -> tuple[int, int]:
    """Sentences found exactly (as whole sentences) when each paragraph is one document."""
    found = total = 0
    for para in paras:
        got = split(joiner.join(para))
        total += len(para)
        found += sum(1 for s in para if s in got)
    return found, total


@pytest.mark.parametrize("code", ["ja", "zh"])
def test_hand_checked_sets_recovered(code):
    paras = paragraphs(f"sentences_{code}.txt")
    found, total = recovered(SentenceSplitting(code), paras, "")
    assert total >= 200
    assert found / total >= 0.95, f"{code}: {found}/{total}"
    # what the English rules did with the same text (the "one sentence")
    old, _ = recovered(split_sentences, paras, "")
    assert old / total < 0.05


def test_chinese_closing_quote_stays_with_its_sentence():
    split = PysbdSplitter().build("zh")
    assert split("他说：“我明天不来了。”大家都很吃惊。") == ["他说：“我明天不来了。”", "大家都很吃惊。"]
    assert PysbdSplitter().build("ja")("「おはようございます。」と先生が言いました。次です。") == [
        "「おはようございます。」と先生が言いました。", "次です。"]


def test_punctuation_fallback():
    split = PunctuationSplitter().build("ko")
    assert split("오늘은 날씨가 좋다. 산에 가자! 좋아?") == ["오늘은 날씨가 좋다.", "산에 가자!", "좋아?"]
    # full-width terminators need no space; quotes keep their sentence together
    assert split("「行く。」と言った。はい。") == ["「行く。」と言った。", "はい。"]
    assert split("नमस्ते। आप कैसे हैं?") == ["नमस्ते।", "आप कैसे हैं?"]
    assert split("") == []


def test_english_keeps_its_rules():
    text = 'Dr. Smith paid $3.50 for it. "Why?" he asked. J. R. R. Tolkien agreed.'
    assert SentenceSplitting("en")(text) == split_sentences(text)
    assert sentence_splitter_for("en") == RulesSplitter()
    assert sentence_splitter_for("ja") == PysbdSplitter()
    assert sentence_splitter_for("th") == PunctuationSplitter()  # nobody claims Thai


def test_mixed_corpus_splits_each_document_by_its_script(tmp_path):
    en = "Dr. Smith came. He sat down."
    ja = "東京でガスが漏れた。ジャガイモを食べます。"
    zh = "这是第一句。这是第二句。"
    (tmp_path / "mixed.txt").write_text(f"{en}\n{ja}\n{zh}\n", encoding="utf-8")
    docs = list(read_documents([tmp_path / "mixed.txt"], input_format="document_per_line",
                               language="en"))
    assert [d.sentences for d in docs] == [
        ["Dr. Smith came.", "He sat down."],
        ["東京でガスが漏れた。", "ジャガイモを食べます。"],
        ["这是第一句。", "这是第二句。"],
    ]
    splitting = SentenceSplitting("ja")
    assert [splitting.language_of(t) for t in (en, ja, zh, "Je suis là et le chat dort.")] == [
        "en", "ja", "zh", "fr"]
    # a document in the corpus's own script group always uses the corpus's language
    assert SentenceSplitting("de").language_of("The cat sat on the mat and the dog too.") == "de"


class _Lines:
    """A test splitter: one sentence per '|'."""

    def build(self, language):
        return lambda text: [s.strip() for s in text.split("|") if s.strip()]


@pytest.fixture
def clean_registry(builtins_only_registry):
    # albertkit's own parts only, restored after the test (conftest.builtins_only_registry)
    return builtins_only_registry


def test_a_registered_splitter_wins_for_its_languages(clean_registry):
    register_sentence_splitter("bars", _Lines, languages=["th", "ja"])
    assert isinstance(sentence_splitter_for("th"), _Lines)
    assert SentenceSplitting("th")("สวัสดี | ครับ") == ["สวัสดี", "ครับ"]
    assert isinstance(sentence_splitter_for("ja"), _Lines)  # before albertkit's pysbd
    assert sentence_splitter_for("zh") == PysbdSplitter()
    assert registry.sentence_splitters()["bars"] == ("th", "ja")


def test_bad_registrations_are_named(clean_registry):
    with pytest.raises(PluginError, match="'x' is not a 'module:Class' path"):
        register_sentence_splitter("lines", "x", languages=["en"])
    with pytest.raises(PluginError, match="no build"):
        register_sentence_splitter("lines", object, languages=["en"])
    with pytest.raises(PluginError, match="registered twice"):
        register_sentence_splitter("pysbd", _Lines, languages=["en"])
    register_sentence_splitter("gone", "no_such_module:Splitter", languages=["sw"])
    with pytest.raises(PluginError, match="cannot import no_such_module:Splitter"):
        sentence_splitter_for("sw")
