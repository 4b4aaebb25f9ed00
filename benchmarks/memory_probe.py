"""Where a training process's resident memory goes, stage by stage.

Runs one framework's benchmark step (albertkit's ``TrainStep`` as the trainer builds it, or
Hugging Face's PyTorch ALBERT) in this process and prints, in MiB, the resident memory
(``/proc/self/status``: total, anonymous, file-backed) at each stage:

* ``start``: the interpreter;
* ``import``: after importing the framework (its shared libraries and Python modules;
  albertkit: :func:`albertkit.tfstart.start_tensorflow`, or ``--plain-import``);
* ``warm``: after building the model and running the warm-up steps (compilation included);
* ``peak``: the high-water mark over the timed steps (reset with ``/proc/self/clear_refs``
  first), and the resident memory right after them.

Each variant is one process: ``--allocator bfc`` runs TensorFlow on its BFC allocator
(``TF_CPU_ALLOCATOR_USE_BFC``; the tensor peak is then printed too), ``--arenas N`` caps
glibc's malloc arenas first. Linux only.

    python benchmarks/memory_probe.py --framework albertkit
    python benchmarks/memory_probe.py --framework albertkit --allocator bfc
    python benchmarks/memory_probe.py --framework hf-pytorch
    python benchmarks/memory_probe.py --framework albertkit --precision mixed_bfloat16 --seq-length 512 --micro-batch 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) // 1024
    return out


def _child(args: argparse.Namespace) -> None:
    from albertkit.perf.settings import BenchmarkSettings
    from albertkit.training.native import limit_malloc_arenas

    if args.arenas:
        limit_malloc_arenas(args.arenas)
    marks = {"start": _status()}
    settings = BenchmarkSettings(
        size=args.size, seq_length=args.seq_length, micro_batch=args.micro_batch,
        precision=args.precision, steps=args.steps, warmup=args.warmup, rounds=1,
    )
    if args.framework == "albertkit":
        if args.plain_import:
            import tensorflow  # noqa: F401 - the import is a stage
        else:
            from albertkit.tfstart import start_tensorflow

            start_tensorflow(quiet=False)  # as albertkit's processes start it
        from albertkit.perf.workers import AlbertkitWorker as Worker
    else:
        import torch  # noqa: F401

        from albertkit.perf.workers import HFWorker as Worker
    marks["import"] = _status()
    worker = Worker(settings)
    worker.setup()
    marks["warm"] = _status()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM
    reply = worker.steps(args.steps)
    marks["after"] = _status()
    print(json.dumps({
        "marks": marks,
        "tensor_peak_mib": (reply.get("tensor_peak_bytes") or 0) // 2**20 or None,
        "median_step_s": sorted(reply["times"])[len(reply["times"]) // 2],
    }))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["albertkit", "hf-pytorch"], default="albertkit")
    p.add_argument("--allocator", choices=["default", "bfc"], default="default")
    p.add_argument("--arenas", type=int, default=None)
    p.add_argument("--size", default="base")
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--precision", default="float32")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--plain-import", action="store_true",
                   help="albertkit: a plain `import tensorflow` (with the optional packages it "
                   "pulls in) instead of albertkit's start_tensorflow")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args)
        return 0
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", HF_HUB_OFFLINE="1")
    env.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    if args.allocator == "bfc":
        env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    out = subprocess.run([sys.executable, *sys.argv, "--child"], env=env, check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    m = r["marks"]
    print(f"{args.framework}, {args.size} seq {args.seq_length} x {args.micro_batch}, "
          f"{args.precision}, allocator {args.allocator}"
          f"{', plain import tensorflow' if args.plain_import else ''}"
          f"{', arenas ' + str(args.arenas) if args.arenas else ''} (MiB)")
    print("| stage | resident | anonymous | file-backed |")
    print("|---|---:|---:|---:|")
    for stage in ("start", "import", "warm"):
        s = m[stage]
        print(f"| {stage} | {s['VmRSS']:,} | {s['RssAnon']:,} | {s['RssFile']:,} |")
    a = m["after"]
    print(f"| peak over the timed steps | {a['VmHWM']:,} | | |")
    print(f"| after them | {a['VmRSS']:,} | {a['RssAnon']:,} | {a['RssFile']:,} |")
    if r["tensor_peak_mib"]:
        print(f"TensorFlow's allocator peak: {r['tensor_peak_mib']:,} MiB")
    print(f"median step: {r['median_step_s']:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
