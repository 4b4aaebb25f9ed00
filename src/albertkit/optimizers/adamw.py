"""AdamW with BERT/ALBERT semantics as a Keras 3 optimizer.

Spec: ``AdamWeightDecayOptimizer`` in Google's BERT ``optimization.py`` (also shipped in
Google's ALBERT ``optimization.py``):

    m <- beta_1 * m + (1 - beta_1) * g
    v <- beta_2 * v + (1 - beta_2) * g^2
    u  = m / (sqrt(v) + epsilon)                    # NO bias correction
    u += weight_decay_rate * w                      # unless w's name is excluded
    w <- w - lr * u

The decay is added to the Adam direction (so it is scaled by the learning rate but not by
``1/sqrt(v)``), which is the "decoupled" decay of Loshchilov & Hutter as BERT implements it.
Keras' own ``weight_decay`` argument is NOT used (it decays before the update and has no
name-based exclusion list). Global-norm clipping is the training step's job, not ours.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import keras
import tensorflow as tf
from keras import ops

DEFAULT_EXCLUDE: tuple[str, ...] = ("layer_norm", "LayerNorm", "bias")


def variable_name(variable) -> str:
    """The name exclusion patterns are matched against: the Keras 3 ``.path``."""
    return getattr(variable, "path", None) or variable.name


def matches_any(name: str, patterns: Sequence[str]) -> bool:
    """True when any pattern is found in ``name`` (``re.search``, as Google's reference).

    A plain word such as ``"bias"`` therefore matches as a substring.
    """
    return any(re.search(p, name) is not None for p in patterns)


def dense_gradient(gradient):
    """Densify an ``IndexedSlices`` gradient (embedding lookups produce them).

    The whole-tensor formulas (and LAMB's norms) need the dense gradient; the sparse
    shortcut would also be wrong here because Adam's moments decay every row every step.
    """
    if isinstance(gradient, tf.IndexedSlices):
        return tf.convert_to_tensor(gradient)
    return gradient


def validate_hyperparameters(
    beta_1: float, beta_2: float, epsilon: float, weight_decay_rate: float, kwargs: dict
) -> None:
    """Reject out-of-range values with a message quoting them."""
    bad = []
    if not 0.0 <= beta_1 < 1.0:
        bad.append(f"beta_1={beta_1!r} (need 0 <= beta_1 < 1)")
    if not 0.0 <= beta_2 < 1.0:
        bad.append(f"beta_2={beta_2!r} (need 0 <= beta_2 < 1)")
    if not epsilon > 0.0:
        bad.append(f"epsilon={epsilon!r} (need > 0)")
    if not weight_decay_rate >= 0.0:
        bad.append(f"weight_decay_rate={weight_decay_rate!r} (need >= 0)")
    if kwargs.get("weight_decay") is not None:
        bad.append(
            f"weight_decay={kwargs['weight_decay']!r}: Keras' decoupled decay is not used, "
            "pass weight_decay_rate instead"
        )
    for key in ("clipnorm", "clipvalue", "global_clipnorm"):
        if kwargs.get(key) is not None:
            bad.append(f"{key}={kwargs[key]!r}: clipping is done by albertkit's training step")
    if bad:
        raise ValueError("invalid optimizer arguments: " + "; ".join(bad))


def as_learning_rate(learning_rate):
    """Pass schedules through; turn numbers into the Python float Keras insists on."""
    if isinstance(learning_rate, int | float) and not isinstance(learning_rate, bool):
        return float(learning_rate)
    return learning_rate


@keras.saving.register_keras_serializable(package="albertkit")
class AdamW(keras.optimizers.Optimizer):
    """Adam with BERT-style weight decay and a name-based exclusion list.

    Args:
        learning_rate (float | LearningRateSchedule): a float or a schedule (see
            ``WarmupPolynomialDecay``).
        beta_1: decay rate of the first moment.
        beta_2: decay rate of the second moment.
        epsilon: added to ``sqrt(v)`` (BERT/ALBERT use 1e-6).
        weight_decay_rate: decay added to the update of non-excluded variables.
        exclude_from_weight_decay: regex patterns searched in each variable's ``.path``;
            matching variables (LayerNorm gamma/beta, biases) are not decayed.
        name: optimizer name.

    Example:
        >>> import keras
        >>> w = keras.Variable([1.0, -2.0], name="kernel")
        >>> opt = AdamW(learning_rate=0.1)
        >>> opt.apply([keras.ops.convert_to_tensor([0.5, 0.5])], [w])
        >>> # no bias correction: u = 0.1*g / sqrt(0.001*g^2) = sqrt(10) * sign(g), + 0.01*w
        >>> [round(float(x), 4) for x in w.numpy()]
        [0.6828, -2.3142]
    """

    def __init__(
        self,
        learning_rate,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        weight_decay_rate: float = 0.01,
        exclude_from_weight_decay: Sequence[str] | None = DEFAULT_EXCLUDE,
        name: str = "adamw",
        **kwargs,
    ):
        validate_hyperparameters(beta_1, beta_2, epsilon, weight_decay_rate, kwargs)
        kwargs.pop("weight_decay", None)
        super().__init__(
            learning_rate=as_learning_rate(learning_rate), name=name, weight_decay=None, **kwargs
        )
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.weight_decay_rate = float(weight_decay_rate)
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay or ())

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        # Decided once from the Keras variable paths: inside tf.distribute's update the
        # variable handed to update_step is a plain tf.Variable without `.path`.
        self._decay_flags = tuple(
            self.weight_decay_rate > 0.0
            and not matches_any(variable_name(v), self.exclude_from_weight_decay_patterns)
            for v in var_list
        )

    def uses_weight_decay(self, variable) -> bool:
        """Whether ``variable`` (one this optimizer was built with) is decayed."""
        return self._decay_flags[self._get_variable_index(variable)]

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # albertkit's training step hands the optimizer gradients that its distributor has
        # ALREADY mean-reduced across replicas (and clipped). Keras' TF optimizer would
        # all-reduce-SUM them again when applied in a replica context (strategy.run), which
        # multiplies them by the replica count and breaks clipping; so it is a no-op here.
        return list(grads_and_vars)

    def _decayed_update(self, index: int, gradient, w):
        """New moments and the decayed Adam update ``m / (sqrt(v) + eps) + wd * w``."""
        m, v = self._m[index], self._v[index]
        g = ops.cast(dense_gradient(gradient), w.dtype)
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * g
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(g)
        # No bias correction: BERT's AdamWeightDecayOptimizer has none.
        update = next_m / (ops.sqrt(next_v) + self.epsilon)
        if self._decay_flags[index]:
            update = update + self.weight_decay_rate * w
        return next_m, next_v, update

    def _assign(self, index: int, variable, next_m, next_v, step):
        self.assign(self._m[index], next_m)
        self.assign(self._v[index], next_v)
        self.assign_sub(variable, step)

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        w = ops.convert_to_tensor(variable)  # read once, before any assignment
        next_m, next_v, update = self._decayed_update(index, gradient, w)
        self._assign(index, variable, next_m, next_v, ops.cast(learning_rate, w.dtype) * update)

    def get_config(self):
        config = super().get_config()
        for key in ("clipnorm", "clipvalue", "global_clipnorm", "weight_decay"):
            config.pop(key, None)
        config.update(
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            weight_decay_rate=self.weight_decay_rate,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay_patterns),
        )
        return config
