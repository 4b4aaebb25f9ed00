"""benchlib.ops and benchmarks/op_profile.py: the step's time by kind of operation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchlib.ops import op_kind, op_name, op_times, summarize

ROOT = Path(__file__).resolve().parents[1]
MS = 10**9  # picoseconds per millisecond


@pytest.mark.parametrize(("event", "kind"), [
    ("MatMul.134", "matmul"),
    ("MatMul_4.2", "matmul"),
    ("dot.7", "matmul"),
    ("group/layer/ffn/Tensordot/MatMul:MatMul", "matmul"),
    ("attn/MatMul_1:BatchMatMulV2", "matmul"),
    ("wrapped_reduce-window.3", "reduction"),
    ("ynn_fusion.31", "reduction"),
    ("iota_reduce_fusion", "reduction"),
    ("loss/SparseSoftmaxCrossEntropyWithLogits:SparseSoftmaxCrossEntropyWithLogits",
     "reduction"),
    ("transpose_copy_fusion.13", "data movement"),
    ("bitcast_copy_fusion.1", "data movement"),
    ("wrapped_scatter.2", "data movement"),
    ("gradient_tape/x/Transpose:Transpose", "data movement"),
    ("subtract_exponential_fusion.5", "elementwise"),
    ("broadcast_add_fusion", "elementwise"),
    ("mul_4:Mul", "elementwise"),
    ("Adam/ReadVariableOp:ReadVariableOp", "variables"),
])
def test_op_kind_of_both_runtimes(event, kind):
    assert op_kind(event) == kind


def test_op_name_drops_suffixes_and_scopes():
    assert op_name("MatMul.134") == "MatMul"
    assert op_name("multiply_add_fusion.2.1") == "multiply_add_fusion"
    assert op_name("a/b/MatMul_3:MatMul") == "MatMul"


def _xspace(lines: dict[str, list[tuple[str, int, int]]]):
    """An XSpace with one host plane: {line name: [(event name, start ms, end ms)]}."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    ids: dict[str, int] = {}
    for i, (name, events) in enumerate(lines.items()):
        line = plane.lines.add(id=i, name=name)
        for ev_name, start, end in events:
            if ev_name not in ids:
                ids[ev_name] = len(ids) + 1
                plane.event_metadata[ids[ev_name]].id = ids[ev_name]
                plane.event_metadata[ids[ev_name]].name = ev_name
            line.events.add(metadata_id=ids[ev_name], offset_ps=start * MS,
                            duration_ps=(end - start) * MS)
    return space


def test_op_times_counts_each_operations_own_time():
    space = _xspace({
        "tf_numa_-1_Eigen/1": [
            ("ThunkExecutor::Execute", 0, 100),
            ("MatMul.3", 10, 50),
            ("end: MatMul", 50, 51),
            ("multiply_add_fusion.2", 60, 80),
            ("SlinkyThreadPool::Await", 85, 90),
            ("BlockUntilReady", 200, 300),  # not inside a thunk executor: not an operation
        ],
        "tf_Compute/7": [
            ("a/MatMul:MatMul", 0, 30),
            ("ParallelFor", 5, 25),  # the runtime inside an op: the op's own time
            ("x/StatefulPartitionedCall:StatefulPartitionedCall", 40, 100),  # a container
            ("y/Mul:Mul", 50, 60),
            ("outer/Sum:Sum", 110, 150),
            ("inner/Mul:Mul", 120, 130),  # nested op: counted for itself, not for Sum
        ],
        "python": [("_replica_step", 0, 1000), ("q/Mul:Mul", 10, 20)],
    })
    times = op_times(space)
    assert {k: v / MS for k, v in times.items()} == {
        "MatMul.3": 40, "multiply_add_fusion.2": 20, "a/MatMul:MatMul": 30,
        "y/Mul:Mul": 10, "outer/Sum:Sum": 30, "inner/Mul:Mul": 10,
    }
    summary = summarize(times, steps=2)
    assert summary["op_ms_per_step"] == pytest.approx(70)
    kinds = {k: v["ms_per_step"] for k, v in summary["kinds"].items()}
    assert kinds == pytest.approx({"matmul": 35, "elementwise": 20, "reduction": 15})
    assert sum(v["share"] for v in summary["kinds"].values()) == pytest.approx(1)
    assert summary["top"][0] == {"op": "MatMul", "kind": "matmul", "ms_per_step": 35}
    assert {"op": "Mul", "kind": "elementwise", "ms_per_step": 10} in summary["top"]


@pytest.mark.slow
@pytest.mark.parametrize("xla", ["on", "off"])
def test_op_profile_script_finds_the_steps_matmuls(tmp_path, xla):
    """A real trace of the tiny model's step: the compiled (XLA thunks) and the graph
    executor's operations are both read, and the matmuls are found in them."""
    out = tmp_path / "profile.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "op_profile.py"), "--size", "tiny",
         "--seq-length", "32", "--micro-batch", "4", "--steps", "2", "--xla", xla,
         "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["xla_plan"]["compute"] is (xla == "on")
    kinds = result["kinds"]
    assert kinds["matmul"]["ms_per_step"] > 0 and kinds["elementwise"]["ms_per_step"] > 0
    assert sum(v["share"] for v in kinds.values()) == pytest.approx(1)
    names = {t["op"] for t in result["top"] if t["kind"] == "matmul"}
    # XLA's thunks carry HLO names (MatMul, MatMul_1...); without XLA, op types, which
    # TensorFlow renames on a CPU where its oneDNN rewrites are on (the default on an Intel
    # Xeon: _MklMatMul, _MklBatchMatMulV2, _MklFusedMatMul)
    bare = {n.removeprefix("_Mkl").removeprefix("_Fused") for n in names}
    assert names and all(n.startswith(("MatMul", "BatchMatMul", "dot")) for n in bare), names
    assert result["step_s"] > 0 and result["profiled_step_s"] > 0
    assert "| matmul |" in proc.stdout
