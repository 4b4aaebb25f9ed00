"""``albertkit pretrain|demo|evaluate|export``: training runs from a config, and their outputs.

Thin wrappers over the Python API (``AlbertTrainer``, ``export_run``); ``finetune`` (in
``albertkit.cli.finetune``) shares :func:`load_config` and :func:`run_training`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from albertkit.cli.nproc import add_nproc_argument

BACKENDS = ["single", "horovod", "tf_multiworker"]


def add_config_arguments(p: argparse.ArgumentParser, required: bool = True) -> None:
    """``--config FILE`` and repeatable ``--set key.path=value``."""
    p.add_argument("--config", "-c", required=required, type=Path, help="YAML or JSON config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. --set optimizer.learning_rate=1e-3 (repeatable)")


def load_config(args: argparse.Namespace):
    """The command's config: file, ``--set`` overrides, then ``--distributed``/``--run-dir``.

    A ``sagemaker:`` section is kept as it is: a local run never reads it (``albertkit
    launch`` and ``to_sagemaker()`` validate it).
    """
    from albertkit.config import TrainerConfig

    # Flag values are typed already: set them as they are. Re-parsed as YAML, a run
    # directory "runs/x #tmp" would lose its comment-like tail and train in runs/x.
    values: dict[str, object] = {}
    if getattr(args, "distributed", None):
        values["distributed.backend"] = args.distributed
    if getattr(args, "run_dir", None):
        values["run_dir"] = str(args.run_dir)
    return TrainerConfig.from_yaml(args.config, list(args.overrides), values=values)


def run_training(args: argparse.Namespace, expected_task: str | None,
                 refused_task: str | None = None) -> int:
    """Load the config, supervise ``--nproc`` local processes or train here, print the summary.

    The config must train ``expected_task`` (when given) and must not train
    ``refused_task`` (``finetune`` without a family refuses a pretraining config)."""
    from albertkit.distributed.launch import launch_if_requested
    from albertkit.training.trainer import AlbertTrainer

    cfg = load_config(args)
    code = launch_if_requested(getattr(args, "nproc", None), cfg.distributed.backend,
                               getattr(args, "argv", []))
    if code is not None:  # this process only supervised N local training processes
        return code
    if expected_task and cfg.task != expected_task:
        raise SystemExit(f"error: {args.config}: data.kind={cfg.data.kind!r} is a {cfg.task} "
                         f"config, not {expected_task}")
    if refused_task and cfg.task == refused_task:
        raise SystemExit(f"error: {args.config}: data.kind={cfg.data.kind!r} is a {cfg.task} "
                         f"config: run it with `albertkit {cfg.task.removesuffix('ing')}`")
    trainer = AlbertTrainer(cfg).fit()
    print_summary(trainer)
    return 0


def print_summary(trainer) -> None:
    s = trainer.summary or {}
    ev = s.get("eval") or {}
    shown = {k: round(v, 4) for k, v in ev.items() if isinstance(v, float)}
    print(f"{s.get('status', 'done')}: step {s.get('step')} in {s.get('wall_seconds')} s "
          f"({s.get('sequences_per_second')} seq/s); eval {shown}; "
          f"summary: {trainer.run_dir / 'summary.json'}")


# ---------------------------------------------------------------------- pretrain
def add_pretrain_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("pretrain", help="pretrain ALBERT (MLM + SOP) from a config")
    add_config_arguments(p)
    p.add_argument("--distributed", choices=BACKENDS,
                   help="override distributed.backend (run under horovodrun/mpirun for horovod)")
    p.add_argument("--run-dir", type=Path, help="override run_dir")
    add_nproc_argument(p)
    p.set_defaults(func=run_pretrain)
    return p


def run_pretrain(args: argparse.Namespace) -> int:
    return run_training(args, expected_task="pretraining")


# ---------------------------------------------------------------------- demo
def add_demo_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("demo", help="pretrain a tiny ALBERT on the built-in English corpus")
    p.add_argument("--run-dir", type=Path, default=Path("runs/demo"))
    p.add_argument("--steps", type=int, default=None, help="override the number of steps")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=run_demo)
    return p


def run_demo(args: argparse.Namespace) -> int:
    from albertkit.data.demo import demo_config
    from albertkit.training.trainer import AlbertTrainer

    cfg = demo_config(run_dir=args.run_dir, max_steps=args.steps, overrides=args.overrides)
    trainer = AlbertTrainer(cfg).fit()
    print_summary(trainer)
    return 0


def checkpoint_choice(value: str) -> str | int:
    """argparse type of ``--checkpoint``: newest, best or a step number."""
    from albertkit.training.checkpoint import parse_checkpoint_choice

    try:
        return parse_checkpoint_choice(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected newest, best or a step number") from None


def add_checkpoint_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--checkpoint", type=checkpoint_choice, default="newest",
                   metavar="best|newest|STEP",
                   help=f"which checkpoint of the run to {what}: newest (the default), best "
                        "(the one kept for the best eval metric) or a step number")


# ---------------------------------------------------------------------- evaluate
def add_evaluate_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("evaluate",
                              help="evaluate a checkpoint of a run (the newest by default)")
    add_config_arguments(p)
    p.add_argument("--run-dir", type=Path, help="override run_dir")
    add_checkpoint_argument(p, "evaluate")
    p.set_defaults(func=run_evaluate)
    return p


def run_evaluate(args: argparse.Namespace) -> int:
    import json

    from albertkit.training.trainer import AlbertTrainer

    metrics = AlbertTrainer(load_config(args)).evaluate(checkpoint=args.checkpoint)
    print(json.dumps(metrics, indent=2))
    return 0


# ---------------------------------------------------------------------- export
def add_export_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("export",
                              help="export a checkpoint of a run (the newest by default)")
    p.add_argument("run_dir", type=Path)
    p.add_argument("out_dir", type=Path)
    p.add_argument("--format", choices=["hf", "albertkit"], default="hf")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a previous export in OUT_DIR (a directory holding anything "
                        "else is never replaced)")
    add_checkpoint_argument(p, "export")
    p.set_defaults(func=run_export)
    return p


def run_export(args: argparse.Namespace) -> int:
    from albertkit.training.export import export_run

    out = export_run(args.run_dir, args.out_dir, format=args.format, overwrite=args.overwrite,
                     checkpoint=args.checkpoint)
    print(f"exported {args.run_dir} -> {out} ({args.format})")
    return 0
