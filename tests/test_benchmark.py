"""FLOP counting, the memory planner, the device table and the benchmark command.

No timing assertions: the benchmark's smoke tests only check that it runs and prints a
well-formed table.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from albertkit.cli.benchmark import add_benchmark_parser
from albertkit.config.sizes import SIZES, AlbertSpec
from albertkit.errors import BenchmarkError
from albertkit.hardware import DEVICES, INSTANCE_TYPES, GiB, get_device
from albertkit.models.footprint import (
    activation_bytes_per_sequence,
    default_predictions,
    estimate_memory,
    parameter_count,
)
from albertkit.perf import (
    BenchmarkResult,
    BenchmarkSettings,
    format_table,
    measure,
)
from albertkit.perf.memory import (
    PLANNED_DEVICES,
    format_plan_table,
    plan_batch,
    plan_table,
    training_flops,
)
from albertkit.perf.meter import PeakMemory
from conftest import tiny_spec_with

# the tiny architecture at half width and round sizes, for the FLOPs counted by hand below
SMALL = tiny_spec_with(vocab_size=100, embedding_size=8, hidden_size=16, intermediate_size=32)


# ----------------------------------------------------------------------------- FLOPs
def test_flops_hand_computed_small_model():
    t, p = 10, 3
    f = training_flops(SMALL, t, p)
    # by hand: E=8, H=16, F=32, V=100, 2 layer applications
    expected_forward = (
        2 * 10 * 8 * 16  # embedding projection        2,560
        + 2 * (3 * 2 * 10 * 16 * 16)  # Q, K, V                    30,720
        + 2 * (2 * 10 * 10 * 16) * 2  # scores + context           12,800
        + 2 * (2 * 10 * 16 * 16)  # attention output           10,240
        + 2 * (2 * 2 * 10 * 16 * 32)  # FFN                        40,960
        + (2 * 16 * 16 + 2 * 16 * 2)  # pooler + SOP                  576
        + (2 * 3 * 16 * 8 + 2 * 3 * 8 * 100)  # MLM head at 3 positions     5,568
    )
    assert expected_forward == 103_424
    assert f.forward == expected_forward
    assert f.training == 3 * expected_forward


def test_flops_base_seq128_order_of_magnitude():
    spec = AlbertSpec(**SIZES["base"])
    f = training_flops(spec, 128, 20)
    # 6 x (non-embedding params ~ 7.1M, applied 12 times ~ 85M) x 128 tokens ~ 65 GFLOP,
    # plus attention scores/context: 3 x 12 x 4 x 128^2 x 768 ~ 1.8 GFLOP
    assert 60e9 < f.training < 75e9
    assert f.parts["mlm_head"] == 2 * 20 * 768 * 128 + 2 * 20 * 128 * 30000


def test_flops_match_the_real_models_matmuls():
    """Independent count: walk the built Keras model's Dense kernels, rows through each."""
    from albertkit.models.albert import AlbertForPretraining

    spec = SMALL
    t, p = 12, 4
    model = AlbertForPretraining(spec)
    model.build_for(seq_length=t, max_predictions=p)
    rows = {"pooler": 1, "sop_classifier": 1, "predictions": p}
    total = 0.0
    kernels = [v for v in model.trainable_variables if v.path.endswith("/kernel")]
    assert len(kernels) == 10  # projection, q/k/v/out, ffn x2, pooler, MLM dense, SOP
    for kernel in kernels:
        fan_in, fan_out = kernel.shape
        n_rows = next((r for k, r in rows.items() if k in kernel.path), t)
        uses = spec.num_hidden_layers if "group_0" in kernel.path else 1
        total += 2 * n_rows * fan_in * fan_out * uses
    total += spec.num_hidden_layers * 4 * t * t * spec.hidden_size  # QK^T and PV
    total += 2 * p * spec.embedding_size * spec.vocab_size  # tied decoder
    assert training_flops(spec, t, p).forward == pytest.approx(total)


def test_default_predictions():
    assert default_predictions(128) == 20
    assert default_predictions(512) == 77


def test_flops_reject_bad_shapes():
    with pytest.raises(ValueError, match="seq_length=0"):
        training_flops(SMALL, 0, 3)


