"""``albertkit train-tokenizer`` and ``albertkit prepare-data``.

Each ``func`` returns a process exit code: 0 on success, 2 on a data/tokenizer error (the
message, naming file/line/setting, goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from albertkit.data.corpus import DEFAULT_MAX_LINE_BYTES


def _fail(e: Exception) -> int:
    print(f"error: {e}", file=sys.stderr)
    return 2


def _option_errors(e) -> ValueError:
    """A pydantic ValidationError as one line naming each command-line option and value."""
    parts = []
    for err in e.errors():
        opt = ".".join(str(p) for p in err["loc"]).replace("_", "-")
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"--{opt}: {msg} (got {err.get('input')!r})" if opt else msg)
    return ValueError("; ".join(parts))


def add_train_tokenizer_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``train-tokenizer``: text files -> SentencePiece + HF tokenizer directory."""
    p = subparsers.add_parser(
        "train-tokenizer",
        help="train an ALBERT SentencePiece tokenizer on text files",
        description="Train a SentencePiece unigram tokenizer with the ALBERT recipe and save "
        "spiece.model plus a Hugging Face tokenizer directory.",
    )
    p.add_argument("inputs", nargs="+", help="text files, directories or globs (.gz ok)")
    p.add_argument("--out", required=True, help="tokenizer directory to write")
    p.add_argument("--vocab-size", type=int, default=30000)
    p.add_argument(
        "--language",
        default="auto",
        help="language code (en, ja, zh, ko, th, de, ...) or auto: decided from the corpus's "
        "Unicode scripts (default: %(default)s)",
    )
    p.add_argument(
        "--lowercase", action=argparse.BooleanOptionalAction, default=None,
        help="lower-case the text (default: where the language's script has case)")
    p.add_argument(
        "--keep-accents", action=argparse.BooleanOptionalAction, default=None,
        help="keep combining marks (default: English strips accents, the ALBERT recipe; every "
        "other language keeps them)")
    p.add_argument("--character-coverage", type=float, default=0.99995)
    p.add_argument(
        "--input-format",
        choices=["document_per_line", "sentence_per_line"],
        default="document_per_line",
    )
    p.add_argument("--encoding-errors", choices=["fail", "skip"], default="fail")
    p.add_argument(
        "--max-line-bytes",
        type=int,
        default=DEFAULT_MAX_LINE_BYTES,
        help="longest input line; a longer one is an error naming file and line "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--input-sentence-size", type=int, default=10_000_000, help="sentences sampled for training"
    )
    p.add_argument(
        "--num-threads",
        type=int,
        default=4,
        help="training threads (part of the result: same threads, same model)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--word-segmenter", default="auto", metavar="NAME",
        help="learn pieces inside the words of a segmenter: auto (ja: fugashi, zh: jieba, "
        "th: pythainlp, other languages: none), none or whitespace (the text as it is), or a "
        "registered segmenter; default: auto")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a tokenizer in --out that prepared data still uses (prepare it again)",
    )
    p.set_defaults(func=run_train_tokenizer)
    return p


