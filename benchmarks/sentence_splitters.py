"""Sentence splitters compared on hand-checked sentences: Japanese, Chinese and English.

The sets: ``tests/fixtures/languages/sentences_{ja,zh}.txt`` (205 sentences each, one per
line, a blank line between paragraphs; each paragraph is joined into one document) and the
English cases of ``tests/test_data_corpus.py`` (18 sentences). A sentence counts when a
splitter returns it exactly. Libraries that are not installed are skipped and named:
pysbd is albertkit's dependency; ``pip install sentencex bunkai pyicu`` for the others (PyICU
needs the ICU headers, ``libicu-dev``).

Usage: ``python benchmarks/sentence_splitters.py [--json out.json]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "languages"

ENGLISH = [  # the cases of tests/test_data_corpus.py::test_sentence_splitter
    ["Dr. Smith paid $3.50 for it.", '"Why?" he asked.', "J. R. R. Tolkien agreed."],
    ["The U.S. Army was founded in 1775.", "It is large."],
    ["Pi is about 3.14159.", "That is, e.g. Archimedes knew it."],
    ["See Fig. 3 for details.", "Mr. Jones (born Jan. 5) came too!", "Did he?"],
    ['She said "Stop."', "Then she left."],
    ["Wait... what happened?", "Nothing."],
    ["It costs 10 vs. 20 i.e. Less.", "Version 3.11 is out.", "2024 was a year."],
    ["no capital after. the period keeps it together."],
]


def paragraphs(code: str) -> list[list[str]]:
    out, current = [], []
    text = (FIXTURES / f"sentences_{code}.txt").read_text(encoding="utf-8")
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(current)
            current = []
    return out


def recovered(split, paras: list[list[str]], joiner: str) -> int:
    found = 0
    for para in paras:
        got = [s.strip() for s in split(joiner.join(para)) if s.strip()]
        found += sum(1 for s in para if s in got)
    return found


def candidates(code: str) -> dict:
    """name -> split function for ``code``, for the libraries installed here."""
    out = {}
    if code == "en":
        from albertkit.data.sentences import split_sentences

        out["albertkit rules"] = split_sentences
    else:
        from albertkit.data.sentences import SentenceSplitting

        out["albertkit (pysbd + closers)"] = SentenceSplitting(code)
    if importlib.util.find_spec("pysbd"):
        import pysbd

        seg = pysbd.Segmenter(language=code, clean=False)
        out["pysbd"] = seg.segment
    if importlib.util.find_spec("sentencex"):
        import sentencex

        out["sentencex"] = lambda t, c=code: list(sentencex.segment(c, t))
    if importlib.util.find_spec("icu"):
        import icu

        def icu_split(text: str, c: str = code) -> list[str]:
            it = icu.BreakIterator.createSentenceInstance(icu.Locale(c))
            it.setText(text)
            parts, start = [], 0
            for end in it:
                parts.append(text[start:end])
                start = end
            return parts

        out["icu"] = icu_split
    if code == "ja" and importlib.util.find_spec("bunkai"):
        from bunkai import Bunkai

        bunkai = Bunkai()
        out["bunkai"] = lambda t: list(bunkai(t))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    sets = {"ja": (paragraphs("ja"), ""), "zh": (paragraphs("zh"), ""), "en": (ENGLISH, " ")}
    rows = []
    for code, (paras, joiner) in sets.items():
        total = sum(len(p) for p in paras)
        for name, split in candidates(code).items():
            found = recovered(split, paras, joiner)
            rows.append({"language": code, "splitter": name, "found": found, "total": total})
            print(f"{code} {name}: {found}/{total} ({100 * found / total:.1f}%)", flush=True)
    missing = [m for m in ("pysbd", "sentencex", "icu", "bunkai") if not importlib.util.find_spec(m)]
    if missing:
        print(f"not installed (skipped): {', '.join(missing)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
