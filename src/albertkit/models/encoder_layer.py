"""The ALBERT encoder as one Keras layer, for models that albertkit does not build.

:class:`AlbertEncoderLayer` wraps :class:`~albertkit.models.albert.AlbertEncoder` so that it
can sit in anyone's functional or subclassed Keras model, train there with ``model.fit``,
and be saved and loaded in the ``.keras`` format. It starts from a spec (random weights),
from an albertkit run (:meth:`~AlbertEncoderLayer.from_run`), from a Hugging Face ALBERT
directory (:meth:`~AlbertEncoderLayer.from_hf`) or from an albertkit model already in memory
(:meth:`~AlbertEncoderLayer.from_model`).

Its config is the architecture (the spec), the dtype policy and the remat mode, never the
weights: a ``.keras`` file stores those itself, so a loaded model needs neither the run nor
the Hugging Face directory it started from. The class is registered with Keras under
``albertkit>AlbertEncoderLayer`` when this module is imported (``from albertkit.models import
AlbertEncoderLayer`` imports it); ``import albertkit`` alone does not, because it does not
import TensorFlow.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import keras

from albertkit.config.sizes import SIZES, AlbertSpec
from albertkit.models.albert import AlbertEncoder
from albertkit.models.hf import hf_weight_map, load_hf_weights, spec_from_hf_config
from albertkit.models.options import RematMode

# albertkit's input names, and the Hugging Face names accepted for the same tensors.
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
HF_INPUT_NAMES = {"attention_mask": "input_mask", "token_type_ids": "segment_ids"}


def _as_spec(spec: AlbertSpec | Mapping[str, Any] | str) -> AlbertSpec:
    if isinstance(spec, AlbertSpec):
        return spec
    if isinstance(spec, str):
        if spec not in SIZES:
            raise ValueError(f"spec={spec!r}: not a size preset (choose one of {list(SIZES)})")
        return AlbertSpec(**SIZES[spec])
    if isinstance(spec, Mapping):
        return AlbertSpec(**spec)
    raise TypeError(f"spec must be an AlbertSpec, a mapping of its fields or a size name, "
                    f"got {type(spec).__name__}")


def _encoder_inputs(inputs: Any) -> dict[str, Any]:
    """``inputs`` under albertkit's names: a dict with ``input_ids`` and optionally
    ``input_mask`` (or ``attention_mask``) and ``segment_ids`` (or ``token_type_ids``), or a
    single ``input_ids`` tensor."""
    if not isinstance(inputs, Mapping):
        return {"input_ids": inputs}
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        name = HF_INPUT_NAMES.get(key, key)
        if name not in INPUT_NAMES:
            raise ValueError(
                f"AlbertEncoderLayer: unknown input {key!r}; expected input_ids, input_mask "
                "(or attention_mask) and segment_ids (or token_type_ids)")
        if name in out:
            raise ValueError(f"AlbertEncoderLayer: input {name!r} given twice (as {name!r} "
                             "and under its Hugging Face name); give it once")
        out[name] = value
    if "input_ids" not in out:
        raise ValueError(f"AlbertEncoderLayer: the inputs have no 'input_ids' "
                         f"(got {sorted(inputs)})")
    return out


@keras.saving.register_keras_serializable(package="albertkit")
class AlbertEncoderLayer(keras.layers.Layer):
    """The ALBERT encoder as a Keras layer: token ids in, contextual vectors out.

    Inputs: a dict of int tensors [B, T]: ``input_ids``, and optionally ``input_mask``
    (1 for real tokens, 0 for padding; default all ones) and ``segment_ids`` (default all
    zeros). The Hugging Face names ``attention_mask`` and ``token_type_ids`` are accepted
    too, and a single tensor is taken as ``input_ids``. Outputs: a dict with
    ``sequence_output`` [B, T, H] and ``pooled_output`` [B, H] (the tanh pooler on the first
    token; absent with ``add_pooling_layer=False``), in the layer's compute dtype.

    ``trainable=False`` (or setting ``layer.trainable = False`` before ``compile``) freezes
    every encoder weight. ``get_config`` holds the spec, not the weights: the ``.keras``
    format saves the weights beside it.

    Args:
        spec: the architecture: an ``AlbertSpec``, a mapping of its fields, or a size
            preset name (``"base"``, ``"large"``...).
        add_pooling_layer: build the pooler and return ``pooled_output``.
        remat: what training recomputes instead of keeping (``"none"``, ``"selective"``,
            ``"full"``; see :class:`~albertkit.models.albert.AlbertEncoder`).
        **kwargs: Keras layer arguments: ``name``, ``trainable``, ``dtype`` (a dtype policy:
            ``"float32"``, ``"mixed_float16"``, ``"mixed_bfloat16"``).

    Example:
        >>> import numpy as np
        >>> spec = AlbertSpec(vocab_size=101, embedding_size=16, hidden_size=32,
        ...                   num_hidden_layers=2, num_attention_heads=2,
        ...                   intermediate_size=64, max_position_embeddings=64)
        >>> layer = AlbertEncoderLayer(spec)
        >>> out = layer({"input_ids": np.ones((2, 8), "int32"),
        ...              "attention_mask": np.ones((2, 8), "int32")})
        >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
        ((2, 8, 32), (2, 32))
        >>> AlbertEncoderLayer.from_config(layer.get_config()).spec == spec
        True
    """

    def __init__(
        self,
        spec: AlbertSpec | Mapping[str, Any] | str,
        add_pooling_layer: bool = True,
        remat: RematMode | bool = "none",
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.spec = _as_spec(spec)
        self.add_pooling_layer = bool(add_pooling_layer)
        self.encoder = AlbertEncoder(
            self.spec, dtype=self.dtype_policy, add_pooling_layer=self.add_pooling_layer,
            name="albert", remat=remat,
        )
        if not self.trainable:
            # Keras hands trainable=False to this layer only; the encoder's variables, made
            # later, take their flag from the layer that makes them.
            self.encoder.trainable = False

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_model(cls, model: Any, **kwargs: Any) -> AlbertEncoderLayer:
        """A layer with the architecture and encoder weights of an albertkit model (an
        ``AlbertEncoder`` or any task model: pretraining, question answering,
        classification). Task heads are left out. ``kwargs`` go to the constructor.

        A model without a pooler (question answering) leaves this layer's pooler at its
        initialisation, with a warning; pass ``add_pooling_layer=False`` to go without one.
        """
        source = model if isinstance(model, AlbertEncoder) else getattr(model, "albert", None)
        if not isinstance(source, AlbertEncoder):
            raise TypeError(f"not an albertkit ALBERT model: {type(model).__name__}")
        layer = cls(source.spec, **kwargs)
        layer.build()
        have = hf_weight_map(source)
        missing = []
        for name, (variable, _) in hf_weight_map(layer.encoder).items():
            if name in have:
                variable.assign(have[name][0].numpy())
            else:
                missing.append(name)
        if missing:
            warnings.warn(
                f"{type(model).__name__} has no weights for {', '.join(missing)} (it has no "
                "pooler): pooled_output comes from an untrained pooler; pass "
                "add_pooling_layer=False to leave it out", UserWarning, stacklevel=2)
        return layer

    @classmethod
    def from_run(cls, run_dir: str | os.PathLike, checkpoint: str | int = "newest",
                 **kwargs: Any) -> AlbertEncoderLayer:
        """The encoder of an albertkit run (or of an albertkit export) with the weights of its
        ``checkpoint``: ``"newest"`` (the default), ``"best"`` or a step number. Raises in
        one line naming the path when ``run_dir`` is not a run or holds no usable checkpoint.
        ``kwargs`` go to the constructor."""
        # A documented convenience that reaches up a layer (lazily): reading a run's config
        # and choosing among its checkpoints belongs to albertkit.training.
        from albertkit.training.export import load_run_model

        _, model = load_run_model(run_dir, checkpoint)
        return cls.from_model(model, **kwargs)

    @classmethod
    def from_hf(cls, hf_dir: str | os.PathLike, **kwargs: Any) -> AlbertEncoderLayer:
        """The encoder of a Hugging Face ALBERT directory (``config.json`` and
        ``model.safetensors``; a ``pytorch_model.bin`` pickle is refused). Raises in one line
        naming the file when the directory is not an ALBERT checkpoint. ``kwargs`` go to the
        constructor."""
        layer = cls(spec_from_hf_config(hf_dir), **kwargs)
        layer.build()
        load_hf_weights(layer.encoder, hf_dir)
        return layer

    # ------------------------------------------------------------------ Keras
    def build(self, input_shape: Any = None) -> None:
        self.encoder.build()
        self.built = True

    def call(self, inputs: Any, training: bool | None = None) -> dict[str, Any]:
        return self.encoder(_encoder_inputs(inputs), training=bool(training))

    def compute_output_spec(self, inputs: Any, training: bool | None = None) -> dict[str, Any]:
        ids = _encoder_inputs(inputs)["input_ids"]
        if len(ids.shape) != 2:
            raise ValueError(f"AlbertEncoderLayer: input_ids must be [batch, length], got "
                             f"shape {tuple(ids.shape)}")
        batch, length, width = ids.shape[0], ids.shape[1], self.spec.hidden_size
        out = {"sequence_output": keras.KerasTensor((batch, length, width), self.compute_dtype)}
        if self.add_pooling_layer:
            out["pooled_output"] = keras.KerasTensor((batch, width), self.compute_dtype)
        return out

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "dtype": self.dtype_policy.name,  # as every albertkit model's config holds it
            "spec": self.spec.model_dump(),
            "add_pooling_layer": self.add_pooling_layer,
            "remat": self.encoder.remat,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> AlbertEncoderLayer:
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(AlbertSpec(**config.pop("spec")), **config)
