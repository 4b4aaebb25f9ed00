"""Host-side half of part (f) of scripts/simulate_sagemaker.sh: a job whose task is a plugin's.

``stage``: reads a plugin's source directory and a config whose data kind (and so task) that
plugin provides, installs the plugin for this process only (its wheel into ``WORK/plugin-site``
on ``sys.path``, as ``pip install`` would on the user's machine; the environment is not
touched), adds the simulation's ``sagemaker:`` values and ``sagemaker.plugins: [the plugin's
directory]``, and stages the one-host job with ``sagemaker_sim.submit_and_lay_out``. Files
the config names (any value that is an existing path relative to the project directory: the
plugin's own for its example config, else the directory of the config given with --config)
travel in ``local`` input channels, unless the config's own ``sagemaker.inputs`` say how.

``check``: the job trained (summary ``completed``, training log lines), its task was the
plugin's, the container installed the shipped wheel, and ``/opt/ml/model`` holds the model.

``make-tiny-plugin``: a small plugin of its own to try the machinery with (a sentence
classification task registered under another name, its data kind, a TSV data set and a
tokenizer): ``--out DIR`` gets ``DIR/pyproject.toml``, the package and ``DIR/example.yaml``.

    python scripts/sagemaker_sim_plugin.py stage --work W --plugin DIR [--config FILE]
    python scripts/sagemaker_sim_plugin.py check --work W
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path

import sagemaker_sim as sim

NAME = "plugin"  # WORK/plugin: the staged job, as WORK/<name> for the other parts
_SKIP = {".git", ".venv", "build", "dist", "__pycache__", "node_modules"}


def find_config(plugin: Path) -> Path:
    """The plugin's example config: the one YAML file in its directory tree."""
    found = sorted(p for p in plugin.rglob("*.y*ml")
                   if not _SKIP & set(p.relative_to(plugin).parts) and p.suffix in (".yaml", ".yml"))
    if len(found) != 1:
        raise SystemExit(f"{plugin}: {len(found)} YAML files ({[str(p) for p in found]}); name "
                         "the example config with --plugin-config")
    return found[0]


def _paths(node, out: set[str], root: Path) -> None:
    if isinstance(node, dict):
        for value in node.values():
            _paths(value, out, root)
    elif isinstance(node, list):
        for value in node:
            _paths(value, out, root)
    elif isinstance(node, str) and node and "://" not in node and "\n" not in node:
        path = Path(node)
        if path.is_absolute() and path.exists():
            out.add(str(path.parent))
        elif not path.is_absolute() and (root / path).exists() and path.parts[0] != "..":
            out.add(path.parts[0])


def stage(args: argparse.Namespace) -> int:
    import yaml

    from albertkit.config import TrainerConfig
    from albertkit.config.registry import entries
    from albertkit.sagemaker.shipping import (
        build_dependency_wheels,
        build_wheels,
        distribution_key,
        install_shipped_plugins,
        read_plugin_source,
    )

    work = Path(args.work).resolve()
    plugin = Path(args.plugin).resolve()
    config = Path(args.config).resolve() if args.config else find_config(plugin)
    source = read_plugin_source(plugin)
    # "pip install" the plugin for this process only, before the first config is parsed
    site = work / "plugin-site"
    built = build_wheels([plugin], site / "code" / "albertkit_plugins")
    build_dependency_wheels(built, site / "code" / "albertkit_plugins" / "deps")
    install_shipped_plugins(site / "code", site / "installed")
    print(f"plugin {source.distribution}: {built[0].name}, installed for this process")

    # the user's project directory, which the config's relative paths are relative to: the
    # plugin's own directory for its example config (run from there, as its comment says),
    # else the directory of the config given with --config
    project = config.parent if args.config else plugin
    os.chdir(project)
    raw = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    own = raw.get("sagemaker") or {}
    section = {**sim._sagemaker_section("albertkit-sim-plugin", 1),
               **{k: v for k, v in own.items() if k in ("inputs", "hyperparameters")},
               "plugins": [str(plugin)]}
    if not section.get("inputs"):
        found: set[str] = set()
        _paths({k: v for k, v in raw.items() if k not in ("sagemaker", "run_dir")}, found,
               project)
        section["inputs"] = {
            f"files{i}": {"kind": "local", "path": str((project / p).resolve()),
                          "path_in_config": p}
            for i, p in enumerate(sorted(found))}
    raw["sagemaker"] = section
    raw.setdefault("distributed", {})["backend"] = "single"
    if args.max_steps:
        raw.setdefault("runtime", {})["max_steps"] = args.max_steps
    cfg = TrainerConfig.from_dict(raw, source=str(config))
    task = entries("task")[cfg.task]
    if distribution_key(task.source.distribution or "") != distribution_key(source.distribution):
        raise SystemExit(f"{config}: task {cfg.task!r} comes from {task.source}, not from the "
                         f"plugin {source.distribution}")
    print(f"config {config}: data kind {cfg.data.kind!r}, task {cfg.task!r} of "
          f"{source.distribution}; inputs {sorted(section['inputs'])}")
    request = sim.submit_and_lay_out(cfg, work / NAME)
    out = work / NAME
    (out / "plugin.json").write_text(json.dumps({
        "distribution": source.distribution, "wheel": built[0].name, "task": cfg.task,
        "kind": cfg.data.kind}))
    channels = sorted(c["ChannelName"] for c in request["InputDataConfig"])
    print(f"channels: {', '.join(channels)}")
    return 0