# ----------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"num_hidden_groups": 2, "inner_group_num": 2},
        {"pre_layer_norm": True},
    ],
)
def test_parameter_count_matches_keras_model(overrides):
    from albertkit.models.albert import AlbertForPretraining

    spec = AlbertSpec(**{**SMALL.model_dump(), **overrides})
    model = AlbertForPretraining(spec)
    model.build_for(seq_length=8)
    assert parameter_count(spec) == model.count_params()


def test_parameter_count_base_is_albert_paper_size():
    # ALBERT paper table 1: base 12M parameters (pretraining heads add ~0.6M)
    n = parameter_count(AlbertSpec(**SIZES["base"]))
    assert 11.5e6 < n < 12.5e6


# ----------------------------------------------------------------------------- memory
def test_estimate_memory_hand_computed():
    spec, t, p, b = SMALL, 10, 3, 4
    est = estimate_memory(spec, t, b, "float32", max_predictions=p, accumulation=2)
    n = parameter_count(spec)
    assert est.state == {
        "weights": 4 * n,
        "weight_casts": 0,
        "gradients": 4 * n,
        "accumulator": 4 * n,
        "optimizer": 8 * n,
    }
    per_seq = activation_bytes_per_sequence(spec, t, p, "float32")
    # layers: 2 applications x 10 tokens x 4 bytes x (8 x 16 + 4 x 32): XLA inlines the fused
    # gelu_new and keeps 4 F-wide tensors, as for a formula activation
    assert per_seq["layers"] == 2 * 10 * 4 * (8 * 16 + 4 * 32)
    relu = activation_bytes_per_sequence(spec.model_copy(update={"hidden_act": "relu"}),
                                         t, p, "float32")
    assert relu["layers"] == per_seq["layers"]
    # attention probabilities: 2 x 10 tokens x 2 heads x 10 keys x 4 bytes
    assert per_seq["attention_probs"] == 2 * 10 * 2 * 10 * 4
    assert est.activation_bytes == pytest.approx(b * sum(per_seq.values()))
    assert est.peak_bytes == pytest.approx(20 * n + b * sum(per_seq.values()))


def test_estimate_memory_trends():
    spec = AlbertSpec(**SIZES["base"])
    one = estimate_memory(spec, 512, 1)
    four = estimate_memory(spec, 512, 4)
    assert four.activation_bytes == pytest.approx(4 * one.activation_bytes)
    assert four.state_bytes == one.state_bytes
    mixed = estimate_memory(spec, 512, 4, "mixed_bfloat16")
    assert mixed.activation_bytes < four.activation_bytes
    assert mixed.state["weight_casts"] > 0
    assert estimate_memory(spec, 512, 4, accumulation=1).state["accumulator"] == 0
    assert estimate_memory(spec, 128, 4).peak_bytes < four.peak_bytes
    with pytest.raises(ValueError, match="precision='float64'"):
        estimate_memory(spec, 128, 1, "float64")  # type: ignore[arg-type]


def test_estimate_memory_without_xla_hand_computed():
    """The unfused path: 9 H- and 2 F-wide tensors per token and layer (6 F-wide with an
    activation that has no fused kernel, under remat none); the attention core's
    probabilities in the compute dtype, or scores plus float32 probabilities when autodiff
    runs the attention (attention dropout, float16); under mixed precision one weight cast
    per weight, as with XLA (the encoder shares the casts)."""
    spec, t, p = SMALL.model_copy(update={"hidden_act": "relu"}), 10, 3
    fused = activation_bytes_per_sequence(SMALL, t, p, "float32", xla=False)
    assert fused["layers"] == 2 * 10 * 4 * (9 * 16 + 2 * 32)
    assert fused["attention_probs"] == 2 * 10 * 2 * 10 * 4
    per_seq = activation_bytes_per_sequence(spec, t, p, "float32", xla=False)
    assert per_seq["layers"] == 2 * 10 * 4 * (9 * 16 + 6 * 32)
    bf16 = activation_bytes_per_sequence(spec, t, p, "mixed_bfloat16", xla=False)
    assert bf16["layers"] == 2 * 10 * 2 * (9 * 16 + 6 * 32)
    assert bf16["attention_probs"] == 2 * 10 * 2 * 10 * 2
    fp16 = activation_bytes_per_sequence(spec, t, p, "mixed_float16", xla=False)
    assert fp16["attention_probs"] == 2 * 10 * 2 * 10 * (2 + 4)
    dropout = spec.model_copy(update={"attention_probs_dropout_prob": 0.1})
    assert activation_bytes_per_sequence(dropout, t, p, "float32", xla=False)[
        "attention_probs"] == 2 * 10 * 2 * 10 * (4 + 4)
    n = parameter_count(spec)
    assert estimate_memory(spec, t, 1, "mixed_bfloat16", p, xla=False).state["weight_casts"] == (
        2 * n)
    assert estimate_memory(spec, t, 1, "mixed_bfloat16", p).state["weight_casts"] == 2 * n
    assert estimate_memory(spec, t, 1, "float32", p, xla=False).state["weight_casts"] == 0


