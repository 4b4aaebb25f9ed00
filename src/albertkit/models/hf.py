"""Hugging Face interop: import and export ALBERT checkpoint directories.

A Hugging Face directory holds ``config.json`` (an ``AlbertConfig``), ``model.safetensors``
(or shards listed in ``model.safetensors.index.json``) and the tokenizer files
(``spiece.model``, ``tokenizer_config.json``, ``special_tokens_map.json``,
``tokenizer.json``). Only safetensors are read: ``pytorch_model.bin`` is a pickle, and
unpickling runs arbitrary code, so it is refused with a conversion hint.

Names and layouts (transformers v5, ``models/albert/modeling_albert.py``): PyTorch
``nn.Linear.weight`` is ``[out, in]`` while a Keras ``Dense`` kernel is ``[in, out]``, so
dense kernels are transposed both ways; LayerNorm ``weight``/``bias`` are Keras
``gamma``/``beta``; the MLM decoder weight is tied to the word embeddings and HF saves only
``predictions.bias`` for it. Values are copied as float32 without arithmetic, so import then
export reproduces every tensor bit for bit.

Nothing here imports ``transformers`` or ``torch``: a TensorFlow training process that loads
PyTorch as well risks clashing CUDA libraries. ``config.json`` is read and written as JSON;
missing fields take ``AlbertConfig``'s defaults (``_HF_DEFAULTS``, checked against
transformers by the tests).

Example (export a tiny question-answering model, then import it back):
    >>> spec = AlbertSpec(vocab_size=101, embedding_size=16, hidden_size=32,
    ...                   num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
    ...                   max_position_embeddings=64)
    >>> qa = AlbertForQuestionAnswering(spec)
    >>> _ = qa.build_for(seq_length=8)
    >>> out = export_to_hf(qa, "albert-qa")
    >>> sorted(path.name for path in out.iterdir())
    ['.albertkit-export.json', 'config.json', 'model.safetensors']
    >>> json.loads((out / "config.json").read_text())["architectures"]
    ['AlbertForQuestionAnswering']
    >>> back = model_from_hf("albert-qa", "question_answering")
    >>> back.spec == spec, all(np.array_equal(a, b)
    ...                        for a, b in zip(qa.get_weights(), back.get_weights()))
    (True, True)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import ValidationError

from albertkit.config.sizes import AlbertSpec
from albertkit.fileio import read_json, replace_dir, temp_dir_beside, write_synced
from albertkit.models.albert import (
    AlbertEncoder,
    AlbertForPretraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
)
from albertkit.models.hf_files import (  # noqa: F401 - re-exported names of this module
    PICKLE_FILES,
    WEIGHTS_FILE,
    WEIGHTS_INDEX_FILE,
    _normalise_hf_names,
    _read_bf16,
    _shard_path,
    _weight_files,
    read_safetensors,
)
from albertkit.models.multiple_choice import AlbertForMultipleChoice

logger = logging.getLogger(__name__)

AlbertModelLike = (
    AlbertEncoder
    | AlbertForPretraining
    | AlbertForQuestionAnswering
    | AlbertForSequenceClassification
    | AlbertForMultipleChoice
    | Any  # any HFExportable model (a plugin's)
)
# The built-in models' HF classes; an HFExportable model names its own (``hf_architectures``).
Architecture = Literal[
    "AlbertForPreTraining",
    "AlbertForMaskedLM",
    "AlbertForQuestionAnswering",
    "AlbertForSequenceClassification",
    "AlbertForMultipleChoice",
    "AlbertModel",
] | str
ModelKind = Literal["pretraining", "question_answering", "classification", "multiple_choice",
                    "encoder"]

CONFIG_FILE = "config.json"
# Written into every export: only a directory holding it may be replaced by a new export.
EXPORT_MARKER = ".albertkit-export.json"
TOKENIZER_FILES = (
    "spiece.model",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "albertkit_tokenizer.json",  # albertkit's record (the language); transformers ignores it
)

# transformers.AlbertConfig defaults (configuration_albert.py, v5): a config.json that omits
# a field means this value. Not AlbertSpec's defaults (those are ALBERT-base, HF's are xxlarge).
_HF_DEFAULTS: dict[str, Any] = {
    "vocab_size": 30000,
    "embedding_size": 128,
    "hidden_size": 4096,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "num_attention_heads": 64,
    "intermediate_size": 16384,
    "inner_group_num": 1,
    "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "classifier_dropout_prob": 0.1,
    "pad_token_id": 0,
    "bos_token_id": 2,
    "eos_token_id": 3,
}
_SPEC_FIELDS = [f for f in AlbertSpec.model_fields if f != "pre_layer_norm"]
# Fields that change the function the weights compute (dropouts and init do not).
_ARCH_FIELDS = [
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "hidden_act",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
]


class HFImportWarning(UserWarning):
    """Weights the model needs that the Hugging Face checkpoint lacks (left initialised)."""


# --------------------------------------------------------------------------- config
def _read_config(hf_dir: Path) -> dict[str, Any]:
    path = hf_dir / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{hf_dir}: no {CONFIG_FILE}: not a Hugging Face model directory")
    raw = read_json(path, "Hugging Face model config", ValueError)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: top level must be a JSON object")
    if raw.get("model_type") != "albert":
        raise ValueError(f"{path}: model_type={raw.get('model_type')!r}, expected 'albert'")
    pos = raw.get("position_embedding_type", "absolute")
    if pos != "absolute":
        raise ValueError(
            f"{path}: position_embedding_type={pos!r}: only 'absolute' positions are supported"
        )
    return raw


def spec_from_hf_config(hf_dir: str | os.PathLike) -> AlbertSpec:
    """The ``AlbertSpec`` of a Hugging Face ALBERT directory's ``config.json``."""
    hf_dir = Path(hf_dir)
    raw = _read_config(hf_dir)
    values = {f: raw.get(f, _HF_DEFAULTS[f]) for f in _SPEC_FIELDS}
    try:
        return AlbertSpec(**values)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "config"
        raise ValueError(
            f"{hf_dir / CONFIG_FILE}: {field}={err.get('input')!r}: "
            f"{err['msg'].removeprefix('Value error, ')}"
        ) from None


