"""Mixed-precision plumbing of albertkit's ALBERT (:mod:`albertkit.models.albert`).

The dtype policy argument's check, the attention softmax's dtype, the float32 cast of every
model output, and the weight casts that mixed precision makes once per forward pass for all
the applications of a shared layer (:class:`SharedWeightCasts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf
from keras import ops

# Keras exports no public name for the scope its layers cast variables under (a layer keeps an
# enclosing scope of its own compute dtype: keras/src/layers/layer.py, Layer.__call__).
from keras.src.backend import AutocastScope


def check_dtype(dtype: Any) -> Any:
    """``dtype`` (a model's ``dtype`` argument) unchanged, if Keras knows it as a policy."""
    if dtype is None:
        return None
    try:
        keras.dtype_policies.get(dtype)
    except ValueError:
        raise ValueError(
            f"dtype={dtype!r} is not a Keras dtype policy (use 'float32', 'mixed_float16' or "
            "'mixed_bfloat16')"
        ) from None
    return dtype


def as_float32(outputs: dict[str, Any]) -> dict[str, Any]:
    """A model's outputs cast to float32, so that losses are float32 under any policy."""
    return {k: ops.cast(v, "float32") for k, v in outputs.items()}


def softmax_dtype(compute_dtype: str) -> str:
    """The dtype the attention softmax takes its scores in.

    float16 scores go to float32 first (their range ends at 65504, the usual mixed-precision
    rule). bfloat16 has float32's exponent range and the softmax kernels accumulate its sum
    in float32 (TensorFlow's oneDNN CPU kernel, and XLA's lowering, which sums in the
    accumulation type), so bfloat16 scores are used as they are: the two casts of every
    T x T score, forward and backward, were a third of the attention core's time at seq 512.
    """
    return "float32" if compute_dtype == "float16" else compute_dtype


class SharedWeightCasts(AutocastScope):
    """Mixed precision's weight casts, made once per forward pass and shared by every
    application of a shared layer.

    Keras casts a float32 variable to the compute dtype each time a layer reads it. ALBERT
    applies one parameter group ``num_hidden_layers`` times, so a forward pass makes that
    many low-precision copies of the group's weights, and the graph executor keeps each one
    for its application's backward pass (XLA merges the equal casts; the executor does
    not): at base 11 extra bfloat16 copies of 7.1 M weights, 156 MB. Under this scope each
    variable is cast once.

    ``reads`` maps ``id`` of a variable to the number of reads expected in one pass (a
    shared layer's applications). Such a variable is cast by :func:`_fanned_cast`, whose
    outputs are handed out one per read and whose backward pass sums the reads' gradients
    in float32 in one kernel; other variables' reads return their one cast through
    :func:`_shared_cast_use`, whose gradient is the read's own gradient in the variable's
    dtype. Either way the applications' weight gradients are summed in float32, as with a
    cast per read.
    """

    def __init__(self, dtype: Any, reads: dict[int, int] | None = None):
        super().__init__(dtype)
        self._reads = reads or {}
        self._casts: dict[int, tuple[Any, Any, list[Any]]] = {}

    def maybe_cast(self, value: Any) -> Any:
        dtype = tf.as_dtype(self.dtype) if self.dtype is not None else None
        if dtype is None or not value.dtype.is_floating or value.dtype == dtype:
            return super().maybe_cast(value)
        read = tf.convert_to_tensor(value)  # a recorded read: the gradient reaches value
        entry = self._casts.get(id(value))
        if entry is None:
            # The variable is held with its cast so that its id is not reused in this pass.
            reads = self._reads.get(id(value), 1)
            if reads > 1:
                uses = list(_fanned_cast(read, dtype, reads))
                entry = (value, tf.stop_gradient(uses[0]), uses)
            else:
                entry = (value, tf.cast(tf.stop_gradient(read), dtype), [])
            self._casts[id(value)] = entry
        if entry[2]:
            return entry[2].pop(0)
        return _shared_cast_use(read, entry[1])


def _fanned_cast(read: Any, dtype: Any, reads: int) -> list[Any]:
    """``reads`` uses of one ``dtype`` cast of ``read``; the gradient is the sum of the
    uses' gradients, computed in ``read``'s dtype by one XLA kernel: each element is read
    once and widened in registers, with no full-size float32 copy per use.

    Autodiff would sum a shared read's gradients itself, but in the compute dtype; with a
    cast per read it casts each to float32 first (at base 12 float32 copies of the layer's
    gradients, alive together at the end of the backward pass) and then adds them.
    """

    @tf.custom_gradient
    def fan(x: Any) -> tuple[list[Any], Callable[..., Any]]:
        cast = tf.cast(x, dtype)

        def grad(*d_uses: Any) -> Any:
            return _sum_wide([d for d in d_uses if d is not None], x.dtype)

        return [tf.identity(cast) for _ in range(reads)], grad

    return fan(read)


@tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
def _sum_wide(parts: list[Any], dtype: Any) -> Any:
    return tf.add_n([tf.cast(p, dtype) for p in parts])


@tf.custom_gradient
def _shared_cast_use(read: Any, cast: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``cast`` (the shared low-precision copy of ``read``) passed on as this read's value;
    the gradient goes to ``read`` in its own dtype, none to the shared copy."""

    def grad(d_cast: Any) -> tuple[Any, None]:
        return tf.cast(d_cast, read.dtype), None

    return tf.identity(cast), grad
