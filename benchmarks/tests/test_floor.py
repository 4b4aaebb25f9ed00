"""benchmarks/bench_floor.py: the step's matmuls alone, their timing in both benchmark
workers, and the script."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from albertkit.config.sizes import SIZES, AlbertSpec
from albertkit.models.footprint import training_flops
from albertkit.perf.settings import BenchmarkSettings
from benchlib.quiet import wait_until_quiet

SCRIPT = Path(__file__).resolve().parents[1] / "bench_floor.py"
_spec = importlib.util.spec_from_file_location("bench_floor", SCRIPT)
floor = sys.modules["bench_floor"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floor)  # a script, not a package: its dataclass needs the entry
step_matmuls, with_backward = floor.step_matmuls, floor.with_backward
SMALL = dict(size="tiny", model={"vocab_size": 300}, seq_length=16, micro_batch=2,
             max_predictions=3)


def _numpy_product(a, b, m):
    """The product a matmul entry stands for, with NumPy's own transposes."""
    a = np.swapaxes(a, -1, -2) if m.transpose_a else a
    b = np.swapaxes(b, -1, -2) if m.transpose_b else b
    return a @ b


@pytest.mark.parametrize(("size", "seq", "batch", "pred", "groups"),
                         [("tiny", 128, 32, 20, 1), ("base", 512, 4, 77, 1),
                          ("base", 64, 3, 10, 2)])
def test_the_matmuls_add_up_to_the_flop_model(size, seq, batch, pred, groups):
    """Forward and backward FLOPs of the shapes = micro_batch x the FLOP model's training
    FLOPs (footprint.training_flops, written from the formulas, not from these shapes)."""
    spec = AlbertSpec(**{**SIZES[size], "inner_group_num": groups})
    mms = step_matmuls(spec, seq, batch, pred)
    assert sum(m.flops for m in mms) == pytest.approx(
        batch * training_flops(spec, seq, pred).training, rel=1e-12)
    assert {m.part.split(".")[0] for m in mms} >= {"attention_scores", "ffn_in", "mlm_decoder"}


def test_each_backward_product_has_the_shape_of_the_tensor_it_differentiates():
    """y = x w with x [m, k], w [k, n]: dx comes out [m, k], dw [k, n], computed from the
    operands' shapes as the entries give them (NumPy does the products)."""
    rng = np.random.default_rng(0)
    for batch in (1, 3):
        fwd, dx, dw = with_backward("p", batch, 5, 7, 4)
        x = rng.standard_normal(fwd.a_shape)
        w = rng.standard_normal(fwd.b_shape)
        dy = rng.standard_normal(_numpy_product(x, w, fwd).shape)
        assert _numpy_product(dy, w, dx).shape == x.shape
        assert _numpy_product(x, dy, dw).shape == w.shape
        assert dx.flops == dw.flops == fwd.flops == 2 * batch * 5 * 7 * 4


def test_shapes_are_checked():
    spec = AlbertSpec(**SIZES["tiny"])
    with pytest.raises(ValueError, match="micro_batch=0"):
        step_matmuls(spec, 128, 0, 20)


@pytest.mark.parametrize("jit", [False, True])
def test_tensorflow_floor_computes_every_product(jit):
    """The timed function returns each product of the step's shapes, equal to NumPy's
    (float32), on the compile path asked for."""
    settings = BenchmarkSettings(**SMALL)
    mms = floor.floor_matmuls(settings)
    operands = floor.floor_operands(settings, np.random.default_rng(settings.seed))
    products = floor.tf_floor_function(settings, jit)()
    assert len(products) == len(mms)
    for (a, b), m, got in zip(operands, mms, products, strict=True):
        np.testing.assert_allclose(got.numpy(), _numpy_product(a, b, m), rtol=1e-4, atol=1e-4)


def test_albertkit_worker_times_the_floor_on_the_path_asked_for(jit_compile_calls):
    seen = jit_compile_calls()
    worker = floor.FloorAlbertkitWorker(BenchmarkSettings(**SMALL))
    for jit in (True, False, True):
        reply = worker.floor(calls=3, jit=jit)
        assert len(reply["times"]) == 3 and all(t > 0 for t in reply["times"])
    assert seen == [True, False]  # one function per path, built once
    assert reply["flops"] == sum(m.flops for m in step_matmuls(
        worker.s.spec, 16, 2, 3))


