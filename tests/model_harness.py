"""One harness that runs every ALBERT model through the same checks.

A :class:`ModelCase` holds what a model test needs: the model class, its constructor
arguments (``init_kwargs``, without ``dtype`` and ``remat``), ``input_data`` and the output
shapes as a function of batch and sequence length. Then one call,
``run_model_test(case, policy=..., remat=...)``, checks for that dtype policy and remat mode:

* every output has its expected shape, is float32 and finite;
* a training-mode forward pass (where remat takes effect; the cases use no dropout) gives the
  inference outputs;
* another sequence length, in training mode, gives outputs of its shapes;
* ``from_config(get_config())`` rebuilds the same model: equal configs and, with the
  weights copied, identical outputs.

``check_xla_forward`` compares the XLA-compiled forward pass with the uncompiled one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

# Outputs compared across compile paths within tol x max(1, largest |value|): XLA's CPU
# backend computes 16-bit types in float32 and fuses differently, so only float32 is tight.
XLA_TOLERANCE = {"float32": 1e-4, "mixed_bfloat16": 2e-2, "mixed_float16": 4e-3}


@dataclass(frozen=True)
class ModelCase:
    """A model under test: ``model_class(**init_kwargs, dtype=..., remat=...)`` called on
    ``input_data`` returns outputs of shapes ``output_shape(batch, seq_length)``."""

    name: str
    model_class: type[keras.layers.Layer]  # a model, or AlbertEncoderLayer
    init_kwargs: dict[str, Any]
    input_data: dict[str, np.ndarray]
    output_shape: Callable[[int, int], dict[str, tuple[int, ...]]]
    # Head models cast their outputs to float32; the bare encoder returns the compute dtype.
    float32_outputs: bool = True
    other_length: int = 6

    @property
    def batch_size(self) -> int:
        return self.input_data["input_ids"].shape[0]

    @property
    def seq_length(self) -> int:
        return self.input_data["input_ids"].shape[1]

    @property
    def expected_output_shape(self) -> dict[str, tuple[int, ...]]:
        return self.output_shape(self.batch_size, self.seq_length)

    def inputs_of_length(self, length: int) -> dict[str, np.ndarray]:
        """``input_data`` cut or tiled to ``length`` tokens (positions kept below it)."""
        reps = -(-length // self.seq_length)
        out = {k: np.tile(v, (1, reps))[:, :length] for k, v in self.input_data.items()
               if k != "masked_lm_positions"}
        if "masked_lm_positions" in self.input_data:
            out["masked_lm_positions"] = self.input_data["masked_lm_positions"] % length
        return out


def build_model(case: ModelCase, policy: str, remat: str, seed: int = 0) -> keras.Model:
    """The case's model under ``policy`` and ``remat``, its variables created (seeded)."""
    keras.utils.set_random_seed(seed)
    model = case.model_class(**case.init_kwargs, dtype=policy, remat=remat)
    model.build()
    return model


def numpy_outputs(outputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Model outputs as float32 NumPy arrays (exact: every compute dtype fits in float32)."""
    return {k: np.asarray(tf.cast(v, tf.float32)) for k, v in outputs.items()}


def check_outputs(model: keras.Model, case: ModelCase, outputs: dict[str, Any], batch: int,
                  length: int) -> None:
    """Every output has the expected shape and dtype (float32 from a head model whatever
    the policy, else the compute dtype) and is finite."""
    expected = case.output_shape(batch, length)
    dtype = "float32" if case.float32_outputs else model.compute_dtype
    assert sorted(outputs) == sorted(expected), (sorted(outputs), sorted(expected))
    for key, value in outputs.items():
        assert tuple(value.shape) == expected[key], (key, tuple(value.shape), expected[key])
        assert value.dtype == dtype, (key, value.dtype, dtype)
    assert all(np.isfinite(v).all() for v in numpy_outputs(outputs).values())


def check_training_forward(model: keras.Model, case: ModelCase,
                           reference: dict[str, np.ndarray]) -> None:
    """Without dropout, the training-mode pass (remat's path) gives the inference outputs."""
    trained = numpy_outputs(model(case.input_data, training=True))
    for key, value in reference.items():
        np.testing.assert_allclose(trained[key], value, rtol=1e-6, atol=1e-7, err_msg=key)


def check_variable_sequence_length(model: keras.Model, case: ModelCase) -> None:
    """After ``input_data``, the model takes another sequence length, in training mode (so
    through remat's path), with outputs of that length's shapes."""
    length = case.other_length
    outputs = model(case.inputs_of_length(length), training=True)
    check_outputs(model, case, outputs, case.batch_size, length)


def check_config_round_trip(model: keras.Model, case: ModelCase, policy: str, remat: str,
                            reference: dict[str, np.ndarray]) -> keras.Model:
    """The config holds every constructor argument; ``from_config(get_config())`` gives the
    same config and, with the weights copied over, the same outputs. Returns the clone."""
    config = model.get_config()
    for key, value in {**case.init_kwargs, "dtype": policy, "remat": remat}.items():
        assert config[key] == (value.model_dump() if key == "spec" else value), key
    clone = type(model).from_config(config)
    assert clone.get_config() == config
    clone.build()
    clone.set_weights(model.get_weights())
    got = numpy_outputs(clone(case.input_data))
    for key, value in reference.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    return clone


def check_xla_forward(model: keras.Model, case: ModelCase, policy: str, training: bool = True,
                      reference: dict[str, np.ndarray] | None = None) -> None:
    """The forward pass compiled by XLA equals the uncompiled one (``reference``, computed
    eagerly when not given) within the policy's :data:`XLA_TOLERANCE`."""
    if reference is None:
        reference = numpy_outputs(model(case.input_data, training=training))

    @tf.function(jit_compile=True)
    def compiled(inputs):
        return model(inputs, training=training)

    got = numpy_outputs(compiled(case.input_data))
    tol = XLA_TOLERANCE[policy]
    for key, value in reference.items():
        scale = max(1.0, float(np.abs(value).max()))
        np.testing.assert_allclose(got[key], value, atol=tol * scale, rtol=tol, err_msg=key)


def run_model_test(case: ModelCase, *, policy: str, remat: str, xla: bool = False) -> keras.Model:
    """Every check of this module on ``case`` under ``policy`` and ``remat`` (with ``xla``,
    the XLA comparison too); returns the model."""
    model = build_model(case, policy, remat)
    assert model.dtype_policy.name == policy
    assert all(v.dtype == "float32" for v in model.trainable_weights)
    outputs = model(case.input_data)
    check_outputs(model, case, outputs, case.batch_size, case.seq_length)
    reference = numpy_outputs(outputs)
    check_training_forward(model, case, reference)
    check_variable_sequence_length(model, case)
    check_config_round_trip(model, case, policy, remat, reference)
    if xla:
        check_xla_forward(model, case, policy)
    return model
