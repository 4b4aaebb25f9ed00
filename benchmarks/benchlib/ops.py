"""Where a training step's time goes, operation by operation (``benchmarks/op_profile.py``).

:func:`profile_steps` runs a few steps under TensorFlow's profiler and sums the duration of
every operation in the trace by its kind (:data:`KINDS`). Two runtimes record operations:

* the graph executor (``runtime.xla`` off, and the step's ``apply`` part always): one
  event per kernel, named ``node/name:OpType``, on TensorFlow's compute threads;
* XLA's CPU runtime (the compiled ``compute`` part): one event per thunk (``MatMul.134``,
  ``multiply_add_fusion.2``, ``wrapped_reduce-window``), inside ``ThunkExecutor::Execute``
  on the Eigen pool's threads (TensorFlow 2.21 records them with no flag set).

Each operation counts its own time: what an operation nested inside it takes is counted
for the nested one (runtime events such as ``ParallelFor`` stay inside their operation). The
figures are sums over threads per step: two operations running at once on two threads both
count, and a matmul that splits its work over the thread pool counts once (its event is on
the thread that started it). Tracing can slow a step (``benchmarks/op_profile.py`` prints the
step time with and without it), so the shares, not the absolute milliseconds, are what the
profile is for.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

KINDS = ("matmul", "reduction", "data movement", "elementwise", "variables", "other")

# TensorFlow op types (the graph executor's events, ``name:Type``) by kind.
_GRAPH_KINDS = {
    "matmul": {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklMatMul",
               "_FusedMatMul", "_MklFusedMatMul", "_MklBatchMatMulV2", "Einsum", "_MklEinsum",
               "Conv2D", "_MklConv2D", "_FusedConv2D"},
    "reduction": {"Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "L2Loss", "ArgMax",
                  "ArgMin", "Softmax", "_MklSoftmax", "LogSoftmax",
                  "SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits",
                  "BiasAddGrad", "TopKV2"},
    "data movement": {"Transpose", "_MklTranspose", "ConcatV2", "GatherV2", "ResourceGather",
                      "GatherNd", "ScatterNd", "TensorScatterUpdate", "TensorScatterAdd",
                      "UnsortedSegmentSum", "Slice", "StridedSlice", "StridedSliceGrad",
                      "Pad", "Tile", "Reshape", "Identity", "BroadcastTo", "Pack", "Unpack",
                      "Split", "SplitV", "ZerosLike", "OnesLike", "Fill", "OneHot",
                      "Const", "Squeeze", "ExpandDims", "Shape", "Reverse"},
    "variables": {"ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp",
                  "AssignSubVariableOp", "VarHandleOp", "ResourceApplyAdam",
                  "ResourceApplyAdamWithAmsgrad"},
}
# Operations that only run other operations (their own time is bookkeeping).
_CONTAINERS = {"StatefulPartitionedCall", "PartitionedCall", "While", "StatelessWhile", "If",
               "StatelessIf", "Case", "StatelessCase", "_XlaRun", "_XlaCompile", "XlaLaunch",
               "_XlaMerge"}
_GRAPH_OP = re.compile(r"^[^\s:]+:([A-Za-z_][A-Za-z0-9_]*)$")
_SUFFIX = re.compile(r"(\.\d+)+$")
_MOVEMENT_WORDS = ("transpose", "copy", "gather", "scatter", "concatenate", "slice",
                   "dynamic", "pad", "reverse")


def op_name(event: str) -> str:
    """The operation an event stands for: a graph op's type (``MatMul``), or an XLA thunk's
    instruction name without its numeric suffixes (``MatMul.134`` -> ``MatMul``)."""
    m = _GRAPH_OP.match(event)
    if m:
        return m.group(1)
    return _SUFFIX.sub("", event)


def op_kind(event: str) -> str:
    """The kind (one of :data:`KINDS`) of an operation event of either runtime.

    XLA names a fusion after the operations it holds (``transpose_copy_fusion``,
    ``subtract_exponential_fusion``); a fusion with a reduction in it is a reduction, one
    of transposes/copies/gathers is data movement, any other is elementwise. XLA's CPU
    backend hands row reductions (LayerNorm's mean, softmax's max and sum) to YNNPACK, as
    ``ynn_fusion``: a reduction.

        >>> [op_kind(n) for n in ("MatMul.134", "a/b/MatMul:MatMul", "wrapped_reduce-window",
        ...                       "transpose_copy_fusion.3", "multiply_add_fusion", "x:Mul")]
        ['matmul', 'matmul', 'reduction', 'data movement', 'elementwise', 'elementwise']
    """
    m = _GRAPH_OP.match(event)
    if m:
        op_type = m.group(1)
        for kind, types in _GRAPH_KINDS.items():
            if op_type in types:
                return kind
        return "elementwise"
    name = _SUFFIX.sub("", event).lower()
    if name.startswith("wrapped_"):
        name = name[len("wrapped_"):]
    if any(w in name for w in ("matmul", "dot", "einsum", "conv")):
        return "matmul"
    words = name.replace("-", "_").split("_")
    if ("reduce" in name or name.startswith("ynn_fusion") or "softmax" in name
            or words[0] in {"mean", "sum"}):
        return "reduction"
    if words[0] in _MOVEMENT_WORDS or (words[0] == "bitcast" and len(words) > 1
                                       and words[1] in _MOVEMENT_WORDS):
        return "data movement"
    if name.endswith("fusion") or words[0] in {"add", "multiply", "subtract", "divide",
                                               "exponential", "log", "tanh", "rsqrt",
                                               "select", "compare", "convert", "maximum",
                                               "minimum", "negate", "broadcast", "iota"}:
        return "elementwise"
    return "other"


def _is_op(name: str, in_thunk: bool) -> bool:
    m = _GRAPH_OP.match(name)
    if m:
        return m.group(1) not in _CONTAINERS
    return in_thunk and "::" not in name and not name.startswith("end: ")


def op_times(xspace: Any) -> Counter:
    """Each operation event's own time (picoseconds) summed by event name, over the host
    plane's threads of a profiler ``XSpace``. Python's line and runtime events are left out;
    an operation's time excludes the operations nested inside it."""
    totals: Counter = Counter()
    for plane in xspace.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            if line.name.startswith("python"):
                continue
            events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
            stack: list[list[Any]] = []  # [end_ps, name, is_op, nested_op_ps, dur_ps]

            def close(entry: list[Any]) -> None:
                if entry[2]:
                    totals[entry[1]] += entry[4] - entry[3]

            for ev in events:
                start, name = ev.offset_ps, names.get(ev.metadata_id, "")
                while stack and stack[-1][0] <= start:
                    close(stack.pop())
                in_thunk = any(s[1] == "ThunkExecutor::Execute" for s in stack)
                is_op = _is_op(name, in_thunk)
                if is_op:
                    parent = next((s for s in reversed(stack) if s[2]), None)
                    if parent is not None:
                        parent[3] += ev.duration_ps
                stack.append([start + ev.duration_ps, name, is_op, 0, ev.duration_ps])
            while stack:
                close(stack.pop())
    return totals


