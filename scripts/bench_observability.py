"""What observability costs: the same short pretraining run with the step-time breakdown on
(the default) and off, and optionally with the albertkit source of an older checkout (which
has neither), interleaved so that the machine's drift hits every variant alike.

Each run is a fresh process (``albertkit pretrain`` on synthetic data, a small model whose
step takes tens of milliseconds on a CPU); the figure is the throughput of the logging
windows after the first two (compilation and the tracing of the timed halves excluded),
from ``metrics.jsonl``. The load average is printed with the figures: measure on a quiet
machine.

    python scripts/bench_observability.py --rounds 3
    python scripts/bench_observability.py --rounds 3 --baseline-src /path/to/old/checkout/src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

CONFIG = {
    "model": {"size": "tiny", "vocab_size": 1000, "hidden_size": 128, "embedding_size": 64,
              "num_attention_heads": 4, "intermediate_size": 512, "num_hidden_layers": 4,
              "max_position_embeddings": 128},
    "data": {"kind": "synthetic", "seq_length": 128, "max_predictions_per_seq": 20},
    "optimizer": {"kind": "adamw", "learning_rate": 1e-4},
    "runtime": {"micro_batch_size": 8, "global_batch_size": 8, "max_steps": 300,
                "eval_every_steps": 0, "eval_steps": 1},
    "checkpoint": {"every_steps": 10_000},
    "logging": {"progress_bar": False, "log_every_steps": 50},
}


def run_once(src: Path, breakdown: bool | None, work: Path) -> float:
    """Median sequences/s of the windows after the first two."""
    run_dir = Path(tempfile.mkdtemp(dir=work))
    cfg = json.loads(json.dumps(CONFIG))
    cfg["run_dir"] = str(run_dir / "run")
    if breakdown is not None:  # None: a source without the setting
        cfg["logging"]["breakdown"] = breakdown
    path = run_dir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": str(src), "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "-c", "import sys; from albertkit.cli import main; "
                    "sys.exit(main())", "pretrain", "--config", str(path)],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = [json.loads(line) for line in (run_dir / "run" / "metrics.jsonl").open()]
    rates = [r["seq_per_s"] for r in records if r.get("kind") == "train"][2:]
    return statistics.median(rates)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="the src/ folder of an albertkit checkout without observability")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "albertkit-obs")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    variants = {"breakdown on (default)": (ROOT / "src", True),
                "breakdown off": (ROOT / "src", False)}
    if args.baseline_src:
        variants["baseline source"] = (args.baseline_src.resolve(), None)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    got: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(args.rounds):
        for name, (src, breakdown) in variants.items():
            got[name].append(run_once(src, breakdown, args.work))
            print(f"round {r + 1} {name}: {got[name][-1]:.1f} sequences/s "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
    ref = statistics.median(got["breakdown off"])
    print("\n| variant | sequences/s per run | median | vs breakdown off |\n|---|---|---:|---:|")
    for name, values in got.items():
        med = statistics.median(values)
        print(f"| {name} | {', '.join(f'{v:.1f}' for v in values)} | {med:.1f} | "
              f"{med / ref:.3f} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