def hf_num_labels(hf_dir: str | os.PathLike) -> int:
    """``num_labels`` of a Hugging Face config (from ``id2label``; HF's default is 2)."""
    raw = _read_config(Path(hf_dir))
    if isinstance(raw.get("id2label"), dict):
        return len(raw["id2label"])
    return int(raw.get("num_labels", 2))


def hf_config_dict(
    spec: AlbertSpec, architecture: Architecture, id2label: dict[int, str] | None = None
) -> dict[str, Any]:
    """The ``config.json`` content for ``spec`` (what ``AlbertConfig.to_dict`` would hold)."""
    if spec.pre_layer_norm:
        raise ValueError(_PRE_LN_MESSAGE)
    config: dict[str, Any] = {"architectures": [architecture], "model_type": "albert"}
    config.update({k: v for k, v in _HF_DEFAULTS.items() if k not in _SPEC_FIELDS})
    config.update(spec.model_dump(include=set(_SPEC_FIELDS)))
    config["tie_word_embeddings"] = True
    config["dtype"] = "float32"
    if id2label is not None:
        config["id2label"] = {str(i): str(n) for i, n in sorted(id2label.items())}
        config["label2id"] = {str(n): int(i) for i, n in sorted(id2label.items())}
        if len(id2label) == 1:
            config["problem_type"] = "regression"
    return dict(sorted(config.items()))


_PRE_LN_MESSAGE = (
    "model has pre_layer_norm=True: Hugging Face's ALBERT is post-LayerNorm only, so a pre-LN "
    "model has no Hugging Face equivalent and cannot be exported to or imported from that "
    "format (keep it as an albertkit checkpoint)"
)