def run_train_tokenizer(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
    from albertkit.errors import CorpusError, TokenizerError

    try:
        cfg = TokenizerConfig(
            vocab_size=args.vocab_size,
            language=args.language,
            lowercase=args.lowercase,
            keep_accents=args.keep_accents,
            character_coverage=args.character_coverage,
            input_format=args.input_format,
            encoding_errors=args.encoding_errors,
            max_line_bytes=args.max_line_bytes,
            input_sentence_size=args.input_sentence_size,
            num_threads=args.num_threads,
            seed=args.seed,
            word_segmenter=args.word_segmenter,
        )
        t0 = time.time()
        tok = train_tokenizer(args.inputs, args.out, cfg, overwrite=args.overwrite, say=print)
    except ValidationError as e:
        return _fail(_option_errors(e))
    except (CorpusError, TokenizerError, ValueError) as e:
        return _fail(e)
    print(
        f"tokenizer: {args.out} (vocab {tok.vocab_size}, special ids {tok.special_ids}, "
        f"{time.time() - t0:.1f} s)"
    )
    return 0


def add_prepare_data_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``prepare-data``: text files -> sharded pretraining TFRecords + manifest."""
    p = subparsers.add_parser(
        "prepare-data",
        help="turn text files into sharded ALBERT pretraining TFRecords",
        description="Create sentence-order pairs with n-gram masking (static) or unmasked "
        "pairs for dynamic masking, written as TFRecord shards with a manifest.json. "
        "Re-running resumes; finished directories are reused.",
    )
    p.add_argument("inputs", nargs="+", help="text files, directories or globs (.gz ok)")
    p.add_argument("--tokenizer", required=True, help="tokenizer directory or spiece.model")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--language",
        default="auto",
        help="language code (en, ja, zh, ko, th, de, ...) or auto: decided from the corpus's "
        "Unicode scripts; decides how sentences are split (default: %(default)s)",
    )
    p.add_argument(
        "--input-format",
        choices=["document_per_line", "sentence_per_line"],
        default="document_per_line",
    )
    p.add_argument("--encoding-errors", choices=["fail", "skip"], default="fail")
    p.add_argument(
        "--max-line-bytes",
        type=int,
        default=DEFAULT_MAX_LINE_BYTES,
        help="longest input line; a longer one is an error naming file and line "
        "(default: %(default)s)",
    )
    p.add_argument("--seq-length", type=int, default=512)
    p.add_argument(
        "--max-predictions-per-seq", type=int, default=None,
        help="masked positions per sequence (default: ceil(masked-lm-prob x seq-length), "
        "77 at 512; Google's fixed default was 20)")
    p.add_argument("--short-seq-prob", type=float, default=0.1)
    p.add_argument("--dupe-factor", type=int, default=10)
    p.add_argument("--masking", choices=["static", "dynamic"], default="static")
    p.add_argument("--masked-lm-prob", type=float, default=0.15)
    p.add_argument("--max-ngram", type=int, default=3)
    p.add_argument("--num-shards", type=int, default=None, help="default: ~20k examples each")
    p.add_argument(
        "--eval-fraction",
        type=float,
        default=0.0,
        help="fraction of documents held out as eval-*.tfrecord",
    )
    p.add_argument("--eval-shards", type=int, default=1)
    p.add_argument("--eval-dupe-factor", type=int, default=1)
    p.add_argument("--min-document-tokens", type=int, default=4)
    p.add_argument(
        "--word-segmenter", default="auto", metavar="NAME",
        help="words for whole-word masking: auto (ja: fugashi, zh: jieba, th: pythainlp, "
        "other languages: whitespace), none (single pieces), whitespace (Google's rule on "
        "the pieces) or a registered segmenter (albertkit plugins); default: auto")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--num-workers", type=int, default=None, help="processes (default: all CPUs)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace data prepared with other settings in --out",
    )
    p.add_argument("--keep-work", action="store_true", help="keep tokenised arrays in --out/.work")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True)
    p.set_defaults(func=run_prepare_data)
    return p


def run_prepare_data(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from albertkit.config import MaskingConfig
    from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data
    from albertkit.errors import CorpusError, DataPreparationError, TokenizerError

    try:
        cfg = PretrainingDataConfig(
            inputs=args.inputs,
            language=args.language,
            input_format=args.input_format,
            encoding_errors=args.encoding_errors,
            max_line_bytes=args.max_line_bytes,
            seq_length=args.seq_length,
            max_predictions_per_seq=args.max_predictions_per_seq,
            short_seq_prob=args.short_seq_prob,
            dupe_factor=args.dupe_factor,
            masking=args.masking,
            masking_rules=MaskingConfig(
                masked_lm_prob=args.masked_lm_prob, max_ngram=args.max_ngram
            ),
            num_shards=args.num_shards,
            eval_fraction=args.eval_fraction,
            eval_shards=args.eval_shards,
            eval_dupe_factor=args.eval_dupe_factor,
            min_document_tokens=args.min_document_tokens,
            seed=args.seed,
            word_segmenter=args.word_segmenter,
        )
        manifest = prepare_pretraining_data(
            cfg,
            args.tokenizer,
            args.out,
            num_workers=args.num_workers,
            progress=args.progress,
            overwrite=args.overwrite,
            keep_work=args.keep_work,
            say=print,
        )
    except ValidationError as e:
        return _fail(_option_errors(e))
    except (CorpusError, TokenizerError, DataPreparationError, ValueError) as e:
        return _fail(e)
    summary = {k: manifest[k] for k in ("examples", "documents", "masking", "seq_length")}
    summary["skipped_lines"] = manifest["read"]["skipped_lines"]
    print(f"{args.out}: {json.dumps(summary)}")
    return 0
