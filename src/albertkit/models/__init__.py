"""ALBERT in Keras 3 and what describes it.

* :mod:`albertkit.models.albert` -- the Keras 3 model: embeddings, encoder, the three heads;
* :mod:`albertkit.models.layers` -- its LayerNorm and Dropout layers;
* :mod:`albertkit.models.kernels` -- activations and the custom-gradient kernels (GELU,
  LayerNorm, cross-entropy, the attention core);
* :mod:`albertkit.models.precision` -- mixed-precision plumbing (shared weights cast once);
* :mod:`albertkit.models.options` -- ``RematMode`` and the activations fused into kernels;
* :mod:`albertkit.models.footprint` -- parameter count and training-memory estimate;
* :mod:`albertkit.models.hf` -- Hugging Face checkpoint import and export;
* :mod:`albertkit.models.encoder_layer` -- the encoder as a Keras layer for your own models
  (:class:`AlbertEncoderLayer`, importable from here).

The architecture description and the size presets are :mod:`albertkit.config.sizes`.
"""

__all__ = ["AlbertEncoderLayer"]


def __getattr__(name: str) -> object:
    # Imported on first use: the layer pulls in TensorFlow, and the light modules of this
    # package (the memory estimate, the remat modes) are imported where TensorFlow must not be.
    if name == "AlbertEncoderLayer":
        from albertkit.models.encoder_layer import AlbertEncoderLayer

        return AlbertEncoderLayer
    raise AttributeError(f"module 'albertkit.models' has no attribute {name!r}")