# --------------------------------------------------------------------------- name mapping
@runtime_checkable
class HFExportable(Protocol):
    """What a Keras model needs for Hugging Face export and import: an ALBERT encoder, the
    Hugging Face classes it can be written as, and its head's weights by Hugging Face name.

    albertkit's own task models implement it (``AlbertForPretraining``,
    ``AlbertForQuestionAnswering``, ``AlbertForSequenceClassification``,
    ``AlbertForMultipleChoice``), and so may a
    plugin's (a model for a task albertkit does not have): :func:`export_to_hf`,
    :func:`load_hf_weights` and ``model.load_from`` then treat it exactly as the built-ins.

    A model need not be built: :func:`load_hf_weights`, :func:`export_to_hf` and
    ``model.load_from`` build an unbuilt one with its ``build_for(seq_length)`` method if
    it has one (albertkit's models do), else by calling it on a one-example batch of
    ``input_ids``, ``input_mask`` and ``segment_ids`` of 8 tokens; a model that takes other
    inputs defines ``build_for`` (or is built before). No argument-free ``build()`` is
    needed.

    Attributes:
        spec: the encoder's architecture (an :class:`~albertkit.config.AlbertSpec`).
        albert: the :class:`~albertkit.models.AlbertEncoder` (its weights get the
            ``albert.`` names of every Hugging Face ALBERT task class).
        hf_architectures: the ``transformers`` class names the model can be exported as
            (``config.json``'s ``architectures``), the default first. ``AlbertModel`` means
            the encoder alone; any other name holds every weight the map names.
        num_labels: optional; a model with an ``int`` ``num_labels`` gets ``id2label`` and
            ``label2id`` in ``config.json`` (names from ``export_to_hf(id2label=...)``, else
            the model's ``label_names`` if it has them, else ``LABEL_i``).

    Example (a token-classification head that transformers' ``AlbertForTokenClassification``
    loads; the plugin in ``examples/plugins/albertkit-tagging`` trains one):
        >>> import keras
        >>> class Tagger(keras.Model):
        ...     hf_architectures = ("AlbertForTokenClassification",)
        ...     def __init__(self, spec, num_labels):
        ...         super().__init__()
        ...         self.spec, self.num_labels = spec, num_labels
        ...         self.albert = AlbertEncoder(spec, add_pooling_layer=False)
        ...         self.classifier = keras.layers.Dense(num_labels, name="classifier")
        ...     def call(self, inputs):
        ...         return {"logits": self.classifier(self.albert(inputs)["sequence_output"])}
        ...     def hf_head_weights(self):
        ...         return {"classifier.weight": (self.classifier.kernel, True),
        ...                 "classifier.bias": (self.classifier.bias, False)}
        >>> spec = AlbertSpec(vocab_size=101, embedding_size=16, hidden_size=32,
        ...                   num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        ...                   max_position_embeddings=64)
        >>> tagger = Tagger(spec, num_labels=3)
        >>> isinstance(tagger, HFExportable)
        True
        >>> out = export_to_hf(tagger, "tagger-hf")  # built here: it was not yet
        >>> config = json.loads((out / "config.json").read_text())
        >>> config["architectures"], config["id2label"]
        (['AlbertForTokenClassification'], {'0': 'LABEL_0', '1': 'LABEL_1', '2': 'LABEL_2'})
        >>> again = Tagger(spec, num_labels=3)  # unbuilt: load_hf_weights builds it
        >>> load_hf_weights(again, out)
        []
        >>> bool(np.array_equal(again.classifier.kernel, tagger.classifier.kernel))
        True
    """

    spec: AlbertSpec
    albert: AlbertEncoder
    hf_architectures: ClassVar[tuple[str, ...]]

    def hf_head_weights(self) -> dict[str, tuple[Any, bool]]:
        """The head's weights: Hugging Face state-dict name -> ``(Keras variable,
        transpose)``, ``transpose`` true for a dense kernel (Keras ``[in, out]``, PyTorch
        ``[out, in]``)."""