@pytest.mark.torch
def test_pytorch_floor_computes_every_product():
    """The Hugging Face worker's pass writes each product of the same shapes (to buffers
    made once), equal to NumPy's."""
    settings = BenchmarkSettings(**SMALL)
    worker = floor.FloorHFWorker(settings)
    reply = worker.floor(calls=2)
    assert len(reply["times"]) == 2 and all(t > 0 for t in reply["times"])
    mms = floor.floor_matmuls(settings)
    operands = floor.floor_operands(settings, np.random.default_rng(settings.seed))
    for (a, b), m, (_, _, out) in zip(operands, mms, worker._floor, strict=True):
        np.testing.assert_allclose(out.numpy(), _numpy_product(a, b, m), rtol=1e-4, atol=1e-4)
    assert reply["flops"] == sum(m.flops for m in mms)


class FakeClock:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_waiting_for_a_quiet_machine_reads_until_the_load_falls(capsys):
    clock = FakeClock()
    readings = iter([1.5, 0.9, 0.2, 0.1])
    assert wait_until_quiet(0.25, 60, load_average=lambda: next(readings), clock=clock,
                            sleep=clock.sleep) == 0.2
    assert clock.slept == [5, 5]
    assert capsys.readouterr().out.count("waiting for load average <= 0.25 (now 1.50") == 1
    clock = FakeClock()
    assert wait_until_quiet(0.25, 0, load_average=lambda: 3.0, clock=clock,
                            sleep=clock.sleep) == 3.0  # no time: no wait
    assert clock.slept == []
    clock = FakeClock()  # a machine that stays busy: given up after the timeout
    assert wait_until_quiet(0.25, 12, load_average=lambda: 3.0, clock=clock,
                            sleep=clock.sleep) == 3.0
    assert clock.slept == [5, 5, 5]


def test_budget_and_rest_arithmetic():
    rounds = {label: [0.1] for label, *_ in floor.PARTS}
    rounds["Hugging Face step"] = [0.4, 0.2, 0.3]
    rounds["albertkit step, TF graph executor"] = [0.2, 0.16]
    rounds["matmuls alone, TF graph executor"] = [0.05, 0.06, 0.07]
    per_pass = {label: 2 if "step" in label else 1 for label in rounds}
    parts = floor.summarise(rounds, per_pass)
    assert parts["Hugging Face step"]["ms"] == pytest.approx(150.0)  # median 0.3 s / 2
    assert parts["Hugging Face step"]["round_ms"] == pytest.approx([200.0, 100.0, 150.0])
    assert floor.rest(parts) == pytest.approx({"TF graph executor": 90.0 - 60.0,
                                               "TF XLA": 50.0 - 100.0})
    b = floor.budget(parts, 2.5)
    assert b["step_ms"] == pytest.approx(60.0)
    assert b["rest_allowed_ms, TF graph executor"] == pytest.approx(0.0)
    assert b["rest_allowed_ms, TF XLA"] == pytest.approx(-40.0)


def test_script_rejects_bad_counts():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "0"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--rounds must be at least 1" in proc.stderr


@pytest.mark.slow
@pytest.mark.torch
def test_script_times_every_part_and_writes_the_budget(tmp_path):
    out = tmp_path / "floor.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--seq-length", "16", "--micro-batch", "2", "--steps",
         "1", "--calls", "1", "--rounds", "2", "--quiet-wait", "0", "--target", "2",
         "--json", str(out)],
        capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    for label, *_ in floor.PARTS:
        assert label in proc.stdout
        assert len(result["parts"][label]["round_ms"]) == 2
        assert result["parts"][label]["ms"] > 0
    assert result["budget"]["step_ms"] == pytest.approx(
        result["parts"]["Hugging Face step"]["ms"] / 2)
    assert isinstance(result["noisy"], bool) and result["load_after"] is not None
