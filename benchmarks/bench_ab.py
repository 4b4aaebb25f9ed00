"""Two variants of albertkit's training step, timed in alternating rounds in one process.

Both steps are built as the trainer builds them (``albertkit benchmark``'s worker:
synthetic batch, same model, optimizer and ``runtime.xla`` plan) and differ only in the
``--a`` / ``--b`` settings. Their rounds alternate (a, b, b, a, a, b...), so a machine whose
speed drifts over minutes slows both alike and the ratio of their medians holds where two
separate runs would not agree. Speed only: both steps live in one process, so resident
memory is shared (use ``albertkit benchmark`` for memory).

The result is marked noisy as the benchmark's are (``albertkit.perf.noise``): by the load
average before the script started or other processes' runnable threads during the rounds
(above 0.25 per CPU), or when the per-round A/B ratios disagree by more than 10 %.

Variant settings: ``remat`` (none, selective, full), ``xla`` (auto, on, off), ``optimizer``
(adamw, lamb). Precisions are compared with separate ``albertkit benchmark`` runs.

    python benchmarks/bench_ab.py --size tiny --seq-length 128 --micro-batch 32 --b remat=none
    python benchmarks/bench_ab.py --size base --micro-batch 8 --a xla=on --b xla=off \\
        --rounds 6 --steps 2 --json runs/ab/xla.json
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

# TensorFlow's C++ INFO lines stay hidden unless the environment asks for them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VARIANT_FIELDS = {
    "remat": ("none", "selective", "full"),
    "xla": ("auto", "on", "off"),
    "optimizer": ("adamw", "lamb"),
}


def parse_variant(text: str, option: str) -> dict[str, str]:
    """``"remat=none,xla=off"`` -> ``{"remat": "none", "xla": "off"}``; ValueError naming the
    option and the field for anything else."""
    variant: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in VARIANT_FIELDS:
            raise ValueError(f"{option} {item!r}: expected FIELD=VALUE with FIELD one of "
                             f"{', '.join(VARIANT_FIELDS)}")
        if value not in VARIANT_FIELDS[key]:
            raise ValueError(f"{option} {key}={value!r}: expected one of "
                             f"{', '.join(VARIANT_FIELDS[key])}")
        variant[key] = value
    return variant


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    from benchlib.args import script_parser

    p = script_parser(__doc__)
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="model field override, e.g. --set num_hidden_layers=2")
    p.add_argument("--a", default="", help="variant A's settings, e.g. remat=selective")
    p.add_argument("--b", default="", help="variant B's settings, e.g. remat=none")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=5, help="timed steps per round and variant")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write the result here")
    args = p.parse_args(argv)
    try:
        args.variants = {"A": parse_variant(args.a, "--a"), "B": parse_variant(args.b, "--b")}
    except ValueError as e:
        p.error(str(e))
    if args.variants["A"] == args.variants["B"]:
        p.error("--a and --b describe the same step: give them different settings")
    for option in ("rounds", "steps", "warmup"):
        if getattr(args, option) < 1:
            p.error(f"--{option} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from albertkit.fileio import atomic_write_json
    from albertkit.perf.meter import timed
    from albertkit.perf.noise import LoadMonitor
    from albertkit.perf.settings import BenchmarkSettings, model_overrides
    from albertkit.perf.workers import AlbertkitWorker
    from albertkit.tfstart import start_tensorflow

    monitor = LoadMonitor()  # the load average now, before this process does any work
    start_tensorflow(quiet=True)
    model = model_overrides(args.set)
    workers, settings = {}, {}
    for name, variant in args.variants.items():
        fields = dict(variant)
        if "xla" in fields:
            fields["xla"] = {"auto": "auto", "on": True, "off": False}[fields["xla"]]
        settings[name] = BenchmarkSettings(
            size=args.size, model=model, seq_length=args.seq_length,
            micro_batch=args.micro_batch, warmup=args.warmup, steps=args.steps, **fields)
        print(f"building {name} ({describe(variant)}) and running {args.warmup} warm-up "
              "steps", flush=True)
        workers[name] = AlbertkitWorker(settings[name])
        workers[name].setup()
    times: dict[str, list[float]] = {"A": [], "B": []}
    round_ratios = []
    monitor.start()
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        this = {name: timed(workers[name]._run_step, args.steps) for name in order}
        for name in order:
            times[name] += this[name]
        round_ratios.append(statistics.median(this["A"]) / statistics.median(this["B"]))
        print(f"round {r + 1}/{args.rounds}: A / B x{round_ratios[-1]:.3f}", flush=True)
    monitor.stop()
    noisy, reasons = noise(monitor, round_ratios)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_before": monitor.before,
        "load_during": monitor.during,
        "load_after": monitor.after,
        "round_ratios": round_ratios,
        "noisy": noisy,
        "noisy_reasons": reasons,
        "variants": {n: {"settings": args.variants[n],
                         "xla_plan": workers[n].step.xla._asdict(),
                         "step_s_median": statistics.median(times[n]),
                         "step_times_s": times[n]} for n in ("A", "B")},
        "settings": settings["A"].model_dump(mode="json", exclude={"remat", "xla",
                                                                   "optimizer"}),
    }
    result["a_over_b"] = (result["variants"]["A"]["step_s_median"]
                          / result["variants"]["B"]["step_s_median"])
    print(format_result(result))
    if args.json:
        atomic_write_json(args.json, result)
    return 0


def noise(monitor, round_ratios: list[float]) -> tuple[bool, list[str]]:
    """The benchmark's load rules, and the per-round A/B ratios' spread instead of each
    framework's per-round rates (drift moves the rates of both variants, not their ratio)."""
    from albertkit.perf.noise import assess_noise, round_spread_pct
    from albertkit.perf.settings import BenchmarkSettings

    limits = BenchmarkSettings.model_fields  # the benchmark's default thresholds
    max_spread = limits["noisy_spread_pct"].default
    _, reasons = assess_noise(monitor.before, monitor.during, os.cpu_count() or 1, {},
                              limits["noisy_load_per_cpu"].default)
    spread = round_spread_pct(round_ratios)
    if spread > max_spread:
        reasons.append(f"per-round A / B ratios disagree by {spread:.1f}% "
                       f"(x{min(round_ratios):.3f}-x{max(round_ratios):.3f}) > "
                       f"{max_spread:g}%")
    return bool(reasons), reasons


