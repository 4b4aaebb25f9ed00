"""Word boundaries for whole-word masking, in languages written with and without spaces.

The tokenizer stays a plain SentencePiece model on raw text (transformers'
``AlbertTokenizer`` gives the same ids). What a *word* is only decides which pieces one
whole-word mask covers (:mod:`albertkit.data.masking`), and is one of three things:

* ``whitespace`` (the default for languages that space their words): Google ALBERT's rule on
  the pieces themselves: a piece starts a word when it begins with "▁", is punctuation, or
  holds a character other than an English letter (``Tokenizer.word_start_table``). In
  Japanese or Chinese this makes nearly every piece a word of its own;
* a *word segmenter* (the default for Japanese, Chinese and Thai): a morphological analyser
  or dictionary segmenter finds the words of each sentence, and a piece starts a word unless
  its first character lies inside a word that an earlier piece already began. The pieces
  that one mask covers are therefore every piece that overlaps a chosen word; a piece that
  crosses a word boundary joins the two words into one unit. A piece of only whitespace
  (the "▁" SentencePiece puts before a word) goes with the piece after it;
* ``none``: every piece is a word (masking single pieces and n-grams of pieces).

Built-in segmenters, each an optional extra, its library imported when data is prepared:
``fugashi`` (Japanese: MeCab through fugashi with the UniDic-lite dictionary, the analyser
cl-tohoku's Japanese BERT used; ``pip install 'albertkit[ja]'``), ``jieba`` (Chinese:
jieba's dictionary and algorithm in the Rust port rjieba; ``albertkit[zh]``) and
``pythainlp`` (Thai: PyThaiNLP's ``newmm`` dictionary segmenter; ``albertkit[th]``).
They are registered in :mod:`albertkit.config.builtins` with
:func:`albertkit.config.register_word_segmenter`, as an outside package registers its own.

A segmenter also shapes the tokenizer when it is trained (:func:`pretokenize`): the
training sentences carry a delimiter at every word boundary and SentencePiece's
``pretokenization_delimiter`` keeps pieces from crossing it, while the model still encodes
raw text. On the Japanese text of the tests, fewer pieces cross a word boundary that way
(:func:`boundary_crossing_share`; ``tests/test_word_segmenters.py``).

Example (the rule of a segmenter on pieces, without any segmenter library):
    >>> # "▁東京", "で", "ガ", "ス" over the words 東京 | で | ガス
    >>> word_starts([3, 1, 1, 1], " 東京でガス", [(1, 3), (3, 4), (4, 6)]).tolist()
    [True, True, True, False]
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from albertkit.errors import DataPreparationError, PluginError

AUTO, NONE, WHITESPACE = "auto", "none", "whitespace"
RESERVED = (AUTO, NONE, WHITESPACE)
"""Settings that name no registered segmenter: ``auto`` (chosen by language), ``none``
(single pieces) and ``whitespace`` (Google's rule on the pieces)."""

PRETOKENIZATION_DELIMITER = "\ue000"


class Tokenizer(Protocol):
    """What this module uses of :class:`albertkit.data.tokenizer.Tokenizer` (that module
    imports this one, so it is described here rather than imported)."""

    sp: Any
    special_ids: dict[str, int]

    @property
    def vocab_size(self) -> int: ...

    def normalize(self, text: str) -> str: ...

    def word_start_table(self) -> np.ndarray: ...
"""Marks word boundaries in tokenizer training text (a private-use character, removed by
SentencePiece before it counts pieces)."""

_SPACE = "\u2581"  # SentencePiece's whitespace mark


class WordSegmenter(Protocol):
    """What a segmenter's ``build()`` returns."""

    def words(self, text: str) -> list[tuple[int, int]]:
        """The ``(start, end)`` character spans of the words of ``text``, in order, not
        overlapping; whitespace belongs to no word."""
        ...


def _missing_extra(kind: str, extra: str, module: str) -> DataPreparationError:
    return DataPreparationError(
        f"word segmenter {kind!r} needs the optional {module!r} package: pip install "
        f"'albertkit[{extra}]' (in a clone: pip install -e '.[{extra}]'), or "
        "--word-segmenter none (word_segmenter: none) to mask single pieces"
    )


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _spans_of(text: str, words: Sequence[str]) -> list[tuple[int, int]]:
    """Spans of ``words`` found in order in ``text`` (a word not found is left out)."""
    out = []
    pos = 0
    for w in words:
        if not w or w.isspace():
            continue
        at = text.find(w, pos)
        if at < 0:
            continue
        out.append((at, at + len(w)))
        pos = at + len(w)
    return out


class _SegmenterConfig(BaseModel):
    """Shared settings of the built-in segmenter configs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    extra: ClassVar[str] = ""
    distributions: ClassVar[tuple[str, ...]] = ()

    def versions(self) -> dict[str, str]:
        """Versions of the libraries the segmentation depends on (recorded with the data)."""
        return {d: _version(d) for d in self.distributions}


class FugashiSegmenter(_SegmenterConfig):
    """Japanese words from MeCab (fugashi) with the UniDic-lite dictionary.

    Example:
        >>> FugashiSegmenter().build().words("東京でガスが漏れた。")
        [(0, 2), (2, 3), (3, 5), (5, 6), (6, 8), (8, 9), (9, 10)]
    """

    kind: Literal["fugashi"] = Field("fugashi", description="MeCab + UniDic-lite (ja).")
    extra: ClassVar[str] = "ja"
    distributions: ClassVar[tuple[str, ...]] = ("fugashi", "unidic-lite")

    def build(self) -> WordSegmenter:
        try:
            import fugashi
            import unidic_lite
        except ImportError as e:
            raise _missing_extra(self.kind, self.extra, e.name or "fugashi") from None
        dicdir = unidic_lite.DICDIR
        # wakati output: the surfaces separated by spaces, without building node objects
        tagger = fugashi.GenericTagger(f'-d "{dicdir}" -r "{dicdir}/mecabrc" -Owakati')
        return _Wakati(tagger)


@dataclass
class _Wakati:
    tagger: Any

    def words(self, text: str) -> list[tuple[int, int]]:
        return _spans_of(text, self.tagger.parse(text).split(" "))


class JiebaSegmenter(_SegmenterConfig):
    """Chinese words from jieba's dictionary and algorithm (the Rust port, rjieba).

    Example:
        >>> JiebaSegmenter().build().words("我们在北京大学学习。")
        [(0, 2), (2, 3), (3, 7), (7, 9), (9, 10)]
    """

    kind: Literal["jieba"] = Field("jieba", description="jieba (rjieba) for zh.")
    hmm: bool = Field(True, description="Find words missing from the dictionary (jieba's HMM).")
    extra: ClassVar[str] = "zh"
    distributions: ClassVar[tuple[str, ...]] = ("rjieba",)

    def build(self) -> WordSegmenter:
        try:
            import rjieba
        except ImportError as e:
            raise _missing_extra(self.kind, self.extra, e.name or "rjieba") from None
        return _Jieba(rjieba, self.hmm)


@dataclass
class _Jieba:
    module: Any
    hmm: bool

    def words(self, text: str) -> list[tuple[int, int]]:
        return [(s, e) for w, s, e in self.module.tokenize(text, hmm=self.hmm)
                if not w.isspace()]


class PyThaiNLPSegmenter(_SegmenterConfig):
    """Thai words from PyThaiNLP's ``newmm`` (maximal matching over its dictionary).

    Example:
        >>> PyThaiNLPSegmenter().build().words("ฉันรักภาษาไทย")
        [(0, 3), (3, 6), (6, 13)]
    """

    kind: Literal["pythainlp"] = Field("pythainlp", description="PyThaiNLP newmm (th).")
    extra: ClassVar[str] = "th"
    distributions: ClassVar[tuple[str, ...]] = ("pythainlp",)

    def build(self) -> WordSegmenter:
        try:
            from pythainlp.tokenize import word_tokenize
        except ImportError as e:
            raise _missing_extra(self.kind, self.extra, e.name or "pythainlp") from None
        return _Thai(word_tokenize)


@dataclass
class _Thai:
    tokenize: Any

    def words(self, text: str) -> list[tuple[int, int]]:
        return _spans_of(text, self.tokenize(text, engine="newmm", keep_whitespace=False))


# --------------------------------------------------------------------------- choosing one
@dataclass(frozen=True)
class WordSegmentation:
    """The resolved ``word_segmenter`` setting: ``name`` is ``whitespace``, ``none`` or a
    registered segmenter, whose config is ``config``."""

    name: str
    config: BaseModel | None = None

    @property
    def uses_segmenter(self) -> bool:
        return self.config is not None

    def build(self) -> WordSegmenter:
        """The segmenter (its library imported now; a missing extra raises
        :class:`~albertkit.errors.DataPreparationError` naming it)."""
        if self.config is None:
            raise ValueError(f"word segmentation {self.name!r} uses no segmenter")
        return self.config.build()  # type: ignore[attr-defined]

    def word_start_table(self, tokenizer: Tokenizer) -> np.ndarray:
        """Per piece id, whether it starts a word (``whitespace`` and ``none`` only)."""
        if self.name == NONE:
            return np.ones(tokenizer.vocab_size, bool)
        if self.name == WHITESPACE:
            return tokenizer.word_start_table()
        raise ValueError(f"word segmenter {self.name!r} decides word starts from the text")

    def describe(self) -> dict[str, Any]:
        """What the data manifest and the tokenizer record."""
        if self.config is None:
            rule = ("Google ALBERT's piece rule: a piece starts a word when it begins with "
                    "'▁', is punctuation or holds a character other than an English letter"
                    if self.name == WHITESPACE else "every piece is a word")
            return {"segmenter": self.name, "rule": rule}
        versions = getattr(self.config, "versions", None)
        out: dict[str, Any] = {
            "segmenter": self.name,
            "config": self.config.model_dump(mode="json"),
            "rule": "a mask covers every piece that overlaps a chosen word",
        }
        if callable(versions):
            out["versions"] = versions()
        else:
            module = type(self.config).__module__.split(".")[0]
            out["versions"] = {module: _version(module)}
        return out


def _segmenter_entries() -> dict[str, Any]:
    from albertkit.config.registry import entries, load_plugins

    load_plugins()
    return entries("word segmenter")


def segmenter_names() -> list[str]:
    """Every registered word segmenter (plugins loaded first)."""
    return list(_segmenter_entries())


def segmenter_for(language: str | None) -> str | None:
    """The registered segmenter ``auto`` picks for ``language`` (``None``: the language
    spaces its words, or no segmenter is registered for it)."""
    if not language:
        return None
    code = language.replace("_", "-").split("-")[0].lower()
    for name, entry in _segmenter_entries().items():
        languages = entry.value[1]
        if code in languages or language in languages:
            return name
    return None


def segmenter_config_class(name: str) -> type[BaseModel]:
    """The config class of registered segmenter ``name`` (imported now when it was
    registered by path)."""
    table = _segmenter_entries()
    if name not in table:
        raise PluginError(
            f"unknown word segmenter {name!r}; known: {[*RESERVED, *table]} (a plugin may be "
            "missing: pip install it or check `albertkit plugins`)"
        )
    entry = table[name]
    target = entry.value[0]
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise PluginError(f"word segmenter {name!r} of {entry.source}: cannot import "
                          f"{target}: {type(e).__name__}: {e}") from e


def check_setting(setting: str) -> str:
    """``setting`` if it is ``auto``, ``none``, ``whitespace`` or a registered segmenter;
    else an error listing the known ones."""
    if setting in RESERVED:
        return setting
    names = segmenter_names()
    if setting not in names:
        raise ValueError(f"unknown word segmenter {setting!r}; known: {[*RESERVED, *names]}")
    return setting


def resolve_word_segmentation(setting: str, language: str | None) -> WordSegmentation:
    """What ``word_segmenter: <setting>`` means for text in ``language``.

    ``auto`` picks the segmenter registered for the language (ja: fugashi, zh: jieba,
    th: pythainlp) and ``whitespace`` for every other language (or ``language=None``).

    Example:
        >>> resolve_word_segmentation("auto", "en").name, resolve_word_segmentation("auto", "ja").name
        ('whitespace', 'fugashi')
    """
    check_setting(setting)
    if setting == AUTO:
        setting = segmenter_for(language) or WHITESPACE
    if setting in (NONE, WHITESPACE):
        return WordSegmentation(setting)
    return WordSegmentation(setting, segmenter_config_class(setting)())


# --------------------------------------------------------------------------- pieces and words
def word_starts(piece_lengths: Sequence[int], text: str,
                spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Per piece, whether it starts a word, for pieces of ``piece_lengths`` characters laid
    end to end over ``text`` and the word ``spans`` of ``text`` (the module's rule)."""
    inside = bytearray(len(text) + 1)  # 1: the character continues a word begun before it
    for s, e in spans:
        if e - s > 1:
            inside[s + 1 : e] = b"\x01" * (e - s - 1)
    out = np.zeros(len(piece_lengths), bool)
    pos = 0
    blank_from = -1  # first of the whitespace-only pieces waiting for the next piece
    for i, n in enumerate(piece_lengths):
        first = pos
        end = pos + n
        while first < end and text[first].isspace():
            first += 1
        pos = end
        if first == end:  # only whitespace: goes with the next piece
            if blank_from < 0:
                blank_from = i
            continue
        start = not inside[first]
        if blank_from >= 0:
            out[blank_from] = start
            blank_from = -1
        else:
            out[i] = start
    if blank_from == 0:
        out[0] = True
    return out


def _piece_texts(tokenizer: Tokenizer, normalized: Sequence[str]
                 ) -> list[tuple[list[int], list[int], str]]:
    """Ids, piece lengths and the text the pieces are laid over end to end, for sentences
    already normalised by the tokenizer: SentencePiece's own normalisation of the sentence
    (whitespace as spaces, the dummy-prefix space included) whenever the pieces spell it,
    else (an ``<unk>`` piece, whose length its text does not tell) the sentence itself with
    lengths from SentencePiece's byte offsets."""
    sp = tokenizer.sp
    ids_all = sp.encode(list(normalized))
    norm_all = sp.normalize(list(normalized))
    unk = tokenizer.special_ids["unk"]
    out = []
    for sentence, ids, norm in zip(normalized, ids_all, norm_all, strict=True):
        pieces = sp.id_to_piece(ids)
        if unk not in ids and "".join(pieces) == norm:
            out.append((ids, [len(p) for p in pieces], norm.replace(_SPACE, " ")))
        else:
            ids, spans = _offsets(tokenizer, sentence)
            ends = [e for _, e in spans]
            out.append((ids, np.diff([0, *ends]).tolist(), sentence))
    return out


def _offsets(tokenizer: Tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids of ``text`` (no normalisation) and each piece's characters in it, from
    SentencePiece's byte offsets; a piece's span includes the whitespace its "▁" stands
    for."""
    proto = tokenizer.sp.encode(text, return_type="proto")
    raw = text.encode("utf-8")
    ids, spans = [], []
    byte = char = 0
    for p in proto.pieces:
        start = char + len(raw[byte : p.begin].decode("utf-8"))
        end = start + len(raw[p.begin : p.end].decode("utf-8"))
        byte, char = p.end, end
        ids.append(p.id)
        spans.append((start, end))
    return ids, spans


def encode_with_word_starts(
    tokenizer: Tokenizer, segmenter: WordSegmenter, sentences: Sequence[str]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(ids, word_starts)`` of each sentence: the ids ``tokenizer.encode`` gives, and per
    piece whether it starts a word of ``segmenter`` (the module's rule)."""
    normalized = [tokenizer.normalize(s) for s in sentences]
    out = []
    for ids, lengths, text in _piece_texts(tokenizer, normalized):
        starts = word_starts(lengths, text, segmenter.words(text))
        out.append((np.asarray(ids, np.int32), starts))
    return out


def piece_spans(tokenizer: Tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids of ``text`` (as ``tokenizer.encode`` gives them) and each piece's ``(start, end)``
    characters in ``text``, for text that normalisation leaves as it is
    (``tokenizer.normalize(text) == text``; else a ``ValueError``).

    The span leaves out the whitespace a piece's "▁" stands for; a piece of only
    whitespace has an empty span where the next word starts.

    Example (with a tokenizer trained on a few sentences):
        >>> from albertkit.data import TokenizerConfig, train_tokenizer
        >>> tok = train_tokenizer(None, "tok", TokenizerConfig(vocab_size=20, num_threads=1),
        ...                       sentences=["ab cd", "ab ab", "cd ab"] * 10)
        >>> ids, spans = piece_spans(tok, "ab cd")
        >>> [tok.id_to_piece(i) for i in ids], spans
        (['▁ab', '▁cd'], [(0, 2), (3, 5)])
    """
    if tokenizer.normalize(text) != text:
        raise ValueError(f"piece_spans: {text[:40]!r} changes under the tokenizer's "
                         "normalisation; pass tokenizer.normalize(text)")
    ids, spans = _offsets(tokenizer, text)
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        out.append((s, e))
    return ids, out


def pretokenize(text: str, spans: Sequence[tuple[int, int]],
                delimiter: str = PRETOKENIZATION_DELIMITER) -> str:
    """``text`` with ``delimiter`` at every word boundary not already marked by a space
    (tokenizer training text for SentencePiece's ``pretokenization_delimiter``).

    Example:
        >>> pretokenize("東京でガス", [(0, 2), (2, 3), (3, 5)], "|")
        '東京|で|ガス'
    """
    cuts = sorted({p for s, e in spans for p in (s, e)
                   if 0 < p < len(text) and text[p - 1] != " " and text[p] != " "})
    if not cuts:
        return text
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return delimiter.join(parts)


def boundary_crossing_share(tokenizer: Tokenizer, segmenter: WordSegmenter,
                            sentences: Sequence[str]) -> float:
    """Fraction of the pieces of ``sentences`` that cross a word boundary of ``segmenter``
    (a boundary strictly inside the piece's characters, its leading whitespace left out)."""
    normalized = [tokenizer.normalize(s) for s in sentences]
    crossing = total = 0
    for _, lengths, text in _piece_texts(tokenizer, normalized):
        bounds = bytearray(len(text) + 1)
        for s, e in segmenter.words(text):
            bounds[s] = bounds[e] = 1
        pos = 0
        for n in lengths:
            first, end = pos, pos + n
            pos = end
            while first < end and text[first].isspace():
                first += 1
            if first == end:
                continue
            total += 1
            crossing += any(bounds[first + 1 : end])
    return crossing / max(total, 1)


__all__ = [
    "FugashiSegmenter",
    "JiebaSegmenter",
    "PyThaiNLPSegmenter",
    "WordSegmentation",
    "WordSegmenter",
    "boundary_crossing_share",
    "encode_with_word_starts",
    "piece_spans",
    "pretokenize",
    "resolve_word_segmentation",
    "segmenter_for",
    "word_starts",
]
