"""Where albertkit's training step spends its time, by kind of operation: matmul,
reduction, data movement (transposes, copies, gathers, scatters), elementwise, variables.

The step is built as the trainer builds it (``albertkit benchmark``'s worker: synthetic
batch, same model, optimizer, precision and ``runtime.xla`` plan), timed unprofiled for
``--steps`` steps, then run ``--steps`` more under TensorFlow's profiler, which sees XLA's
operations (its CPU runtime's thunks) as well as the graph executor's. The table gives
each kind's milliseconds per step summed over threads and its share of all operation time,
and the operations that take the most (``benchlib.ops`` says how events are read and
counted).

    python benchmarks/op_profile.py --size tiny --seq-length 128 --micro-batch 32
    python benchmarks/op_profile.py --size base --seq-length 128 --micro-batch 8 --steps 2 \\
        --json runs/op_profile/base128.json
    python benchmarks/op_profile.py --size base --precision mixed_bfloat16   # xla auto: off on CPU
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# benchlib sits beside this script: importable from any working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# TensorFlow's C++ INFO lines (XLA service, profiler session) stay hidden unless the
# environment asks for them (TF_CPP_MIN_LOG_LEVEL=0).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    from benchlib.args import script_parser

    p = script_parser(__doc__)
    p.add_argument("--accumulation", type=int, default=1)
    p.add_argument("--precision", default="float32",
                   choices=["float32", "mixed_float16", "mixed_bfloat16"])
    p.add_argument("--xla", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--remat", default="selective", choices=["none", "selective", "full"])
    p.add_argument("--steps", type=int, default=5, help="timed steps, then profiled steps")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--json", type=Path, help="also write the result here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from albertkit.fileio import atomic_write_json
    from albertkit.perf.meter import timed
    from albertkit.perf.settings import BenchmarkSettings
    from albertkit.perf.workers import AlbertkitWorker
    from albertkit.tfstart import start_tensorflow
    from benchlib.ops import profile_steps

    start_tensorflow(quiet=True)
    settings = BenchmarkSettings(
        size=args.size, seq_length=args.seq_length, micro_batch=args.micro_batch,
        accumulation=args.accumulation, precision=args.precision,
        xla={"auto": "auto", "on": True, "off": False}[args.xla],
        remat=args.remat, warmup=args.warmup, steps=args.steps)
    load_before = os.getloadavg()[0]
    worker = AlbertkitWorker(settings)
    info = worker.setup()
    step_s = statistics.median(timed(worker._run_step, args.steps))
    profile = profile_steps(worker._run_step, args.steps)
    result = {
        "settings": settings.model_dump(mode="json"),
        "xla_plan": info["xla_plan"],
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "step_s": step_s,
        **profile,
    }
    print(format_profile(result))
    if args.json:
        atomic_write_json(args.json, result)
    return 0


def format_profile(r: dict) -> str:
    s = r["settings"]
    lines = [
        f"ALBERT-{s['size']} seq {s['seq_length']} micro-batch {s['micro_batch']} x "
        f"accumulation {s['accumulation']}, {s['precision']}, compute XLA "
        f"{'on' if r['xla_plan']['compute'] else 'off'}; {r['date']}, load "
        f"{r['load_before']:.2f} -> {r['load_after']:.2f}",
        f"step {r['step_s'] * 1e3:.1f} ms unprofiled (median of {r['steps']}), "
        f"{r['profiled_step_s'] * 1e3:.1f} ms profiled; operations "
        f"{r['op_ms_per_step']:.1f} ms per step summed over threads",
        "",
        "| kind | ms per step | share |",
        "|---|---:|---:|",
    ]
    lines += [f"| {k} | {v['ms_per_step']:.1f} | {100 * v['share']:.1f} % |"
              for k, v in r["kinds"].items()]
    lines += ["", "| operation | kind | ms per step |", "|---|---|---:|"]
    lines += [f"| {t['op'][:60]} | {t['kind']} | {t['ms_per_step']:.2f} |" for t in r["top"]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
