"""LAMB with ALBERT semantics as a Keras 3 optimizer.

Spec: ``LAMBOptimizer`` in Google's ALBERT ``lamb_optimizer.py`` (You et al., "Large Batch
Optimization for Deep Learning", arXiv:1904.00962):

    m <- beta_1 * m + (1 - beta_1) * g
    v <- beta_2 * v + (1 - beta_2) * g^2
    u  = m / (sqrt(v) + epsilon)          # NO bias correction (see below)
    u += weight_decay_rate * w            # unless excluded from weight decay
    r  = ||w|| / ||u||                    # per variable; 1.0 when either norm is 0,
                                          # and 1.0 for variables excluded from adaptation
    w <- w - lr * r * u

Bias correction: the LAMB paper's Algorithm 2 divides m and v by (1 - beta^t), but
Google's ALBERT ``lamb_optimizer.py`` (the optimizer ALBERT was trained with) does not,
exactly like BERT's ``AdamWeightDecayOptimizer``. We follow ALBERT. The missing correction
is, up to epsilon, one scalar per step (sqrt(1 - beta_2^t) / (1 - beta_1^t)), which the
trust ratio cancels for adapted variables without decay; it matters for the decay weight
and for excluded (LayerNorm/bias) variables, whose early steps are smaller.

Differences from ``keras.optimizers.Lamb``: the decay sits INSIDE the trust ratio (Keras
decays separately, decoupled), LayerNorm/bias variables are excluded by name from decay
and from adaptation, and there is no bias correction. Global-norm clipping belongs to the
training step (Google's ``optimization.py`` clips to 1.0 before ``apply_gradients``).
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from albertkit.optimizers.adamw import DEFAULT_EXCLUDE, AdamW, matches_any, variable_name


@keras.saving.register_keras_serializable(package="albertkit")
class Lamb(AdamW):
    """LAMB (layer-wise adaptive moments) exactly as Google's ALBERT pretrains with it.

    Args:
        learning_rate (float | LearningRateSchedule): a float or a schedule (see
            ``WarmupPolynomialDecay``).
        beta_1: decay rate of the first moment.
        beta_2: decay rate of the second moment.
        epsilon: added to ``sqrt(v)`` (ALBERT uses 1e-6).
        weight_decay_rate: decay added to the update before the trust ratio.
        exclude_from_weight_decay: regex patterns searched in each variable's ``.path``;
            matches are not decayed.
        exclude_from_layer_adaptation: patterns of variables that get trust ratio 1.0.
            ``None`` means the weight-decay list (as in ALBERT); ``[]`` adapts everything.
        name: optimizer name.

    Example:
        >>> import keras
        >>> w = keras.Variable([3.0, 4.0], name="kernel")
        >>> opt = Lamb(learning_rate=0.1, weight_decay_rate=0.0)
        >>> opt.apply([keras.ops.convert_to_tensor([1.0, 1.0])], [w])
        >>> # u = (1, 1) (up to eps), r = ||w|| / ||u|| = 5 / sqrt(2)
        >>> [round(float(x), 3) for x in w.numpy()]
        [2.646, 3.646]
    """

    def __init__(
        self,
        learning_rate,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        weight_decay_rate: float = 0.01,
        exclude_from_weight_decay: Sequence[str] | None = DEFAULT_EXCLUDE,
        exclude_from_layer_adaptation: Sequence[str] | None = None,
        name: str = "lamb",
        **kwargs,
    ):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, weight_decay_rate,
                         exclude_from_weight_decay, name=name, **kwargs)
        self.exclude_from_layer_adaptation_patterns = (
            self.exclude_from_weight_decay_patterns
            if exclude_from_layer_adaptation is None
            else tuple(exclude_from_layer_adaptation)
        )

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Decided once from the Keras variable paths (see AdamW.build).
        self._adapt_flags = tuple(
            not matches_any(variable_name(v), self.exclude_from_layer_adaptation_patterns)
            for v in var_list
        )

    def uses_layer_adaptation(self, variable) -> bool:
        """Whether ``variable`` gets the trust ratio (otherwise ratio 1.0)."""
        return self._adapt_flags[self._get_variable_index(variable)]

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        w = ops.convert_to_tensor(variable)  # read once, before any assignment
        next_m, next_v, update = self._decayed_update(index, gradient, w)
        if self._adapt_flags[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(w)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            # Both zero checks as in ALBERT: a zero-initialised variable (w_norm = 0) still
            # moves with ratio 1.0 instead of never leaving zero. The denominator is made
            # safe so no inf/NaN is ever formed, even in the branch that is discarded.
            safe = ops.logical_and(w_norm > 0.0, u_norm > 0.0)
            ratio = ops.where(safe, w_norm / ops.where(safe, u_norm, 1.0), 1.0)
            update = ratio * update
        self._assign(index, variable, next_m, next_v, ops.cast(learning_rate, w.dtype) * update)

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = list(self.exclude_from_layer_adaptation_patterns)
        return config
