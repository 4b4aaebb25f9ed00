"""The ``albertkit`` command line: thin argparse wrappers over the Python API.

The commands, their options and their exit statuses are public (``docs/``); in Python, only
:func:`main` is.

The environment is read here (and in the SageMaker entry point), never in configs. Errors
reach users as one ``error: ...`` line naming the file/field; ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from albertkit import __version__
from albertkit.cli.config import add_config_parser
from albertkit.cli.data import add_prepare_data_parser, add_train_tokenizer_parser
from albertkit.cli.doctor import add_doctor_parser
from albertkit.cli.finetune import add_evaluate_squad_parser, add_finetune_parser
from albertkit.cli.train import (
    add_demo_parser,
    add_evaluate_parser,
    add_export_parser,
    add_pretrain_parser,
)
from albertkit.training.run_logger import setup_console_logging

__all__ = ["main"]

log = logging.getLogger("albertkit")
# Commands that start TensorFlow: they start it lean, and without --debug with its C++ start-up
# lines held back (albertkit.tfstart).
TENSORFLOW_COMMANDS = frozenset({"pretrain", "finetune", "demo", "evaluate", "export"})


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """Every ``albertkit`` subcommand. Each module of this package registers its commands
    with ``add_<command>_parser(subparsers)``; their handlers are ``run_<command>(args)``."""
    parser = argparse.ArgumentParser(
        prog="albertkit",
        description="Pretrain and fine-tune ALBERT with TensorFlow 2 + Keras 3.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("--version", action="version", version=f"albertkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_pretrain_parser(sub)
    add_finetune_parser(sub)
    add_demo_parser(sub)
    add_evaluate_parser(sub)
    add_export_parser(sub)
    add_doctor_parser(sub)
    _add_optional_commands(sub)
    return parser


def _add_optional_commands(sub) -> None:
    """Subcommands whose parsers still live beside the code they drive."""
    from albertkit.cli.benchmark import add_benchmark_parser
    from albertkit.cli.jobs import add_jobs_parser
    from albertkit.cli.plan import add_plan_parser
    from albertkit.cli.plugins import add_plugins_parser
    from albertkit.cli.report import add_report_parser
    from albertkit.cli.sagemaker import add_launch_parser
    from albertkit.sagemaker.defaults import sagemaker_defaults_from_env

    add_train_tokenizer_parser(sub)
    add_prepare_data_parser(sub)
    add_evaluate_squad_parser(sub)
    add_launch_parser(sub, sagemaker_defaults_from_env(os.environ))  # env read here, not in configs
    add_jobs_parser(sub, sagemaker_defaults_from_env(os.environ))
    add_benchmark_parser(sub)
    add_plan_parser(sub, sagemaker_defaults_from_env(os.environ))
    add_report_parser(sub)
    add_config_parser(sub, sagemaker_defaults_from_env(os.environ))
    add_plugins_parser(sub)


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


def _supervises(args: argparse.Namespace) -> bool:
    """Whether this process only supervises ``--nproc`` local processes (it then never
    starts TensorFlow; they do)."""
    from albertkit.distributed.launch import LAUNCHED_ENV

    return bool(getattr(args, "nproc", None)) and not os.environ.get(LAUNCHED_ENV)


def quiet_imports(environ) -> None:
    """Hold back what the libraries albertkit imports print at start-up, before they are
    imported (``--debug`` keeps it all); a variable the user set wins.

    * ``TF_CPP_MIN_LOG_LEVEL=2``: TensorFlow's C++ INFO and WARNING lines (the rest, written
      before that setting applies, is held back by :mod:`albertkit.tfstart`);
    * ``TRANSFORMERS_NO_ADVISORY_WARNINGS=1``: transformers' advice, such as "PyTorch was not
      found. Models won't be available ..." at every import in a TensorFlow-only
      installation: albertkit uses transformers only for tokenizers and never needs PyTorch.

    Set in the environment, so the processes a command starts (data-preparation workers,
    ``--nproc`` ranks) inherit them.
    """
    environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def main(argv: list[str] | None = None) -> int:
    """Run one ``albertkit`` command; returns its exit status.

    ``argv`` is the command line without the program name (default: ``sys.argv[1:]``), for
    example ``main(["pretrain", "--config", "pretrain.yaml"])``. A failure albertkit
    diagnoses prints one ``error: ...`` line and returns 2 (``--debug`` raises it instead).
    """
    argv = sys.argv[1:] if argv is None else argv
    if "--debug" not in argv:
        quiet_imports(os.environ)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv)  # re-used by the local N-process launcher (--nproc)
    setup_console_logging(debug=args.debug)
    try:
        if "ALBERTKIT_PLUGINS" in os.environ:
            from albertkit.config.registry import limit_plugins, plugin_names

            # the plugins this process may load (all when unset): read here, not in configs
            limit_plugins(plugin_names(os.environ["ALBERTKIT_PLUGINS"]))
        if args.command in TENSORFLOW_COMMANDS and not _supervises(args):
            from albertkit.tfstart import start_tensorflow

            start_tensorflow(quiet=not args.debug)
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