def build_unbuilt(model: Any, seq_length: int = 8) -> None:
    """Create ``model``'s variables: with its ``build_for(seq_length)`` if it has one (every
    albertkit model does), else by calling it on a one-example batch of ``input_ids``,
    ``input_mask`` and ``segment_ids`` (zeros, ones, zeros) of ``seq_length`` tokens.

    Raises:
        TypeError: the model has no ``build_for`` and that call fails (the message says why).
    """
    build_for = getattr(model, "build_for", None)
    if callable(build_for):
        build_for(seq_length)
        return
    ones = np.ones((1, seq_length), np.int32)
    try:
        model({"input_ids": ones * 0, "input_mask": ones, "segment_ids": ones * 0},
              training=False)
    except Exception as e:  # a model of any shape: say what was tried and how to fix it
        raise TypeError(
            f"{type(model).__name__} is not built, and calling it on a batch of input_ids, "
            f"input_mask and segment_ids [1, {seq_length}] failed ({type(e).__name__}: "
            f"{e}): build it first (call it on a batch) or give it a build_for(seq_length) "
            "method") from e


def hf_weight_map(model: AlbertModelLike) -> dict[str, tuple[Any, bool]]:
    """Map Hugging Face state-dict names to ``(keras variable, transpose)`` for ``model``.

    ``transpose`` is true for dense kernels (Keras ``[in, out]`` vs PyTorch ``[out, in]``).
    The encoder's names (under ``albert.``) come from here, the head's from the model's
    ``hf_head_weights()`` (:class:`HFExportable`), as the HF task class of the same role
    names them.
    """
    enc = model if isinstance(model, AlbertEncoder) else getattr(model, "albert", None)
    if not isinstance(enc, AlbertEncoder) or (enc is not model and not callable(
            getattr(model, "hf_head_weights", None))):
        raise TypeError(f"{type(model).__name__} is not an HFExportable model: it needs an "
                        "AlbertEncoder in .albert, hf_architectures and hf_head_weights()")
    if not model.built:
        build_unbuilt(model)
    out: dict[str, tuple[Any, bool]] = {}

    def dense(name: str, layer: Any) -> None:
        out[f"{name}.weight"] = (layer.kernel, True)
        out[f"{name}.bias"] = (layer.bias, False)

    def norm(name: str, layer: Any) -> None:
        out[f"{name}.weight"] = (layer.gamma, False)
        out[f"{name}.bias"] = (layer.beta, False)

    emb = enc.embeddings
    for table in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        out[f"albert.embeddings.{table}.weight"] = (getattr(emb, table).embeddings, False)
    norm("albert.embeddings.LayerNorm", emb.layer_norm)
    dense("albert.encoder.embedding_hidden_mapping_in", enc.embedding_hidden_mapping_in)
    for g, group in enumerate(enc.albert_layer_groups):
        for i, layer in enumerate(group.albert_layers):
            p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{i}"
            for part in ("query", "key", "value", "dense"):
                dense(f"{p}.attention.{part}", getattr(layer.attention, part))
            norm(f"{p}.attention.LayerNorm", layer.attention.layer_norm)
            dense(f"{p}.ffn", layer.ffn)
            dense(f"{p}.ffn_output", layer.ffn_output)
            norm(f"{p}.full_layer_layer_norm", layer.full_layer_layer_norm)
    if enc.pooler is not None:
        dense("albert.pooler", enc.pooler)
    if enc.final_layer_norm is not None:
        # pre-LayerNorm only: albertkit's own name (HF has no such weight; export refuses
        # pre-LN), so that the map names every weight for task-to-task initialisation.
        norm("albert.final_layer_norm", enc.final_layer_norm)
    if enc is not model:
        head = model.hf_head_weights()
        clash = sorted(set(head) & set(out))
        if clash:
            raise ValueError(f"{type(model).__name__}.hf_head_weights() names encoder "
                             f"weights: {clash}")
        out.update(head)
    return out


