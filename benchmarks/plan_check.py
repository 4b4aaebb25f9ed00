"""Check the fleet plan's scaling here: predict a 2-process tf_multiworker run from a 1-process
benchmark, then compare with the 2-process run measured in the same invocation.

`albertkit plan` predicts a fleet's step as each replica's compute (at the rate measured on
one device) plus the all-reduce of the communication model (albertkit.plan.cost). This script
does the same for the one data-parallel setup this machine can run, two local tf_multiworker
processes (the loopback interface as their "network link", --link-gbps), and prints the
prediction beside the measurement with the error. Two predictions are shown:

* "plan (a device each)": the plan's own assumption, that every replica has a device to
  itself, so each runs as fast as the 1-process benchmark did;
* "plan (devices shared)": the same with the 1-process rate divided among the processes that
  share this machine's CPU cores (the 1-process run used them all), which is what happens
  on a CPU-only machine and what a fleet of separate GPUs does not do.

Usage::

    python benchmarks/plan_check.py [--size tiny] [--seq-length 128] [--micro-batch 32]
        [--precision float32] [--link-gbps 10] [--json result.json] [--from result.json]

``--from`` reads a saved `albertkit benchmark --processes 1,2 --json` result instead of
measuring. Measuring takes minutes and wants a quiet machine (it waits for one, up to
``--quiet-timeout`` seconds).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def predict(result, link_gbps: float, link_efficiency: float) -> dict[str, float]:
    """Predicted 2-process sequences/s from the 1-process figure of ``result``."""
    from albertkit.plan.cost import allreduce_seconds
    from albertkit.plan.fleet import step_time

    per_step = result.settings.micro_batch * result.settings.accumulation  # per process
    one = result.results["albertkit"].sequences_per_s
    comm = allreduce_seconds(result.spec, 2, link_gbps, link_efficiency=link_efficiency)
    cores = os.cpu_count() or 1
    shared = one * max(1, cores // 2) / cores
    out = {"allreduce_s": comm, "one_process_seq_per_s": one}
    for name, rate in (("a_device_each", one), ("devices_shared", shared)):
        step, _ = step_time(per_step, rate, comm)
        out[name] = 2 * per_step / step
    return out


def main(argv: list[str] | None = None) -> int:
    from albertkit.perf import BenchmarkResult, BenchmarkSettings, measure
    from albertkit.plan.fleet import LINK_EFFICIENCY
    from benchlib.args import script_parser
    from benchlib.quiet import wait_until_quiet

    p = script_parser(__doc__)
    p.add_argument("--precision", default="float32")
    p.add_argument("--link-gbps", type=float, default=10.0,
                   help="the loopback 'link' the all-reduce crosses, Gbit/s (an assumption)")
    p.add_argument("--json", type=Path, help="save the benchmark result here")
    p.add_argument("--from", dest="source", type=Path, help="a saved result to read instead")
    p.add_argument("--quiet-timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    if args.source:
        result = BenchmarkResult.read(args.source)
    else:
        wait_until_quiet(0.5, args.quiet_timeout)
        settings = BenchmarkSettings(size=args.size, seq_length=args.seq_length,
                                     micro_batch=args.micro_batch, precision=args.precision,
                                     processes=[1, 2])
        result = measure(settings)
        if args.json:
            from albertkit.fileio import atomic_write_text

            atomic_write_text(args.json, result.to_json())
    if "2" not in result.data_parallel:
        print(f"{args.source}: no 2-process figure (measure with --processes 1,2)")
        return 2
    measured = result.data_parallel["2"].sequences_per_s
    pred = predict(result, args.link_gbps, LINK_EFFICIENCY)
    s = result.settings
    print(f"ALBERT-{s.size}, seq {s.seq_length}, micro-batch {s.micro_batch}, {s.precision}, "
          f"{os.cpu_count()} CPUs; noisy: {result.noisy}")
    print(f"1 process measured:      {pred['one_process_seq_per_s']:9.2f} seq/s")
    print(f"all-reduce (model):      {pred['allreduce_s'] * 1000:9.2f} ms per step "
          f"at {args.link_gbps:g} Gbit/s x {LINK_EFFICIENCY:.0%}")
    print(f"2 processes measured:    {measured:9.2f} seq/s")
    rows = {}
    for name in ("a_device_each", "devices_shared"):
        error = (pred[name] - measured) / measured
        rows[name] = {"predicted_seq_per_s": pred[name], "error": error}
        label = "plan (a device each):" if name == "a_device_each" else "plan (devices shared):"
        print(f"{label:24s} {pred[name]:9.2f} seq/s  error {100 * error:+.0f}%")
    print(json.dumps({"measured_seq_per_s": measured, **rows,
                      "allreduce_s": pred["allreduce_s"], "link_gbps": args.link_gbps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
