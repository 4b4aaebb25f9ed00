"""How often segment B of a sentence-order pair starts at a sentence start, per language.

ALBERT's sentence-order prediction swaps two runs of whole sentences; a segment B that starts
in the middle of a sentence (its sentence was not found, or the pair was cut at the front)
teaches less. This prepares data with albertkit's ``prepare-data`` code (dynamic masking,
so the records hold the unmasked ids) on

* Japanese and Chinese: the hand-checked sets under ``tests/fixtures/languages/`` (one
  paragraph = one document),
* English: sentences of Python's own documentation (``pydoc_data.topics``), five to a
  document like the other two sets, as many documents as both together,

and counts the segments B whose first pieces are the first three pieces of one of the
corpus's true sentences (the hand-checked lines; for English the sentences the documents were
made of), each tokenised on its own as prepare-data tokenises a sentence. With
``--english-rules`` the Japanese and Chinese corpora are split by the English rule set
instead, as albertkit did before it asked for a language (a registered splitter, the way a
plugin would replace one).

Usage: ``python benchmarks/sentence_starts.py [--seq-length 128] [--dupe-factor 5]
[--english-rules] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from albertkit.data.protobuf import decode_varint, fields
from albertkit.data.tfrecord import read_records
from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "languages"


def fixture_documents(code: str) -> list[list[str]]:
    docs, current = [], []
    text = (FIXTURES / f"sentences_{code}.txt").read_text(encoding="utf-8")
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if line.strip():
            current.append(line.strip())
        elif current:
            docs.append(current)
            current = []
    return docs


def english_documents(n_docs: int, per_doc: int = 5) -> list[list[str]]:
    from pydoc_data import topics

    from albertkit.data.sentences import split_sentences

    prose = [s for name in sorted(topics.topics)
             for s in split_sentences(topics.topics[name]) if 20 <= len(s) <= 300]
    return [prose[i : i + per_doc] for i in range(0, per_doc * n_docs, per_doc)]


def int64_features(record: bytes) -> dict[str, list[int]]:
    """``tf.train.Example`` int64 features, parsed by hand (no TensorFlow)."""
    out = {}
    for f in fields(record):  # Example.features
        for entry in fields(f.value):  # Features.feature (map entries)
            parts = {g.number: g.value for g in fields(entry.value)}
            key = parts[1].decode()
            for kind in fields(parts[2]):  # Feature: 3 = int64_list
                if kind.number != 3:
                    continue
                values = []
                for packed in fields(kind.value):
                    buf = packed.value
                    if isinstance(buf, int):
                        values.append(buf)
                        continue
                    i = 0
                    while i < len(buf):
                        v, i = decode_varint(buf, i)
                        values.append(v)
                out[key] = values
    return out


def measure(code: str, sentences: list[list[str]], work: Path, seq_length: int,
            dupe: int) -> dict:
    joiner = " " if code == "en" else ""
    docs = [joiner.join(d) for d in sentences]
    corpus = work / f"{code}.txt"
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    chars = len({c for d in docs for c in d})
    tok = train_tokenizer([corpus], work / f"tok-{code}",
                          TokenizerConfig(vocab_size=max(chars + 40, 400), num_threads=1,
                                          character_coverage=1.0, input_sentence_size=10**6))
    out = work / f"data-{code}"
    cfg = PretrainingDataConfig(inputs=[str(corpus)], language=code, seq_length=seq_length,
                                masking="dynamic", dupe_factor=dupe, num_shards=1, seed=1)
    prepare_pretraining_data(cfg, tok, out, num_workers=1, progress=False, keep_work=True)
    found = len(np.load(out / ".work" / "tok-00000.sent.npy"))  # sentences prepare-data saw
    prefixes = {tuple(tok.encode(s)[:3]) for d in sentences for s in d}
    hits = total = 0
    for record in read_records(next(out.glob("train-*.tfrecord"))):
        features = int64_features(record)
        input_ids = features["input_ids"]
        seps = [i for i, t in enumerate(input_ids) if t == tok.sep_id]
        b = input_ids[seps[0] + 1 : seps[1]]
        total += 1
        hits += tuple(b[:3]) in prefixes or any(tuple(b) == p for p in prefixes if len(p) < 3)
    return {"language": code, "documents": len(docs),
            "sentences": sum(len(d) for d in sentences), "sentences_found": found,
            "pairs": total, "b_at_sentence_start": round(hits / max(total, 1), 4)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--dupe-factor", type=int, default=5)
    p.add_argument("--english-rules", action="store_true",
                   help="split Japanese and Chinese with the English rules (the old behaviour)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    if args.english_rules:
        from albertkit.config.registry import register_sentence_splitter
        from albertkit.data.sentences import RulesSplitter

        register_sentence_splitter("english_everywhere", RulesSplitter, languages=["ja", "zh"])
    ja, zh = fixture_documents("ja"), fixture_documents("zh")
    en = english_documents(len(ja) + len(zh))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for code, docs in (("en", en), ("ja", ja), ("zh", zh)):
            rows.append(measure(code, docs, Path(tmp), args.seq_length, args.dupe_factor))
            print(json.dumps(rows[-1]), flush=True)
    english = rows[0]["b_at_sentence_start"]
    for row in rows[1:]:
        gap = 100 * (english - row["b_at_sentence_start"])
        print(f"{row['language']}: {100 * row['b_at_sentence_start']:.1f}% of segments B start "
              f"a sentence, English {100 * english:.1f}% ({gap:+.1f} points behind)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