def _architecture_keys(model: AlbertModelLike, architecture: str) -> list[str]:
    """The HF names that ``architecture`` holds (and ``model`` can provide), in map order."""
    names = list(hf_weight_map(model))
    has_pooler = "albert.pooler.weight" in names
    allowed = tuple(getattr(model, "hf_architectures", ()))
    if architecture not in allowed:
        raise ValueError(
            f"architecture={architecture!r} cannot be exported from a {type(model).__name__} "
            f"(choose one of {list(allowed)})"
        )
    if architecture == "AlbertModel" and not has_pooler:
        raise ValueError("architecture='AlbertModel' needs the pooler: build the encoder with it")
    encoder = [n for n in names if n.startswith("albert.")]
    if architecture == "AlbertModel":
        return encoder
    if architecture == "AlbertForMaskedLM":  # HF's masked-LM model has no pooler and no SOP
        return [n for n in names if not n.startswith(("albert.pooler.", "sop_classifier."))]
    return names


def _default_architecture(model: AlbertModelLike) -> str:
    architectures = getattr(model, "hf_architectures", None)
    if not architectures or not isinstance(architectures, tuple | list):
        raise TypeError(f"not an albertkit ALBERT model (no hf_architectures): "
                        f"{type(model).__name__}")
    return str(architectures[0])


# --------------------------------------------------------------------------- import
def _check_spec_matches(model: AlbertModelLike, hf_dir: Path) -> None:
    spec = model.spec
    if spec.pre_layer_norm:
        raise ValueError(_PRE_LN_MESSAGE)
    theirs = spec_from_hf_config(hf_dir)
    diff = [
        f"{f}: model {getattr(spec, f)!r} vs checkpoint {getattr(theirs, f)!r}"
        for f in _ARCH_FIELDS
        if getattr(spec, f) != getattr(theirs, f)
    ]
    if diff:
        raise ValueError(
            f"{hf_dir / CONFIG_FILE}: the checkpoint's architecture differs from the model's: "
            + "; ".join(diff)
        )


def load_hf_weights(model: AlbertModelLike, hf_dir: str | os.PathLike) -> list[str]:
    """Copy a Hugging Face checkpoint's weights into ``model`` (built here if needed).

    The model's architecture must equal the checkpoint's ``config.json``. Weights the
    checkpoint lacks (a new task head) keep their initialisation and are listed in an
    ``HFImportWarning``; checkpoint weights the model has no use for (say the pretraining
    heads when fine-tuning) are logged at INFO level.

    Returns:
        The HF names of the model's weights that the checkpoint did not provide.
    """
    hf_dir = Path(hf_dir)
    _check_spec_matches(model, hf_dir)
    targets = hf_weight_map(model)
    tensors: dict[str, np.ndarray] = {}
    sources: dict[str, Path] = {}
    for path in _weight_files(hf_dir):
        for name, value in read_safetensors(path):
            tensors[name] = value
            sources[name] = path
    tensors = _normalise_hf_names(tensors)
    for name, (variable, transpose) in targets.items():
        if name not in tensors:
            continue
        value = tensors[name].T if transpose else tensors[name]
        if tuple(value.shape) != tuple(variable.shape):
            src = sources.get(name, hf_dir)
            raise ValueError(
                f"{src}: {name} has shape {list(tensors[name].shape)}, the model needs "
                f"{list(variable.shape)}{' (transposed)' if transpose else ''}"
            )
        variable.assign(np.ascontiguousarray(value, dtype=variable.dtype))
    missing = [n for n in targets if n not in tensors]
    unused = sorted(n for n in tensors if n not in targets)
    if missing:
        warnings.warn(
            f"{hf_dir}: the checkpoint has no weights for {len(missing)} of "
            f"{type(model).__name__}'s variables, left at their initialisation: "
            + ", ".join(missing),
            HFImportWarning,
            stacklevel=2,
        )
    if unused:
        logger.info(
            "%s: checkpoint weights not used by %s: %s",
            hf_dir,
            type(model).__name__,
            ", ".join(unused),
        )
    return missing


