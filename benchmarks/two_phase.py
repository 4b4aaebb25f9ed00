"""Two-phase pretraining against one phase at the long length: held-out MLM accuracy at
seq 512 and wall time, several seeds (docs/howto/two-phase.md).

For each seed it trains, on the demo's prose (English text shipped with Python):

* ``two-phase``: phase 1 at seq 128 for ``--phase1-fraction`` of ``--steps`` steps, then
  phase 2 at seq 512 for the rest, started from phase 1's run (``model.load_from``) with a
  fresh optimizer and schedule and a peak rate of ``--phase2-lr-ratio`` x phase 1's;
* ``seq512``: one run at seq 512 for all ``--steps`` steps, with phase 1's rate.

Both are the demo's tiny ALBERT (vocab 3000, 2 layers of 128, max_position_embeddings 512
from the start) with the demo's AdamW settings (peak ``--lr``, warmup 10% of each run, linear
decay), ``--batch`` sequences per step in both phases. The corpus split and tokenizer are the
demo's (``data.seed = --data-seed``); the example files are written with
``albertkit prepare-data`` at seq 128 and 512 (static masks), and the held-out documents at
seq 512, so every run is evaluated on the same masked sequences. Each run is a fresh
``albertkit pretrain`` process; ``train seconds`` is the runs' own ``wall_seconds`` (phase 1
+ phase 2 for the two-phase rows), without process start-up.

On a loaded machine the wall times are indicative only; the accuracy columns do not depend
on the load.

    python benchmarks/two_phase.py --seeds 0 1 2 --steps 1500 --json runs/two_phase/result.json
    python benchmarks/two_phase.py --seeds 0 --steps 100          # a quick look
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
LONG = 512
SHORT = 128


def cli(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "albertkit.cli", *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"albertkit {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def prepare(work: Path, data_seed: int) -> dict[str, Path]:
    """The demo corpus and tokenizer, then example files at 128 and 512 and held-out ones
    at 512, each written once with ``albertkit prepare-data``."""
    from albertkit.config import DemoData
    from albertkit.data.demo import prepare_demo_data

    demo = work / f"demo-seed{data_seed}"
    # dupe_factor 1: only its corpus split and tokenizer are used here
    prepare_demo_data(DemoData(dupe_factor=1, seed=data_seed), demo, seed=data_seed,
                      progress=False)
    out = {}
    for name, src, seq, dupe in (("train128", "train", SHORT, 5), ("train512", "train", LONG, 5),
                                 ("eval512", "eval", LONG, 2)):
        out[name] = work / f"data-seed{data_seed}" / name
        if not (out[name] / "manifest.json").is_file():
            print(f"  prepare-data {name}", flush=True)
            cli("prepare-data", str(demo / "corpus" / f"{src}.txt"), "--tokenizer",
                str(demo / "tokenizer"), "--out", str(out[name]), "--input-format",
                "sentence_per_line", "--seq-length", str(seq), "--masking", "static",
                "--dupe-factor", str(dupe), "--min-document-tokens", "8",
                "--seed", str(data_seed + (1 if src == "eval" else 0)), "--num-workers", "1",
                "--no-progress")
    return out


def run_config(run_dir: Path, data: dict[str, Path], train: str, seq: int, steps: int,
               lr: float, seed: int, args, load_from: Path | None = None) -> dict:
    preds = {SHORT: 20, LONG: 77}[seq]  # prepare-data's default: ceil(0.15 x seq)
    model = ({"load_from": str(load_from)} if load_from is not None else
             {"size": "tiny", "vocab_size": 3000, "max_position_embeddings": LONG})
    return {
        "run_dir": str(run_dir),
        "model": model,
        "data": {"kind": "tfrecord", "train_files": [str(data[train] / "*.tfrecord")],
                 "eval_files": ([str(data["eval512"] / "*.tfrecord")] if seq == LONG else []),
                 "seq_length": seq, "max_predictions_per_seq": preds, "masking": "static"},
        "optimizer": {"kind": "adamw", "learning_rate": lr, "weight_decay": 0.01,
                      "schedule": {"warmup_fraction": 0.1}},
        "runtime": {"micro_batch_size": args.batch, "global_batch_size": args.batch,
                    "max_steps": steps, "seed": seed, "xla": args.xla,
                    "eval_every_steps": steps if seq == LONG else 0,
                    "eval_steps": args.eval_steps},
        "checkpoint": {"every_steps": steps, "keep_last": 1},
        "logging": {"progress_bar": False, "log_every_steps": max(steps // 4, 1)},
    }


def train(work: Path, name: str, cfg: dict, rerun: bool) -> dict:
    run_dir = Path(cfg["run_dir"])
    if (run_dir / "summary.json").is_file() and not rerun:
        print(f"  {name}: reusing {run_dir}", flush=True)
    else:
        path = work / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        load = os.getloadavg()[0]
        cli("pretrain", "--config", str(path))
        print(f"  {name}: done (load average before {load:.2f}, after "
              f"{os.getloadavg()[0]:.2f})", flush=True)
    return json.loads((run_dir / "summary.json").read_text())


def run_seed(work: Path, data: dict[str, Path], seed: int, args) -> list[dict]:
    runs = work / "runs"
    short = max(1, round(args.steps * args.phase1_fraction))
    long_ = args.steps - short
    if long_ < 1:
        raise SystemExit(f"--steps {args.steps} x --phase1-fraction {args.phase1_fraction} "
                         "leaves no phase-2 step")
    p1_dir = runs / f"two-phase-seed{seed}-p1"
    p1 = train(work, f"two-phase-seed{seed}-p1",
               run_config(p1_dir, data, "train128", SHORT, short, args.lr, seed, args), args.rerun)
    p2 = train(work, f"two-phase-seed{seed}-p2",
               run_config(runs / f"two-phase-seed{seed}-p2", data, "train512", LONG, long_,
                          args.lr * args.phase2_lr_ratio, seed, args, load_from=p1_dir),
               args.rerun)
    one = train(work, f"seq512-seed{seed}",
                run_config(runs / f"seq512-seed{seed}", data, "train512", LONG, args.steps,
                           args.lr, seed, args), args.rerun)
    return [
        {"recipe": "two-phase", "seed": seed, "steps": f"{short}+{long_}",
         "mlm_accuracy": p2["eval"]["mlm_accuracy"], "mlm_loss": p2["eval"]["mlm_loss"],
         "train_seconds": p1["wall_seconds"] + p2["wall_seconds"]},
        {"recipe": "seq512", "seed": seed, "steps": str(args.steps),
         "mlm_accuracy": one["eval"]["mlm_accuracy"], "mlm_loss": one["eval"]["mlm_loss"],
         "train_seconds": one["wall_seconds"]},
    ]


def table(rows: list[dict]) -> str:
    lines = [f"{'recipe':<11}{'seed':>5}{'steps':>10}{'MLM acc@512':>13}{'MLM loss':>10}"
             f"{'train s':>9}"]
    for r in rows:
        lines.append(f"{r['recipe']:<11}{r['seed']:>5}{r['steps']:>10}{r['mlm_accuracy']:>13.4f}"
                     f"{r['mlm_loss']:>10.4f}{r['train_seconds']:>9.0f}")
    for recipe in ("two-phase", "seq512"):
        acc = [r["mlm_accuracy"] for r in rows if r["recipe"] == recipe]
        secs = [r["train_seconds"] for r in rows if r["recipe"] == recipe]
        sd = f" (stdev {statistics.stdev(acc):.4f})" if len(acc) > 1 else ""
        lines.append(f"{recipe}: mean MLM acc@512 {statistics.fmean(acc):.4f}{sd}, "
                     f"mean train seconds {statistics.fmean(secs):.0f}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "two_phase")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=1500, help="total steps of either recipe")
    p.add_argument("--phase1-fraction", type=float, default=0.9,
                   help="share of the steps at seq 128 (the LAMB paper's 9/10)")
    p.add_argument("--lr", type=float, default=5e-4, help="peak rate (the demo's AdamW 5e-4)")
    p.add_argument("--phase2-lr-ratio", type=float, default=2 / 3,
                   help="phase 2's peak rate over phase 1's (NVIDIA's 4e-3 / 6e-3)")
    p.add_argument("--batch", type=int, default=32, help="sequences per step, both phases")
    p.add_argument("--eval-steps", type=int, default=20, help="held-out batches per evaluation")
    p.add_argument("--xla", default="auto", choices=["auto", "true", "false"])
    p.add_argument("--rerun", action="store_true", help="run again even if a result exists")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    args.xla = {"auto": "auto", "true": True, "false": False}[args.xla]
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    data = prepare(args.work, args.data_seed)
    rows = [r for seed in args.seeds for r in run_seed(args.work, data, seed, args)]
    print(table(rows))
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if args.json:
        from albertkit.fileio import atomic_write_text

        settings = {k: str(x) if isinstance(x, Path) else x for k, x in vars(args).items()}
        atomic_write_text(args.json, json.dumps({"settings": settings, "runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
