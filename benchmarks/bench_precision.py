"""Training quality of mixed precision: held-out MLM accuracy of float32 and mixed_bfloat16
runs of the demo's tiny model, several model seeds each, on one and the same data.

Every run is the demo's pretraining (``albertkit demo``'s config: tiny ALBERT, seq 128, 32
sequences per step, AdamW with warmup and linear decay, dynamic masking), ``--steps`` steps,
with ``runtime.xla: auto`` (the default path of each precision on this device) and
``runtime.seed`` set to the run's seed. The corpus split, tokenizer and example files are
prepared once with ``data.seed = --data-seed`` and shared by every run, so the seeds vary only
the weight initialisation, the data order and the masks. Each run is a fresh
``albertkit pretrain`` process; the precisions alternate seed by seed so that the machine's
drift hits both alike.

The question asked (mixed precision must not cost training quality): is the mixed_bfloat16
runs' mean final held-out MLM accuracy inside the range (min..max) of the float32 runs'?
The figures, the per-run accuracies and wall times, and the load average are printed and
written to ``--json``.

    python benchmarks/bench_precision.py --seeds 0 1 2 --json runs/bench_precision/result.json
    python benchmarks/bench_precision.py --seeds 0 --steps 60      # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PRECISIONS = ("float32", "mixed_bfloat16")


def prepare(work: Path, data_seed: int) -> Path:
    """The demo corpus, tokenizer and example files of ``data_seed``, built once."""
    from albertkit.data.demo import demo_config, prepare_demo_data

    data = demo_config(overrides=[f"data.seed={data_seed}"]).data
    out = work / f"data-seed{data_seed}"
    prepare_demo_data(data, out, seed=data_seed, progress=False)
    return out


def run_config(data: Path, run_dir: Path, precision: str, seed: int, args) -> dict:
    from albertkit.data.demo import demo_config

    raw = demo_config(max_steps=args.steps).model_dump(mode="json")
    raw["run_dir"] = str(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # the demo prepares run_dir/data and reuses what is there when its settings match
    if not (run_dir / "data").exists():
        (run_dir / "data").symlink_to(data.resolve(), target_is_directory=True)
    raw["data"]["seed"] = args.data_seed
    raw["runtime"].update(seed=seed, precision=precision, xla=args.xla)
    raw["checkpoint"]["every_steps"] = args.steps
    raw["logging"]["progress_bar"] = False
    raw.pop("sagemaker", None)
    return raw


def run_once(work: Path, data: Path, precision: str, seed: int, args) -> dict:
    name = f"{precision}-seed{seed}"
    run_dir = work / "runs" / name
    load_before = load_after = None
    if (run_dir / "summary.json").is_file() and not args.rerun:
        print(f"  {name}: reusing {run_dir}", flush=True)
    else:
        cfg = run_config(data, run_dir, precision, seed, args)
        path = work / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "albertkit.cli", "pretrain", "--config", str(path)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load_after = os.getloadavg()[0]
        print(f"  {name}: {time.perf_counter() - start:.0f} s (load average before "
              f"{load_before:.2f}, after {load_after:.2f})", flush=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    ev = summary["eval"]
    return {"run": name, "precision": precision, "seed": seed, "step": summary["step"],
            "mlm_accuracy": ev["mlm_accuracy"], "sop_accuracy": ev["sop_accuracy"],
            "mlm_loss": ev["mlm_loss"], "baseline": ev["mlm_baseline_accuracy"],
            "train_seconds": summary["wall_seconds"],
            "load_before": load_before, "load_after": load_after}


def verdict(runs: list[dict]) -> dict:
    acc = {p: [r["mlm_accuracy"] for r in runs if r["precision"] == p] for p in PRECISIONS}
    ref, mixed = acc["float32"], acc["mixed_bfloat16"]
    out = {p: {"mean": statistics.fmean(v), "min": min(v), "max": max(v),
               "stdev": statistics.stdev(v) if len(v) > 1 else None}
           for p, v in acc.items() if v}
    if ref and mixed:
        m = out["mixed_bfloat16"]["mean"]
        out["mean_difference"] = m - out["float32"]["mean"]
        out["within_float32_spread"] = out["float32"]["min"] <= m <= out["float32"]["max"]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_precision")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=1500, help="steps per run (the demo's 1500)")
    p.add_argument("--xla", default="auto", choices=["auto", "true", "false"],
                   help="runtime.xla of every run (default: auto, each precision's own path)")
    p.add_argument("--rerun", action="store_true", help="run again even if a result exists")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    args.xla = {"auto": "auto", "true": True, "false": False}[args.xla]
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    data = prepare(args.work, args.data_seed)
    runs = [run_once(args.work, data, prec, seed, args)
            for seed in args.seeds for prec in PRECISIONS]
    print(f"{'run':<24}{'step':>6}{'MLM acc':>9}{'MLM loss':>10}{'SOP acc':>9}{'seconds':>9}")
    for r in runs:
        secs = f"{r['train_seconds']:.0f}" if r["train_seconds"] is not None else "-"
        print(f"{r['run']:<24}{r['step']:>6}{r['mlm_accuracy']:>9.4f}{r['mlm_loss']:>10.4f}"
              f"{r['sop_accuracy']:>9.4f}{secs:>9}")
    v = verdict(runs)
    for prec in PRECISIONS:
        if prec in v:
            s = v[prec]
            sd = f", stdev {s['stdev']:.4f}" if s["stdev"] is not None else ""
            print(f"{prec}: mean {s['mean']:.4f} (min {s['min']:.4f}, max {s['max']:.4f}{sd})")
    if "within_float32_spread" in v:
        print(f"mixed_bfloat16 mean - float32 mean = {v['mean_difference']:+.4f}; "
              f"inside the float32 range: {v['within_float32_spread']}")
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if args.json:
        from albertkit.fileio import atomic_write_text

        settings = {k: str(x) if isinstance(x, Path) else x for k, x in vars(args).items()}
        atomic_write_text(args.json, json.dumps({"settings": settings, "runs": runs,
                                                 "verdict": v}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
