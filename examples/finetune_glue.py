"""Fine-tune a pretrained ALBERT on a GLUE-style classification task (SST-2 by default).

The Python-API version of docs/howto/finetune-glue.md. The run is configured by
examples/configs/finetune_<task>.yaml (sst2, mrpc, cola, stsb); other GLUE tasks reuse the
SST-2 config with data.task set. Paths are overridden here.

    python examples/finetune_glue.py --pretrained runs/pretrain-local --task sst2 \
        --train-file data/glue/SST-2/train.tsv --eval-file data/glue/SST-2/dev.tsv
    python examples/finetune_glue.py --tiny        # 16 hand-made SST-2 sentences, ~1 minute

--pretrained is an albertkit run directory or a Hugging Face ALBERT directory; without it a
small model is pretrained first by examples/pretrain_from_text.py. Without --train-file the
script writes a tiny SST-2-style TSV file and trains and evaluates on it (no download).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import _shared
from finetune_squad import small_pretrained_model, tokenizer_of

GLUE_TASKS = ["cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"]

TINY_OVERRIDES = [
    "data.max_seq_length=32",
    "optimizer.learning_rate=1e-3",
    "runtime.xla=false",
    "runtime.micro_batch_size=8",
    "runtime.global_batch_size=8",
    "runtime.max_steps=12",
    "runtime.eval_every_steps=0",
    "checkpoint.every_steps=12",
    "logging.log_every_steps=4",
]


def main() -> int:
    p = _shared.parser(__doc__.splitlines()[0])
    p.add_argument("--pretrained", type=Path, default=None,
                   help="albertkit run directory or Hugging Face ALBERT directory")
    p.add_argument("--task", choices=GLUE_TASKS, default="sst2",
                   help="GLUE preset: columns, labels and headline metric")
    p.add_argument("--train-file", type=Path, default=None, help="TSV, CSV or JSONL")
    p.add_argument("--eval-file", type=Path, default=None,
                   help="evaluation file (default: the training file)")
    args = p.parse_args()
    if args.train_file is None and args.task != "sst2":
        p.error("the built-in sample is SST-2: give --train-file for other tasks")
    _shared.quiet_tensorflow()
    _shared.setup_logging()
    out = _shared.out_dir(args, __file__)

    from albertkit import AlbertTrainer, TrainerConfig

    train_file = args.train_file or _shared.write_sst2_fixture(out / "data" / "sst2.tsv")
    eval_file = args.eval_file or train_file
    pretrained = args.pretrained or small_pretrained_model(out, args.tiny, _shared.sst2_texts())

    config = _shared.CONFIGS / f"finetune_{args.task}.yaml"
    if not config.is_file():
        config = _shared.CONFIGS / "finetune_sst2.yaml"
    run_dir = out / "run"
    overrides = [
        f"run_dir={run_dir}",
        f"model.load_from={pretrained}",
        f"data.task={args.task}",
        f"data.tokenizer={tokenizer_of(pretrained)}",
        f"data.train_file={train_file}",
        f"data.eval_file={eval_file}",
        *(TINY_OVERRIDES if args.tiny else []),
    ]
    if not args.tiny and args.train_file is None:
        overrides += ["runtime.max_steps=100", "runtime.micro_batch_size=8",
                      "runtime.global_batch_size=8", "runtime.eval_every_steps=50",
                      "optimizer.learning_rate=1e-3", "data.max_seq_length=32"]
    cfg = TrainerConfig.from_yaml(config, overrides)
    trainer = AlbertTrainer(cfg).fit()
    if trainer.summary["status"] != "completed":
        print(f"stopped at step {trainer.summary['step']}: run the same command to resume")
        return 130

    scores = {k: round(v, 4) for k, v in trainer.summary["eval"].items() if isinstance(v, float)}
    print("eval:", json.dumps(scores))
    print("best checkpoint:", trainer.summary["best"])
    print(f"export it for PyTorch: albertkit export --format hf {run_dir} {out / 'hf'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