def describe(variant: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in variant.items()) or "the defaults"


def format_result(r: dict) -> str:
    s = r["settings"]
    lines = [
        f"ALBERT-{s['size']} seq {s['seq_length']} micro-batch {s['micro_batch']}, "
        f"{s['precision']}; {r['date']}, load {r['load_before']:.2f} -> {r['load_after']:.2f}",
        "",
        "| variant | settings | compute XLA | median step ms | steps |",
        "|---|---|---|---:|---:|",
    ]
    for name, v in r["variants"].items():
        lines.append(f"| {name} | {describe(v['settings'])} | "
                     f"{'on' if v['xla_plan']['compute'] else 'off'} | "
                     f"{v['step_s_median'] * 1e3:.1f} | {len(v['step_times_s'])} |")
    ratio = r["a_over_b"]
    faster = "B" if ratio > 1 else "A"
    lines += ["", f"A / B step time: x{ratio:.3f} ({faster} is faster by "
                  f"{abs(1 - (ratio if ratio < 1 else 1 / ratio)) * 100:.1f} %); per round "
                  f"x{min(r['round_ratios']):.3f}-x{max(r['round_ratios']):.3f}"]
    lines.append("NOISY: " + "; ".join(r["noisy_reasons"]) if r["noisy"] else
                 "quiet (load and per-round ratios within the benchmark's thresholds)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
