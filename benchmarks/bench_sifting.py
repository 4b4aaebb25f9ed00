"""Time to accuracy with smart sifting off and on: the demo corpus, the demo's tiny model.

Every run is the demo's pretraining (``albertkit demo``'s config: tiny ALBERT, seq 128,
32 sequences per step, AdamW, the built-in corpus prepared with the run's seed, once per
seed), with ``--steps`` steps, evaluated every ``--eval-every`` steps on ``--eval-steps``
held-out batches. Each run is a fresh ``albertkit pretrain``
process; runs alternate off / on so that the machine's drift hits both alike.

For each run it reports:

* the training wall time to the target (held-out MLM accuracy ``--target`` times the
  most-frequent-token baseline): the time breakdown's windows (``metrics.jsonl`` kind
  ``time``) up to the first evaluation that reaches it, minus their evaluation and
  checkpoint time (measurement, not training);
* the training FLOPs to the target: ``F x (3 x trained + scored)`` examples, F the matmul
  FLOPs of one example's forward pass, from the sifting counters (off: everything trained);
* the same for lower targets (1.5, 1.7, 1.8 times the baseline), for runs that never
  reach the target;
* the final held-out MLM and SOP accuracy, and the sifting-off run's accuracy at the wall
  time the sifting-on run ended (linear between its evaluations): equal wall time.

``--tune-seed`` runs every ``--betas`` value on one seed (choose beta there); ``--seeds``
then reports off vs the ``--beta`` chosen on the other seeds. The load average is printed
with the figures: measure on a quiet machine.

    python benchmarks/bench_sifting.py --tune-seed 0 --betas 0.3 0.5 0.7
    python benchmarks/bench_sifting.py --seeds 1 2 3 --beta 0.5 --json sifting.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LOWER_TARGETS = (1.5, 1.7, 1.8)  # also reported (times the baseline)


def prepare(work: Path, seed: int) -> Path:
    """The demo corpus, tokenizer and example files of ``seed`` (the demo prepares its data
    with the run's seed), built once under ``work`` and shared by that seed's runs."""
    from albertkit.data.demo import demo_config, prepare_demo_data

    out = work / f"data-seed{seed}"
    prepare_demo_data(demo_config().data, out, seed=seed, progress=False)
    return out


def run_config(data: Path, run_dir: Path, seed: int, beta: float | None, args) -> dict:
    from albertkit.data.demo import demo_config

    raw = demo_config(max_steps=args.steps).model_dump(mode="json")
    raw["run_dir"] = str(run_dir)
    # the demo prepares run_dir/data, and reuses what is there when its settings match
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "data").exists():
        (run_dir / "data").symlink_to(data.resolve(), target_is_directory=True)
    rt = raw["runtime"]
    rt.update(seed=seed, eval_every_steps=args.eval_every, eval_steps=args.eval_steps,
              xla=args.xla)
    rt["sifting"] = None if beta is None else {"beta": beta, "warmup_steps": args.warmup}
    raw["checkpoint"]["every_steps"] = args.steps
    raw["logging"].update(log_every_steps=args.eval_every, progress_bar=False)
    raw.pop("sagemaker", None)
    return raw


def run_once(work: Path, seed: int, beta: float | None, args) -> dict:
    name = f"seed{seed}-" + ("off" if beta is None else f"beta{beta}")
    run_dir = work / "runs" / name
    if (run_dir / "summary.json").is_file() and not args.rerun:
        print(f"  {name}: reusing {run_dir}", flush=True)
    else:
        cfg = run_config(prepare(work, seed), run_dir, seed, beta, args)
        path = work / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        load = os.getloadavg()[0]
        subprocess.run([sys.executable, "-m", "albertkit.cli", "pretrain", "--config",
                        str(path)], check=True, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        print(f"  {name}: done (load average before {load:.2f}, after "
              f"{os.getloadavg()[0]:.2f})", flush=True)
    return analyse(run_dir, args.target, name)


def analyse(run_dir: Path, target: float, name: str) -> dict:
    """Curves from ``metrics.jsonl``: cumulative training seconds and FLOPs at each eval."""
    from albertkit.models.footprint import training_flops

    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    from albertkit.config import TrainerConfig

    spec = TrainerConfig.from_dict(cfg).model.spec
    forward = training_flops(spec, cfg["data"]["seq_length"],
                             cfg["data"]["max_predictions_per_seq"]).forward
    batch = cfg["runtime"]["global_batch_size"]
    seconds, prev_step, at, flops_at, train = 0.0, 0, {}, {}, {}
    for r in records:
        if r["kind"] == "time":
            n = r["step"] - prev_step
            seconds += n * (r["wall_s"] - r.get("eval_s", 0.0) - r.get("checkpoint_s", 0.0))
            prev_step = r["step"]
            at[r["step"]] = seconds
        elif r["kind"] == "train":
            train[r["step"]] = r
    for step, r in train.items():
        if "sift_examples_kept" in r:
            flops_at[step] = forward * (3 * r["sift_examples_kept"] + r["sift_examples_scored"])
        else:
            flops_at[step] = forward * 3 * batch * step
    evals = [r for r in records if r["kind"] == "eval"]
    curve = [(r["step"], at.get(r["step"]), r["mlm_accuracy_over_baseline"], r["mlm_accuracy"],
              r["sop_accuracy"]) for r in evals]
    reached = next((c for c in curve if c[2] >= target), None)
    summary = json.loads((run_dir / "summary.json").read_text())
    last = curve[-1]
    lower = {}  # the same for lower targets, for when a run never reaches the target
    for t in LOWER_TARGETS:
        hit = next((c for c in curve if c[2] >= t), None)
        lower[str(t)] = (None if hit is None else
                         {"step": hit[0], "seconds": hit[1], "flops": flops_at.get(hit[0])})
    return {
        "run": name, "steps": summary["step"], "train_seconds": at[max(at)], "lower_targets": lower,
        "target_step": reached[0] if reached else None,
        "target_seconds": reached[1] if reached else None,
        "target_flops": flops_at.get(reached[0]) if reached else None,
        "final_over_baseline": last[2], "final_mlm_accuracy": last[3],
        "final_sop_accuracy": last[4], "curve": curve, "sifting": summary.get("sifting"),
    }


def at_time(curve: list, seconds: float, column: int) -> float:
    """A run's eval metric at ``seconds`` of training, linear between evaluations."""
    points = [(c[1], c[column]) for c in curve if c[1] is not None]
    for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
        if t0 <= seconds <= t1:
            return v0 + (v1 - v0) * (seconds - t0) / max(t1 - t0, 1e-9)
    return points[-1][1] if seconds > points[-1][0] else points[0][1]


def show(results: list[dict]) -> None:
    print(f"{'run':<16}{'steps':>6}{'train s':>9}{'target step':>12}{'target s':>9}"
          f"{'target TFLOP':>13}{'MLM acc':>9}{'x base':>8}{'SOP acc':>9}")
    for r in results:
        ts = f"{r['target_seconds']:.1f}" if r["target_seconds"] is not None else "-"
        tf_ = f"{r['target_flops'] / 1e12:.1f}" if r["target_flops"] is not None else "-"
        print(f"{r['run']:<16}{r['steps']:>6}{r['train_seconds']:>9.1f}"
              f"{r['target_step'] or '-':>12}{ts:>9}{tf_:>13}{r['final_mlm_accuracy']:>9.4f}"
              f"{r['final_over_baseline']:>8.3f}{r['final_sop_accuracy']:>9.4f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_sifting")
    p.add_argument("--tune-seed", type=int, default=None)
    p.add_argument("--betas", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    p.add_argument("--seeds", type=int, nargs="+", default=[])
    p.add_argument("--beta", type=float, default=0.5)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=100, help="sifting warm-up steps")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-steps", type=int, default=10)
    p.add_argument("--target", type=float, default=2.0)
    p.add_argument("--xla", default=True, action=argparse.BooleanOptionalAction)
    p.add_argument("--rerun", action="store_true", help="run again even if a result exists")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    out: dict = {"settings": {k: str(v) if isinstance(v, Path) else v
                              for k, v in vars(args).items()}}
    if args.tune_seed is not None:
        tune = [run_once(args.work, args.tune_seed, None, args)]
        tune += [run_once(args.work, args.tune_seed, b, args) for b in args.betas]
        show(tune)
        out["tune"] = tune
    pairs = []
    for seed in args.seeds:
        pairs.append((run_once(args.work, seed, None, args),
                      run_once(args.work, seed, args.beta, args)))
    if pairs:
        show([r for pair in pairs for r in pair])
        rows = []
        for off, on in pairs:
            row = {"off": off["run"], "on": on["run"],
                   "time_ratio": (on["target_seconds"] / off["target_seconds"]
                                  if on["target_seconds"] and off["target_seconds"] else None),
                   "flops_ratio": (on["target_flops"] / off["target_flops"]
                                   if on["target_flops"] and off["target_flops"] else None),
                   "on_final_mlm": on["final_mlm_accuracy"],
                   "off_mlm_at_equal_time": at_time(off["curve"], on["train_seconds"], 3),
                   "on_final_sop": on["final_sop_accuracy"],
                   "off_sop_at_equal_time": at_time(off["curve"], on["train_seconds"], 4),
                   "off_final_mlm": off["final_mlm_accuracy"]}
            rows.append(row)
            print(json.dumps(row))
        for t in LOWER_TARGETS:
            cells = []
            for off, on in pairs:
                a, b = off["lower_targets"][str(t)], on["lower_targets"][str(t)]
                cells.append("-" if not (a and b) else
                             f"steps {a['step']}/{b['step']} s {a['seconds']:.0f}/"
                             f"{b['seconds']:.0f} TFLOP {a['flops'] / 1e12:.1f}/"
                             f"{b['flops'] / 1e12:.1f}")
            print(f"to {t}x baseline, off/on: " + "; ".join(cells))
        ratios = [r["time_ratio"] for r in rows if r["time_ratio"] is not None]
        if ratios:
            print(f"wall time to target, on / off: median {statistics.median(ratios):.3f} "
                  f"({', '.join(f'{x:.3f}' for x in ratios)})")
        out["pairs"] = [{"off": off, "on": on} for off, on in pairs]
        out["rows"] = rows
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
