"""The training step against its matmuls alone: how much of a step is left to make faster.

Times, in alternating rounds, albertkit's training step and Hugging Face PyTorch's (the
benchmark's two worker processes, ``albertkit benchmark``'s synthetic batch) and, in the
same processes, the step's matrix products alone (every forward and backward matmul of albertkit's step, at its shapes and compute dtype) in TensorFlow's
graph executor, in XLA, and in PyTorch. A step minus its matmuls is "the rest": bias adds,
softmax, GELU, LayerNorm, transposes, the optimizer update and the executor's own cost.

With ``--target R`` it prints what albertkit's step would have to take to be R times as
fast as Hugging Face's, and how much of that time the matmuls leave for the rest: a target
that leaves the rest less than any executor here needs for it cannot be met by changing
the rest.

The matmuls (:func:`step_matmuls`) are those of ``albertkit.models.footprint.training_flops``
for ``micro_batch`` sequences, each forward product ``y = x w`` with its two backward
products ``dx = dy w^T`` and ``dw = x^T dy`` (the FLOP model's "3x forward"); the workers'
``floor`` command times them (:class:`FloorAlbertkitWorker`, :class:`FloorHFWorker`).

Noisy as the benchmark is (``albertkit.perf.noise``): load before, other processes'
runnable threads during the rounds, or rounds disagreeing by more than 10 %. Like
``benchmarks/bench_targets.py`` it first waits (up to ``--quiet-wait`` seconds) for the load
average to fall to half the noisy limit.

    python benchmarks/bench_floor.py --size tiny --seq-length 128 --micro-batch 32 --target 2.5
    python benchmarks/bench_floor.py --size base --micro-batch 8 --steps 2 --calls 2 --rounds 3 \\
        --json runs/floor-base.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albertkit.config.sizes import AlbertSpec
from albertkit.models.footprint import layer_applications
from albertkit.perf.meter import timed
from albertkit.perf.settings import BenchmarkSettings
from albertkit.perf.workers import AlbertkitWorker, HFWorker

# benchlib sits beside this script: importable from any working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# TensorFlow's C++ INFO lines stay hidden unless the environment asks for them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# (label, worker, command, arguments) of each timed part; ``steps`` is one optimizer step.
# Worker "albertkit-xla" runs the step with XLA, "albertkit-graph" without.
PARTS = (
    ("albertkit step, TF graph executor", "albertkit-graph", "steps", {}),
    ("albertkit step, TF XLA", "albertkit-xla", "steps", {}),
    ("matmuls alone, TF graph executor", "albertkit-graph", "floor", {"jit": False}),
    ("matmuls alone, TF XLA", "albertkit-xla", "floor", {"jit": True}),
    ("Hugging Face step", "hf-pytorch", "steps", {}),
    ("matmuls alone, PyTorch", "hf-pytorch", "floor", {}),
)
PATHS = ("TF graph executor", "TF XLA")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="tiny")
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--precision", default="float32",
                   choices=("float32", "mixed_bfloat16", "mixed_float16"))
    p.add_argument("--steps", type=int, default=10, help="timed steps per round")
    p.add_argument("--calls", type=int, default=10, help="timed matmul passes per round")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--target", type=float, default=None,
                   help="a speed ratio over Hugging Face to budget (e.g. 2.5)")
    p.add_argument("--quiet-wait", type=float, default=300.0,
                   help="seconds to wait at most for a quiet machine first (0: do not wait)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args(argv)
    for name in ("steps", "calls", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.target is not None and args.target <= 0:
        p.error("--target must be positive")
    return args


def summarise(rounds: dict[str, list[float]], per_pass: dict[str, int]) -> dict[str, dict]:
    """Each part's median over its rounds' medians, in ms per micro-batch."""
    out = {}
    for label, medians in rounds.items():
        ms = 1e3 * statistics.median(medians) / per_pass[label]
        out[label] = {"ms": ms, "round_ms": [1e3 * m / per_pass[label] for m in medians]}
    return out


def rest(parts: dict[str, dict]) -> dict[str, float]:
    """Per compile path: albertkit's step minus its matmuls alone (ms per micro-batch)."""
    return {path: parts[f"albertkit step, {path}"]["ms"] - parts[f"matmuls alone, {path}"]["ms"]
            for path in PATHS}


