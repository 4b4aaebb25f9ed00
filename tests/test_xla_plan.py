"""``runtime.xla: auto``: the per-part XLA plan, the config field, and the step that uses it."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albertkit.config import ConfigError, RuntimeConfig
from albertkit.hardware import XlaPlan, resolve_xla
from conftest import make_tiny_config
from test_step import PREDS, SEQ, VOCAB
from test_step import config as step_config

# (setting, device, precision, eager) -> (compute, eval): the table of resolve_xla's docstring
TABLE = [
    ("auto", "cpu", "float32", False, False, False),
    ("auto", "cpu", "mixed_bfloat16", False, False, False),
    ("auto", "cpu", "mixed_float16", False, False, False),
    ("auto", "gpu", "float32", False, True, True),
    ("auto", "gpu", "mixed_bfloat16", False, True, True),
    ("auto", "gpu", "mixed_float16", False, True, True),
    ("auto", "cpu", "float32", True, False, False),
    ("auto", "gpu", "mixed_float16", True, False, False),
    (True, "cpu", "mixed_bfloat16", False, True, True),
    (True, "gpu", "float32", False, True, True),
    (False, "gpu", "float32", False, False, False),
    (False, "cpu", "float32", False, False, False),
    (False, "cpu", "float32", True, False, False),
]


@pytest.mark.parametrize(("setting", "device", "precision", "eager", "compute", "evaluate"),
                         TABLE)
def test_resolve_xla_table(setting, device, precision, eager, compute, evaluate):
    plan = resolve_xla(setting, device, precision, eager)
    assert isinstance(plan, XlaPlan)
    assert (plan.compute, plan.eval) == (compute, evaluate)
    assert plan.reason  # every choice says why


def test_resolve_xla_reasons_and_description():
    plan = resolve_xla("auto", "cpu", "mixed_bfloat16")
    assert "AVX-512 BF16" in plan.reason and "oneDNN" in plan.reason
    assert plan.describe("auto").startswith("auto -> compute off, eval off (cpu + mixed_bfloat16")
    assert resolve_xla("auto", "cpu", "float32", eager=True).reason.startswith("runtime.eager")
    assert resolve_xla(True, "cpu", "float32").describe(True) == (
        "true -> compute on, eval on (runtime.xla=true)")


@pytest.mark.parametrize(("args", "match"), [
    (("sometimes", "cpu", "float32"), "runtime.xla='sometimes'"),
    (("auto", "tpu", "float32"), "device='tpu'"),
    (("auto", "cpu", "float64"), "precision='float64'"),
])
def test_resolve_xla_rejects_unknown_values(args, match):
    with pytest.raises(ValueError, match=match):
        resolve_xla(*args)


def test_resolve_xla_true_with_eager_is_an_error():
    with pytest.raises(ValueError, match="exclude each other"):
        resolve_xla(True, "cpu", "float32", eager=True)


# --------------------------------------------------------------------------- config field
def test_config_default_is_auto():
    assert RuntimeConfig().xla == "auto"


@pytest.mark.parametrize("value", ["auto", True, False])
def test_config_accepts_auto_true_false(value):
    cfg = make_tiny_config(runtime={"xla": value})
    assert cfg.runtime.xla == value and type(cfg.runtime.xla) is type(value)


def test_config_override_auto_from_the_command_line():
    from albertkit.config import TrainerConfig
    from conftest import tiny_raw_config

    cfg = TrainerConfig.from_dict(tiny_raw_config(), ["runtime.xla=auto"])
    assert cfg.runtime.xla == "auto"
    cfg = TrainerConfig.from_dict(tiny_raw_config(), ["runtime.xla=true"])
    assert cfg.runtime.xla is True


@pytest.mark.parametrize("value", ["maybe", "on", 1, "AUTO", None])
def test_config_rejects_other_values_naming_the_field(value):
    with pytest.raises(ConfigError, match=r"runtime\.xla"):
        make_tiny_config(runtime={"xla": value})


def test_config_auto_with_eager_means_off_and_true_with_eager_errors():
    cfg = make_tiny_config(runtime={"xla": "auto", "eager": True})
    assert cfg.runtime.xla_plan("cpu")[:2] == (False, False)
    assert cfg.runtime.xla_plan("gpu")[:2] == (False, False)
    with pytest.raises(ConfigError, match=r"runtime\.xla=true and runtime\.eager=true"):
        make_tiny_config(runtime={"xla": True, "eager": True})


def test_config_plan_detects_this_device():
    device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    rt = RuntimeConfig(precision="mixed_bfloat16")
    assert rt.xla_plan() == resolve_xla("auto", device, "mixed_bfloat16")


# --------------------------------------------------------------------------- the step


def _batch(n: int = 8, seed: int = 0) -> dict[str, tf.Tensor]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, size=(n, SEQ)).astype(np.int32)
    pos = np.stack([np.sort(rng.choice(np.arange(1, SEQ), PREDS, replace=False))
                    for _ in range(n)]).astype(np.int32)
    batch = {
        "input_ids": ids,
        "input_mask": np.ones((n, SEQ), np.int32),
        "segment_ids": (np.arange(SEQ)[None, :] >= SEQ // 2).astype(np.int32).repeat(n, 0),
        "masked_lm_positions": pos,
        "masked_lm_ids": np.take_along_axis(ids, pos, 1).astype(np.int32),
        "masked_lm_weights": np.ones((n, PREDS), np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=n).astype(np.int32),
    }
    return {k: tf.constant(v[None]) for k, v in batch.items()}  # accumulation axis of 1


def _build(cfg):
    import keras

    from albertkit.distributed.single import SingleProcess
    from albertkit.tasks import build_task
    from albertkit.training.builders import resolve_spec
    from albertkit.training.step import TrainStep

    keras.utils.set_random_seed(0)
    task = build_task(cfg, resolve_spec(cfg))
    model = task.build_model()
    opt = cfg.optimizer.build(cfg.runtime.max_steps)
    return model, TrainStep(task, model, opt, SingleProcess(), cfg.runtime, 1,
                            cfg.optimizer.clip_norm)


def _on_cpu() -> bool:
    return not tf.config.list_physical_devices("GPU")


@pytest.mark.parametrize(("precision", "compiled"), [
    ("float32", False), ("mixed_bfloat16", False), ("mixed_float16", False),
])
def test_step_with_auto_compiles_per_part(precision, compiled):
    assert _on_cpu(), "this expectation is CPU's row of the table"
    _, step = _build(step_config(xla="auto", precision=precision))
    assert step.xla == resolve_xla("auto", "cpu", precision)
    assert step._compute._jit_compile is compiled
    assert step._eval._jit_compile is compiled
    assert step._predict._jit_compile is compiled


def test_step_with_true_compiles_bfloat16_too():
    _, step = _build(step_config(xla=True, precision="mixed_bfloat16"))
    assert step._compute._jit_compile is True and step._eval._jit_compile is True


def test_bfloat16_and_float32_steps_agree_from_the_same_weights():
    """The bf16 path auto picks on CPU (no XLA) computes what the float32 path computes
    (with XLA, so that the two paths share no compiler), within bfloat16's precision: same
    loss to 2e-2, gradients pointing the same way."""
    batch = _batch()
    model32, step32 = _build(step_config(xla=True, precision="float32"))
    model16, step16 = _build(step_config(xla="auto", precision="mixed_bfloat16"))
    assert step32._compute._jit_compile and not step16._compute._jit_compile
    model16.set_weights(model32.get_weights())
    g32, s32 = step32._compute(batch, tf.constant(1.0))
    g16, s16 = step16._compute(batch, tf.constant(1.0))
    for key in ("mlm_loss_sum", "sop_loss_sum"):
        assert float(s16[key]) == pytest.approx(float(s32[key]), rel=2e-2), key
    flat32 = np.concatenate([g.numpy().ravel() for g in g32])
    flat16 = np.concatenate([g.numpy().ravel() for g in g16])
    cosine = flat32 @ flat16 / (np.linalg.norm(flat32) * np.linalg.norm(flat16))
    assert cosine > 0.99, cosine
    # and not trivially: the gradients are not zero and the two paths did differ somewhat
    assert np.linalg.norm(flat32) > 0 and not np.array_equal(flat32, flat16)


def test_trainer_logs_the_resolved_plan_and_why(tmp_path, caplog):
    from albertkit.training.trainer import AlbertTrainer

    cfg = make_tiny_config(
        tmp_path / "run",
        data={"seq_length": 16, "max_predictions_per_seq": 3, "num_examples": 16,
              "eval_examples": 8},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 1,
                 "eval_every_steps": 0, "eval_steps": 1, "xla": "auto",
                 "precision": "mixed_bfloat16"},
    )
    with caplog.at_level("INFO", logger="albertkit"):
        AlbertTrainer(cfg).fit()
    device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    expected = resolve_xla("auto", device, "mixed_bfloat16").describe("auto")
    assert f"xla: {expected}" in caplog.text


def _cpuinfo(tmp_path, flags):
    path = tmp_path / "cpuinfo"
    cpu = f"processor\t: {{n}}\nmodel name\t: test CPU\nflags\t\t: fpu sse2 avx2 {flags}\n\n"
    path.write_text(cpu.format(n=0) + cpu.format(n=1))
    return str(path)


@pytest.mark.parametrize(
    ("flags", "found"),
    [("avx512f", ()), ("avx512_bf16 amx_tile amx_bf16", ("avx512_bf16", "amx_bf16")),
     ("avx_ne_convert", ("avx_ne_convert",)), ("avx512_bf16x", ())],
)
def test_cpu_bfloat16_flags_read_from_cpuinfo(tmp_path, flags, found):
    from albertkit.hardware import cpu_bfloat16_flags

    assert cpu_bfloat16_flags(_cpuinfo(tmp_path, flags)) == found


def test_cpu_bfloat16_flags_unknown_without_cpuinfo(tmp_path):
    from albertkit.hardware import bfloat16_warning, cpu_bfloat16_flags

    missing = str(tmp_path / "no-such-file")
    assert cpu_bfloat16_flags(missing) is None
    assert bfloat16_warning("cpu", "mixed_bfloat16", missing) is None  # unknown: no warning


def test_bfloat16_warning_only_for_bfloat16_on_a_cpu_without_it(tmp_path):
    from albertkit.hardware import bfloat16_warning

    without, with_ = _cpuinfo(tmp_path, "avx512f"), str(tmp_path / "bf16")
    (tmp_path / "bf16").write_text("flags\t: avx512f avx512_bf16\n")
    text = bfloat16_warning("cpu", "mixed_bfloat16", without)
    assert text and "runtime.precision=mixed_bfloat16" in text and "float32" in text
    assert bfloat16_warning("cpu", "mixed_bfloat16", with_) is None
    assert bfloat16_warning("cpu", "float32", without) is None
    assert bfloat16_warning("cpu", "mixed_float16", without) is None
    assert bfloat16_warning("gpu", "mixed_bfloat16", without) is None


@pytest.mark.parametrize("has_bf16", [False, True])
def test_trainer_warns_about_emulated_bfloat16(tmp_path, caplog, monkeypatch, has_bf16):
    import albertkit.training.trainer as trainer_module
    from albertkit.hardware import bfloat16_warning
    from albertkit.training.trainer import AlbertTrainer

    cpuinfo = _cpuinfo(tmp_path, "avx512_bf16" if has_bf16 else "avx512f")
    monkeypatch.setattr(trainer_module, "local_device_kind", lambda: "cpu")
    monkeypatch.setattr(
        trainer_module, "bfloat16_warning", lambda d, p: bfloat16_warning(d, p, cpuinfo)
    )
    cfg = make_tiny_config(
        tmp_path / "run",
        data={"seq_length": 16, "max_predictions_per_seq": 3, "num_examples": 16,
              "eval_examples": 8},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 1,
                 "eval_every_steps": 0, "eval_steps": 1, "precision": "mixed_bfloat16"},
    )
    with caplog.at_level("INFO", logger="albertkit"):
        AlbertTrainer(cfg).fit()
    warned = [r for r in caplog.records if "without bfloat16 instructions" in r.getMessage()]
    assert len(warned) == (0 if has_bf16 else 1)
    assert all(r.levelname == "WARNING" for r in warned)
