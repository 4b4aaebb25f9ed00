"""Which language a corpus is in: Unicode scripts, a table of languages and their defaults.

Text is not assumed English. The language is decided once, from the corpus's scripts
(``auto``) or given as a code, and recorded with the tokenizer and the prepared data;
every text step (normalisation, sentences, words, scoring) asks it.

Detection counts the letters (and combining marks) of each Unicode script, by code-point
ranges of the Unicode ``Scripts.txt`` blocks (no dependency). The script group with most
letters decides: Han/kana/Hangul text is Japanese when kana make at least 5% of its CJK
letters, else Korean when Hangul outnumbers Han, else Chinese; other scripts map to their
main language (Cyrillic -> ru, Arabic -> ar, Devanagari -> hi, ...). Latin script alone
cannot tell English from German, so Latin text is decided by counting frequent function
words of a few languages (English unless another one clearly leads). Give the code
explicitly for a language that shares its script with a more common one (uk, fa, mr, ...).

Example:
    >>> guess = detect_language(["東京でガスが漏れた。ジャガイモを食べます。"])
    >>> guess.code, guess.describe()
    ('ja', 'ja (Hiragana 42%, Katakana 37%, Han 21%)')
    >>> detect_language(["The cat sat on the mat, and that was it."]).code
    'en'
    >>> resolve_language("zh", ["这是第一句。这是第二句。"]).code
    'zh'
    >>> language_info("ja").keep_accents, language_info("en").keep_accents
    (True, False)
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from albertkit.errors import LanguageError

AUTO = "auto"

# ---------------------------------------------------------------- scripts by code point
# (first, last, script); from the Unicode 15 block chart. Letters outside every range count
# as "Other"; combining marks of the "Inherited" blocks (U+0300-036F, ...) count for no script.
_RANGES: list[tuple[int, int, str]] = sorted([
    (0x0041, 0x005A, "Latin"), (0x0061, 0x007A, "Latin"), (0x00AA, 0x00AA, "Latin"),
    (0x00BA, 0x00BA, "Latin"), (0x00C0, 0x024F, "Latin"), (0x0250, 0x02AF, "Latin"),
    (0x1D00, 0x1D7F, "Latin"), (0x1E00, 0x1EFF, "Latin"), (0x2C60, 0x2C7F, "Latin"),
    (0xA720, 0xA7FF, "Latin"), (0xAB30, 0xAB6F, "Latin"), (0xFF21, 0xFF3A, "Latin"),
    (0xFF41, 0xFF5A, "Latin"),
    (0x0370, 0x03FF, "Greek"), (0x1F00, 0x1FFF, "Greek"),
    (0x0400, 0x052F, "Cyrillic"), (0x1C80, 0x1C8F, "Cyrillic"), (0x2DE0, 0x2DFF, "Cyrillic"),
    (0xA640, 0xA69F, "Cyrillic"),
    (0x0530, 0x058F, "Armenian"),
    (0x0590, 0x05FF, "Hebrew"), (0xFB1D, 0xFB4F, "Hebrew"),
    (0x0600, 0x06FF, "Arabic"), (0x0750, 0x077F, "Arabic"), (0x0870, 0x08FF, "Arabic"),
    (0xFB50, 0xFDFF, "Arabic"), (0xFE70, 0xFEFF, "Arabic"),
    (0x0900, 0x097F, "Devanagari"), (0xA8E0, 0xA8FF, "Devanagari"),
    (0x0980, 0x09FF, "Bengali"), (0x0A00, 0x0A7F, "Gurmukhi"), (0x0A80, 0x0AFF, "Gujarati"),
    (0x0B00, 0x0B7F, "Oriya"), (0x0B80, 0x0BFF, "Tamil"), (0x0C00, 0x0C7F, "Telugu"),
    (0x0C80, 0x0CFF, "Kannada"), (0x0D00, 0x0D7F, "Malayalam"), (0x0D80, 0x0DFF, "Sinhala"),
    (0x0E00, 0x0E7F, "Thai"), (0x0E80, 0x0EFF, "Lao"), (0x0F00, 0x0FFF, "Tibetan"),
    (0x1000, 0x109F, "Myanmar"), (0x10A0, 0x10FF, "Georgian"), (0x1C90, 0x1CBF, "Georgian"),
    (0x1100, 0x11FF, "Hangul"), (0x3130, 0x318F, "Hangul"), (0xA960, 0xA97F, "Hangul"),
    (0xAC00, 0xD7AF, "Hangul"), (0xD7B0, 0xD7FF, "Hangul"), (0xFFA0, 0xFFDC, "Hangul"),
    (0x1200, 0x139F, "Ethiopic"), (0x1780, 0x17FF, "Khmer"),
    (0x3005, 0x3007, "Han"), (0x3021, 0x3029, "Han"), (0x3038, 0x303B, "Han"),
    (0x3400, 0x4DBF, "Han"), (0x4E00, 0x9FFF, "Han"), (0xF900, 0xFAFF, "Han"),
    (0x20000, 0x323AF, "Han"),
    (0x3041, 0x309F, "Hiragana"), (0x30A0, 0x30FF, "Katakana"), (0x31F0, 0x31FF, "Katakana"),
    (0xFF66, 0xFF9F, "Katakana"),
    (0x3100, 0x312F, "Bopomofo"), (0x31A0, 0x31BF, "Bopomofo"),
])
_STARTS = [r[0] for r in _RANGES]
_INHERITED = ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF),
              (0xFE20, 0xFE2F))
_CJK = frozenset({"Han", "Hiragana", "Katakana", "Hangul", "Bopomofo"})


def script_of(char: str) -> str | None:
    """The script of one letter or mark (``"Latin"``, ``"Han"``, ...); None for anything
    else (digits, punctuation, spaces, inherited combining marks).

    Example:
        >>> script_of("ガ"), script_of("a"), script_of("5"), script_of("ก")
        ('Katakana', 'Latin', None, 'Thai')
    """
    import unicodedata

    if unicodedata.category(char)[0] not in "LM":
        return None
    cp = ord(char)
    if any(a <= cp <= b for a, b in _INHERITED):
        return None
    i = bisect.bisect_right(_STARTS, cp) - 1
    if i >= 0 and cp <= _RANGES[i][1]:
        return _RANGES[i][2]
    return "Other"


def script_counts(texts: Iterable[str], max_chars: int | None = None) -> Counter[str]:
    """Letters per script in ``texts`` (reading at most ``max_chars`` characters)."""
    chars: Counter[str] = Counter()
    seen = 0
    for text in texts:
        if max_chars is not None and seen + len(text) > max_chars:
            text = text[: max_chars - seen]
        chars.update(text)  # counted in C; each distinct character is classified once
        seen += len(text)
        if max_chars is not None and seen >= max_chars:
            break
    scripts: Counter[str] = Counter()
    for char, n in chars.items():
        script = script_of(char)
        if script is not None:
            scripts[script] += n
    return scripts


# ---------------------------------------------------------------- the languages
@dataclass(frozen=True)
class Language:
    """One language albertkit knows, with the defaults of its text steps.

    Attributes:
        code: ISO 639-1 code (``"ja"``).
        name: English name.
        scripts: the scripts its text is written in; the first is the main one.
        cased: its main script has upper and lower case (so lower-casing means something).
        keep_accents: the tokenizer default. Only English follows the ALBERT recipe and
            strips accents; everywhere else a mark is part of a letter (dakuten, matras,
            Thai vowels, Hangul jamo, harakat, niqqud, й, é).
        spaced: words are separated by spaces (False: ja, zh, th, ... need a word segmenter).
    """

    code: str
    name: str
    scripts: tuple[str, ...]
    cased: bool
    keep_accents: bool = True
    spaced: bool = True

    @property
    def lowercase(self) -> bool:
        """The tokenizer default: lower-case where the script has case."""
        return self.cased


def _latin(code: str, name: str, keep_accents: bool = True) -> Language:
    return Language(code, name, ("Latin",), cased=True, keep_accents=keep_accents)


_LANGUAGES: dict[str, Language] = {lang.code: lang for lang in [
    _latin("en", "English", keep_accents=False),
    _latin("de", "German"), _latin("fr", "French"), _latin("es", "Spanish"),
    _latin("it", "Italian"), _latin("pt", "Portuguese"), _latin("nl", "Dutch"),
    _latin("sv", "Swedish"), _latin("da", "Danish"), _latin("no", "Norwegian"),
    _latin("fi", "Finnish"), _latin("pl", "Polish"), _latin("cs", "Czech"),
    _latin("ro", "Romanian"), _latin("hu", "Hungarian"), _latin("tr", "Turkish"),
    _latin("id", "Indonesian"), _latin("vi", "Vietnamese"),
    Language("ru", "Russian", ("Cyrillic",), cased=True),
    Language("uk", "Ukrainian", ("Cyrillic",), cased=True),
    Language("bg", "Bulgarian", ("Cyrillic",), cased=True),
    Language("el", "Greek", ("Greek",), cased=True),
    Language("hy", "Armenian", ("Armenian",), cased=True),
    Language("ka", "Georgian", ("Georgian",), cased=False),
    Language("ar", "Arabic", ("Arabic",), cased=False),
    Language("fa", "Persian", ("Arabic",), cased=False),
    Language("ur", "Urdu", ("Arabic",), cased=False),
    Language("he", "Hebrew", ("Hebrew",), cased=False),
    Language("hi", "Hindi", ("Devanagari",), cased=False),
    Language("mr", "Marathi", ("Devanagari",), cased=False),
    Language("ne", "Nepali", ("Devanagari",), cased=False),
    Language("bn", "Bengali", ("Bengali",), cased=False),
    Language("pa", "Punjabi", ("Gurmukhi",), cased=False),
    Language("gu", "Gujarati", ("Gujarati",), cased=False),
    Language("or", "Odia", ("Oriya",), cased=False),
    Language("ta", "Tamil", ("Tamil",), cased=False),
    Language("te", "Telugu", ("Telugu",), cased=False),
    Language("kn", "Kannada", ("Kannada",), cased=False),
    Language("ml", "Malayalam", ("Malayalam",), cased=False),
    Language("si", "Sinhala", ("Sinhala",), cased=False),
    Language("am", "Amharic", ("Ethiopic",), cased=False),
    Language("th", "Thai", ("Thai",), cased=False, spaced=False),
    Language("lo", "Lao", ("Lao",), cased=False, spaced=False),
    Language("km", "Khmer", ("Khmer",), cased=False, spaced=False),
    Language("my", "Burmese", ("Myanmar",), cased=False, spaced=False),
    Language("bo", "Tibetan", ("Tibetan",), cased=False, spaced=False),
    Language("ja", "Japanese", ("Han", "Hiragana", "Katakana"), cased=False, spaced=False),
    Language("zh", "Chinese", ("Han", "Bopomofo"), cased=False, spaced=False),
    Language("ko", "Korean", ("Hangul", "Han"), cased=False),
]}

# The language a script means when nothing else tells (Latin and CJK are decided apart).
_SCRIPT_LANGUAGE = {
    "Greek": "el", "Cyrillic": "ru", "Armenian": "hy", "Georgian": "ka", "Hebrew": "he",
    "Arabic": "ar", "Devanagari": "hi", "Bengali": "bn", "Gurmukhi": "pa", "Gujarati": "gu",
    "Oriya": "or", "Tamil": "ta", "Telugu": "te", "Kannada": "kn", "Malayalam": "ml",
    "Sinhala": "si", "Thai": "th", "Lao": "lo", "Tibetan": "bo", "Myanmar": "my",
    "Ethiopic": "am", "Khmer": "km",
}

# Frequent function words, enough to tell Latin-script languages apart on a page of text.
_FUNCTION_WORDS = {
    "en": "the and of to in is that it was for with as on are this be by not",
    "de": "der die und das ist nicht ein eine zu den mit sich auf für dem von des auch",
    "fr": "le la les et des est une du que dans pour pas qui sur au avec ce il",
    "es": "el los las del que y en una por con para es se lo como más pero",
    "it": "il di che è la per un non del della sono gli le una con si",
    "pt": "o os de que não do da em um uma para é com dos no se",
    "nl": "de het een en van is dat niet op te zijn met voor die",
    # Vietnamese: its tone marks are letters, so telling it from English matters most
    "vi": "và của có là không những được trong cho người một các với này tôi đi",
}
_WORD_SETS = {code: frozenset(words.split()) for code, words in _FUNCTION_WORDS.items()}
_WORD = re.compile(r"[^\W\d_]+")


def known_languages() -> list[str]:
    """The language codes albertkit knows, sorted.

    Example:
        >>> {"en", "ja", "zh", "ko", "th"} <= set(known_languages())
        True
    """
    return sorted(_LANGUAGES)


def language_info(code: str) -> Language:
    """The :class:`Language` of ``code``; an unknown code raises :class:`LanguageError`
    listing the known ones."""
    try:
        return _LANGUAGES[code]
    except KeyError:
        raise LanguageError(
            f"language {code!r} is not known; known: {AUTO}, {', '.join(known_languages())}"
        ) from None


# ---------------------------------------------------------------- detection
@dataclass(frozen=True)
class LanguageGuess:
    """A language decided for a text.

    Attributes:
        code: the language code.
        script_shares: share of the letters per script, largest first (sums to 1; empty
            when the text has no letters).
        letters: how many letters were counted.
        detected: True when ``code`` came from the text (``auto``), False when given.
    """

    code: str
    script_shares: dict[str, float] = field(default_factory=dict)
    letters: int = 0
    detected: bool = True

    @property
    def language(self) -> Language:
        return language_info(self.code)

    def shares_text(self) -> str:
        """``"Han 41%, Hiragana 38%"`` (scripts under 0.5% are left out)."""
        parts = [f"{s} {round(100 * v)}%" for s, v in self.script_shares.items() if v >= 0.005]
        return ", ".join(parts) if parts else "no letters"

    def describe(self) -> str:
        """``"ja (Han 41%, Hiragana 38%, Katakana 12%, Latin 9%)"``."""
        return f"{self.code} ({self.shares_text()})"

    def to_record(self) -> dict:
        """What the tokenizer's ``albertkit_tokenizer.json`` and a dataset's
        ``manifest.json`` keep (``"language"``); :func:`recorded_language` reads it back."""
        return {"code": self.code, "detected": self.detected,
                "script_shares": {k: round(v, 4) for k, v in self.script_shares.items()}}


def recorded_language(record: object) -> str:
    """The code of a ``"language"`` record (:meth:`LanguageGuess.to_record`); ``"en"`` when
    there is none (files written before albertkit recorded languages). A record without a
    known code raises :class:`LanguageError`."""
    if record is None:
        return "en"
    code = record.get("code") if isinstance(record, dict) else None
    if not isinstance(code, str):
        raise LanguageError(f"language record {record!r} has no code")
    return language_info(code).code


def _shares(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    if not total:
        return {}
    return {s: n / total for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


def _latin_language(texts: list[str]) -> str:
    hits: Counter[str] = Counter()
    for text in texts:
        for word in _WORD.findall(text.lower()):
            for code, words in _WORD_SETS.items():
                if word in words:
                    hits[code] += 1
    if not hits:
        return "en"
    best, n = max(hits.items(), key=lambda kv: (kv[1], kv[0] == "en"))
    # English unless another language clearly leads (shared words like "de", "la" tie)
    return best if n >= 1.2 * hits.get("en", 0) else "en"


def _main_group(counts: Counter[str]) -> tuple[str, Counter[str]]:
    """The script group with most letters (``"Latin"``, ``"CJK-ja"``, ...) and all groups."""
    groups: Counter[str] = Counter()
    for script, n in counts.items():
        groups["CJK" if script in _CJK else script] += n
    main = max(groups.items(), key=lambda kv: (kv[1], kv[0] == "Latin"))[0]
    if main == "CJK":
        kana = counts["Hiragana"] + counts["Katakana"]
        if kana >= 0.05 * groups["CJK"]:
            main = "CJK-ja"
        else:
            main = "CJK-ko" if counts["Hangul"] > counts["Han"] else "CJK-zh"
    return main, groups


def text_script_group(text: str) -> str | None:
    """The :func:`script_group` ``text`` belongs to by its letters (None: no letters); cheaper
    than :func:`detect_language` (no word counting for Latin text).

    Example:
        >>> text_script_group("Größe"), text_script_group("ガス"), text_script_group("42")
        ('Latin', 'CJK-ja', None)
    """
    counts = script_counts([text])
    return _main_group(counts)[0] if counts else None


def _code_for(counts: Counter[str], texts: list[str]) -> str:
    if not counts:
        return "en"
    main, groups = _main_group(counts)
    if main.startswith("CJK-"):
        return main[4:]
    if main == "Latin":
        return _latin_language(texts)
    for script, _ in groups.most_common():  # "Other" letters: the next script that says
        if script in _SCRIPT_LANGUAGE:
            return _SCRIPT_LANGUAGE[script]
    return "en"


def detect_language(texts: Iterable[str], *, max_chars: int = 2_000_000) -> LanguageGuess:
    """The language of ``texts`` from their scripts (reads at most ``max_chars`` characters).

    Text without letters is English (what albertkit assumed before it asked).
    """
    sample: list[str] = []
    seen = 0
    for text in texts:
        sample.append(text[: max_chars - seen])
        seen += len(sample[-1])
        if seen >= max_chars:
            break
    counts = script_counts(sample)
    return LanguageGuess(
        code=_code_for(counts, sample),
        script_shares=_shares(counts),
        letters=sum(counts.values()),
    )


def script_group(code: str) -> str:
    """What script detection can tell apart: ``"Latin"``, ``"Cyrillic"``, ... and one group
    per CJK language (``"CJK-ja"``)."""
    lang = language_info(code)
    main = lang.scripts[0]
    return f"CJK-{code}" if main in _CJK else main


def mismatch(code: str, guess: LanguageGuess) -> bool:
    """Whether text detected as ``guess`` is clearly not in language ``code``: its scripts
    hold under 20% of the letters, or it is another CJK language (ja/zh/ko differ in kana
    and Hangul, not in script alone). Text without letters matches every language."""
    if not guess.letters:
        return False
    lang = language_info(code)
    own = sum(guess.script_shares.get(s, 0.0) for s in lang.scripts)
    if own < 0.2:
        return True
    return script_group(code).startswith("CJK") and script_group(guess.code).startswith(
        "CJK") and script_group(code) != script_group(guess.code)


def resolve_language(
    setting: str,
    texts: Iterable[str] | None = None,
    *,
    max_chars: int = 2_000_000,
    fallback: str = "en",
) -> LanguageGuess:
    """The language to use for a corpus: ``setting`` is ``"auto"`` or a language code.

    ``auto`` detects it from ``texts``; without texts it is ``fallback`` (a fine-tuning
    config passes the language its tokenizer records: ``Tokenizer.language``). A given code is
    checked: an unknown one, or one the corpus is clearly not written in (see
    :func:`mismatch`), raises :class:`LanguageError` in one line saying both languages and
    the script shares.
    """
    if setting == AUTO:
        if texts is None:
            return LanguageGuess(language_info(fallback).code, detected=False)
        return detect_language(texts, max_chars=max_chars)
    lang = language_info(setting)
    if texts is None:
        return LanguageGuess(lang.code, detected=False)
    guess = detect_language(texts, max_chars=max_chars)
    if mismatch(lang.code, guess):
        raise LanguageError(
            f"language {lang.code!r} ({lang.name}) was given, but the corpus looks like "
            f"{guess.code!r} ({guess.shares_text()}); give --language {guess.code} or "
            f"--language {AUTO}, or check the input files"
        )
    return LanguageGuess(lang.code, guess.script_shares, guess.letters, detected=False)
