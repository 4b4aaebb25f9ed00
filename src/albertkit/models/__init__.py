"""ALBERT in Keras 3 and what describes it.

* :mod:`albertkit.models.albert` -- the Keras 3 model: embeddings, encoder, the three heads;
* :mod:`albertkit.models.layers` -- its LayerNorm and Dropout layers;
* :mod:`albertkit.models.kernels` -- activations and the custom-gradient kernels (GELU,
  LayerNorm, cross-entropy, the attention core);
* :mod:`albertkit.models.precision` -- mixed-precision plumbing (shared weights cast once);
* :mod:`albertkit.models.options` -- ``RematMode`` and the activations fused into kernels;
* :mod:`albertkit.models.footprint` -- parameter count and training-memory estimate;
* :mod:`albertkit.models.hf` -- Hugging Face checkpoint import and export.

The architecture description and the size presets are :mod:`albertkit.config.sizes`.
"""
