"""The speed and memory targets against Hugging Face PyTorch, measured and checked in one
command.

The targets (docs/performance.md, "Targets") are ratios between benchmark runs of five
shapes (:data:`ROWS`): albertkit over Hugging Face in one run (sequences/s, peak resident
memory), and albertkit's mixed_bfloat16 over its float32 at the same shape (two runs). The
script runs ``albertkit benchmark --compare hf-pytorch --no-pipeline`` at each shape, one at
a time, and :func:`evaluate` gives each target a verdict:

* ``met`` / ``not met`` -- measured, and every run it uses was quiet;
* ``noisy`` -- a speed target whose run was marked noisy (:mod:`albertkit.perf.noise`):
  shown, but counts neither way. Memory targets keep their verdict in a noisy run, with the
  run's noise listed: a process's resident peak does not depend on how fast its steps ran;
* ``emulated`` -- a bfloat16 speed target on a CPU without bfloat16 instructions, where
  both frameworks emulate bfloat16 (such rows run only when named in ``--rows``: Hugging
  Face's emulated bfloat16 step takes minutes at base);
* ``missing`` -- a run it needs was not measured.

Before each run it waits (``--quiet-wait`` s at most) for the load average to fall to half
the noisy limit. Each result goes to ``OUT/<row>.json`` at once; a row whose file exists is
read, not measured (``--rerun`` measures it again). The checks go to ``OUT/targets.md`` and
``OUT/targets.json``; ``--from DIR`` prints them from the results in DIR, writing nothing.

    python benchmarks/bench_targets.py --out runs/targets
    python benchmarks/bench_targets.py --out runs/targets --rows tiny128-float32 --steps 10
    python benchmarks/bench_targets.py --from runs/targets          # the checks, no new runs
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from albertkit.perf.result import BenchmarkResult

# benchlib sits beside this script: importable from any working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))


Verdict = Literal["met", "not met", "noisy", "emulated", "missing"]


@dataclass(frozen=True)
class Row:
    """One benchmark run the targets need: a shape and precision, with Hugging Face."""

    key: str
    size: str
    seq_length: int
    micro_batch: int
    precision: str
    steps: int  # default timed steps per round (a tiny step is 100x shorter than a base one)
    rounds: int

    @property
    def label(self) -> str:
        return f"{self.size} {self.seq_length} x {self.micro_batch} {self.precision}"

    def mismatch(self, result: BenchmarkResult) -> str | None:
        """What in ``result`` differs from this row (None: it is a run of this row)."""
        s = result.settings
        wrong = [f"{k} {getattr(s, k)} (the row's is {getattr(self, k)})"
                 for k in ("size", "seq_length", "micro_batch", "precision")
                 if getattr(s, k) != getattr(self, k)]
        return ", ".join(wrong) or None


ROWS: tuple[Row, ...] = (
    Row("base128-float32", "base", 128, 8, "float32", 3, 2),
    Row("base128-bf16", "base", 128, 8, "mixed_bfloat16", 3, 2),
    Row("base512-float32", "base", 512, 4, "float32", 2, 2),
    Row("base512-bf16", "base", 512, 4, "mixed_bfloat16", 2, 2),
    Row("tiny128-float32", "tiny", 128, 32, "float32", 30, 3),
)
ROW_BY_KEY = {r.key: r for r in ROWS}


@dataclass(frozen=True)
class Target:
    """``value op limit``, where value is one of three ratios of ``rows`` (the second row,
    for ``bf16_over_fp32``, is the float32 run the bfloat16 one is divided by)."""

    rows: tuple[str, ...]
    quantity: Literal["speed_vs_hf", "memory_vs_hf", "bf16_over_fp32"]
    op: Literal[">=", "<="]
    limit: float

    @property
    def name(self) -> str:
        label = ROW_BY_KEY[self.rows[0]].label
        what = {
            "speed_vs_hf": "sequences/s vs HF",
            "memory_vs_hf": "peak resident memory vs HF",
            "bf16_over_fp32": "albertkit sequences/s vs its float32",
        }[self.quantity]
        return f"{label}: {what}"

    @property
    def is_bf16(self) -> bool:
        """Its (first) run is in mixed_bfloat16."""
        return ROW_BY_KEY[self.rows[0]].precision == "mixed_bfloat16"


TARGETS: tuple[Target, ...] = (
    Target(("base128-float32",), "speed_vs_hf", ">=", 1.15),
    Target(("base128-bf16",), "speed_vs_hf", ">=", 1.15),
    Target(("base512-bf16",), "speed_vs_hf", ">=", 1.15),
    Target(("base128-bf16", "base128-float32"), "bf16_over_fp32", ">=", 1.5),
    Target(("base512-bf16", "base512-float32"), "bf16_over_fp32", ">=", 1.5),
    Target(("tiny128-float32",), "speed_vs_hf", ">=", 2.5),
    Target(("base128-float32",), "memory_vs_hf", "<=", 1.0),
    Target(("base128-bf16",), "memory_vs_hf", "<=", 1.0),
    Target(("base512-float32",), "memory_vs_hf", "<=", 0.8),
    Target(("base512-bf16",), "memory_vs_hf", "<=", 0.8),
)


@dataclass
class Check:
    """One target's figure and verdict, and why it is not ``met``/``not met`` if so."""

    name: str
    op: str
    limit: float
    value: float | None
    verdict: Verdict
    rows: tuple[str, ...]
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "op": self.op, "limit": self.limit,
                "verdict": self.verdict, "rows": list(self.rows), "reasons": self.reasons}