def test_estimate_memory_with_and_without_xla():
    """With the fused GELU and LayerNorm kernels the graph executor keeps less than XLA
    (measured at base 128 x 8 float32: 858 against 1,040 MiB of tensors, docs/memory.md); an
    activation without a fused kernel keeps more without XLA under remat none."""
    spec = AlbertSpec(**SIZES["base"])
    mish = spec.model_copy(update={"hidden_act": "mish"})
    for seq, batch in ((128, 8), (512, 2)):
        for precision in ("float32", "mixed_bfloat16"):
            xla = estimate_memory(spec, seq, batch, precision, remat="selective")
            graph = estimate_memory(spec, seq, batch, precision, remat="selective", xla=False)
            assert 0.7 < graph.peak_bytes / xla.peak_bytes < 1.0
        formula_xla = activation_bytes_per_sequence(mish, seq, 20, "float32")
        formula_graph = activation_bytes_per_sequence(mish, seq, 20, "float32", xla=False)
        assert formula_graph["layers"] > formula_xla["layers"]


def test_plan_batch_plans_the_path_xla_resolves_to():
    spec = AlbertSpec(**SIZES["base"])
    auto = plan_batch(spec, 512, "mixed_bfloat16", "A100", 64)
    on = plan_batch(spec, 512, "mixed_bfloat16", "A100", 64, xla=True)
    off = plan_batch(spec, 512, "mixed_bfloat16", "A100", 64, xla=False)
    assert auto == on  # auto on a GPU compiles
    assert off.predicted_peak_bytes < on.predicted_peak_bytes or off.micro_batch > on.micro_batch


def test_plan_batch_properties():
    spec = AlbertSpec(**SIZES["base"])
    plans = {
        d: plan_batch(spec, 512, "float32", d, global_batch=4096, replicas=64)
        for d in PLANNED_DEVICES
    }
    for name, plan in plans.items():
        assert plan.fits, name
        per_replica = 4096 // 64
        assert plan.micro_batch * plan.accumulation == per_replica
        assert plan.predicted_peak_bytes <= plan.usable_bytes
        # the next larger divisor would not fit (or there is none)
        bigger = [d for d in range(plan.micro_batch + 1, per_replica + 1) if per_replica % d == 0]
        if bigger:
            over = estimate_memory(
                spec, 512, bigger[0], "float32", accumulation=per_replica // bigger[0]
            )
            assert over.peak_bytes > plan.usable_bytes
    micro = [plans[d].micro_batch for d in ("V100", "A100", "A100-80GB", "H200")]
    assert micro == sorted(micro)
    assert plans["V100-32GB"].micro_batch >= plans["V100"].micro_batch


def test_plan_batch_does_not_fit_and_errors():
    huge = AlbertSpec(**{**SIZES["xxlarge"], "num_hidden_layers": 48})
    plan = plan_batch(huge, 512, "float32", "V100", global_batch=8, remat="none")
    assert not plan.fits and plan.micro_batch == 0
    assert "does not fit" in format_plan_table([plan])
    with pytest.raises(ValueError, match="known devices: V100"):
        get_device("B300")
    with pytest.raises(ValueError, match="global_batch=10 must be a positive multiple"):
        plan_batch(huge, 128, "float32", "H100", global_batch=10, replicas=4)


