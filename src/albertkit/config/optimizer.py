"""The ``optimizer`` section: the base every optimizer config builds on, LAMB and AdamW.

An optimizer config holds data only. It names what turns it into a Keras optimizer by a
``"module:function"`` path (``builder``), imported when a run builds the optimizer (LAMB and
AdamW: :mod:`albertkit.optimizers.from_config`), so configs import no TensorFlow and this
package never imports the optimizers; a plugin may instead override ``build(total_steps)``.

Example:
    >>> LambConfig().learning_rate, AdamWConfig(beta_2=0.98).beta_2
    (0.00176, 0.98)
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from albertkit.config.base import Section
from albertkit.errors import PluginError


class ScheduleConfig(Section):
    """Linear warmup to the peak rate, then polynomial decay to ``end_learning_rate``."""

    warmup_steps: int = Field(
        0, ge=0, description="Steps of linear warmup from 0 to the peak learning rate."
    )
    warmup_fraction: float | None = Field(
        None, ge=0.0, lt=1.0,
        description="Warmup as a fraction of runtime.max_steps (overrides warmup_steps when set).",
    )
    power: float = Field(
        1.0, gt=0.0, description="Exponent of the polynomial decay after warmup (1 = linear)."
    )
    end_learning_rate: float = Field(
        0.0, ge=0.0, description="Learning rate reached at runtime.max_steps."
    )

    def resolved_warmup(self, total_steps: int) -> int:
        if self.warmup_fraction is not None:
            return int(round(self.warmup_fraction * total_steps))
        return self.warmup_steps


class OptimizerSection(Section):
    """The base class of an optimizer section: the fields every optimizer has (the trainer
    reads ``clip_norm`` and ``schedule``). A plugin's optimizer config subclasses it with a
    ``kind`` literal and its own fields, and either names its builder
    (``builder = "my_package.optim:build"``) or overrides :meth:`build`."""

    builder: ClassVar[str | None] = None
    """``"module:function"``: ``function(config, total_steps)`` returns the Keras optimizer
    (imported when a run builds it)."""

    learning_rate: float = Field(
        1e-3, gt=0.0, description="Peak learning rate (reached after warmup)."
    )
    weight_decay: float = Field(
        0.01, ge=0.0,
        description="Weight decay rate (ALBERT: 0.01); not applied to excluded variables.",
    )
    exclude_from_weight_decay: list[str] = Field(
        ["layer_norm", "LayerNorm", "bias"],
        description="Variables whose name contains one of these strings get no weight decay.",
    )
    clip_norm: float | None = Field(
        1.0, gt=0.0,
        description="Clip gradients to this global norm before the update (None = no clipping).",
    )
    schedule: ScheduleConfig = Field(
        ScheduleConfig(),
        description="Learning-rate schedule: linear warmup, then polynomial decay.",
    )

    def build(self, total_steps: int) -> Any:
        """The Keras optimizer this section configures, for a run of ``total_steps``: built
        by the function ``builder`` names (imported now)."""
        path = type(self).builder
        if path is None:
            raise PluginError(f"{type(self).__qualname__} names no builder ('module:function') "
                              "and has no build(total_steps) of its own")
        module, _, attr = path.partition(":")
        try:
            function = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise PluginError(f"optimizer {getattr(self, 'kind', '?')!r}: cannot import {path}: "
                              f"{type(e).__name__}: {e}") from e
        return function(self, total_steps)

    build.calls_builder = True  # type: ignore[attr-defined]


class AdamFamily(OptimizerSection):
    """The Adam family's optimizers (LAMB, AdamW): the moment estimates' fields besides."""

    beta_1: float = Field(
        0.9, gt=0.0, lt=1.0, description="Decay rate of the first-moment estimate."
    )
    beta_2: float = Field(
        0.999, gt=0.0, lt=1.0, description="Decay rate of the second-moment estimate."
    )
    epsilon: float = Field(
        1e-6, gt=0.0, description="Added to the denominator for numerical stability (ALBERT: 1e-6)."
    )


class LambConfig(AdamFamily):
    """LAMB (You et al. 2020) with ALBERT semantics: decay inside the trust ratio."""

    builder: ClassVar[str | None] = "albertkit.optimizers.from_config:lamb"
    kind: Literal["lamb"] = Field("lamb", description="Selects LAMB.")
    learning_rate: float = Field(
        0.00176, gt=0.0,
        description="Peak learning rate (reference recipe: 0.00176 at global batch 4096).",
    )
    exclude_from_layer_adaptation: list[str] | None = Field(
        None,
        description="Variables without the layer-wise trust ratio (None = as for weight decay).",
    )


class AdamWConfig(AdamFamily):
    """AdamW (Loshchilov & Hutter) as in BERT/ALBERT: decay excluded for LayerNorm and bias."""

    builder: ClassVar[str | None] = "albertkit.optimizers.from_config:adamw"
    kind: Literal["adamw"] = Field("adamw", description="Selects AdamW.")


# The built-in kinds (the type checkers' view); a config accepts every registered optimizer.
OptimizerConfig = Annotated[LambConfig | AdamWConfig, Field(discriminator="kind")]
"""The ``optimizer`` section: LAMB or AdamW, chosen by its ``kind`` field."""
