"""``albertkit finetune [squad|glue]`` and ``albertkit evaluate-squad``.

``evaluate-squad`` prints the same JSON the official SQuAD scripts print:
``{"exact_match", "f1"}`` for v1.1 and ``{"exact", "f1", "total", "HasAns_*", "NoAns_*",
["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]}`` for v2.0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from albertkit.cli.nproc import add_nproc_argument
from albertkit.cli.train import BACKENDS, add_config_arguments, run_training

# the task family named on the command line -> the task its config's data.kind selects
_FAMILY_TASK = {"squad": "squad", "glue": "classification"}


# ---------------------------------------------------------------------- finetune
def add_finetune_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "finetune", help="fine-tune on SQuAD, a GLUE-style task or a plugin's task",
        description="Fine-tune from a config. The config's data.kind selects the task (a "
        "plugin's too); naming the family (squad or glue) also checks the config is one.")
    p.add_argument("task", nargs="?", choices=list(_FAMILY_TASK),
                   help="task family the config must be (optional)")
    add_config_arguments(p)
    p.add_argument("--distributed", choices=BACKENDS)
    p.add_argument("--run-dir", type=Path, help="override run_dir")
    add_nproc_argument(p)
    p.set_defaults(func=run_finetune)
    return p


def run_finetune(args: argparse.Namespace) -> int:
    if args.task is None:  # any fine-tuning task the config's data.kind selects
        return run_training(args, expected_task=None, refused_task="pretraining")
    return run_training(args, expected_task=_FAMILY_TASK[args.task])


# ---------------------------------------------------------------------- evaluate-squad
def add_evaluate_squad_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``evaluate-squad``: the official SQuAD v1.1 / v2.0 evaluation."""
    p = subparsers.add_parser(
        "evaluate-squad",
        help="score SQuAD predictions with the official v1.1/v2.0 metrics",
        description="Score predictions.json against an official SQuAD file. The version is "
        "read from the data file unless --version is given.",
    )
    p.add_argument("data_file", type=Path, metavar="DATA.json", help="official SQuAD dataset")
    p.add_argument(
        "pred_file",
        type=Path,
        metavar="PREDICTIONS.json",
        help="question id -> answer text ('' = no answer)",
    )
    p.add_argument(
        "--na-prob-file",
        type=Path,
        default=None,
        metavar="F",
        help="question id -> no-answer score (v2.0; e.g. null_odds.json)",
    )
    p.add_argument(
        "--na-prob-thresh",
        type=float,
        default=1.0,
        help="predict no answer when the no-answer score exceeds this (default 1.0)",
    )
    p.add_argument(
        "--version",
        choices=["1.1", "2.0"],
        default=None,
        help="SQuAD version (default: from the data file)",
    )
    p.add_argument(
        "--language",
        default=None,
        metavar="CODE",
        help="language of the answers: ja or zh score characters (the CMRC 2018 convention); "
        "default: the official English definitions",
    )
    p.add_argument("--out-file", type=Path, default=None, help="also write the JSON here")
    p.set_defaults(func=run_evaluate_squad)
    return p


def run_evaluate_squad(args: argparse.Namespace) -> int:
    from albertkit.fileio import atomic_write_text
    from albertkit.tasks.squad_metrics import evaluate_squad_files

    result = evaluate_squad_files(
        args.data_file,
        args.pred_file,
        args.na_prob_file,
        version=args.version,
        na_prob_thresh=args.na_prob_thresh,
        language=args.language,
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out_file is not None:
        atomic_write_text(args.out_file, text + "\n")
    return 0
