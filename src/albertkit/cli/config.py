"""``albertkit config schema|show|reference``: the JSON Schema, the resolved view, the reference.

The config package generates the schema and the reference from its models; the ``sagemaker:``
extension section is composed in here, from the SageMaker package that owns its schema (the
config package never imports it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from albertkit.config import TrainerConfig
from albertkit.config.reference import (
    GENERATOR,
    MODELINE,
    SCHEMA_FILE,
    ExtensionSection,
    json_schema,
    reference_markdown,
)
from albertkit.errors import ConfigError
from albertkit.fileio import atomic_write_text, load_yaml


def extension_sections() -> tuple[ExtensionSection, ...]:
    """The typed extension sections a config file may hold."""
    from albertkit.sagemaker.config import SECTION_DESCRIPTION, SageMakerConfig

    return (ExtensionSection("sagemaker", SageMakerConfig, SECTION_DESCRIPTION),)


def config_schema() -> dict[str, Any]:
    """The JSON Schema of a config file, extension sections included."""
    return json_schema(extension_sections())


def config_reference() -> str:
    """``docs/configuration.md``, extension sections included."""
    return reference_markdown(extension_sections())


# =========================================================================== show
def resolved_view(cfg: TrainerConfig) -> dict[str, Any]:
    """The config (defaults filled in), the resolved model architecture and derived values.

    The architecture comes from ``albertkit.training.builders.resolve_spec`` (preset + overrides, or
    the ``model.load_from`` checkpoint's); when ``load_from`` cannot be read here, from the
    preset with a note. A ``sagemaker:`` section is validated and shown with its defaults.
    """
    from albertkit.training.builders import resolve_spec

    notes: list[str] = []
    try:
        spec = resolve_spec(cfg)
        source = (f"model.load_from={cfg.model.load_from}" if cfg.model.load_from
                  else f"size preset {cfg.model.size!r} + overrides")
    except ConfigError as e:
        spec = cfg.model.spec
        source = f"size preset {cfg.model.size!r} + overrides"
        notes.append(f"model.load_from is not readable here ({e}); showing the preset")
    derived: dict[str, Any] = {"task": cfg.task}
    replicas = 1
    config = cfg.to_dict()
    from albertkit.sagemaker.config import SageMakerConfig  # on use: not for local runs

    sm = SageMakerConfig.from_trainer_config(cfg)
    if sm is not None:
        config["sagemaker"] = sm.model_dump(mode="json", exclude_none=True)
        try:
            replicas = int(sm.replicas)
            derived["sagemaker_replicas"] = replicas
        except Exception as e:  # noqa: BLE001 - a derived value must not hide the config
            notes.append(f"sagemaker replicas unknown: {e}")
    try:
        derived[f"accumulation_steps ({replicas} replica{'s' if replicas > 1 else ''})"] = (
            cfg.runtime.accumulation_steps(replicas))
    except ConfigError as e:
        notes.append(str(e))
    derived["warmup_steps"] = cfg.optimizer.schedule.resolved_warmup(cfg.runtime.max_steps)
    view = {"config": _kind_first(config), "model_spec": spec.model_dump(mode="json"),
            "model_spec_source": source, "derived": derived}
    if notes:
        view["notes"] = notes
    return view


def _kind_first(node: Any) -> Any:
    """The same data with every section's ``kind`` key first (it says what the rest means)."""
    if isinstance(node, dict):
        keys = sorted(node, key=lambda k: k != "kind")
        return {k: _kind_first(node[k]) for k in keys}
    if isinstance(node, list):
        return [_kind_first(x) for x in node]
    return node


def show_config(cfg: TrainerConfig, source: str = "", fmt: Literal["yaml", "json"] = "yaml"
                ) -> str:
    """Text of ``albertkit config show``.

    ``yaml``: the resolved config as YAML that loads back as the same config, followed by the
    resolved model architecture and derived values as comments. ``json``: one object with
    ``config``, ``model_spec``, ``model_spec_source``, ``derived`` (and ``notes``).
    """
    view = resolved_view(cfg)
    if fmt == "json":
        return json.dumps(view, indent=2) + "\n"
    lines = [f"# resolved configuration{f' of {source}' if source else ''} "
             "(defaults filled in; loads back as the same config)"]
    lines.append(yaml.safe_dump(view["config"], sort_keys=False).rstrip("\n"))
    lines.append(f"# resolved model architecture ({view['model_spec_source']}):")
    lines += [f"#   {ln}" for ln in
              yaml.safe_dump(view["model_spec"], sort_keys=False).rstrip("\n").splitlines()]
    lines.append("# derived:")
    lines += [f"#   {k}: {v}" for k, v in view["derived"].items()]
    for note in view.get("notes", []):
        lines.append(f"# note: {note}")
    return "\n".join(lines) + "\n"


def load_for_show(path: Path, overrides: list[str],
                  sagemaker_env_defaults: Mapping[str, Any] | None = None) -> TrainerConfig:
    """Load a config as the command that runs it would: a file with a ``sagemaker:``
    section as ``albertkit launch`` (environment defaults under that section), any other
    file as ``albertkit pretrain/finetune``. The ``sagemaker:`` section is validated here,
    so a bad key fails at load, naming its field."""
    cfg = None
    if sagemaker_env_defaults:
        try:
            raw = load_yaml(path)
        except ConfigError:
            raw = None  # from_yaml below reports the problem with file and line
        if isinstance(raw, dict) and raw.get("sagemaker") is not None:
            from albertkit.sagemaker.defaults import load_launch_config

            cfg = load_launch_config(path, overrides, sagemaker_env_defaults)
    if cfg is None:
        cfg = TrainerConfig.from_yaml(path, overrides)
    from albertkit.sagemaker.config import SageMakerConfig

    SageMakerConfig.from_trainer_config(cfg, source=str(path))
    return cfg


# =========================================================================== CLI
def add_config_parser(subparsers, sagemaker_env_defaults: Mapping[str, Any] | None = None
                      ) -> argparse.ArgumentParser:
    """Register ``albertkit config`` with ``schema``, ``show`` and ``reference``.

    ``sagemaker_env_defaults`` (``albertkit.sagemaker.defaults.sagemaker_defaults_from_env``
    of ``os.environ``, read by ``albertkit.cli``) fill a config's ``sagemaker:`` section as
    ``albertkit launch`` does, so ``show`` resolves SageMaker configs the same way.
    """
    p = subparsers.add_parser(
        "config", help="JSON Schema, resolved view and reference of configs",
        description="Tools for albertkit YAML configs.")
    sub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")

    s = sub.add_parser(
        "schema", help="print or write the JSON Schema of a config (for editors)",
        description="JSON Schema (draft-07) of TrainerConfig. Reference it from a YAML config "
                    f"with a first line `{MODELINE}PATH_OR_URL` (YAML language server).")
    s.add_argument("--out", type=Path, help=f"write here (e.g. {SCHEMA_FILE}) instead of stdout")

    s = sub.add_parser("show", help="print a config with defaults and the resolved model",
                       description="Validate a config file plus overrides and print it with "
                                   "every default filled in and the resolved model architecture.")
    s.add_argument("--config", "-c", required=True, type=Path, help="YAML or JSON config file")
    s.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. --set runtime.max_steps=10 (repeatable)")
    s.add_argument("--format", choices=["yaml", "json"], default="yaml")

    s = sub.add_parser("reference", help="write the Markdown configuration reference",
                       description="Generate docs/configuration.md from the pydantic models.")
    s.add_argument("--out", type=Path, help="write here instead of stdout")
    s.add_argument("--check", action="store_true",
                   help="exit 1 if --out differs from the generated text (CI staleness check)")
    p.set_defaults(func=run_config, sagemaker_env_defaults=dict(sagemaker_env_defaults or {}))
    return p


def run_config(args: argparse.Namespace) -> int:
    """``albertkit config SUBCOMMAND``."""
    return {"schema": _schema, "show": _show, "reference": _reference}[args.config_command](args)


def _schema(args: argparse.Namespace) -> int:
    text = json.dumps(config_schema(), indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    atomic_write_text(args.out, text)
    print(f"wrote {args.out}; reference it from a YAML config with a first line\n"
          f"  {MODELINE}{args.out}", file=sys.stderr)
    return 0


def _show(args: argparse.Namespace) -> int:
    cfg = load_for_show(args.config, args.overrides,
                        getattr(args, "sagemaker_env_defaults", None))
    sys.stdout.write(show_config(cfg, str(args.config), args.format))
    return 0


def _reference(args: argparse.Namespace) -> int:
    text = config_reference()
    if args.out is None:
        if args.check:
            raise SystemExit("error: --check needs --out FILE")
        sys.stdout.write(text)
        return 0
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else None
        if current != text:
            print(f"{args.out} is stale: regenerate it with `{GENERATOR}`", file=sys.stderr)
            return 1
        return 0
    atomic_write_text(args.out, text)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
