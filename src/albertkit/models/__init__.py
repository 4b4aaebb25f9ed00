"""ALBERT in Keras 3 and what describes it.

The public names (``__all__``) are importable from here: ``from albertkit.models import
AlbertForPretraining, model_from_hf``. Each is imported on first use (the model classes
import Keras and TensorFlow).

* :mod:`albertkit.models.albert` -- the Keras 3 model: embeddings, encoder, the three heads;
* :mod:`albertkit.models.multiple_choice` -- the multiple-choice head (one score per choice);
* :mod:`albertkit.models.layers` -- its LayerNorm and Dropout layers;
* :mod:`albertkit.models.kernels` -- activations and the custom-gradient kernels (GELU,
  LayerNorm, cross-entropy, the attention core);
* :mod:`albertkit.models.precision` -- mixed-precision plumbing (shared weights cast once);
* :mod:`albertkit.models.options` -- ``RematMode`` and the activations fused into kernels;
* :mod:`albertkit.models.footprint` -- parameter count and training-memory estimate;
* :mod:`albertkit.models.hf` -- Hugging Face checkpoint import and export (a model of
  your own joins them by implementing :class:`HFExportable`);
* :mod:`albertkit.models.encoder_layer` -- the encoder as a Keras layer for your own models
  (:class:`AlbertEncoderLayer`, importable from here).

The architecture description and the size presets (``AlbertSpec``, ``SIZES``) are in
:mod:`albertkit.config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.models.albert import (
        AlbertEncoder,
        AlbertForPretraining,
        AlbertForQuestionAnswering,
        AlbertForSequenceClassification,
    )
    from albertkit.models.encoder_layer import AlbertEncoderLayer
    from albertkit.models.footprint import MemoryEstimate, estimate_memory, parameter_count
    from albertkit.models.hf import (
        HFExportable,
        HFImportWarning,
        export_to_hf,
        load_hf_weights,
        model_from_hf,
        spec_from_hf_config,
    )
    from albertkit.models.multiple_choice import AlbertForMultipleChoice

__all__ = [
    "AlbertEncoder",
    "AlbertEncoderLayer",
    "AlbertForMultipleChoice",
    "AlbertForPretraining",
    "AlbertForQuestionAnswering",
    "AlbertForSequenceClassification",
    "HFExportable",
    "HFImportWarning",
    "MemoryEstimate",
    "estimate_memory",
    "export_to_hf",
    "load_hf_weights",
    "model_from_hf",
    "parameter_count",
    "spec_from_hf_config",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "AlbertEncoder": "albert",
    "AlbertEncoderLayer": "encoder_layer",
    "AlbertForMultipleChoice": "multiple_choice",
    "AlbertForPretraining": "albert",
    "AlbertForQuestionAnswering": "albert",
    "AlbertForSequenceClassification": "albert",
    "HFExportable": "hf",
    "HFImportWarning": "hf",
    "MemoryEstimate": "footprint",
    "estimate_memory": "footprint",
    "export_to_hf": "hf",
    "load_hf_weights": "hf",
    "model_from_hf": "hf",
    "parameter_count": "footprint",
    "spec_from_hf_config": "hf",
})