def model_from_hf(
    hf_dir: str | os.PathLike, kind: ModelKind, dtype: Any = None, num_labels: int | None = None
) -> AlbertModelLike:
    """Build an albertkit model of ``kind`` with the architecture and weights of ``hf_dir``.

    ``num_labels`` (classification) defaults to the checkpoint's ``id2label`` size.
    """
    spec = spec_from_hf_config(hf_dir)
    model: AlbertModelLike
    match kind:
        case "pretraining":
            model = AlbertForPretraining(spec, dtype=dtype)
        case "question_answering":
            model = AlbertForQuestionAnswering(spec, dtype=dtype)
        case "classification":
            labels = num_labels if num_labels is not None else hf_num_labels(hf_dir)
            model = AlbertForSequenceClassification(spec, labels, dtype=dtype)
        case "multiple_choice":
            model = AlbertForMultipleChoice(spec, dtype=dtype)
        case "encoder":
            model = AlbertEncoder(spec, dtype=dtype)
        case _:
            raise ValueError(
                f"kind={kind!r}: expected pretraining, question_answering, "
                "classification, multiple_choice or encoder"
            )
    load_hf_weights(model, hf_dir)
    return model


def hf_tokenizer_files(hf_dir: str | os.PathLike) -> list[Path]:
    """The tokenizer files present in ``hf_dir`` (empty if it holds no tokenizer)."""
    hf_dir = Path(hf_dir)
    return [hf_dir / f for f in TOKENIZER_FILES if (hf_dir / f).is_file()]


# --------------------------------------------------------------------------- export
def hf_state_dict(
    model: AlbertModelLike, architecture: Architecture | None = None
) -> dict[str, np.ndarray]:
    """The model's weights under Hugging Face names and shapes (float32, C-contiguous)."""
    architecture = architecture or _default_architecture(model)
    if model.spec.pre_layer_norm:
        raise ValueError(_PRE_LN_MESSAGE)
    mapping = hf_weight_map(model)
    keys = _architecture_keys(model, architecture)
    state = {}
    for name in keys:
        variable, transpose = mapping[name]
        value = np.asarray(variable.numpy(), dtype=np.float32)
        state[name] = np.ascontiguousarray(value.T if transpose else value)
    if architecture == "AlbertModel":  # HF's base model has no "albert." prefix
        state = {k.removeprefix("albert."): v for k, v in state.items()}
    return state


