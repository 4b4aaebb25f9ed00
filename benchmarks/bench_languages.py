"""Benchmark: prepare-data on Japanese with word segmentation beside English (not a test).

The question it answers: what a Japanese corpus costs to prepare, with fugashi (MeCab +
UniDic-lite) finding the words for whole-word masking, against an English corpus of the same
size, measured side by side on the same host. The target is at most 2x the CPU time per MB
of English.

Corpora (each ``--mb`` MB of UTF-8, one document per line, written into ``--work``):

* Japanese: ``--ja FILE`` (real text, one document per line), else documents made from the
  sentences of ``tests/fixtures/words/ja.txt`` in shuffled order (repeated text: fine for
  speed, not for anything learnt);
* English: ``--en FILE``, else the demo prose (Python's documentation), perturbed as
  ``bench_data.py`` does.

Each corpus gets its own tokenizer (Japanese: trained inside fugashi's words), then
``prepare_pretraining_data`` runs in this process (``num_workers=1``), static masking, seq
512, and the CPU time of the process is taken around it. For Japanese the tokenize phase is
also split: SentencePiece alone against SentencePiece plus segmentation, on the same
sentences.

Usage::

    python benchmarks/bench_languages.py --work /tmp/albertkit-lang [--mb 5] [--dupe-factor 2]

Prints one JSON line per measurement, then a summary line with the ratio and the CPU.
Figures from a loaded machine are not worth quoting: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JA_SENTENCES = ROOT / "tests" / "fixtures" / "words" / "ja.txt"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _fill(path: Path, megabytes: float, make_line) -> int:
    size = 0
    with open(path, "w", encoding="utf-8") as fh:
        while size < megabytes * 1e6:
            line = make_line() + "\n"
            fh.write(line)
            size += len(line.encode("utf-8"))
    return size


def japanese_corpus(path: Path, megabytes: float, seed: int = 0) -> int:
    sentences = [s for s in JA_SENTENCES.read_text("utf-8").splitlines() if s.strip()]
    rng = random.Random(seed)
    return _fill(path, megabytes, lambda: "".join(rng.sample(sentences, 12)))


def english_corpus(path: Path, megabytes: float, seed: int = 0) -> int:
    from albertkit.data.demo import stdlib_documents

    docs = [" ".join(d) for d in stdlib_documents()]
    rng = random.Random(seed)

    def line() -> str:
        words = rng.choice(docs).split()
        return " ".join(w for w in words if rng.random() > 0.05)

    return _fill(path, megabytes, line)


def copy_corpus(source: Path, path: Path, megabytes: float) -> int:
    """The first ``megabytes`` MB (whole lines) of a corpus the user gave."""
    size = 0
    with open(source, encoding="utf-8") as src, open(path, "w", encoding="utf-8") as dst:
        for line in src:
            if size >= megabytes * 1e6:
                break
            dst.write(line)
            size += len(line.encode("utf-8"))
    return size


def prepare(language: str, corpus: Path, tok, work: Path, dupe: int, segmenter: str) -> dict:
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data

    out = work / f"data-{language}"
    shutil.rmtree(out, ignore_errors=True)
    cfg = PretrainingDataConfig(inputs=[str(corpus)], seq_length=512, dupe_factor=dupe,
                                num_shards=2, seed=1, word_segmenter=segmenter,
                                language=language)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    m = prepare_pretraining_data(cfg, tok, out, num_workers=1, progress=False)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    mb = corpus.stat().st_size / 1e6
    return {"what": "prepare", "language": language,
            "segmenter": m["word_segmentation"]["segmenter"], "mb": round(mb, 2),
            "examples": m["examples"]["train"], "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2), "cpu_s_per_mb": round(cpu / mb, 3),
            "masked_share": m["masked_share"].get("train")}


def tokenize_split(corpus: Path, tok, limit: int = 20000) -> dict:
    """CPU seconds per MB of SentencePiece alone, and with fugashi's word starts."""
    from albertkit.data.segmenters import FugashiSegmenter, encode_with_word_starts

    text = corpus.read_text("utf-8")
    sentences = [s + "。" for s in text.replace("\n", "").split("。") if s][:limit]
    mb = sum(len(s.encode("utf-8")) for s in sentences) / 1e6
    segmenter = FugashiSegmenter().build()
    t0 = time.process_time()
    tok.encode_batch(sentences)
    plain = time.process_time() - t0
    t0 = time.process_time()
    encode_with_word_starts(tok, segmenter, sentences)
    segmented = time.process_time() - t0
    return {"what": "tokenize", "language": "ja", "mb": round(mb, 3),
            "sentencepiece_cpu_s_per_mb": round(plain / mb, 3),
            "with_segmenter_cpu_s_per_mb": round(segmented / mb, 3)}


def main(argv: list[str] | None = None) -> list[dict]:
    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch directory")
    ap.add_argument("--mb", type=float, default=5.0, help="MB of text per language")
    ap.add_argument("--dupe-factor", type=int, default=2)
    ap.add_argument("--ja", type=Path, default=None, help="Japanese text, a document a line")
    ap.add_argument("--en", type=Path, default=None, help="English text, a document a line")
    ap.add_argument("--ja-vocab", type=int, default=590,
                    help="Japanese vocabulary (590: what the built-in sentences can fill)")
    ap.add_argument("--en-vocab", type=int, default=8000)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for lang, given, build, vocab, segmenter in (
        ("ja", args.ja, japanese_corpus, args.ja_vocab, "fugashi"),
        ("en", args.en, english_corpus, args.en_vocab, "auto"),
    ):
        corpus = args.work / f"{lang}.txt"
        if given is not None:
            copy_corpus(given, corpus, args.mb)
        else:
            build(corpus, args.mb)
        tok = train_tokenizer(
            [corpus], args.work / f"tok-{lang}",
            TokenizerConfig(vocab_size=vocab, keep_accents=lang != "en", num_threads=1,
                            word_segmenter=segmenter, input_sentence_size=200_000,
                            language=lang),
            overwrite=True)
        if lang == "ja":
            results.append(tokenize_split(corpus, tok))
            print(json.dumps(results[-1]), flush=True)
        results.append(prepare(lang, corpus, tok, args.work, args.dupe_factor, segmenter))
        print(json.dumps(results[-1]), flush=True)
    ja, en = (r for r in results if r["what"] == "prepare")
    summary = {"what": "summary", "cpu": cpu_name(), "python": sys.version.split()[0],
               "ja_over_en_cpu_per_mb": round(ja["cpu_s_per_mb"] / en["cpu_s_per_mb"], 2),
               "target": "<= 2.0"}
    print(json.dumps(summary), flush=True)
    results.append(summary)
    return results


if __name__ == "__main__":
    main()
