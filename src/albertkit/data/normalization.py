"""Text normalisation before SentencePiece, and what it would change in a language.

:func:`normalize_text` is the normalisation of Hugging Face's ``AlbertTokenizer`` (v5) and
Google's ``preprocess_text``: the same for every language, so albertkit's ids and the
exported tokenizer's agree. Accent stripping (NFKD, then every non-spacing mark dropped)
is the English ALBERT recipe; it would turn ガ into カ, drop Thai vowels and Devanagari
matras. It cannot be limited to Latin letters here: transformers' ``AlbertTokenizer``
rebuilds its normaliser from ``keep_accents`` whatever ``tokenizer.json`` says, so a
narrower rule would make the two disagree. So the language decides the default instead
(:class:`albertkit.data.language.Language`: only English strips), and
:func:`letters_changed` says, before training, what a setting given against that default
does to the corpus's own letters.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence

from albertkit.data.language import language_info, script_of


def normalize_text(text: str, *, lowercase: bool = True, keep_accents: bool = False) -> str:
    """The normalisation of HF ``AlbertTokenizer`` / Google's ``preprocess_text``."""
    text = " ".join(text.split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents and not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    if lowercase:
        text = text.lower()
    return text


def letters_changed(
    language: str, texts: Sequence[str], *, lowercase: bool, keep_accents: bool
) -> str | None:
    """One line when ``lowercase``/``keep_accents`` depart from ``language``'s defaults in
    a way that changes letters of the language's own scripts in ``texts``; else None.

    Example:
        >>> letters_changed("ja", ["ガスが漏れた。"], lowercase=False, keep_accents=False)
        'keep_accents=false changes 2 letters of the corpus (Katakana 1, Hiragana 1), e.g. ガス -> カス; the ja default keeps them (keep_accents=true)'
    """
    lang = language_info(language)
    given = {"lowercase": lowercase, "keep_accents": keep_accents}
    departs = {k: v for k, v in given.items() if v != getattr(lang, k)}
    if not departs:
        return None
    chars: Counter[str] = Counter()
    nfkc = [unicodedata.normalize("NFKC", t) for t in texts]
    for text in nfkc:
        chars.update(text)

    def after(text: str) -> str:
        return unicodedata.normalize("NFKC", normalize_text(
            text, lowercase=lowercase, keep_accents=keep_accents))

    changed: Counter[str] = Counter()
    first = None
    for char, n in chars.most_common():
        script = script_of(char)
        if script in lang.scripts and after(char) != char:
            changed[script] += n
            first = first or char
    if not changed:
        return None
    word = first
    for text in nfkc:
        at = text.find(first)
        if at >= 0:
            lo, hi = at, at + 1
            while lo > 0 and at - lo < 1 and script_of(text[lo - 1]) in lang.scripts:
                lo -= 1
            while hi < len(text) and hi - at < 2 and script_of(text[hi]) in lang.scripts:
                hi += 1
            word = text[lo:hi]
            break
    settings = ", ".join(f"{k}={str(v).lower()}" for k, v in departs.items())
    defaults = ", ".join(f"{k}={str(getattr(lang, k)).lower()}" for k in departs)
    per_script = ", ".join(f"{s} {n}" for s, n in changed.most_common())
    return (f"{settings} changes {sum(changed.values())} letters of the corpus ({per_script}), "
            f"e.g. {word} -> {after(word)}; the {lang.code} default keeps them ({defaults})")
