"""The ``albertkit`` command line: thin argparse wrappers over the Python API.

The environment is read here (and in the SageMaker entry point), never in configs. Errors
reach users as one ``error: ...`` line naming the file/field; ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from albertkit.training.run_logger import setup_console_logging

log = logging.getLogger("albertkit")


def _add_config_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--config", "-c", required=required, type=Path, help="YAML or JSON config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. --set optimizer.learning_rate=1e-3 (repeatable)")


def load_config(args: argparse.Namespace):
    from albertkit.config import TrainerConfig

    overrides = list(args.overrides)
    if getattr(args, "distributed", None):
        overrides.append(f"distributed.backend={args.distributed}")
    if getattr(args, "run_dir", None):
        overrides.append(f"run_dir={args.run_dir}")
    return TrainerConfig.from_yaml(args.config, overrides)


# ---------------------------------------------------------------------- commands
def cmd_train(args: argparse.Namespace) -> int:
    from albertkit.training.trainer import AlbertTrainer

    cfg = load_config(args)
    from albertkit.distributed.launch import launch_if_requested

    code = launch_if_requested(getattr(args, "nproc", None), cfg.distributed.backend,
                               getattr(args, "argv", []))
    if code is not None:  # this process only supervised N local training processes
        return code
    expected = getattr(args, "expected_task", None)
    if expected and cfg.task != expected:
        raise SystemExit(f"error: {args.config}: data.kind={cfg.data.kind!r} is a {cfg.task} "
                         f"config, not {expected}")
    trainer = AlbertTrainer(cfg).fit()
    _print_summary(trainer)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from albertkit.data.demo import demo_config
    from albertkit.training.trainer import AlbertTrainer

    cfg = demo_config(run_dir=args.run_dir, max_steps=args.steps, overrides=args.overrides)
    trainer = AlbertTrainer(cfg).fit()
    _print_summary(trainer)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    import json

    from albertkit.training.trainer import AlbertTrainer

    metrics = AlbertTrainer(load_config(args)).evaluate()
    print(json.dumps(metrics, indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from albertkit.training.export import export_run

    out = export_run(args.run_dir, args.out_dir, format=args.format)
    print(f"exported {args.run_dir} -> {out} ({args.format})")
    return 0


def _print_summary(trainer) -> None:
    s = trainer.summary or {}
    ev = s.get("eval") or {}
    shown = {k: round(v, 4) for k, v in ev.items() if isinstance(v, float)}
    print(f"{s.get('status', 'done')}: step {s.get('step')} in {s.get('wall_seconds')} s "
          f"({s.get('sequences_per_second')} seq/s); eval {shown}; "
          f"summary: {trainer.run_dir / 'summary.json'}")


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from albertkit.distributed.launch import add_launch_arguments

    parser = argparse.ArgumentParser(
        prog="albertkit",
        description="Pretrain and fine-tune ALBERT with TensorFlow 2 + Keras 3.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("pretrain", help="pretrain ALBERT (MLM + SOP) from a config")
    _add_config_args(p)
    p.add_argument("--distributed", choices=["single", "horovod", "tf_multiworker"],
                   help="override distributed.backend (run under horovodrun/mpirun for horovod)")
    p.add_argument("--run-dir", type=Path, help="override run_dir")
    add_launch_arguments(p)
    p.set_defaults(func=cmd_train, expected_task="pretraining")

    p = sub.add_parser("finetune", help="fine-tune on SQuAD or a GLUE-style task")
    p.add_argument("task", choices=["squad", "glue"], help="task family of the config")
    _add_config_args(p)
    p.add_argument("--distributed", choices=["single", "horovod", "tf_multiworker"])
    p.add_argument("--run-dir", type=Path, help="override run_dir")
    add_launch_arguments(p)
    p.set_defaults(func=_cmd_finetune)

    p = sub.add_parser("demo", help="pretrain a tiny ALBERT on the built-in English corpus")
    p.add_argument("--run-dir", type=Path, default=Path("runs/demo"))
    p.add_argument("--steps", type=int, default=None, help="override the number of steps")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("evaluate", help="evaluate the newest checkpoint of a run")
    _add_config_args(p)
    p.add_argument("--run-dir", type=Path, help="override run_dir")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", help="export a run's newest checkpoint")
    p.add_argument("run_dir", type=Path)
    p.add_argument("out_dir", type=Path)
    p.add_argument("--format", choices=["hf", "albertkit"], default="hf")
    p.set_defaults(func=cmd_export)

    _add_optional_commands(sub)
    return parser


def _cmd_finetune(args: argparse.Namespace) -> int:
    args.expected_task = "squad" if args.task == "squad" else "classification"
    return cmd_train(args)


def _add_optional_commands(sub) -> None:
    """Subcommands that live beside the code they drive (each module owns its arguments)."""
    from albertkit.benchmark import add_parser as add_benchmark
    from albertkit.cli.sagemaker import add_launch_parser
    from albertkit.config_tools import add_parser as add_config
    from albertkit.data.commands import add_prepare_data_parser, add_train_tokenizer_parser
    from albertkit.report import add_parser as add_report
    from albertkit.sagemaker.defaults import sagemaker_defaults_from_env
    from albertkit.tasks.commands import add_parser as add_squad_eval

    add_train_tokenizer_parser(sub)
    add_prepare_data_parser(sub)
    add_squad_eval(sub)
    add_launch_parser(sub, sagemaker_defaults_from_env(os.environ))  # env read here, not in configs
    add_benchmark(sub)
    add_report(sub)
    add_config(sub, sagemaker_defaults_from_env(os.environ))


def _error_text(e: BaseException) -> str:
    """``str(e)``; for TensorFlow runtime errors, without the graph-construction stack
    ("Detected at node ... defined at", ``File ...`` lines) and the ``{{node ...}}`` noise."""
    import re

    text = str(e)
    if not type(e).__module__.startswith("tensorflow"):
        return text
    skip = ('File "', "Graph execution error", "Detected at node", "[[")
    lines = [ln.strip() for ln in text.splitlines()]
    kept = " ".join(ln for ln in lines if ln and not ln.startswith(skip))
    kept = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", kept)
    kept = re.sub(r"\s*\[Op:[^\]]*\](\s*name:.*)?$", "", kept).strip()
    if "word_embeddings" in text and " is not in [0, " in kept:
        kept += " (a token id >= model.vocab_size: data made with a larger tokenizer?)"
    return f"{type(e).__name__}: {kept or text.strip()}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--debug" not in argv:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv)  # re-used by the local N-process launcher (--nproc)
    setup_console_logging(debug=args.debug)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - the CLI turns every failure into one clear line
        if args.debug:
            raise
        print(f"error: {_error_text(e)}", file=sys.stderr)
        print("(run with --debug for a traceback)", file=sys.stderr)
        return 2