def _value(target: Target, results: Mapping[str, BenchmarkResult]) -> float | None:
    first = results[target.rows[0]]
    if target.quantity == "bf16_over_fp32":
        base = results[target.rows[1]].results["albertkit"].sequences_per_s
        return first.results["albertkit"].sequences_per_s / base
    if first.ratios_vs_hf is None:
        return None
    if target.quantity == "speed_vs_hf":
        return first.ratios_vs_hf.sequences_per_s
    return first.ratios_vs_hf.peak_memory


def emulates_bfloat16(result: BenchmarkResult) -> bool:
    """Whether ``result`` ran on a CPU without bfloat16 instructions (as its machine record
    says; a result that does not record them counts as native)."""
    flags = result.machine.cpu_bfloat16_flags
    return result.results["albertkit"].device == "CPU" and flags is not None and not flags


def evaluate(results: Mapping[str, BenchmarkResult]) -> list[Check]:
    """One :class:`Check` per :data:`TARGETS` entry from ``results`` (row key -> result).

    A bfloat16 speed target whose bfloat16 run was made on a CPU that emulates bfloat16
    (:func:`emulates_bfloat16`) is ``emulated``. Memory targets are judged regardless, with
    the emulation listed among the reasons.
    """
    checks = []
    for t in TARGETS:
        absent = [k for k in t.rows if k not in results]
        no_hf = [
            k for k in t.rows[:1]
            if k in results and t.quantity != "bf16_over_fp32"
            and results[k].ratios_vs_hf is None
        ]
        if absent or no_hf:
            reasons = [f"{k}: not measured" for k in absent]
            reasons += [f"{k}: measured without --compare hf-pytorch" for k in no_hf]
            checks.append(Check(t.name, t.op, t.limit, None, "missing", t.rows, reasons))
            continue
        value = _value(t, results)
        noisy = [f"{k}: {why}" for k in t.rows for why in results[k].noisy_reasons]
        noisy += [f"{k}: marked noisy" for k in t.rows
                  if results[k].noisy and not results[k].noisy_reasons]
        verdict: Verdict
        emulated = t.is_bf16 and emulates_bfloat16(results[t.rows[0]])
        if emulated:
            why = (f"{t.rows[0]}: run on a CPU without bfloat16 instructions (AVX-512 BF16, "
                   "AMX, AVX-NE-CONVERT), where both frameworks emulate bfloat16")
            if t.quantity == "memory_vs_hf":
                noisy.append(why + "; emulation kernels' scratch memory may differ")
            else:
                noisy = [why]
        if emulated and t.quantity != "memory_vs_hf":
            verdict = "emulated"
        elif noisy and t.quantity != "memory_vs_hf":
            verdict = "noisy"
        elif (value >= t.limit) if t.op == ">=" else (value <= t.limit):
            verdict = "met"
        else:
            verdict = "not met"
        checks.append(Check(t.name, t.op, t.limit, value, verdict, t.rows, noisy))
    return checks


