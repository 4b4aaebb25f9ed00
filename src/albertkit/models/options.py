"""Options of albertkit's ALBERT that the model and its memory planner
(:mod:`albertkit.models.footprint`) both read; no TensorFlow import.
"""

from __future__ import annotations

from typing import Literal

# The activations that run as one fused kernel each way
# (:func:`albertkit.models.kernels.fused_activation`, which asserts it has exactly these):
# the memory planner counts what their backward pass keeps.
FUSED_ACTIVATIONS = frozenset({"gelu", "gelu_new", "gelu_fast"})

# What the backward pass recomputes instead of keeping (gradient checkpointing): "none"
# keeps what autodiff asks for; "selective" recomputes, in each layer, the attention core
# (T x T scores and probabilities) and the FFN activation's elementwise intermediates, which
# dominate activation memory for a few percent of the FLOPs (Korthikanti et al. 2022,
# https://arxiv.org/abs/2205.05198, recompute the attention core the same way); "full"
# recomputes each transformer-layer application from its input.
RematMode = Literal["none", "selective", "full"]
REMAT_MODES: tuple[str, ...] = ("none", "selective", "full")


def remat_mode(value: RematMode | bool) -> RematMode:
    """``value`` as a :data:`RematMode`; True means "full" and False "none" (albertkit 0.1).

    Example:
        >>> remat_mode(True), remat_mode("selective")
        ('full', 'selective')
    """
    if value is True or value is False:
        return "full" if value else "none"
    if value not in REMAT_MODES:
        raise ValueError(f"remat={value!r}; expected one of {', '.join(REMAT_MODES)}")
    return value
