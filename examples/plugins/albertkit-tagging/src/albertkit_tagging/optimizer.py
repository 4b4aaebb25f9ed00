"""Keras' Lion with albertkit's learning-rate schedule and weight-decay exclusions by path."""

from __future__ import annotations

import keras

from albertkit.optimizers import WarmupPolynomialDecay


class PathExcludingLion(keras.optimizers.Lion):
    """``keras.optimizers.Lion`` that skips weight decay for every variable whose path
    contains one of ``exclude_from_weight_decay`` (Keras matches the short name, which for
    a LayerNorm is just ``gamma``; albertkit's paths name the layer: ``.../layer_norm/gamma``).
    """

    def __init__(self, *args, exclude_from_weight_decay: list[str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.excluded_parts = list(exclude_from_weight_decay or [])

    def _use_weight_decay(self, variable) -> bool:
        path = getattr(variable, "path", variable.name)
        if any(part in path for part in self.excluded_parts):
            return False
        return super()._use_weight_decay(variable)

    def get_config(self) -> dict:
        return {**super().get_config(), "exclude_from_weight_decay": self.excluded_parts}


def build_lion(section, total_steps: int) -> PathExcludingLion:
    """The optimizer of a ``LionConfig`` for a run of ``total_steps`` updates."""
    return PathExcludingLion(
        learning_rate=WarmupPolynomialDecay.from_config_section(section, total_steps),
        beta_1=section.beta_1,
        beta_2=section.beta_2,
        weight_decay=section.weight_decay or None,
        exclude_from_weight_decay=section.exclude_from_weight_decay,
        # a fixed name: Keras' default counts optimizers per process, and the name is part
        # of the optimizer variables' paths, the keys of albertkit's checkpoints
        name="lion",
    )