def test_plan_table_markdown():
    spec = AlbertSpec(**SIZES["large"])
    plans = plan_table(spec, 128, "mixed_float16", global_batch=4096, replicas=64)
    text = format_plan_table(plans)
    lines = text.splitlines()
    assert len(lines) == 2 + len(PLANNED_DEVICES)
    assert all(line.count("|") == 6 for line in lines)


def test_device_table():
    for key in ("V100", "V100-32GB", "A100", "A100-80GB", "H100", "H200"):
        assert key in DEVICES
    assert DEVICES["H200"].memory_gib == 141
    assert DEVICES["V100"].usable_bytes() < 16 * GiB
    assert get_device("a100-80gb") is DEVICES["A100-80GB"]


def test_device_table_agrees_with_sagemaker_instances():
    # GPU memory (GiB) and native bfloat16 of every GPU a SageMaker instance type carries
    gpus = {"V100": (16, False), "V100-32GB": (32, False), "T4": (16, False),
            "A10G": (24, True), "L4": (24, True), "L40S": (48, True), "A100": (40, True),
            "A100-80GB": (80, True), "H100": (80, True), "H200": (141, True)}
    for name, (memory, bf16) in gpus.items():
        assert DEVICES[name].memory_gib == memory, name
        assert DEVICES[name].bf16 == bf16, name
    seen = set()
    for instance, spec in INSTANCE_TYPES.items():
        if spec.gpu is None:
            continue
        seen.add(spec.gpu)
        assert spec.gpu_memory_gib == DEVICES[spec.gpu].memory_gib, instance
        assert spec.bf16 == DEVICES[spec.gpu].bf16, instance
    assert seen == set(gpus)