def budget(parts: dict[str, dict], target: float) -> dict[str, float]:
    """albertkit's step time for ``target`` x Hugging Face's speed, and what the matmuls
    leave of it for the rest on each compile path."""
    step = parts["Hugging Face step"]["ms"] / target
    return {"target": target, "step_ms": step,
            **{f"rest_allowed_ms, {path}": step - parts[f"matmuls alone, {path}"]["ms"]
               for path in PATHS}}


def main(argv: list[str] | None = None) -> int:
    from albertkit.fileio import atomic_write_json
    from albertkit.perf.noise import LoadMonitor, assess_noise
    from albertkit.perf.runner import WorkerProcess
    from benchlib.quiet import wait_until_quiet

    args = parse(argv)
    settings = {
        name: BenchmarkSettings(size=args.size, seq_length=args.seq_length,
                                micro_batch=args.micro_batch, precision=args.precision,
                                steps=args.steps, rounds=args.rounds, pipeline=False, xla=xla)
        for name, xla in (("albertkit-graph", False), ("albertkit-xla", True),
                          ("hf-pytorch", "auto"))
    }
    cpus = os.cpu_count() or 1
    limit = settings["hf-pytorch"].noisy_load_per_cpu
    if args.quiet_wait > 0:
        wait_until_quiet(0.5 * limit * cpus, args.quiet_wait)
    monitor = LoadMonitor()
    # The benchmark's worker processes, served by this script (``worker``: the floor
    # workers, which add the ``floor`` command).
    command = [sys.executable, str(Path(__file__).resolve()), "worker"]
    workers = {name: WorkerProcess("hf-pytorch" if name == "hf-pytorch" else "albertkit", s,
                                   command)
               for name, s in settings.items()}
    # ms per micro-batch: a step runs `accumulation` micro-batches, a floor pass one.
    accumulation = settings["hf-pytorch"].accumulation
    per_pass = {label: (accumulation if cmd == "steps" else 1) for label, _, cmd, _ in PARTS}
    rounds: dict[str, list[float]] = {label: [] for label, *_ in PARTS}

    def run(label: str, worker: str, cmd: str, kw: dict) -> list[float]:
        n = {"n": args.steps} if cmd == "steps" else {"calls": args.calls, **kw}
        return workers[worker].call(cmd, **n)["times"]

    try:
        for w in workers.values():  # one at a time: compilation is CPU-heavy
            monitor.add_pid(w.proc.pid)
            w.call("setup")
        # Build the floors (PyTorch's buffers, TensorFlow's functions: XLA compiles here).
        for _label, worker, cmd, kw in PARTS:
            if cmd == "floor":
                workers[worker].call(cmd, calls=1, **kw)
        # Then one untimed round of every part: Hugging Face's first steps after the floor's
        # buffers were made ran at a third of its speed (465 ms against 170 ms per step).
        for part in PARTS:
            run(*part)
        print(f"{len(PARTS)} parts x {args.rounds} rounds ({args.size} {args.seq_length} x "
              f"{args.micro_batch}, {args.precision})", flush=True)
        monitor.start()
        try:
            for r in range(args.rounds):
                for part in PARTS if r % 2 == 0 else PARTS[::-1]:
                    rounds[part[0]].append(statistics.median(run(*part)))
        finally:
            monitor.stop()
    finally:
        for w in workers.values():
            w.close()

    parts = summarise(rounds, per_pass)
    noisy, reasons = assess_noise(
        monitor.before, monitor.during, cpus,
        {label: [args.micro_batch * per_pass[label] / m for m in medians]
         for label, medians in rounds.items()},
        load_per_cpu=limit,
    )
    print("\n| part | ms per micro-batch | rounds (ms) |\n|---|---:|---|")
    for label, *_ in PARTS:
        p = parts[label]
        print(f"| {label} | {p['ms']:.1f} | {', '.join(f'{x:.1f}' for x in p['round_ms'])} |")
    rests = rest(parts)
    print("\nthe rest (step minus its matmuls alone): "
          + ", ".join(f"{path} {ms:.1f} ms" for path, ms in rests.items()))
    print(f"load average {monitor.before:.2f} -> {monitor.after:.2f}; "
          f"{'NOISY: ' + '; '.join(reasons) if noisy else 'quiet'}")
    result = {"settings": settings["hf-pytorch"].model_dump(mode="json"), "parts": parts,
              "rest_ms": rests, "load_before": monitor.before, "load_after": monitor.after,
              "load_during": monitor.during, "noisy": noisy, "noisy_reasons": reasons}
    if args.target is not None:
        b = result["budget"] = budget(parts, args.target)
        print(f"{args.target:g}x Hugging Face's speed needs albertkit's step at "
              f"{b['step_ms']:.1f} ms, which leaves the rest "
              + ", ".join(f"{b[f'rest_allowed_ms, {path}']:.1f} ms ({path})" for path in PATHS))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.json, result)
        print(f"wrote {args.json}")
    return 0