def summarize(times: Counter, steps: int, top: int = 12) -> dict[str, Any]:
    """Per-step milliseconds by kind (with shares of all operation time) and the ``top``
    operations by name (:func:`op_name`), from :func:`op_times`."""
    by_kind: Counter = Counter()
    by_name: Counter = Counter()
    for event, ps in times.items():
        ms = ps / 1e9 / steps
        kind = op_kind(event)
        by_kind[kind] += ms
        by_name[(op_name(event), kind)] += ms
    total = sum(by_kind.values())
    kinds = {k: {"ms_per_step": by_kind[k], "share": by_kind[k] / total if total else 0.0}
             for k in KINDS if by_kind[k] > 0}
    return {
        "op_ms_per_step": total,
        "kinds": kinds,
        "top": [{"op": n, "kind": k, "ms_per_step": ms}
                for (n, k), ms in by_name.most_common(top)],
    }


def profile_steps(run_step: Callable[[], object], steps: int,
                  logdir: Path | None = None) -> dict[str, Any]:
    """Run ``run_step`` (which must wait for its step) ``steps`` times under TensorFlow's
    profiler and :func:`summarize` the trace; ``profiled_step_s`` is the wall time of a
    profiled step (slower than an unprofiled one)."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="albertkit-ops-") as tmp:
        out = Path(logdir or tmp)
        tf.profiler.experimental.start(str(out))
        t0 = time.perf_counter()
        try:
            for _ in range(steps):
                run_step()
        finally:
            wall = time.perf_counter() - t0
            tf.profiler.experimental.stop()
        traces = sorted(out.rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
        if not traces:
            raise RuntimeError(f"the profiler wrote no trace under {out}")
        xspace = _read_xspace(traces[-1])
    return {"steps": steps, "profiled_step_s": wall / steps,
            **summarize(op_times(xspace), steps)}


def _read_xspace(path: Path) -> Any:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    xspace = xplane_pb2.XSpace()
    xspace.ParseFromString(path.read_bytes())
    return xspace
