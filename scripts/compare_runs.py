"""Compare the newest checkpoints of two albertkit run directories, tensor by tensor.

Prints the checkpoint of each, the largest absolute difference over the model and optimizer
tensors, the largest share of the tolerance used (``|a - b| / (atol + rtol * |b|)``, at most
1 within it), and whether they are bit-identical; exits 1 when a tensor differs by more
than the tolerance ``tests/test_distributed_multiprocess.py`` allows between a distributed and
a single-process run (``rtol=1e-4, atol=1e-5``), or with ``--exact`` when any bit differs.
Used for the real Slurm cluster runs of docs/slurm.md.

    python scripts/compare_runs.py RUN_DIR_A RUN_DIR_B [--exact]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

RTOL, ATOL = 1e-4, 1e-5


def newest_checkpoint(run_dir: Path) -> Path:
    found = sorted(p for p in (run_dir / "checkpoints").iterdir() if p.is_dir())
    if not found:
        raise SystemExit(f"{run_dir}: no checkpoint")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--exact", action="store_true", help="fail unless bit-identical")
    args = parser.parse_args(argv)
    ca, cb = newest_checkpoint(args.a), newest_checkpoint(args.b)
    report = {"a": str(ca), "b": str(cb), "tensors": 0, "max_abs_diff": 0.0,
              "max_tolerance_used": 0.0, "bit_identical": True, "within_tolerance": True}
    for part in ("model.safetensors", "optimizer.safetensors"):
        ta, tb = load_file(str(ca / part)), load_file(str(cb / part))
        if sorted(ta) != sorted(tb):
            raise SystemExit(f"{part}: different tensor names")
        for name in ta:
            x, y = ta[name].astype(np.float64), tb[name].astype(np.float64)
            diff = np.abs(x - y)
            report["tensors"] += 1
            report["max_abs_diff"] = max(report["max_abs_diff"], float(diff.max(initial=0)))
            used = diff / (ATOL + RTOL * np.abs(y))
            report["max_tolerance_used"] = max(report["max_tolerance_used"],
                                               float(used.max(initial=0)))
            report["bit_identical"] &= bool(np.array_equal(ta[name], tb[name]))
            report["within_tolerance"] &= bool(np.allclose(x, y, rtol=RTOL, atol=ATOL))
    print(json.dumps(report, indent=1))
    ok = report["bit_identical"] if args.exact else report["within_tolerance"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
