"""``albertkit benchmark``: measure the training step (and compare with HF PyTorch)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albertkit.config.sizes import SIZES


def _parse_int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _xla_value(text: str) -> str | bool:
    values: dict[str, str | bool] = {"auto": "auto", "on": True, "true": True, "off": False,
                                     "false": False}
    try:
        return values[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"--xla: expected auto, on or off, got {text!r}") from None


def add_benchmark_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``albertkit benchmark`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "benchmark",
        help="measure the training step (and compare with HF PyTorch)",
        description="Measure albertkit's training step: sequences/s, step time, peak memory, "
        "MFU, input pipeline; optionally side by side with Hugging Face PyTorch.",
    )
    p.add_argument("--size", default="base", choices=list(SIZES))
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument(
        "--max-predictions",
        type=int,
        default=None,
        help="masked positions per sequence (default ceil(0.15 x seq length))",
    )
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--accumulation", type=int, default=1)
    p.add_argument(
        "--precision", default="float32", choices=["float32", "mixed_float16", "mixed_bfloat16"]
    )
    p.add_argument(
        "--xla",
        nargs="?",
        const=True,
        default="auto",
        type=_xla_value,
        metavar="auto|on|off",
        help="runtime.xla: auto (default: per device and precision), on or off; "
        "a bare --xla means on",
    )
    p.add_argument("--no-xla", dest="xla", action="store_const", const=False,
                   help="the same as --xla off")
    p.add_argument(
        "--noisy-load-per-cpu",
        type=float,
        default=0.25,
        help="mark the result noisy above this many runnable threads of other processes "
        "per CPU (before or during the rounds)",
    )
    p.add_argument(
        "--noisy-spread-pct",
        type=float,
        default=10.0,
        help="mark the result noisy when per-round seq/s spread beyond this percentage",
    )
    p.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw")
    p.add_argument(
        "--remat",
        nargs="?",
        const="full",
        default="selective",
        choices=["none", "selective", "full"],
        help="what albertkit recomputes in the backward pass (runtime.remat; default "
        "selective; bare --remat: full, each layer)",
    )
    p.add_argument(
        "--malloc-arenas",
        type=int,
        default=None,
        help="cap glibc malloc arenas in both frameworks' processes (e.g. 2)",
    )
    p.add_argument(
        "--tensor-stats",
        action="store_true",
        help="run albertkit on TensorFlow's BFC allocator to count tensor bytes (the "
        "memory planner check on CPU); resident memory is then BFC's",
    )
    p.add_argument(
        "--sifting-beta",
        type=float,
        default=None,
        help="time albertkit's step with smart sifting at this beta (every step sifted)",
    )
    p.add_argument("--steps", type=int, default=5, help="timed steps per round and framework")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compare", choices=["hf-pytorch"], action="append", default=[])
    p.add_argument(
        "--processes",
        type=_parse_int_list,
        default=[1],
        help="comma-separated process counts (data parallel), e.g. 1,2",
    )
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false")
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="also time the pieces of albertkit's step (docs/performance.md)",
    )
    p.add_argument(
        "--hf-threads",
        type=int,
        default=None,
        help="torch threads for --compare hf-pytorch (default: torch's own)",
    )
    p.add_argument(
        "--set",
        dest="model",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="model field override, e.g. --set num_hidden_layers=2",
    )
    p.add_argument("--json", type=Path, default=None, help="write the full result here")
    p.set_defaults(func=run_benchmark)
    return p


def run_benchmark(args: argparse.Namespace) -> int:
    """The ``albertkit benchmark`` command."""
    from albertkit.fileio import atomic_write_text
    from albertkit.perf import BenchmarkSettings, format_table, measure
    from albertkit.perf.settings import model_overrides

    model = model_overrides(args.model)
    settings = BenchmarkSettings(
        size=args.size,
        model=model,
        seq_length=args.seq_length,
        max_predictions=args.max_predictions,
        micro_batch=args.micro_batch,
        accumulation=args.accumulation,
        precision=args.precision,
        xla=args.xla,
        optimizer=args.optimizer,
        steps=args.steps,
        warmup=args.warmup,
        rounds=args.rounds,
        compare=args.compare,
        processes=args.processes,
        pipeline=args.pipeline,
        hf_threads=args.hf_threads,
        breakdown=args.breakdown,
        remat=args.remat,
        malloc_arenas=args.malloc_arenas,
        tensor_stats=args.tensor_stats,
        sifting_beta=args.sifting_beta,
        noisy_load_per_cpu=args.noisy_load_per_cpu,
        noisy_spread_pct=args.noisy_spread_pct,
    )
    result = measure(settings)
    print(format_table(result))
    if args.json is not None:
        atomic_write_text(args.json, result.to_json())
        print(f"wrote {args.json}")
    return 0