def format_checks(checks: list[Check]) -> str:
    """The checks as a markdown table, then the reasons for each noisy/emulated/missing one."""
    lines = ["| target | measured | goal | verdict |", "|---|---:|---:|---|"]
    for c in checks:
        value = "-" if c.value is None else f"{c.value:.2f}x"
        lines.append(f"| {c.name} | {value} | {c.op} {c.limit:g}x | {c.verdict} |")
    notes = [f"- {c.name}: {'; '.join(c.reasons)}" for c in checks if c.reasons]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def format_rows(results: Mapping[str, BenchmarkResult]) -> str:
    """The measured runs behind the checks, one line each, in :data:`ROWS` order."""
    mib = 2**20
    lines = [
        "| run | albertkit seq/s | HF seq/s | peak RSS albertkit / HF MiB | load before -> after "
        "| round spread ak / HF | matmul probe spread ak / HF | mark |",
        "|---|---:|---:|---:|---|---|---|---|",
    ]
    for row in ROWS:
        r = results.get(row.key)
        if r is None:
            continue
        ak, hf = r.results["albertkit"], r.results.get("hf-pytorch")
        spread, probe = (
            " / ".join(f"{by[f]:.1f} %" if f in by else "-" for f in ("albertkit", "hf-pytorch"))
            for by in (r.round_spread_pct, r.probe_spread_pct)
        )
        load = " -> ".join("-" if v is None else f"{v:.2f}" for v in (r.load_before, r.load_after))
        lines.append(
            f"| {row.label} | {ak.sequences_per_s:.2f} | "
            f"{'-' if hf is None else f'{hf.sequences_per_s:.2f}'} | "
            f"{ak.peak_bytes / mib:,.0f} / {'-' if hf is None else f'{hf.peak_bytes / mib:,.0f}'} | "
            f"{load} | {spread} | {probe} | {'noisy' if r.noisy else 'quiet'} |"
        )
    return "\n".join(lines)