# ----------------------------------------------------------------------------- measuring
def test_peak_memory_sees_a_short_allocation():
    mem = PeakMemory()
    mem.reset()
    before = mem.peak()
    # 256 MiB, touched. The margin (a rise of 192 MiB is enough) absorbs what other threads of
    # a test worker free meanwhile: with 64 MiB and a 60 MiB bar, a busy worker's rise was
    # seen at 58 MiB.
    block = np.ones(256 * 2**20 // 8)
    del block
    assert mem.peak() - before >= 192 * 2**20
    mem.stop()


def test_worker_builds_the_trainers_model_and_step():
    """The albertkit worker goes through the trainer's config and build calls: the
    settings' remat, precision and accumulation reach the model and the step."""
    from albertkit.distributed.single import SingleProcess
    from albertkit.perf.workers import trainer_config
    from albertkit.training.builders import build_model_and_step

    settings = BenchmarkSettings(size="tiny", model={"vocab_size": 300}, seq_length=32,
                                 micro_batch=2, accumulation=2, remat="full", xla=False)
    cfg = trainer_config(settings)
    assert cfg.runtime.remat == "full" and cfg.runtime.accumulation_steps(1) == 2
    assert cfg.model.spec == settings.spec
    built = build_model_and_step(cfg, SingleProcess())
    assert built.model.get_config()["remat"] == "full"
    assert built.step.model is built.model and built.accum == 2


def test_pipeline_reads_the_records_it_writes(tmp_path):
    from albertkit.data.pretraining_dataset import build_pretraining_dataset
    from albertkit.perf.pipeline import SHARDS, write_pretraining_records

    settings = BenchmarkSettings(size="tiny", model={"vocab_size": 300}, seq_length=32,
                                 micro_batch=4)
    files = write_pretraining_records(tmp_path, settings, 10, np.random.default_rng(0))
    assert len(files) == SHARDS
    ds = build_pretraining_dataset(files, seq_length=32,
                                   max_predictions_per_seq=settings.predictions, batch_size=5,
                                   masking="static", shuffle_buffer=10, seed=0,
                                   deterministic=True, repeat=False, training=True)
    batches = list(ds)
    assert sum(int(b["input_ids"].shape[0]) for b in batches) == 10
    b = batches[0]
    assert b["input_ids"].shape == (5, 32)
    assert b["masked_lm_positions"].shape == (5, settings.predictions)
    assert np.all(b["input_ids"].numpy() >= 5) and np.all(b["input_ids"].numpy() < 300)
    assert np.all(b["masked_lm_weights"].numpy() == 1.0)
    assert np.all(np.diff(b["masked_lm_positions"].numpy(), axis=1) > 0)


def _check_table(text: str, frameworks: list[str]) -> None:
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| framework"))
    columns = lines[header].count("|")
    assert re.fullmatch(r"\|(-+\|)(-+:\|)+", lines[header + 1].replace("|---:", "|--:"))
    rows = lines[header + 2 : header + 2 + len(frameworks)]
    for framework, row in zip(frameworks, rows, strict=True):
        # a loaded test machine may get the result marked noisy (tests/test_benchmark_noise.py)
        assert row.startswith((f"| {framework} |", f"| {framework} (NOISY) |"))
        assert row.count("|") == columns
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert float(cells[0]) > 0  # sequences/s
    assert "memory planner: predicted" in text


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_benchmark_smoke_two_steps(tmp_path):
    settings = BenchmarkSettings(
        size="tiny",
        model={"vocab_size": 300},
        seq_length=32,
        micro_batch=2,
        steps=2,
        warmup=1,
        rounds=1,
        xla=False,
        pipeline=False,
    )
    result = measure(settings, progress=False)
    json.loads(result.to_json())  # serialisable
    assert BenchmarkResult.model_validate_json(result.to_json()) == result  # read back whole
    assert len(result.results["albertkit"].step_times_s) == 2
    table = format_table(result)
    _check_table(table, ["albertkit"])
    # The workers run on TensorFlow's default CPU allocator (the one a training run uses).
    # Whether it counts tensors depends on the CPU, so ask TensorFlow the same way, in a
    # process with the workers' environment.
    if _default_cpu_allocator_counts():
        assert result.planner.measured_tensor_peak_bytes > 0
        assert "memory planner: predicted" in table
    else:
        assert result.planner.measured_tensor_peak_bytes is None
        assert "--tensor-stats measures on BFC" in table


def _default_cpu_allocator_counts() -> bool:
    """Whether TensorFlow's default CPU allocator keeps tensor statistics on this machine.

    It did not on an AVX2-only CPU and did on an Intel Xeon with AMX, where TensorFlow turns
    its oneDNN optimizations on by default and the CPU allocator is BFC.
    """
    from albertkit.perf.runner import worker_env

    code = (
        "import tensorflow as tf\n"
        "try:\n"
        "    tf.config.experimental.reset_memory_stats('CPU:0')\n"
        "    print('counts')\n"
        "except ValueError:\n"
        "    print('does not count')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=worker_env(), capture_output=True,
                         text=True, check=True, timeout=300)
    return out.stdout.strip().splitlines()[-1] == "counts"


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_benchmark_tensor_stats_checks_the_planner_on_bfc():
    settings = BenchmarkSettings(
        size="tiny", model={"vocab_size": 300}, seq_length=32, micro_batch=2, steps=1,
        warmup=1, rounds=1, xla=False, pipeline=False, tensor_stats=True,
    )
    result = measure(settings, progress=False)
    measured = result.planner.measured_tensor_peak_bytes
    assert measured is not None and measured > 0
    assert result.planner.predicted_over_measured == pytest.approx(
        result.planner.predicted_bytes / measured)
    assert "MiB peak of TensorFlow's allocator" in format_table(result)


@pytest.mark.distributed
@pytest.mark.slow
def test_benchmark_smoke_two_processes():
    settings = BenchmarkSettings(
        size="tiny",
        model={"vocab_size": 300},
        seq_length=32,
        micro_batch=2,
        steps=2,
        warmup=1,
        rounds=1,
        xla=False,
        pipeline=False,
        processes=[1, 2],
    )
    result = measure(settings, progress=False)
    row = result.data_parallel["2"]
    assert len(row.step_times_s) == 2 and row.scaling_efficiency > 0
    _check_table(format_table(result), ["albertkit", "albertkit x2 processes"])


@pytest.mark.torch
@pytest.mark.slow
def test_benchmark_smoke_compare_hf(tmp_path):
    settings = BenchmarkSettings(
        size="tiny",
        model={"vocab_size": 300},
        seq_length=32,
        micro_batch=2,
        accumulation=2,
        steps=1,
        warmup=1,
        rounds=2,
        compare=["hf-pytorch"],
        pipeline=False,
    )
    result = measure(settings, progress=False)
    for f in ("albertkit", "hf-pytorch"):
        assert len(result.results[f].step_times_s) == 2
    assert result.results["hf-pytorch"].params == result.results["albertkit"].params
    text = format_table(result)
    _check_table(text, ["albertkit", "hf-pytorch"])
    assert "albertkit / hf-pytorch: sequences/s x" in text


def test_cli_arguments_and_errors():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    add_benchmark_parser(sub)
    args = parser.parse_args(
        [
            "benchmark",
            "--size",
            "tiny",
            "--no-xla",
            "--processes",
            "1,2",
            "--compare",
            "hf-pytorch",
            "--set",
            "num_hidden_layers=1",
        ]
    )
    assert args.xla is False and args.processes == [1, 2] and args.compare == ["hf-pytorch"]
    assert parser.parse_args(["benchmark"]).xla == "auto"
    assert parser.parse_args(["benchmark", "--xla"]).xla is True
    assert parser.parse_args(["benchmark", "--xla", "auto"]).xla == "auto"
    assert parser.parse_args(["benchmark", "--xla=off"]).xla is False
    assert parser.parse_args(["benchmark", "--xla", "on", "--size", "tiny"]).xla is True
    with pytest.raises(SystemExit):
        parser.parse_args(["benchmark", "--xla", "sometimes"])
    noisy = parser.parse_args(["benchmark", "--noisy-spread-pct", "5",
                               "--noisy-load-per-cpu", "0.5"])
    assert (noisy.noisy_spread_pct, noisy.noisy_load_per_cpu) == (5.0, 0.5)
    with pytest.raises(ValueError, match="noisy_spread_pct"):
        BenchmarkSettings(size="tiny", noisy_spread_pct=0)
    with pytest.raises(ValueError, match="xla"):
        BenchmarkSettings(size="tiny", xla="maybe")
    assert args.model == ["num_hidden_layers=1"]
    bad = parser.parse_args(["benchmark", "--set", "num_hidden_layers"])
    with pytest.raises(BenchmarkError, match="--set 'num_hidden_layers' must look like"):
        bad.func(bad)
    with pytest.raises(ValueError, match=r"processes=\[0\]"):
        BenchmarkSettings(size="tiny", processes=[0])
    with pytest.raises(SystemExit):
        parser.parse_args(["benchmark", "--processes", "one"])
    with pytest.raises(ValueError, match="seq_length=1024 exceeds"):
        BenchmarkSettings(size="tiny", seq_length=1024)
    with pytest.raises(ValueError, match="mixed_float16"):
        BenchmarkSettings(size="tiny", compare=["hf-pytorch"], precision="mixed_float16")


# ----------------------------------------------------------------------------- remat
@pytest.mark.parametrize("jit", [False, True], ids=["graph", "xla"])
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_remat_gives_the_same_gradients(jit):
    """Every remat mode recomputes something else; loss and gradients must not change, with
    dropout on: a recomputation must drop exactly what its forward pass dropped."""
    import keras
    import tensorflow as tf

    from albertkit.models.albert import AlbertForPretraining

    spec = AlbertSpec(**{**SMALL.model_dump(), "num_hidden_groups": 2, "inner_group_num": 2,
                         "hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.2})
    rng = np.random.default_rng(0)
    batch = {
        "input_ids": tf.constant(rng.integers(5, 100, (3, 12)), tf.int32),
        "input_mask": tf.constant(np.arange(12)[None, :] < [[12], [9], [5]], tf.int32),
        "segment_ids": tf.zeros((3, 12), tf.int32),
        "masked_lm_positions": tf.constant(rng.integers(0, 5, (3, 4)), tf.int32),
    }
    losses, grads = {}, {}
    for remat in ("none", "selective", "full", True):
        keras.utils.set_random_seed(0)
        model = AlbertForPretraining(spec, remat=remat)
        model.build_for(seq_length=12, max_predictions=4)

        @tf.function(jit_compile=jit)
        def fn(model=model):
            with tf.GradientTape() as tape:
                out = model(batch, training=True)
                loss = tf.reduce_sum(tf.square(out["mlm_logits"])) + tf.reduce_sum(
                    out["sop_logits"]
                )
            grads = tape.gradient(loss, model.trainable_variables)
            return loss, [tf.convert_to_tensor(g) for g in grads]

        loss, g = fn()
        losses[remat], grads[remat] = float(loss), [x.numpy() for x in g]
        assert model.get_config()["remat"] == {True: "full"}.get(remat, remat)
    # dropout is on: a second call draws other masks
    assert losses["none"] != pytest.approx(float(fn()[0]), rel=1e-6)
    for mode in ("selective", "full", True):
        assert losses[mode] == pytest.approx(losses["none"], rel=1e-6)
        for a, b in zip(grads["none"], grads[mode], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_remat_planner_keeps_layer_inputs_only():
    spec = AlbertSpec(**SIZES["base"])
    full = activation_bytes_per_sequence(spec, 512, 77, "float32")
    remat = activation_bytes_per_sequence(spec, 512, 77, "float32", remat=True)
    # 12 layer inputs (512 x 768 float32); the recomputed layer = one layer's activations
    assert remat["layers"] == 12 * 512 * 768 * 4
    assert remat["recomputed_layer"] == (full["layers"] + full["attention_probs"]) / 12
    layer_params = 4 * (768**2 + 768) + 2 * 768 + 2 * 768 * 3072 + 3072 + 768 + 2 * 768
    small = estimate_memory(spec, 512, 1, remat=True)
    assert small.activations["remat_peak"] == 12 * 4 * layer_params  # weight-gradient copies
    big = estimate_memory(spec, 512, 64, remat=True)
    assert big.activations["remat_peak"] == 64 * remat["recomputed_layer"]
    assert big.peak_bytes < 0.3 * estimate_memory(spec, 512, 64).peak_bytes


def test_graph_planner_peak_is_the_larger_of_activations_and_weight_gradient_copies():
    # Without XLA the L = 12 copies of the shared layer's weight gradients (12 x 7.08 M
    # elements, in the compute dtype) outlast the activations: at a small micro-batch they set
    # the peak.
    spec = AlbertSpec(**SIZES["base"])
    layer_params = 4 * (768**2 + 768) + 2 * 768 + 2 * 768 * 3072 + 3072 + 768 + 2 * 768
    for precision, size in (("float32", 4), ("mixed_bfloat16", 2)):
        copies = 12 * size * layer_params
        small = estimate_memory(spec, 128, 2, precision, remat="selective", xla=False)
        acts = sum(v for k, v in small.activations.items() if k != "weight_gradient_copies")
        assert acts < copies
        assert small.activation_bytes == copies  # state + max(activations, copies)
        big = estimate_memory(spec, 128, 16, precision, remat="selective", xla=False)
        assert big.activations["weight_gradient_copies"] == 0.0
        assert big.activation_bytes > copies
    # not on the XLA path (its planner was within 20 % without it; docs/memory.md)
    assert "weight_gradient_copies" not in estimate_memory(spec, 128, 2, xla=True).activations


def test_xla_planner_on_a_cpu_counts_16_bit_activations_at_3_bytes():
    # XLA's CPU backend keeps part of a mixed-precision step's activations in float32: the
    # planner counts 3 bytes per element there (fitted, docs/memory.md), 2 on a GPU, and the
    # device changes nothing else (float32, or the graph executor's path).
    spec = AlbertSpec(**SIZES["base"])
    for precision in ("mixed_bfloat16", "mixed_float16"):
        gpu = activation_bytes_per_sequence(spec, 128, 20, precision, "selective", True, "gpu")
        cpu = activation_bytes_per_sequence(spec, 128, 20, precision, "selective", True, "cpu")
        assert cpu["layers"] == 1.5 * gpu["layers"]
        assert cpu["layers"] == 12 * 128 * 3 * (8 * 768 + 4 * 3072)
        assert cpu["recomputed_attention"] == gpu["recomputed_attention"]
    for precision, xla in (("float32", True), ("mixed_bfloat16", False)):
        assert estimate_memory(spec, 128, 8, precision, xla=xla, device="cpu") == (
            estimate_memory(spec, 128, 8, precision, xla=xla, device="gpu")
        )
    with pytest.raises(ValueError, match="device='tpu'"):
        estimate_memory(spec, 128, 8, xla=True, device="tpu")


def test_selective_planner_drops_the_recomputed_tensors():
    """remat "selective" keeps 2 F-wide tensors fewer per token and layer (with an
    activation that has no fused kernel) and no T x T probabilities, only one layer's
    recomputed ones (with their gradient) at a time."""
    base = AlbertSpec(**SIZES["base"])
    spec = base.model_copy(update={"hidden_act": "mish"})
    for xla in (True, False):
        none = activation_bytes_per_sequence(spec, 512, 77, "float32", xla=xla)
        sel = activation_bytes_per_sequence(spec, 512, 77, "float32", remat="selective", xla=xla)
        assert "attention_probs" in none and "attention_probs" not in sel
        assert sel["recomputed_attention"] == 12 * 512 * 512 * 8
        assert sel["embeddings"] == none["embeddings"] and sel["mlm_head"] == none["mlm_head"]
        ffn_saved = 2 * 3072 if xla else 4 * 3072
        assert none["layers"] - sel["layers"] == 12 * 512 * 4 * ffn_saved
        # A fused activation keeps 2 F-wide tensors without XLA in every mode; XLA inlines it
        # and keeps 4, as for a formula activation under remat none.
        fused_none = activation_bytes_per_sequence(base, 512, 77, "float32", xla=xla)
        assert fused_none["layers"] - sel["layers"] == 12 * 512 * 4 * (2 * 3072 if xla else 0)
    est = estimate_memory(spec, 512, 4, remat="selective")
    assert est.peak_bytes < 0.65 * estimate_memory(spec, 512, 4).peak_bytes
    est = estimate_memory(base, 512, 4, remat="selective")  # only the attention core's gain
    assert est.peak_bytes < 0.85 * estimate_memory(base, 512, 4).peak_bytes
    with pytest.raises(ValueError, match="remat='some'"):
        estimate_memory(spec, 512, 4, remat="some")


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_breakdown_follows_the_resolved_xla_plan(jit_compile_calls):
    """--breakdown compiles its pieces as the step's compute is compiled: with xla auto on
    CPU + mixed_bfloat16 none of them is XLA-compiled."""
    from albertkit.perf.workers import AlbertkitWorker

    settings = BenchmarkSettings(size="tiny", model={"vocab_size": 300}, seq_length=32,
                                 micro_batch=2, warmup=1, xla="auto",
                                 precision="mixed_bfloat16")
    worker = AlbertkitWorker(settings)
    worker.setup()
    assert worker.step.xla.compute is False
    seen = jit_compile_calls()
    pieces = worker.breakdown()["breakdown_s"]
    assert pieces and all(v > 0 for v in pieces.values())
    assert seen and all(j is False or j is None for j in seen), seen


@pytest.mark.parametrize("xla", [True, False])
def test_matmul_peak_is_measured_on_the_steps_compile_path(jit_compile_calls, xla):
    """MFU divides the step's FLOP rate by the matmul peak, so the peak must come from the
    library the step's compute uses: XLA's matmul when compute is compiled, the graph
    executor's otherwise."""
    from albertkit.perf.workers import AlbertkitWorker

    settings = BenchmarkSettings(size="tiny", model={"vocab_size": 300}, seq_length=32,
                                 micro_batch=2, warmup=1, xla=xla)
    worker = AlbertkitWorker(settings)
    worker.setup()
    assert worker.step.xla.compute is xla
    seen = jit_compile_calls()
    reply = worker.matmul()
    assert seen == [xla]
    assert reply["matmul_flops_per_s"] > 0 and reply["matmul_n"] == 2048
