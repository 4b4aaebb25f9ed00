"""Optimizers with Google ALBERT's semantics, as Keras 3 optimizers.

* :mod:`albertkit.optimizers.lamb` -- LAMB (the pretraining optimizer);
* :mod:`albertkit.optimizers.adamw` -- AdamW with BERT's weight decay (fine-tuning);
* :mod:`albertkit.optimizers.schedules` -- linear warmup, then polynomial decay.

The config's optimizer section builds them (:mod:`albertkit.config.sections`).
"""
