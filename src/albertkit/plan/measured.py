"""Measured training rates for fleet plans (:mod:`albertkit.plan.fleet`): where they come
from and what they were measured on.

A measurement is a rate taken on one SageMaker instance type, in one of three forms, each
checked against the config being planned (the model, the sequence length, the precision and,
for a whole fleet, the global batch must be the config's, or the rate says nothing about it):

* a rate of a whole fleet: ``ml.p3dn.24xlarge:8=1.72it/s`` (optimizer steps per second at
  the config's global batch) or ``...=7045seq/s`` (sequences per second);
* an ``albertkit benchmark --json`` result taken on one GPU of the instance type (its
  1-process albertkit figure): ``ml.p4d.24xlarge=base512.json``;
* a run taken on a fleet: its run directory (or its ``metrics.jsonl``), whose
  ``config.yaml`` is checked and whose logged ``seq_per_s`` (median, first window left
  out: it holds the compilation) is the rate: ``ml.g5.48xlarge:2=runs/base512``.

``--measured FILE`` without ``=`` reads a rates file: a YAML or JSON mapping of
``INSTANCE[:COUNT]`` to one of the values above (paths relative to the file).

Example:
    >>> from albertkit import TrainerConfig
    >>> cfg = TrainerConfig.model_validate({"data": {"kind": "synthetic", "seq_length": 512},
    ...     "runtime": {"global_batch_size": 4096, "micro_batch_size": 32}})
    >>> m, = parse_measured("ml.p3dn.24xlarge:8=1.72it/s", cfg)
    >>> m.instance_type, m.instances, round(m.sequences_per_s, 1)
    ('ml.p3dn.24xlarge', 8, 7045.1)
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albertkit.config import TrainerConfig
from albertkit.errors import BenchmarkError, ConfigError
from albertkit.hardware import INSTANCE_TYPES
from albertkit.plan.prices import read_mapping_file

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(it/s|steps/s|seq/s)\s*$")


@dataclass(frozen=True)
class Measurement:
    """A measured rate on ``instance_type``: ``sequences_per_s`` over ``instances`` instances
    (all their GPUs), or over one GPU when ``instances`` is ``None`` (a 1-process benchmark).
    ``source`` says what it was (printed with the plan); ``shape_checked``: whether the
    measurement itself says what it ran (a benchmark or a run: checked against the config),
    which a bare rate does not."""

    instance_type: str
    instances: int | None
    sequences_per_s: float
    source: str
    shape_checked: bool = True


def check_instance_type(instance_type: str, where: str = "--fleet") -> str:
    """``instance_type`` if the instance table knows it, else a one-line ``ConfigError``."""
    if instance_type not in INSTANCE_TYPES:
        parts = instance_type.split(".")
        family = parts[1] if len(parts) == 3 else None
        near = [t for t in INSTANCE_TYPES if family and t.split(".")[1] == family]
        hint = f" (known {family} types: {', '.join(near)})" if near else ""
        raise ConfigError(f"{where}: unknown instance type {instance_type!r}{hint}; "
                          "albertkit/hardware.py lists the types albertkit knows")
    return instance_type


def split_fleet(text: str, where: str = "--fleet") -> tuple[str, int | None]:
    """``"ml.p4d.24xlarge:8"`` -> ``("ml.p4d.24xlarge", 8)``; no count -> ``None``."""
    name, colon, count = text.strip().partition(":")
    if not name or (colon and not (count.isdigit() and int(count) >= 1)) or " " in name:
        raise ConfigError(f"{where}: {text.strip()!r} is not INSTANCE_TYPE[:COUNT] "
                          "(e.g. ml.p4d.24xlarge:8, a count of 1 or more)")
    return check_instance_type(name, where), int(count) if colon else None


def config_shape(cfg: TrainerConfig) -> tuple[str, int | None, str]:
    """(model size, sequence length, precision) of ``cfg``, as measurements are checked."""
    seq = getattr(cfg.data, "seq_length", None) or getattr(cfg.data, "max_seq_length", None)
    return cfg.model.size, seq, cfg.runtime.precision


# The architecture fields a step's time depends on (dropout rates, for one, do not).
_SHAPE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                 "num_hidden_groups", "num_attention_heads", "intermediate_size",
                 "inner_group_num")


def _shape(spec: Any) -> tuple[Any, ...]:
    return tuple(getattr(spec, f) for f in _SHAPE_FIELDS)


def parse_measured(text: str, cfg: TrainerConfig, base: Path | None = None) -> list[Measurement]:
    """Measurements from one ``--measured`` value: ``INSTANCE[:COUNT]=VALUE`` or a rates file."""
    if "=" not in text:
        return read_rates_file(Path(text), cfg)
    fleet_text, value = text.split("=", 1)
    instance_type, count = split_fleet(fleet_text, "--measured")
    return [measurement(instance_type, count, value.strip(), cfg, base)]


def measurement(instance_type: str, count: int | None, value: str, cfg: TrainerConfig,
                base: Path | None = None) -> Measurement:
    """One measurement on ``instance_type`` (``count`` instances) from ``value``: a rate
    (``1.72it/s``, ``7045seq/s``), a benchmark JSON file or a run directory."""
    if not INSTANCE_TYPES[instance_type].gpus:
        raise ConfigError(f"--measured {instance_type}: has no GPU; albertkit plan plans GPU "
                          "fleets")
    rate = _RATE.fullmatch(value)
    if rate:
        number, unit = float(rate.group(1)), rate.group(2)
        if number <= 0:
            raise ConfigError(f"--measured {instance_type}={value}: a rate must be above 0")
        per_s = number * cfg.runtime.global_batch_size if unit != "seq/s" else number
        return Measurement(instance_type, count or 1, per_s, f"measured {number:g} {unit}",
                           shape_checked=False)
    path = Path(value) if base is None or Path(value).is_absolute() else base / value
    if path.is_dir() or path.name == "metrics.jsonl":
        return run_measurement(path, instance_type, count or 1, cfg)
    if path.is_file():
        if count is not None:
            raise ConfigError(f"--measured {instance_type}:{count}={value}: a benchmark result "
                              "is one process on one GPU; name the instance type alone")
        return benchmark_measurement(path, instance_type, cfg)
    raise ConfigError(f"--measured {instance_type}={value}: neither a rate (like 1.72it/s or "
                      "7045seq/s) nor an existing benchmark JSON file or run directory")


def benchmark_measurement(path: Path, instance_type: str, cfg: TrainerConfig) -> Measurement:
    """albertkit's 1-process rate from an ``albertkit benchmark --json`` result taken on one
    GPU of ``instance_type``; refused when its model, sequence length or precision is not the
    config's."""
    from albertkit.perf.result import BenchmarkResult

    result = BenchmarkResult.read(path)
    s = result.settings
    size, seq, precision = config_shape(cfg)
    if _shape(result.spec) != _shape(cfg.model.spec):
        raise BenchmarkError(f"{path}: measured model size {s.size!r} "
                             f"(hidden_size={result.spec.hidden_size}, "
                             f"num_hidden_layers={result.spec.num_hidden_layers}); the config "
                             f"trains {size!r}")
    if s.seq_length != seq:
        raise BenchmarkError(f"{path}: measured at seq_length={s.seq_length}; the config "
                             f"trains at {seq}")
    if s.precision != precision:
        raise BenchmarkError(f"{path}: measured in precision={s.precision}; the config trains "
                             f"in {precision}")
    if "albertkit" not in result.results:
        raise BenchmarkError(f"{path}: holds no albertkit figure (only "
                             f"{', '.join(result.results)})")
    rate = result.results["albertkit"].sequences_per_s
    return Measurement(instance_type, None, rate,
                       f"benchmark {path.name}: {rate:.1f} seq/s on 1 GPU "
                       f"(micro-batch {s.micro_batch})")