def format_current(results: Mapping[str, BenchmarkResult]) -> str:
    """The "Current results" table of docs/performance.md, one line per run with Hugging
    Face, in :data:`ROWS` order; a noisy run says so in its shape cell (the doc shows only
    quiet runs). XLA: whether albertkit's compute step was compiled."""
    mib = 2**20
    lines = ["| shape | precision (XLA) | albertkit seq/s | HF seq/s | speed ratio "
             "| peak RSS ak / HF MiB | memory ratio |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in ROWS:
        r = results.get(row.key)
        if r is None or "hf-pytorch" not in r.results:
            continue
        ak, hf = r.results["albertkit"], r.results["hf-pytorch"]
        xla = "?" if ak.xla_plan is None else "on" if ak.xla_plan.compute else "off"
        rates = [f"{s:.1f}" if s >= 100 else f"{s:.2f}"
                 for s in (ak.sequences_per_s, hf.sequences_per_s)]
        lines.append(
            f"| {row.size} {row.seq_length} x {row.micro_batch}{' (NOISY)' if r.noisy else ''} "
            f"| {row.precision} ({xla}) | {rates[0]} | {rates[1]} "
            f"| {ak.sequences_per_s / hf.sequences_per_s:.2f}x "
            f"| {ak.peak_bytes / mib:,.0f} / {hf.peak_bytes / mib:,.0f} "
            f"| {ak.peak_bytes / hf.peak_bytes:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, help="directory for the runs' results and checks")
    where.add_argument("--from", dest="source", type=Path,
                       help="only evaluate the results already in this directory")
    parser.add_argument("--rows", help="comma-separated row keys (default: all this CPU can "
                        "run meaningfully): " + ", ".join(r.key for r in ROWS))
    parser.add_argument("--steps", type=int, help="timed steps per round (default: per row)")
    parser.add_argument("--rounds", type=int, help="rounds (default: per row)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--quiet-wait", type=float, default=300.0,
                        help="seconds to wait for a quiet machine before each run (0: none)")
    parser.add_argument("--rerun", action="store_true",
                        help="measure rows again even if OUT/<row>.json exists")
    args = parser.parse_args(argv)

    from albertkit.hardware import cpu_bfloat16_flags

    flags = cpu_bfloat16_flags()
    bf16_native = None if flags is None else bool(flags)
    if args.rows:
        keys = [k.strip() for k in args.rows.split(",") if k.strip()]
        unknown = [k for k in keys if k not in ROW_BY_KEY]
        if unknown:
            parser.error(f"--rows: unknown row(s) {', '.join(unknown)}; "
                         f"known: {', '.join(ROW_BY_KEY)}")
    else:
        keys = [r.key for r in ROWS if bf16_native is not False or "bf16" not in r.key]
        if len(keys) < len(ROWS):
            print("this CPU has no bfloat16 instructions: the mixed_bfloat16 rows are left "
                  "out (name them in --rows to run them anyway)", flush=True)
    directory = args.out or args.source
    if args.source is not None and not directory.is_dir():
        parser.error(f"--from {directory}: no such directory")

    from albertkit.errors import BenchmarkError

    try:
        if args.source is not None:
            return report(read_rows(directory), write_to=None)
        return report(measure_rows(directory, keys, args), write_to=directory)
    except BenchmarkError as e:  # a saved result that cannot be read: the message names it
        print(f"bench_targets: {e}", file=sys.stderr)
        return 2


def read_rows(directory: Path) -> dict:
    """The results in ``directory`` (``<row>.json`` of known rows); SystemExit naming the
    file for one that is not a run of its row."""

    results = {}
    for row in ROWS:
        path = directory / f"{row.key}.json"
        if path.exists():
            result = BenchmarkResult.read(path)
            wrong = row.mismatch(result)
            if wrong:
                raise SystemExit(f"{path}: not a run of {row.key}: {wrong}")
            results[row.key] = result
    return results


def measure_rows(directory: Path, keys: list[str], args) -> dict:
    from albertkit.fileio import atomic_write_text
    from albertkit.perf.runner import measure
    from albertkit.perf.settings import BenchmarkSettings
    from benchlib.quiet import wait_until_quiet

    directory.mkdir(parents=True, exist_ok=True)
    results = read_rows(directory)
    cpus = os.cpu_count() or 1
    for i, key in enumerate(keys, 1):
        path = directory / f"{key}.json"
        row = ROW_BY_KEY[key]
        if key in results and not args.rerun:
            print(f"[{i}/{len(keys)}] {row.label}: kept {path} (--rerun measures again)",
                  flush=True)
            continue
        settings = BenchmarkSettings(
            size=row.size, seq_length=row.seq_length, micro_batch=row.micro_batch,
            precision=row.precision, steps=args.steps or row.steps,
            rounds=args.rounds or row.rounds, warmup=args.warmup,
            compare=["hf-pytorch"], pipeline=False,
        )
        print(f"[{i}/{len(keys)}] {row.label}: {settings.steps} steps x {settings.rounds} "
              f"rounds per framework, {time.strftime('%H:%M:%S', time.gmtime())} UTC",
              flush=True)
        if args.quiet_wait > 0:
            wait_until_quiet(0.5 * settings.noisy_load_per_cpu * cpus, args.quiet_wait)
        result = measure(settings, progress=True)
        atomic_write_text(path, result.to_json())
        results[key] = result
        mark = "noisy: " + "; ".join(result.noisy_reasons) if result.noisy else "quiet"
        print(f"  wrote {path} ({mark})", flush=True)
    return results


def report(results: dict, write_to: Path | None) -> int:
    """Print the runs and the checks; with ``write_to``, also write them there."""
    from albertkit.fileio import atomic_write_json, atomic_write_text
    checks = evaluate(results)
    text = (f"# Targets, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC\n\n"
            f"{format_rows(results)}\n\n{format_checks(checks)}\n\n"
            f"## docs/performance.md, Current results\n\n{format_current(results)}\n")
    print()
    print(text)
    if write_to is not None:
        atomic_write_text(write_to / "targets.md", text)
        atomic_write_json(write_to / "targets.json", {"checks": [c.as_dict() for c in checks]})
        print(f"wrote {write_to / 'targets.md'} and {write_to / 'targets.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
