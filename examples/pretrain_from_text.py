"""Raw text to a pretrained ALBERT: tokenizer, pretraining data, training, report.

The Python-API version of docs/howto/train-tokenizer.md, prepare-data.md and
pretrain-locally.md. The run is configured by examples/configs/howto_pretrain_local.yaml;
only the paths (and, with --tiny, the sizes) are overridden here.

    python examples/pretrain_from_text.py --text corpus/*.txt --out runs/my-albert
    python examples/pretrain_from_text.py            # Python's own docs as the corpus
    python examples/pretrain_from_text.py --tiny     # a few steps, about a minute on a CPU

Without --text the corpus is English prose that ships with Python (no download). Run the
same command again and training resumes from the newest checkpoint.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import _shared

# --tiny: a smaller vocabulary and sequence, a handful of steps, no XLA compile wait.
TINY_OVERRIDES = [
    "model.vocab_size=1000",
    "data.seq_length=64",
    "data.max_predictions_per_seq=10",
    "optimizer.schedule.warmup_steps=2",
    "runtime.xla=false",
    "runtime.micro_batch_size=8",
    "runtime.global_batch_size=16",
    "runtime.max_steps=6",
    "runtime.eval_every_steps=0",
    "runtime.eval_steps=2",
    "checkpoint.every_steps=3",
    "logging.log_every_steps=2",
]


def write_default_corpus(folder: Path, tiny: bool) -> list[str]:
    """Python's documentation as a one-document-per-line corpus (no download)."""
    if tiny:
        return [str(_shared.write_sample_corpus(folder / "python_docs.txt", limit=30))]
    # ~2 MB: help() topics plus the standard library's docstrings (the `albertkit demo` text)
    from albertkit.data import stdlib_documents

    path = folder / "stdlib_docs.txt"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(" ".join(doc) for doc in stdlib_documents()) + "\n",
                    encoding="utf-8")
    return [str(path)]


def pretrain_from_text(texts: list[str], out: Path, tiny: bool = False,
                       steps: int | None = None, extra_overrides: list[str] | None = None) -> Path:
    """Train a tokenizer on ``texts``, prepare pretraining data, pretrain; returns the run dir."""
    from albertkit import AlbertTrainer, TrainerConfig
    from albertkit.data import (
        PretrainingDataConfig,
        TokenizerConfig,
        prepare_pretraining_data,
        train_tokenizer,
    )

    tokenizer_dir, data_dir, run_dir = out / "tokenizer", out / "data" / "pretrain", out / "run"
    overrides = [
        f"run_dir={run_dir}",
        f"data.tokenizer={tokenizer_dir}",
        f"data.train_files={json.dumps([str(data_dir / 'train-*.tfrecord')])}",
        f"data.eval_files={json.dumps([str(data_dir / 'eval-*.tfrecord')])}",
        *(TINY_OVERRIDES if tiny else []),
        *([f"runtime.max_steps={steps}"] if steps else []),
        *(extra_overrides or []),
    ]
    # The config is validated before any work starts: a typo fails here, not in an hour.
    cfg = TrainerConfig.from_yaml(_shared.CONFIGS / "howto_pretrain_local.yaml", overrides)

    # 1. Tokenizer: SentencePiece unigram with the ALBERT recipe, saved as a Hugging Face
    #    tokenizer directory. Its vocabulary size is the model's.
    tok_cfg = TokenizerConfig(vocab_size=cfg.model.vocab_size, num_threads=1 if tiny else 4)
    tokenizer = train_tokenizer(texts, tokenizer_dir, tok_cfg)
    print(f"[1/3] tokenizer: {tokenizer_dir} ({tokenizer.vocab_size} pieces)")

    # 2. Pretraining data: sentence-order pairs with n-gram masking, sharded TFRecords plus
    #    a held-out split. Same inputs + seed = same bytes; re-running reuses finished work.
    data_cfg = PretrainingDataConfig(
        inputs=texts, seq_length=cfg.data.seq_length,
        max_predictions_per_seq=cfg.data.max_predictions_per_seq,
        dupe_factor=2 if tiny else 5, eval_fraction=0.1 if tiny else 0.05,
        eval_dupe_factor=5)  # several A/B cuts per held-out document: enough eval pairs
    manifest = prepare_pretraining_data(data_cfg, tokenizer, data_dir,
                                        num_workers=1 if tiny else None, overwrite=True)
    print(f"[2/3] data: {data_dir} ({manifest['examples']} examples)")

    # 3. Pretraining (resumes by itself when run_dir already holds checkpoints).
    trainer = AlbertTrainer(cfg).fit()
    print(f"[3/3] run: {run_dir}")
    ev = trainer.summary["eval"]
    if "mlm_accuracy" in ev:
        print(f"      held-out MLM accuracy {ev['mlm_accuracy']:.3f} (most-frequent-token "
              f"baseline {ev.get('mlm_baseline_accuracy', float('nan')):.3f}), "
              f"SOP accuracy {ev['sop_accuracy']:.3f}")
    return run_dir


def write_report(run_dir: Path) -> None:
    """PNG charts + report.md (what `albertkit report RUN_DIR` does); needs matplotlib."""
    try:
        from albertkit.report import write_run_report

        report = write_run_report(run_dir)
    except ImportError:
        print("report skipped: for charts, pip install -e '.[report]' in the albertkit clone")
        return
    print(f"report: {report.markdown} ({', '.join(sorted(report.charts))})")


def main() -> int:
    p = _shared.parser(__doc__.splitlines()[0])
    p.add_argument("--text", nargs="+", default=None,
                   help="text files or globs, one document per line (default: Python's docs)")
    p.add_argument("--steps", type=int, default=None, help="override runtime.max_steps")
    args = p.parse_args()
    _shared.quiet_tensorflow()
    _shared.setup_logging()
    out = _shared.out_dir(args, __file__)
    texts = args.text or write_default_corpus(out / "corpus", args.tiny)
    run_dir = pretrain_from_text(texts, out, tiny=args.tiny, steps=args.steps)
    write_report(run_dir)
    print(f"next: albertkit export --format hf {run_dir} {out / 'hf'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