def check(args: argparse.Namespace) -> int:
    import yaml

    out = Path(args.work).resolve() / NAME
    expected = json.loads((out / "plugin.json").read_text())
    master = out / "algo-1" / "opt" / "ml"
    problems: list[str] = []

    def need(ok: bool, text: str) -> None:
        print(("  ok   " if ok else "  FAIL ") + text)
        if not ok:
            problems.append(text)

    wheel = master / "input" / "data" / "code" / "albertkit_plugins" / expected["wheel"]
    need(wheel.is_file(), f"the code channel carries {expected['wheel']}")
    log_text = (out / "algo-1.log").read_text(errors="replace")
    need("plugins installed from the job's source" in log_text,
         "the entry point installed the shipped plugin before parsing the config")
    summary_path = master / "output" / "data" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    need(summary.get("status") == "completed", f"summary status {summary.get('status')!r}")
    resolved_path = master / "output" / "data" / "config.yaml"
    resolved = yaml.safe_load(resolved_path.read_text()) if resolved_path.is_file() else {}
    need(resolved.get("data", {}).get("kind") == expected["kind"],
         f"the job ran data kind {resolved.get('data', {}).get('kind')!r} (the plugin's "
         f"{expected['kind']!r}, task {expected['task']!r})")
    steps = [ln for ln in log_text.splitlines() if "albertkit step=" in ln]
    need(bool(steps), f"{len(steps)} training log lines"
         + (f", last: {steps[-1].strip()[-100:]}" if steps else ""))
    model = master / "model"
    need((model / "albertkit").is_dir() and any((model / "albertkit").iterdir()),
         "model/albertkit written (the model artifact)")
    files = sorted(p.relative_to(model).as_posix() for p in model.rglob("*") if p.is_file())
    print(f"  model/: {len(files)} files, e.g. {files[:6]}")
    return 1 if problems else 0


# --------------------------------------------------------------------------- a tiny plugin
_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "albertkit-simplug"
version = "0.1"
description = "A tiny albertkit plugin for scripts/simulate_sagemaker.sh part (f)."

[project.entry-points."albertkit.plugins"]
simplug = "albertkit_simplug:register"

[tool.setuptools]
packages = ["albertkit_simplug"]
"""

_PLUGIN = '''\
"""A sentence classification task of its own: albertkit's, under another name."""

from typing import Literal

from pydantic import Field

from albertkit.config.data import ClassificationData
from albertkit.config.registry import register_task


class FilmReviews(ClassificationData):
    """Short film reviews, one sentence and a 0/1 label per line."""

    kind: Literal["film_reviews"] = Field("film_reviews", description="Selects film reviews.")


def register():
    register_task("film_sentiment", "albertkit_simplug.task:FilmSentimentTask",
                  data=[FilmReviews])
'''

_TASK = '''\
"""The task class (imported when a run builds it, so TensorFlow loads only then)."""

from albertkit.tasks.classification import ClassificationTask


class FilmSentimentTask(ClassificationTask):
    """albertkit's classification task; registered by this plugin as film_sentiment."""
'''


def make_tiny_plugin(args: argparse.Namespace) -> int:
    import yaml

    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer

    out = Path(args.out).resolve()
    (out / "albertkit_simplug").mkdir(parents=True, exist_ok=True)
    (out / "pyproject.toml").write_text(_PYPROJECT)
    (out / "albertkit_simplug" / "__init__.py").write_text(_PLUGIN)
    (out / "albertkit_simplug" / "task.py").write_text(_TASK)
    good = ["great", "fine", "warm", "bright", "lovely", "gentle"]
    bad = ["dull", "awful", "cold", "dark", "boring", "grim"]
    rows = [(f"a {w} film about {t}.", int(w in good)) for w in good + bad
            for t in ("love", "war", "ships", "kings", "rain")]
    data = out / "data"
    data.mkdir(exist_ok=True)
    tsv = "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows)
    for name in ("train.tsv", "dev.tsv"):
        (data / name).write_text(tsv)
    train_tokenizer(None, str(data / "tokenizer"), TokenizerConfig(vocab_size=40, num_threads=1),
                    sentences=[s for s, _ in rows])
    config = {
        "run_dir": "runs/film",
        "model": {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 32},
        "data": {"kind": "film_reviews", "task": "sst2", "train_file": "data/train.tsv",
                 "eval_file": "data/dev.tsv", "tokenizer": "data/tokenizer",
                 "max_seq_length": 16},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3},
        "runtime": {"micro_batch_size": 8, "global_batch_size": 8, "max_steps": 20,
                    "eval_every_steps": 10, "xla": False, "seed": 7},
        "checkpoint": {"every_steps": 10},
        "logging": {"log_every_steps": 2},
    }
    (out / "example.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    print(textwrap.dedent(f"""\
        wrote the plugin albertkit-simplug in {out} (pyproject.toml, albertkit_simplug/,
        data/, example.yaml); part (f) with it:
          sudo scripts/simulate_sagemaker.sh --only f --plugin {out}"""))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("stage", help="stage the job of the plugin's config")
    s.add_argument("--work", required=True)
    s.add_argument("--plugin", required=True, help="the plugin's source directory")
    s.add_argument("--config", help="its config (default: the one YAML file in --plugin)")
    s.add_argument("--max-steps", type=int, default=0, help="override runtime.max_steps")
    s.set_defaults(func=stage)
    c = sub.add_parser("check", help="check the finished job")
    c.add_argument("--work", required=True)
    c.set_defaults(func=check)
    m = sub.add_parser("make-tiny-plugin", help="write a small plugin to try part (f) with")
    m.add_argument("--out", required=True)
    m.set_defaults(func=make_tiny_plugin)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
