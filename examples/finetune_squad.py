"""Fine-tune a pretrained ALBERT on SQuAD v2.0 (or v1.1) and score it with the official metric.

The Python-API version of docs/howto/finetune-squad.md. The run is configured by
examples/configs/finetune_squad_v2.yaml (or _v1.yaml); the paths are overridden here.

    python examples/finetune_squad.py --pretrained runs/pretrain-local \
        --train-file data/squad/train-v2.0.json --eval-file data/squad/dev-v2.0.json
    python examples/finetune_squad.py --tiny       # hand-made SQuAD file, about a minute

--pretrained is an albertkit run directory (its tokenizer/ is used) or a Hugging Face
ALBERT directory (config.json + model.safetensors + tokenizer files). Without it, a small
model is pretrained first by examples/pretrain_from_text.py. Without --train-file the
script writes a hand-made SQuAD-format file with 16 questions and trains on it (no
download); such a model only shows that the path works, it learns nothing general.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import _shared

TINY_OVERRIDES = [
    "data.max_seq_length=128",
    "data.doc_stride=48",
    "data.max_query_length=24",
    "optimizer.learning_rate=1e-3",
    "runtime.xla=false",
    "runtime.micro_batch_size=8",
    "runtime.global_batch_size=8",
    "runtime.max_steps=12",
    "runtime.eval_every_steps=0",
    "checkpoint.every_steps=12",
    "logging.log_every_steps=4",
]


def tokenizer_of(pretrained: Path) -> Path:
    """An albertkit run keeps its tokenizer in run_dir/tokenizer; an HF directory holds it."""
    return pretrained / "tokenizer" if (pretrained / "model_spec.json").is_file() else pretrained


def small_pretrained_model(out: Path, tiny: bool, extra_texts: list[str]) -> Path:
    """Pretrain a small ALBERT whose tokenizer also covers ``extra_texts`` (the fixtures)."""
    from pretrain_from_text import pretrain_from_text, write_default_corpus

    texts = write_default_corpus(out / "corpus", tiny)
    extra = out / "corpus" / "task_texts.txt"
    extra.write_text("\n".join(extra_texts) + "\n", encoding="utf-8")
    print("no --pretrained given: pretraining a small model first (examples/pretrain_from_text.py)")
    return pretrain_from_text([*texts, str(extra)], out / "pretrain", tiny=tiny,
                              steps=None if tiny else 300)


def main() -> int:
    p = _shared.parser(__doc__.splitlines()[0])
    p.add_argument("--pretrained", type=Path, default=None,
                   help="albertkit run directory or Hugging Face ALBERT directory")
    p.add_argument("--version", choices=["1.1", "2.0"], default="2.0")
    p.add_argument("--train-file", type=Path, default=None, help="SQuAD JSON (official format)")
    p.add_argument("--eval-file", type=Path, default=None,
                   help="SQuAD JSON to evaluate on (default: the training file)")
    args = p.parse_args()
    _shared.quiet_tensorflow()
    _shared.setup_logging()
    out = _shared.out_dir(args, __file__)

    from albertkit import AlbertTrainer, TrainerConfig
    from albertkit.tasks import evaluate_squad_files

    train_file = args.train_file or _shared.write_squad_fixture(
        out / "data" / f"squad-v{args.version}.json", args.version)
    eval_file = args.eval_file or train_file
    pretrained = args.pretrained or small_pretrained_model(out, args.tiny, _shared.squad_texts())

    config = _shared.CONFIGS / ("finetune_squad_v2.yaml" if args.version == "2.0"
                                else "finetune_squad_v1.yaml")
    run_dir = out / "run"
    overrides = [
        f"run_dir={run_dir}",
        f"model.load_from={pretrained}",        # weights (and architecture) to start from
        f"data.tokenizer={tokenizer_of(pretrained)}",
        f"data.train_file={train_file}",
        f"data.eval_file={eval_file}",
        *(TINY_OVERRIDES if args.tiny else []),
    ]
    if not args.tiny and args.train_file is None:
        # the hand-made file has 16 questions: a few hundred steps to fit it
        overrides += ["runtime.max_steps=300", "runtime.micro_batch_size=8",
                      "runtime.global_batch_size=8", "runtime.eval_every_steps=100",
                      "optimizer.learning_rate=1e-3", "data.max_seq_length=128",
                      "data.doc_stride=48", "data.max_query_length=24"]
    cfg = TrainerConfig.from_yaml(config, overrides)
    trainer = AlbertTrainer(cfg).fit()
    if trainer.summary["status"] != "completed":
        print(f"stopped at step {trainer.summary['step']}: run the same command to resume")
        return 130

    # The official files: predictions.json, nbest_predictions.json, null_odds.json (v2.0).
    squad_eval = run_dir / "squad_eval"
    print("files:", ", ".join(sorted(f.name for f in squad_eval.glob("*.json"))))
    # Re-score predictions.json from disk exactly as `albertkit evaluate-squad` does.
    na_prob = squad_eval / "null_odds.json" if args.version == "2.0" else None
    scores = evaluate_squad_files(eval_file, squad_eval / "predictions.json", na_prob)
    shown = {k: round(v, 2) for k, v in scores.items() if isinstance(v, float)}
    print("official metric:", json.dumps(shown))
    print("best checkpoint:", trainer.summary["best"])
    command = f"albertkit evaluate-squad {eval_file} {squad_eval / 'predictions.json'}"
    if na_prob:
        command += f" --na-prob-file {na_prob}"
    print(f"same numbers from the command line: {command}")

    try:
        from albertkit.report import write_run_report

        report = write_run_report(run_dir)  # v2.0 adds squad_threshold.png
        print(f"report: {report.markdown} ({', '.join(sorted(report.charts))})")
    except ImportError:
        print("report skipped: for charts, pip install -e '.[report]' in the albertkit clone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
