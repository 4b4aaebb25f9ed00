"""The speed and memory targets against Hugging Face PyTorch, measured in one command.

Runs ``albertkit benchmark --compare hf-pytorch --no-pipeline`` at each shape the targets
need (``benchlib.targets.ROWS``: base 128 x 8 and 512 x 4 in float32 and
mixed_bfloat16, tiny 128 x 32 in float32), one at a time, and prints every target's ratio
with its verdict: met, not met, noisy (a run it uses was marked noisy: it counts neither
way), emulated (bfloat16 speed on a CPU without bfloat16 instructions) or missing.

Before each run it waits (up to ``--quiet-wait`` seconds) until the 1-minute load average
is at most half the benchmark's noisy limit (0.25 runnable threads per CPU), so the
previous run's own load does not mark the next one noisy. Each run's full result is written to
``OUT/<row>.json`` as soon as it finishes; a row whose file is already there is read, not
measured again (``--rerun`` measures it again), so an interrupted session loses at most the
run in progress. The checks go to ``OUT/targets.md`` and ``OUT/targets.json``; ``--from DIR``
prints them from the results in DIR and writes nothing. ``targets.md`` ends with the table
docs/performance.md shows under "Current results" (``benchlib.targets.format_current``).

On a CPU without bfloat16 instructions the mixed_bfloat16 rows are left out unless named in
``--rows`` (Hugging Face's emulated bfloat16 step takes minutes at base); their memory
targets then show as missing.

    python benchmarks/bench_targets.py --out runs/targets
    python benchmarks/bench_targets.py --out runs/targets --rows tiny128-float32 --steps 10
    python benchmarks/bench_targets.py --from runs/targets          # the checks, no new runs
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# benchlib sits beside this script: importable from any working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    from benchlib.targets import ROW_BY_KEY, ROWS

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
    from albertkit.perf.result import BenchmarkResult
    from benchlib.targets import ROWS

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
    from benchlib.targets import ROW_BY_KEY

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
    from benchlib.targets import evaluate, format_checks, format_current, format_rows

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
