"""ALBERT with a per-token classifier, as transformers' ``AlbertForTokenClassification``.

The same layers, names and math as the PyTorch class: the encoder without pooler, dropout
(``classifier_dropout_prob``), one linear layer over every position's hidden state. It
implements albertkit's ``HFExportable`` (``hf_architectures``, ``hf_head_weights``), so
``albertkit export --format hf`` writes a directory that
``AlbertForTokenClassification.from_pretrained`` loads, and ``model.load_from`` fills its
encoder from a pretraining run or a Hugging Face checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
from keras import ops

from albertkit.config import AlbertSpec
from albertkit.models import AlbertEncoder


@keras.saving.register_keras_serializable(package="albertkit_tagging")
class SeededDropout(keras.layers.Layer):
    """Dropout whose random state has the same variable path in every model built.

    ``keras.layers.Dropout`` names its seed generator by a process-wide counter
    (``seed_generator_7``), so the path of that state, which is a key of albertkit's
    checkpoints, would depend on how many models the process built before: a checkpoint
    written by one process would not load in another. Created in ``build`` under the layer's
    own name, it is ``.../dropout/seed_generator/seed_generator_state`` every time.
    """

    def __init__(self, rate: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rate = float(rate)
        self.seed_generator = None

    def build(self, input_shape: Any = None) -> None:
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(name="seed_generator")
        self.built = True

    def call(self, x: Any, training: bool = False) -> Any:
        if training and self.seed_generator is not None:
            return keras.random.dropout(x, self.rate, seed=self.seed_generator)
        return x

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rate": self.rate}


@keras.saving.register_keras_serializable(package="albertkit_tagging")
class AlbertForTokenClassification(keras.Model):
    """The ALBERT encoder and a linear tag classifier at every position.

    Output: ``logits`` ``[B, T, num_labels]`` (float32).

    Args:
        spec: the encoder's architecture.
        num_labels: how many tags.
        label_names: the tag names in label-id order (written to the export's ``id2label``).
        dtype: a Keras dtype policy name (``runtime.precision``) or None.
        remat: the encoder's rematerialisation mode (``runtime.remat``).
    """

    hf_architectures = ("AlbertForTokenClassification",)

    def __init__(self, spec: AlbertSpec, num_labels: int,
                 label_names: Sequence[str] | None = None, dtype: Any = None,
                 remat: str | bool = "none", name: str = "albert_for_token_classification",
                 **kwargs: Any) -> None:
        super().__init__(name=name, dtype=dtype, **kwargs)
        if label_names is not None and len(label_names) != num_labels:
            raise ValueError(f"label_names has {len(label_names)} names for "
                             f"num_labels={num_labels}")
        self.spec = spec
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None
        self.albert = AlbertEncoder(spec, dtype=self.dtype_policy, add_pooling_layer=False,
                                    name="albert", remat=remat)
        self.dropout = SeededDropout(spec.classifier_dropout_prob, name="dropout",
                                     dtype=self.dtype_policy)
        self.classifier = keras.layers.Dense(
            num_labels, name="classifier", dtype=self.dtype_policy,
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=spec.initializer_range))

    def build(self, input_shape: Any = None) -> None:
        self.albert.build()
        self.dropout.build()
        self.classifier.build((None, None, self.spec.hidden_size))
        self.built = True

    def call(self, inputs: dict[str, Any], training: bool = False) -> dict[str, Any]:
        hidden = self.albert(inputs, training=training)["sequence_output"]
        logits = self.classifier(self.dropout(hidden, training=training))
        return {"logits": ops.cast(logits, "float32")}

    def build_for(self, seq_length: int = 8) -> dict[str, Any]:
        """Create every variable with a one-example batch of zeros; returns its outputs."""
        ids = ops.zeros((1, seq_length), "int32")
        return self({"input_ids": ids, "input_mask": ops.ones_like(ids), "segment_ids": ids})

    def hf_head_weights(self) -> dict[str, tuple[Any, bool]]:
        """The classifier under transformers' names (the kernel transposed)."""
        return {"classifier.weight": (self.classifier.kernel, True),
                "classifier.bias": (self.classifier.bias, False)}

    def get_config(self) -> dict[str, Any]:
        return {"spec": self.spec.model_dump(), "num_labels": self.num_labels,
                "label_names": self.label_names, "dtype": self.dtype_policy.name,
                "remat": self.albert.remat, "name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> AlbertForTokenClassification:
        config = dict(config)
        return cls(AlbertSpec(**config.pop("spec")), **config)
