"""albertkit's attention core against PyTorch's fused ``scaled_dot_product_attention``:
forward + backward of the core alone, the two alternating in one process.

The core is ``albertkit.models.kernels.attention_core`` (softmax(Q K^T + bias) V with its
written-out backward pass and, by default, the probabilities recomputed in the backward
pass, as ``runtime.remat: selective`` runs it), in a ``tf.function`` on the graph executor
(what ``runtime.xla: auto`` runs for mixed_bfloat16 on a CPU) or compiled with ``--xla``.
PyTorch's side is ``torch.nn.functional.scaled_dot_product_attention`` with the same inputs
and an additive mask, what Hugging Face's ALBERT calls (``attn_implementation="sdpa"``).

Both run on the same inputs; the gradients are compared first (PyTorch is the independent
reference). Then the two alternate call by call (order swapped every round), so a change
of the machine's speed hits both: the script prints each side's median time and the median
of the per-round ratios with its quartiles.

    python benchmarks/bench_attention.py                          # base at seq 512, batch 4, bf16
    python benchmarks/bench_attention.py --seq-length 128 --batch 8 --rounds 60
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-length", type=int, default=512)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--precision", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--no-recompute", action="store_true",
                   help="keep the probabilities (runtime.remat: none) instead of recomputing")
    p.add_argument("--xla", action="store_true", help="compile albertkit's core with XLA")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    return p.parse_args(argv)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Gradient agreement and alternating timings; the figures the script prints."""
    import numpy as np
    import tensorflow as tf
    import torch

    from albertkit.models.kernels import attention_core
    from albertkit.perf.meter import timed

    b, h, t, d = args.batch, args.heads, args.seq_length, args.head_dim
    rng = np.random.default_rng(0)
    # q already scaled by 1/sqrt(d), as the layer passes it; padding bias 0 or -10000
    arrays = [rng.standard_normal((b, h, t, d)).astype(np.float32) for _ in range(4)]
    arrays[0] /= np.sqrt(d)
    bias = np.zeros((b, 1, 1, t), np.float32)
    bias[-1, ..., t - t // 4:] = -10000.0  # the last sequence is padded over its last quarter
    tf_dtype = tf.bfloat16 if args.precision == "bfloat16" else tf.float32
    pt_dtype = torch.bfloat16 if args.precision == "bfloat16" else torch.float32
    q, k, v, d_out = (tf.cast(a, tf_dtype) for a in arrays)
    tf_bias = tf.cast(bias, tf_dtype)
    recompute = not args.no_recompute

    @tf.function(jit_compile=args.xla)
    def ak_grads(q: Any, k: Any, v: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = attention_core(q, k, v, tf_bias, recompute)
            loss = tf.reduce_sum(tf.cast(out * d_out, tf.float32))
        return tape.gradient(loss, [q, k, v])

    # the same (rounded) values on both sides
    pq, pk, pv, pd = (torch.from_numpy(tf.cast(x, tf.float32).numpy()).to(pt_dtype)
                      for x in (q, k, v, d_out))
    for x in (pq, pk, pv):
        x.requires_grad_()
    p_bias = torch.from_numpy(bias).to(pt_dtype)

    def pt_grads() -> list[Any]:
        out = torch.nn.functional.scaled_dot_product_attention(pq, pk, pv, attn_mask=p_bias,
                                                               scale=1.0)
        out.backward(pd)
        grads = [x.grad for x in (pq, pk, pv)]
        pq.grad = pk.grad = pv.grad = None
        return grads

    def run_ak() -> None:
        for g in ak_grads(q, k, v):
            g.numpy()

    ours = [g.numpy().astype(np.float32) for g in ak_grads(q, k, v)]
    theirs = [g.float().numpy() for g in pt_grads()]
    # each gradient's largest difference over its largest magnitude
    rel = [float(np.abs(a - r).max() / max(np.abs(r).max(), 1e-30))
           for a, r in zip(ours, theirs, strict=True)]
    calls = {"ak": run_ak, "pt": pt_grads}
    for call in calls.values():
        timed(call, args.warmup)
    times: dict[str, list[float]] = {"ak": [], "pt": []}
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        for side in (("ak", "pt") if r % 2 == 0 else ("pt", "ak")):
            times[side] += timed(calls[side], 1)
    ak, pt = times["ak"], times["pt"]
    ratios = [a / p for a, p in zip(ak, pt, strict=True)]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "gradient_relative_difference": dict(zip(("q", "k", "v"), rel, strict=True)),
        "albertkit_ms": 1000 * statistics.median(ak),
        "torch_ms": 1000 * statistics.median(pt),
        "ratio_median": statistics.median(ratios),
        "ratio_q1": quartiles[0],
        "ratio_q3": quartiles[2],
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "torch_threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from albertkit.tfstart import start_tensorflow

    start_tensorflow(quiet=True)
    r = measure(args)
    rel = ", ".join(f"d{n} {v:.1e}" for n, v in r["gradient_relative_difference"].items())
    path = "XLA" if args.xla else "graph executor"
    print(f"attention core fwd+bwd, [{args.batch}, {args.heads}, {args.seq_length}, "
          f"{args.head_dim}] {args.precision}, {'recomputed' if not args.no_recompute else 'kept'}"
          f" probabilities, albertkit on the {path}, torch {r['torch_threads']} threads, "
          f"{args.rounds} alternating rounds")
    print(f"gradients vs torch sdpa (max |difference| / max |torch|): {rel}")
    print(f"albertkit {r['albertkit_ms']:.1f} ms, torch sdpa {r['torch_ms']:.1f} ms (medians); "
          f"per-round ratio albertkit / torch: median {r['ratio_median']:.2f} "
          f"[quartiles {r['ratio_q1']:.2f}-{r['ratio_q3']:.2f}]")
    print(f"1-minute load average before {r['load_before']:.2f}, after {r['load_after']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
