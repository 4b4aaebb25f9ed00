"""Optimizers with Google ALBERT's semantics, as Keras 3 optimizers.

The public names (``__all__``) are importable from here: ``from albertkit.optimizers import
Lamb``. Each is imported on first use (they import Keras and TensorFlow).

* :mod:`albertkit.optimizers.lamb` -- LAMB (the pretraining optimizer);
* :mod:`albertkit.optimizers.adamw` -- AdamW with BERT's weight decay (fine-tuning);
* :mod:`albertkit.optimizers.schedules` -- linear warmup, then polynomial decay.

The config's optimizer section builds them through :mod:`albertkit.optimizers.from_config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.optimizers.adamw import AdamW
    from albertkit.optimizers.lamb import Lamb
    from albertkit.optimizers.schedules import WarmupPolynomialDecay

__all__ = ["AdamW", "Lamb", "WarmupPolynomialDecay"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "AdamW": "adamw",
    "Lamb": "lamb",
    "WarmupPolynomialDecay": "schedules",
})