def export_to_hf(
    model: AlbertModelLike,
    out_dir: str | os.PathLike,
    *,
    architecture: Architecture | None = None,
    tokenizer_dir: str | os.PathLike | None = None,
    id2label: dict[int, str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``model`` as a Hugging Face directory that transformers' PyTorch classes load.

    Args:
        model: an albertkit model or another :class:`HFExportable` (not pre-LayerNorm;
            built here if it is not).
        out_dir: the directory to create; written in a temporary sibling, then renamed.
        architecture: HF class to target, one of the model's ``hf_architectures``
            (:class:`HFExportable`); defaults to the first (``AlbertForPreTraining``,
            ``AlbertForQuestionAnswering``, ``AlbertForSequenceClassification``,
            ``AlbertForMultipleChoice``,
            ``AlbertModel``, or a plugin model's own). A pretraining model can also be
            exported as ``AlbertForMaskedLM`` (pooler and SOP head dropped).
        tokenizer_dir: a tokenizer directory whose files are copied alongside.
        id2label: label names for a model with ``num_labels`` (default: its
            ``label_names`` if it has them, else ``LABEL_i``).
        overwrite: replace an existing non-empty ``out_dir``; only allowed if it is a
            previous export (holds ``.albertkit-export.json``).

    Returns:
        ``out_dir`` as a Path.
    """
    from safetensors.numpy import save

    out_dir = Path(out_dir)
    architecture = architecture or _default_architecture(model)
    state = hf_state_dict(model, architecture)  # refuses pre-LN and wrong architectures

    labels: dict[int, str] | None = None
    num_labels = getattr(model, "num_labels", None)
    if isinstance(num_labels, int) and architecture != "AlbertModel":
        names = getattr(model, "label_names", None)
        labels = id2label or (dict(enumerate(map(str, names))) if names
                              else {i: f"LABEL_{i}" for i in range(num_labels)})
        if sorted(labels) != list(range(num_labels)):
            raise ValueError(f"id2label={labels!r} must name labels 0..{num_labels - 1}")
    elif id2label is not None:
        raise ValueError(f"id2label is only for models with labels, not {architecture}")
    config = hf_config_dict(model.spec, architecture, labels)

    tokenizer_files: list[Path] = []
    if tokenizer_dir is not None:
        tokenizer_files = hf_tokenizer_files(tokenizer_dir)
        if not any(p.name in ("spiece.model", "tokenizer.json") for p in tokenizer_files):
            raise FileNotFoundError(
                f"{tokenizer_dir}: no spiece.model or tokenizer.json: not a tokenizer directory"
            )

    check_export_target(out_dir, overwrite=overwrite)
    tmp = temp_dir_beside(out_dir)
    try:
        write_export_marker(tmp, {"format": "hf", "architecture": architecture})
        write_synced(tmp / CONFIG_FILE, (json.dumps(config, indent=2) + "\n").encode("utf-8"))
        write_synced(tmp / WEIGHTS_FILE, save(state, metadata={"format": "pt"}))
        for src in tokenizer_files:
            write_synced(tmp / src.name, src.read_bytes())
        replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def check_export_target(out_dir: str | os.PathLike, *, overwrite: bool,
                        protect: tuple[str | os.PathLike, ...] = ()) -> None:
    """Refuse an export target whose replacement could delete what the export did not write.

    An export replaces ``out_dir`` as a whole, so ``out_dir`` must not be the working
    directory or above it, nor equal to, inside or above any ``protect`` directory (the run
    being exported); an existing non-empty ``out_dir`` is replaced only with ``overwrite``
    AND when it holds the marker of a previous export.
    """
    given = Path(out_dir)
    out = given.resolve()
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        raise ValueError(f"out_dir={given} is the working directory or a folder above it: an "
                         "export replaces its whole out_dir; choose a new directory")
    for keep in protect:
        keep = Path(keep).resolve()
        where = ("the run directory" if out == keep else "inside the run directory"
                 if keep in out.parents else "above the run directory" if out in keep.parents
                 else None)
        if where:
            raise ValueError(f"out_dir={given} is {where} {keep}: an export replaces its whole "
                             "out_dir, which would delete the run; choose a directory outside it")
    if not given.exists() and not given.is_symlink():
        return
    if not given.is_dir():
        raise FileExistsError(f"out_dir={given} exists and is not a directory")
    if not any(given.iterdir()):
        return
    if not overwrite:
        raise FileExistsError(f"out_dir={given} exists and is not empty; pass --overwrite "
                              "(overwrite=True) to replace a previous export there")
    if not (given / EXPORT_MARKER).is_file():
        raise FileExistsError(
            f"out_dir={given} is not empty and holds no {EXPORT_MARKER}, so it is not a "
            "previous albertkit export; it is never replaced, even with --overwrite: choose a "
            "new or empty directory")


def write_export_marker(directory: Path, info: dict[str, Any]) -> None:
    """Mark ``directory`` as an albertkit export (what a later ``overwrite`` may replace)."""
    import time

    record = {"written_by": "albertkit export",
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **info}
    write_synced(directory / EXPORT_MARKER, (json.dumps(record, indent=2) + "\n").encode())