def worker(framework: str, settings_json: str) -> int:
    """One worker process of :func:`main` (``bench_floor.py worker FRAMEWORK SETTINGS``)."""
    from albertkit.perf.runner import worker_main

    return worker_main(framework, settings_json, WORKERS)


# =========================================================================== the matmuls
@dataclass(frozen=True)
class Matmul:
    """``batch`` products of ``op(a) [m, k]`` by ``op(b) [k, n]`` (``op``: transpose or not),
    as ``tf.linalg.matmul(a, b, transpose_a=..., transpose_b=...)`` takes them."""

    part: str
    batch: int
    m: int
    k: int
    n: int
    transpose_a: bool = False
    transpose_b: bool = False

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    @property
    def a_shape(self) -> tuple[int, ...]:
        inner = (self.k, self.m) if self.transpose_a else (self.m, self.k)
        return (self.batch, *inner) if self.batch > 1 else inner

    @property
    def b_shape(self) -> tuple[int, ...]:
        inner = (self.n, self.k) if self.transpose_b else (self.k, self.n)
        return (self.batch, *inner) if self.batch > 1 else inner


def with_backward(part: str, batch: int, m: int, k: int, n: int) -> list[Matmul]:
    """``y = x w`` (``x [m, k]``, ``w [k, n]``) and its gradients ``dx = dy w^T`` and
    ``dw = x^T dy``: the three products autodiff runs for one forward product."""
    return [
        Matmul(part, batch, m, k, n),
        Matmul(f"{part}.dx", batch, m, n, k, transpose_b=True),
        Matmul(f"{part}.dw", batch, k, m, n, transpose_a=True),
    ]


def step_matmuls(
    spec: AlbertSpec, seq_length: int, micro_batch: int, max_predictions: int
) -> list[Matmul]:
    """Every matmul of one pretraining micro-batch (forward and backward), by part."""
    if min(seq_length, micro_batch, max_predictions) <= 0:
        raise ValueError(f"seq_length={seq_length}, micro_batch={micro_batch} and "
                         f"max_predictions={max_predictions} must be positive")
    b, t, p = micro_batch, seq_length, max_predictions
    e, h, f, v = spec.embedding_size, spec.hidden_size, spec.intermediate_size, spec.vocab_size
    heads, d = spec.num_attention_heads, spec.head_size
    tokens = b * t
    layer = [
        *(with_backward("attention_qkv", 1, tokens, h, h) * 3),  # three dense layers
        # scores Q K^T per head: a = Q [t, d], "w" = K^T [d, t]
        *with_backward("attention_scores", b * heads, t, d, t),
        # context P V per head: P [t, t], V [t, d]
        *with_backward("attention_context", b * heads, t, t, d),
        *with_backward("attention_output", 1, tokens, h, h),
        *with_backward("ffn_in", 1, tokens, h, f),
        *with_backward("ffn_out", 1, tokens, f, h),
    ]
    return [
        *with_backward("embedding_projection", 1, tokens, e, h),
        *(layer * layer_applications(spec)),
        *with_backward("pooler", 1, b, h, h),
        *with_backward("sop", 1, b, h, 2),
        *with_backward("mlm_transform", 1, b * p, h, e),
        *with_backward("mlm_decoder", 1, b * p, e, v),
    ]


