"""Sentence splitting per language: English rules of albertkit's own, pysbd for the languages
it knows, terminal punctuation elsewhere; a registry part, so a plugin can bring its own.

SOP needs sentence boundaries: segment A and B are runs of whole sentences. Which splitter
a language gets is looked up in the registry's "sentence splitter" category
(:func:`albertkit.config.registry.register_sentence_splitter`): a config class with a
``kind`` and a ``build(language)`` that returns a function ``str -> list[str]``, registered
with the languages it splits. A splitter registered by a plugin wins over albertkit's own for its
languages. The built-ins (registered like a plugin's, in :mod:`albertkit.config.builtins`):

* ``rules`` (English): the rule set below, kept because it scores at least as well as
  pysbd, sentencex and ICU on albertkit's English cases (docs/data.md, Languages);
* ``pysbd`` (ja, zh, de, fr, es, ru, ar, hi, ... every language pysbd 0.3.4 has rules for):
  pysbd's per-language rules, with closing quotes and brackets kept on the sentence they
  close (pysbd leaves ``”`` after ``。`` to the next sentence);
* ``punctuation`` (every other language): a break after ``. ! ?`` (and their full-width,
  Arabic, Devanagari and Ethiopic forms) followed by a space, and after full-width ``。！？``
  outside quotes. Thai and Lao end sentences with a space only: a paragraph stays one
  sentence there unless a plugin brings a splitter.

:class:`SentenceSplitting` splits each document by its own script: in a corpus declared
``en`` a Japanese document goes to the Japanese splitter (a document in the corpus's own
script group always uses the corpus's language, so English corpora split exactly as before).

English rules (``split_sentences``). A boundary is
placed after ``.``, ``!`` or ``?`` (plus any closing quotes/brackets) when whitespace follows
and the next word can start a sentence (capital letter, digit, or opening quote/bracket),
unless the period belongs to

* a known abbreviation that usually precedes more text (``Mr.``, ``Dr.``, ``e.g.``,
  ``i.e.``, ``vs.``, ``Fig.``, ``No.``, month names, ...),
* an initial (``J. R. R. Tolkien``) or a dotted acronym (``U.S.``) followed by a capital,
* a decimal number (``3.14``: no whitespace, so never a candidate), or an ellipsis
  followed by a lower-case word.

It is a heuristic, tuned to fail safe: when unsure it keeps text together (a missed
boundary only makes a segment longer; a false one cuts a sentence in half).

Example:
    >>> split_sentences('Dr. Smith paid $3.50 for it. "Why?" he asked. J. R. R. Tolkien agreed.')
    ['Dr. Smith paid $3.50 for it.', '"Why?" he asked.', 'J. R. R. Tolkien agreed.']
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

SentenceSplit = Callable[[str], list[str]]

# Abbreviations after which a capitalised word usually continues the same sentence.
_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "gen",
        "col",
        "lt",
        "sgt",
        "capt",
        "cmdr",
        "adm",
        "maj",
        "rev",
        "hon",
        "gov",
        "sen",
        "rep",
        "pres",
        "supt",
        "insp",
        "det",
        "messrs",
        "mme",
        "mlle",
        "esq",
        "vs",
        "v",
        "e.g",
        "i.e",
        "cf",
        "viz",
        "al",
        "approx",
        "ca",
        "c",
        "fl",
        "no",
        "nos",
        "vol",
        "vols",
        "fig",
        "figs",
        "pp",
        "p",
        "ed",
        "eds",
        "ch",
        "chap",
        "sec",
        "art",
        "op",
        "cit",
        "ibid",
        "ref",
        "refs",
        "eq",
        "eqs",
        "dept",
        "univ",
        "assn",
        "bros",
        "corp",
        "ltd",
        "co",
        "inc",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "b.c",
        "a.d",
        "b.c.e",
        "c.e",
        "a.m",
        "p.m",
        "u.s",
        "u.k",
        "u.n",
        "e.u",
    ]
)

# Candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace.
_CANDIDATE = re.compile(r"""([.!?]+)(["'\u201d\u2019)\]]*)(\s+)""")
_NEXT_STARTS = re.compile(r"""["'\u201c\u2018(\[]*[A-Z0-9\u00C0-\u00DE]""")
_WORD_BEFORE = re.compile(r"([\w.\-']+)$")


def _is_boundary(text: str, m: re.Match[str]) -> bool:
    punct, closers = m.group(1), m.group(2)
    rest = text[m.end() :]
    if not _NEXT_STARTS.match(rest):
        return False  # next word starts lower case or with a symbol: same sentence
    if punct != ".":
        return True  # "!", "?", "?!", "..." followed by a capital
    if closers:
        return True  # 'He said "Stop." Then ...'
    w = _WORD_BEFORE.search(text, max(0, m.start() - 80), m.start())
    if w is None:
        return True
    word = w.group(1).lstrip("'-")
    lowered = word.lower().rstrip(".")
    if lowered in _ABBREVIATIONS:
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():
        return False  # an initial: "J. Smith"
    # a dotted acronym or abbreviation ("U.S.", "Ph.D.", "e.g.") does not end the sentence
    return not ("." in word and all(len(p) <= 2 for p in word.split(".") if p))


def split_sentences(text: str) -> list[str]:
    """Split one paragraph or document of prose into sentences (whitespace normalised)."""
    text = " ".join(text.split())
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _CANDIDATE.finditer(text):
        if _is_boundary(text, m):
            end = m.start(3)
            out.append(text[start:end])
            start = m.end()
    if start < len(text):
        out.append(text[start:])
    return [s for s in out if s]


# ------------------------------------------------------------------ the built-in splitters
_CLOSERS = "\"'\u201d\u2019)]}\u300d\u300f\uff09\u3011\u3015\u3009\u300b\uff3d\uff5d\u00bb"


class RulesSplitter(BaseModel):
    """albertkit's English rule set (:func:`split_sentences`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["rules"] = "rules"

    def build(self, language: str) -> SentenceSplit:
        return split_sentences


def _reattach_closers(parts: list[str]) -> list[str]:
    """Move closing quotes/brackets that start a sentence to the end of the one before."""
    out: list[str] = []
    for part in parts:
        part = part.strip()
        if out:
            n = len(part) - len(part.lstrip(_CLOSERS))
            if n:
                out[-1] += part[:n]
                part = part[n:].strip()
        if part:
            out.append(part)
    return out


class PysbdSplitter(BaseModel):
    """pysbd's rules for the language (imported when a splitter is built).

    Example:
        >>> split = PysbdSplitter().build("zh")
        >>> split("他说：“我明天不来了。”大家都很吃惊。")
        ['他说：“我明天不来了。”', '大家都很吃惊。']
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["pysbd"] = "pysbd"

    def build(self, language: str) -> SentenceSplit:
        import pysbd

        segmenter = pysbd.Segmenter(language=language, clean=False)

        def split(text: str) -> list[str]:
            text = " ".join(text.split())
            return _reattach_closers(segmenter.segment(text)) if text else []

        return split


# a break after terminal punctuation (+ closers) followed by a space, or after full-width
# terminal punctuation (+ closers) anywhere
_TERMINAL = re.compile(
    r"(?:[.!?\u061f\u06d4\u0964\u0965\u1362\u2026]+[" + re.escape(_CLOSERS) + r"]*(?=\s)"
    r"|[\u3002\uff01\uff1f\uff0e]+[" + re.escape(_CLOSERS) + r"]*)"
)
_OPEN_QUOTES = {"\u300c": "\u300d", "\u300e": "\u300f", "\u201c": "\u201d", "\uff08": "\uff09"}


class PunctuationSplitter(BaseModel):
    """A break after terminal punctuation; the fallback for languages no splitter claims.

    Example:
        >>> PunctuationSplitter().build("ko")("오늘은 날씨가 좋다. 산에 가자! 좋아?")
        ['오늘은 날씨가 좋다.', '산에 가자!', '좋아?']
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["punctuation"] = "punctuation"

    def build(self, language: str) -> SentenceSplit:
        return _split_at_punctuation


def _split_at_punctuation(text: str) -> list[str]:
    text = " ".join(text.split())
    out: list[str] = []
    start = 0
    for m in _TERMINAL.finditer(text):
        if _inside_quotes(text, start, m.start()):
            continue
        out.append(text[start : m.end()].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def _inside_quotes(text: str, start: int, end: int) -> bool:
    depth: dict[str, int] = {}
    for c in text[start:end]:
        if c in _OPEN_QUOTES:
            depth[c] = depth.get(c, 0) + 1
        else:
            for opener, closer in _OPEN_QUOTES.items():
                if c == closer and depth.get(opener):
                    depth[opener] -= 1
    return any(depth.values())


# ------------------------------------------------------------------ per document
class SentenceSplitting:
    """Splits documents of a corpus in ``language``, each by its own script.

    A document whose letters are mostly of another script group than ``language``'s (a
    Japanese article in an English corpus) is split by the splitter of the language its
    scripts say; every other document by ``language``'s. Splitters are looked up in the
    registry (plugins loaded) and built once per language.

    Example:
        >>> split = SentenceSplitting("en")
        >>> split("Dr. Smith came. He sat.")
        ['Dr. Smith came.', 'He sat.']
        >>> split("这是第一句。这是第二句。")
        ['这是第一句。', '这是第二句。']
    """

    def __init__(self, language: str = "en") -> None:
        from albertkit.data.language import language_info, script_group

        self.language = language_info(language).code
        self._group = script_group(self.language)
        self._built: dict[str, SentenceSplit] = {}

    def language_of(self, text: str) -> str:
        """The language whose splitter gets ``text``."""
        from albertkit.data.language import detect_language, text_script_group

        if text.isascii():
            return self.language if self._group == "Latin" else "en"
        group = text_script_group(text)
        if group is None or group == self._group:
            return self.language
        return detect_language([text]).code

    def splitter(self, language: str) -> SentenceSplit:
        """The (cached) split function of ``language``."""
        if language not in self._built:
            from albertkit.config.registry import sentence_splitter_for

            self._built[language] = sentence_splitter_for(language).build(language)
        return self._built[language]

    def __call__(self, text: str) -> list[str]:
        return self.splitter(self.language_of(text))(text)