def run_measurement(path: Path, instance_type: str, count: int,
                    cfg: TrainerConfig) -> Measurement:
    """The rate of a run on ``count`` x ``instance_type``: the median of its logged
    ``seq_per_s`` (the first window, which holds compilation, left out)."""
    run_dir = path.parent if path.name == "metrics.jsonl" else path
    config_file = run_dir / "config.yaml"
    if not config_file.is_file():
        raise BenchmarkError(f"{run_dir}: no config.yaml: not an albertkit run directory")
    run_cfg = TrainerConfig.from_yaml(config_file)
    mine, theirs = config_shape(cfg), config_shape(run_cfg)
    for name, a, b in zip(("model.size", "seq_length", "runtime.precision"), theirs, mine,
                          strict=True):
        if a != b:
            raise BenchmarkError(f"{config_file}: the run trained {name}={a}; the config "
                                 f"trains {b}")
    if _shape(run_cfg.model.spec) != _shape(cfg.model.spec):
        raise BenchmarkError(f"{config_file}: the run's model differs from the config's "
                             "(model overrides)")
    if run_cfg.runtime.global_batch_size != cfg.runtime.global_batch_size:
        raise BenchmarkError(f"{config_file}: the run's runtime.global_batch_size="
                             f"{run_cfg.runtime.global_batch_size}; the config's is "
                             f"{cfg.runtime.global_batch_size}")
    rates = [r["seq_per_s"] for r in _records(run_dir / "metrics.jsonl")
             if r.get("kind") == "train" and "seq_per_s" in r]
    if len(rates) < 2:
        raise BenchmarkError(f"{run_dir / 'metrics.jsonl'}: fewer than 2 logged training "
                             "windows with seq_per_s (the first holds compilation)")
    rate = statistics.median(rates[1:])
    return Measurement(instance_type, count, rate,
                       f"run {run_dir.name}: median {rate:.1f} seq/s over {len(rates) - 1} "
                       "windows")


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise BenchmarkError(f"{path}: cannot read it ({e.strerror or e})") from None
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line from a kill
    return out


def read_rates_file(path: Path, cfg: TrainerConfig) -> list[Measurement]:
    """Measurements from a YAML/JSON mapping of ``INSTANCE[:COUNT]`` to rate or path."""
    raw = read_mapping_file(path, "--measured", "a rates file",
                            "give INSTANCE[:COUNT]=RATE|FILE or a rates file")
    if isinstance(raw, dict) and "settings" in raw and "results" in raw:
        raise ConfigError(f"--measured {path}: a benchmark result; name the instance type it "
                          f"ran on: --measured INSTANCE_TYPE={path}")
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{path}: not a rates file: expected a mapping of INSTANCE[:COUNT] "
                          "to a rate (1.72it/s) or a benchmark/run path")
    out = []
    for key, value in raw.items():
        instance_type, count = split_fleet(str(key), str(path))
        out.append(measurement(instance_type, count, str(value), cfg, path.parent))
    return out