# =========================================================================== timed alone
class FloorAlbertkitWorker(AlbertkitWorker):
    """albertkit's benchmark worker with a ``floor`` command."""

    def floor(self, calls: int, jit: bool) -> dict[str, Any]:
        """Seconds per pass over the step's matmuls alone (:func:`step_matmuls`), in
        the step's compute dtype, with ``jit``: XLA, else the graph executor. No ``setup``
        needed; the first call per ``jit`` builds (and compiles) the function."""
        cache = self.__dict__.setdefault("_floor", {})
        if jit not in cache:
            cache[jit] = tf_floor_function(self.s, jit)
            _wait_last(cache[jit]())
        products = cache[jit]
        return {"times": timed(lambda: _wait_last(products()), calls),
                "flops": sum(m.flops for m in floor_matmuls(self.s))}


class FloorHFWorker(HFWorker):
    """Hugging Face's benchmark worker with a ``floor`` command."""

    def floor(self, calls: int) -> dict[str, Any]:
        """Seconds per pass over albertkit's step matmuls (the same shapes as
        :meth:`FloorAlbertkitWorker.floor`) in PyTorch, bfloat16 under mixed_bfloat16."""
        import numpy as np
        import torch

        if self.s.hf_threads:
            torch.set_num_threads(self.s.hf_threads)
        mms = floor_matmuls(self.s)
        if not hasattr(self, "_floor"):
            dtype = torch.bfloat16 if self.s.precision == "mixed_bfloat16" else torch.float32
            operands = floor_operands(self.s, np.random.default_rng(self.s.seed))
            # (a, b, out): the products go to buffers made once, as TensorFlow's pool
            # allocator reuses its blocks; fresh tensors would time the page faults of
            # PyTorch's large allocations too.
            self._floor = [
                (torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype),
                 torch.empty((m.batch, m.m, m.n) if m.batch > 1 else (m.m, m.n), dtype=dtype))
                for (a, b), m in zip(operands, mms, strict=True)
            ]

        def products():
            with torch.no_grad():
                for (a, b, out), m in zip(self._floor, mms, strict=True):
                    torch.matmul(a.mT if m.transpose_a else a, b.mT if m.transpose_b else b,
                                 out=out)
            return float(self._floor[-1][2].flatten()[0])  # CPU ops are synchronous

        products()
        return {"times": timed(products, calls), "flops": sum(m.flops for m in mms)}


WORKERS = {"albertkit": FloorAlbertkitWorker, "hf-pytorch": FloorHFWorker}


def floor_matmuls(settings: BenchmarkSettings) -> list[Matmul]:
    """The matmuls of one micro-batch of the benchmarked step (:func:`step_matmuls`)."""
    return step_matmuls(settings.spec, settings.seq_length, settings.micro_batch,
                        settings.predictions)


def floor_operands(settings: BenchmarkSettings, rng) -> list[tuple[Any, Any]]:
    """Random float32 operands for :func:`floor_matmuls` (NumPy arrays)."""
    import numpy as np

    return [(rng.standard_normal(m.a_shape, dtype=np.float32),
             rng.standard_normal(m.b_shape, dtype=np.float32))
            for m in floor_matmuls(settings)]


def tf_floor_function(settings: BenchmarkSettings, jit: bool):
    """A ``tf.function`` (``jit_compile=jit``) returning every product of
    :func:`floor_matmuls` on :func:`floor_operands`, in the step's compute dtype. Every
    product is an output, so no compiler can drop or shrink one."""
    import numpy as np
    import tensorflow as tf

    dtype = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16}.get(settings.precision,
                                                                        tf.float16)
    mms = floor_matmuls(settings)
    operands = [(tf.cast(a, dtype), tf.cast(b, dtype))
                for a, b in floor_operands(settings, np.random.default_rng(settings.seed))]

    @tf.function(jit_compile=jit)
    def products():
        return [tf.linalg.matmul(a, b, transpose_a=m.transpose_a, transpose_b=m.transpose_b)
                for (a, b), m in zip(operands, mms, strict=True)]

    return products


def _wait_last(tensors: list[Any]) -> None:
    """Block until a function's outputs are computed: a function call returns its outputs
    together, and on a GPU one stream runs its kernels in order, so reading one element of
    the last output is enough (one small copy instead of one per output)."""
    t = tensors[-1]
    t[(0,) * len(t.shape)].numpy()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "worker":
        sys.exit(worker(sys.argv[2], sys.argv[3]))
    sys.exit(main())
