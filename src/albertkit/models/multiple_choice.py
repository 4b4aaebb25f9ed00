"""ALBERT for multiple choice: one shared score per choice (transformers'
``AlbertForMultipleChoice``, google-research/albert ``race_utils.create_model``)."""

from __future__ import annotations

from typing import Any

from keras import ops

from albertkit.config.sizes import AlbertSpec
from albertkit.models.albert import Inputs, _AlbertHeadModel, _dense, _dummy_batch, _hf_dense
from albertkit.models.layers import Dropout
from albertkit.models.precision import as_float32


class AlbertForMultipleChoice(_AlbertHeadModel):
    """ALBERT scoring each choice of an example with one shared head on the pooled output.

    Inputs: ``input_ids``, ``input_mask``, ``segment_ids`` [B, C, T] (C choices per
    example). The C sequences of every example go through the encoder as B x C rows; dropout
    and a one-unit dense layer on each pooled output give its score. Output: ``logits``
    [B, C] (float32), to be soft-maxed over the choices, exactly as transformers'
    ``AlbertForMultipleChoice`` (which this exports to). Padded choices are the task's
    business (it masks their scores).

    Example:
        >>> from albertkit.config import ModelConfig
        >>> model = AlbertForMultipleChoice(ModelConfig(size="tiny").spec)
        >>> tuple(model.build_for(seq_length=16, num_choices=4)["logits"].shape)
        (1, 4)
    """

    def __init__(
        self,
        spec: AlbertSpec,
        dtype: Any = None,
        name: str = "albert_for_multiple_choice",
        **kwargs: Any,
    ):
        super().__init__(spec, dtype, name, **kwargs)
        dt = self.dtype_policy
        self.dropout = Dropout(spec.classifier_dropout_prob, name="dropout", dtype=dt)
        self.classifier = _dense(spec, 1, "classifier", dt)

    def build(self, input_shape: Any = None) -> None:
        self.albert.build()
        self.dropout.build()
        self.classifier.build((None, self.spec.hidden_size))
        self.built = True

    def call(self, inputs: Inputs, training: bool = False) -> dict[str, Any]:
        shape = ops.shape(inputs["input_ids"])  # [B, C, T]
        flat = {k: ops.reshape(inputs[k], (-1, shape[-1]))
                for k in ("input_ids", "input_mask", "segment_ids")}
        enc = self.albert(flat, training=training)
        scores = self.classifier(self.dropout(enc["pooled_output"], training=training))
        return as_float32({"logits": ops.reshape(scores, (shape[0], shape[1]))})

    def build_for(self, seq_length: int = 8, max_predictions: int | None = None,
                  num_choices: int = 2) -> dict[str, Any]:
        batch = {k: ops.expand_dims(v, 1) for k, v in _dummy_batch(seq_length).items()}
        return self({k: ops.repeat(v, num_choices, axis=1) for k, v in batch.items()})

    hf_architectures = ("AlbertForMultipleChoice", "AlbertModel")

    def hf_head_weights(self) -> dict[str, tuple[Any, bool]]:
        """The scoring layer's weights by Hugging Face name (see ``HFExportable``)."""
        return _hf_dense("classifier", self.classifier)
