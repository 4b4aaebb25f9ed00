"""Rule-based English sentence splitting for encyclopedic prose (no downloads, no models).

SOP needs sentence boundaries: segment A and B are runs of whole sentences. A boundary is
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
