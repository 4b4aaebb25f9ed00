"""Build LAMB and AdamW from their config sections (``optimizer.kind: lamb|adamw``).

The registry names these functions by path (``"albertkit.optimizers.from_config:lamb"``,
:mod:`albertkit.config.builtins`) and imports this module when a run builds its optimizer,
so the config package stays free of Keras and never imports this package.
"""

from __future__ import annotations

from typing import Any

from albertkit.optimizers.adamw import AdamW
from albertkit.optimizers.lamb import Lamb
from albertkit.optimizers.schedules import WarmupPolynomialDecay


def _adam_family(config: Any, total_steps: int) -> dict[str, Any]:
    # what LAMB and AdamW share: the schedule, the moment settings and the decay exclusions
    return {
        "learning_rate": WarmupPolynomialDecay.from_config_section(config, total_steps),
        "beta_1": config.beta_1,
        "beta_2": config.beta_2,
        "epsilon": config.epsilon,
        "weight_decay_rate": config.weight_decay,
        "exclude_from_weight_decay": config.exclude_from_weight_decay,
    }


def lamb(config: Any, total_steps: int) -> Lamb:
    """LAMB from a ``LambConfig``, its schedule ending at ``total_steps``."""
    return Lamb(**_adam_family(config, total_steps),
                exclude_from_layer_adaptation=config.exclude_from_layer_adaptation)


def adamw(config: Any, total_steps: int) -> AdamW:
    """AdamW from an ``AdamWConfig``, its schedule ending at ``total_steps``."""
    return AdamW(**_adam_family(config, total_steps))
