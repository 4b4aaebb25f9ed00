"""ALBERT in Keras 3 and what describes it.

* :mod:`albertkit.models.albert` -- the Keras 3 model (only this module imports TensorFlow);
* :mod:`albertkit.models.footprint` -- parameter count and training-memory estimate;
* :mod:`albertkit.models.hf` -- Hugging Face checkpoint import and export.

The architecture description and the size presets are :mod:`albertkit.config.sizes`.
"""
