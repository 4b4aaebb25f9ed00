"""Benchmark: prepare-data CPU seconds per MB, Japanese (fugashi finding the words for
whole-word masking) against English of the same size, side by side (target: at most 2x).

Corpora of ``--mb`` MB each, a document a line: ``--ja FILE`` / ``--en FILE`` (their first
``--mb`` MB), else Japanese made of the sentences of ``tests/fixtures/words/ja.txt`` in
shuffled order (fine for speed, not for anything learnt) and English of the demo prose with
5% of its words dropped. Each gets its own tokenizer, then ``prepare_pretraining_data`` runs
in this process (one worker, static masking, seq 512) under ``time.process_time``; for
Japanese the tokenize phase is also timed alone, SentencePiece against SentencePiece plus
segmentation. Prints one JSON line per measurement, then a summary with the ratio and the
CPU. Run it on a quiet machine:

    python benchmarks/bench_languages.py --work /tmp/albertkit-lang [--mb 5] [--dupe-factor 2]
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

JA_SENTENCES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "words" / "ja.txt"


def cpu_name() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def write_corpus(path: Path, megabytes: float, lines) -> None:
    """Whole lines of the iterable ``lines`` until ``megabytes`` MB are written."""
    size = 0
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            if size >= megabytes * 1e6:
                break
            fh.write(line)
            size += len(line.encode("utf-8"))


def made_lines(language: str, seed: int = 0):
    rng = random.Random(seed)
    if language == "ja":
        sentences = [s for s in JA_SENTENCES.read_text("utf-8").splitlines() if s.strip()]
        while True:
            yield "".join(rng.sample(sentences, 12)) + "\n"
    from albertkit.data.demo import stdlib_documents

    docs = [" ".join(d) for d in stdlib_documents()]
    while True:
        yield " ".join(w for w in rng.choice(docs).split() if rng.random() > 0.05) + "\n"


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
    t1 = time.process_time()
    encode_with_word_starts(tok, segmenter, sentences)
    t2 = time.process_time()
    return {"what": "tokenize", "language": "ja", "mb": round(mb, 3),
            "sentencepiece_cpu_s_per_mb": round((t1 - t0) / mb, 3),
            "with_segmenter_cpu_s_per_mb": round((t2 - t1) / mb, 3)}


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
    for lang, given, vocab, segmenter in (("ja", args.ja, args.ja_vocab, "fugashi"),
                                          ("en", args.en, args.en_vocab, "auto")):
        corpus = args.work / f"{lang}.txt"
        if given is not None:
            with open(given, encoding="utf-8") as source:
                write_corpus(corpus, args.mb, source)
        else:
            write_corpus(corpus, args.mb, made_lines(lang))
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
    results.append({"what": "summary", "cpu": cpu_name(), "python": sys.version.split()[0],
                    "ja_over_en_cpu_per_mb": round(ja["cpu_s_per_mb"] / en["cpu_s_per_mb"], 2),
                    "target": "<= 2.0"})
    print(json.dumps(results[-1]), flush=True)
    return results


if __name__ == "__main__":
    main()
