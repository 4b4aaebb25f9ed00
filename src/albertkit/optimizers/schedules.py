"""Learning-rate schedule of Google's BERT/ALBERT: linear warmup, then polynomial decay.

Spec: ``create_optimizer`` in Google's ALBERT ``optimization.py``. With ``step`` the number
of optimizer updates already applied (Keras passes ``optimizer.iterations``, which is 0 on
the first update, like the reference's ``global_step``):

    decayed(step) = (peak - end) * (1 - min(step, total) / total) ** power + end
    lr(step)      = peak * step / warmup      if step < warmup
                  = decayed(step)              otherwise

The decay is measured from step 0, not from the end of warmup, exactly as the reference
(``tf.train.polynomial_decay`` over ``global_step`` with the warmup overriding the first
``warmup`` steps). So the rate jumps from ``peak * (warmup-1)/warmup`` to
``decayed(warmup) = peak * (1 - warmup/total) ** power`` (for end=0), a step of a few
percent for the usual warmup fractions; the very first update runs at rate 0.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albertkit")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to ``peak_learning_rate``, then polynomial decay to ``total_steps``.

    Args:
        peak_learning_rate: the rate reached at the end of warmup (ALBERT's ``init_lr``).
        total_steps: the step at which the decay reaches ``end_learning_rate``.
        warmup_steps: number of warmup steps (0 = no warmup).
        power: polynomial power (1.0 = linear decay).
        end_learning_rate: final rate, held after ``total_steps``.

    Example:
        >>> s = WarmupPolynomialDecay(1e-3, total_steps=100, warmup_steps=10)
        >>> round(float(s(5)), 6), round(float(s(10)), 6), round(float(s(100)), 6)
        (0.0005, 0.0009, 0.0)
    """

    def __init__(
        self,
        peak_learning_rate: float,
        total_steps: int,
        warmup_steps: int = 0,
        power: float = 1.0,
        end_learning_rate: float = 0.0,
    ):
        bad = []
        if not peak_learning_rate > 0:
            bad.append(f"peak_learning_rate={peak_learning_rate!r} (need > 0)")
        if not total_steps > 0:
            bad.append(f"total_steps={total_steps!r} (need > 0)")
        if not 0 <= warmup_steps <= total_steps:
            bad.append(
                f"warmup_steps={warmup_steps!r} (need 0 <= warmup_steps <= "
                f"total_steps={total_steps!r})"
            )
        if not power > 0:
            bad.append(f"power={power!r} (need > 0)")
        if not 0 <= end_learning_rate <= peak_learning_rate:
            bad.append(
                f"end_learning_rate={end_learning_rate!r} (need 0 <= end <= "
                f"peak_learning_rate={peak_learning_rate!r})"
            )
        if bad:
            raise ValueError("WarmupPolynomialDecay: " + "; ".join(bad))
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.power = float(power)
        self.end_learning_rate = float(end_learning_rate)

    @classmethod
    def from_config_section(cls, section: Any, total_steps: int) -> WarmupPolynomialDecay:
        """Build from a ``config.LambConfig`` / ``config.AdamWConfig`` and the run length."""
        schedule = section.schedule
        return cls(
            peak_learning_rate=section.learning_rate,
            total_steps=total_steps,
            warmup_steps=schedule.resolved_warmup(total_steps),
            power=schedule.power,
            end_learning_rate=schedule.end_learning_rate,
        )

    def __call__(self, step):
        step = ops.cast(step, "float32")
        total = float(self.total_steps)
        progress = ops.minimum(step, total) / total
        decayed = (self.peak_learning_rate - self.end_learning_rate) * ops.power(
            1.0 - progress, self.power
        ) + self.end_learning_rate
        if not self.warmup_steps:
            return decayed
        warm = self.peak_learning_rate * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warm, decayed)

    def get_config(self) -> dict[str, Any]:
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "power": self.power,
            "end_learning_rate": self.end_learning_rate,
        }
