"""Two Keras layers albertkit's ALBERT (:mod:`albertkit.models.albert`) is built from.

:class:`LayerNorm` is Keras' LayerNormalization with a fused backward pass; :class:`Dropout`
keeps its RNG state under a deterministic variable path and can take seeds drawn in advance
(:data:`DRAWN_SEEDS`), so that a recomputed layer application drops what its forward pass did.
"""

from __future__ import annotations

import contextvars
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from albertkit.models.kernels import layer_norm_kernel


class LayerNorm(keras.layers.LayerNormalization):
    """Keras' LayerNormalization over the last axis (the same variables, configuration and
    values) whose backward pass is one fused kernel
    (:func:`~albertkit.models.kernels.layer_norm_kernel`).

    Autodiff of Keras' formula in TensorFlow's graph executor runs its gradient op by op and
    keeps its intermediates (in float32 under mixed precision) for the backward pass; the
    fused backward pass keeps only the input and reads it again. Measured: the allocator
    peak of ALBERT-base at seq 512 x 4 in mixed_bfloat16 drops from 1,164 to 957 MiB
    (docs/memory.md). Inside an XLA-compiled step the kernel is inlined.
    """

    def call(self, inputs: Any) -> Any:
        y = layer_norm_kernel(float(self.epsilon))(
            inputs, tf.convert_to_tensor(self.gamma.value), tf.convert_to_tensor(self.beta.value)
        )
        return ops.cast(y, self.compute_dtype)


# Seeds drawn before a recomputed ("full" remat) layer application, by Dropout layer id:
# the forward pass and its recomputation in the backward pass must drop the same elements,
# so neither may advance a generator inside the recomputed function.
DRAWN_SEEDS: contextvars.ContextVar[dict[int, Any] | None] = contextvars.ContextVar(
    "albertkit_drawn_dropout_seeds", default=None
)


class _DrawnSeed(keras.random.SeedGenerator):
    """A seed already drawn (a tensor) standing in for a generator: ``keras.random`` takes
    its value as is and no state advances. Holds no variable (the base initialiser, which
    creates one, is deliberately not called)."""

    def __init__(self, value: Any):  # noqa: D107 - no SeedGenerator state on purpose
        self._value = value

    def next(self, ordered: bool = True) -> Any:
        return self._value


class Dropout(keras.layers.Layer):
    """Dropout whose RNG state variable has a deterministic path.

    ``keras.layers.Dropout`` creates its ``SeedGenerator`` at construction under a globally
    counted name (``seed_generator_17/...``), so its state's path would change with the
    number of models built before. Here it is created in ``build`` under the layer's own
    scope (``.../dropout/seed_generator/seed_generator_state``) and only if ``rate > 0``.
    """

    def __init__(self, rate: float, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
        self.rate = rate
        self.seed_generator = None

    def build(self, input_shape: Any = None) -> None:
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(name="seed_generator")
        self.built = True

    def _seed(self) -> keras.random.SeedGenerator:
        drawn = DRAWN_SEEDS.get()
        if drawn is not None and id(self) in drawn:
            return _DrawnSeed(drawn[id(self)])
        return self.seed_generator

    def call(self, x: Any, training: bool = False) -> Any:
        if training and self.seed_generator is not None:
            return keras.random.dropout(x, self.rate, seed=self._seed())
        return x

    def keep_mask(self, shape: Any) -> Any:
        """A boolean mask of the elements to keep (each with probability 1 - rate), drawn
        from this layer's generator; None when the rate is 0."""
        if self.seed_generator is None:
            return None
        return keras.random.uniform(shape, seed=self._seed()) >= self.rate

    def apply_keep(self, x: Any, keep: Any) -> Any:
        """Dropout with a mask from :meth:`keep_mask`: kept elements scaled by 1 / (1 - rate)."""
        return ops.where(keep, x * (1.0 / (1.0 - self.rate)), ops.zeros_like(x))
