"""albertkit's Keras ALBERT IS Hugging Face's PyTorch ALBERT: import, export, round trip.

Random tiny transformers models (several architectures) are saved with ``save_pretrained``,
imported and compared in float32 (max abs difference <= 1e-5); albertkit models (fresh and
after a few optimizer steps) are exported, loaded by transformers' PyTorch classes with no
missing/unexpected weights, and compared again.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from albertkit.models import hf
from albertkit.models.albert import (
    AlbertEncoder,
    AlbertForPretraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
)
from conftest import GROUPED_LAYERS, tiny_spec_with

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.torch

TOL = 1e-5

CONFIGS = {
    "shared_gelu_new": dict(num_hidden_layers=2, hidden_act="gelu_new"),
    "groups_inner_gelu": dict(
        num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2, hidden_act="gelu"
    ),
    "relu_groups4_e_eq_h": dict(
        num_hidden_layers=4, num_hidden_groups=4, hidden_act="relu", embedding_size=32
    ),
    "gelu_fast_5_of_3": dict(
        num_hidden_layers=5, num_hidden_groups=3, hidden_act="gelu_fast", num_attention_heads=2
    ),
}


def hf_config(**overrides) -> transformers.AlbertConfig:
    base = dict(
        vocab_size=97,
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=40,
        max_position_embeddings=32,
    )
    return transformers.AlbertConfig(**{**base, **overrides})


def randomise(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Large random weights (LayerNorm included) so that every part of the math shows."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            centre = 1.0 if "LayerNorm.weight" in name or "layer_norm.weight" in name else 0.0
            p.copy_(centre + 0.2 * torch.randn(p.shape, generator=gen))
    return model.eval()


def inputs(vocab: int, b: int = 3, t: int = 16, p: int = 4, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    mask = np.ones((b, t), "int32")
    mask[1, 11:] = 0
    mask[2, 5:] = 0
    seg = np.zeros((b, t), "int32")
    seg[:, 6:] = 1
    lengths = mask.sum(1)
    return {
        "input_ids": rng.integers(0, vocab, (b, t)).astype("int32"),
        "input_mask": mask,
        "segment_ids": seg * mask,
        "masked_lm_positions": np.stack([rng.integers(0, n, p) for n in lengths]).astype("int32"),
    }


def torch_inputs(x: dict) -> dict:
    return {
        "input_ids": torch.tensor(x["input_ids"], dtype=torch.long),
        "attention_mask": torch.tensor(x["input_mask"], dtype=torch.long),
        "token_type_ids": torch.tensor(x["segment_ids"], dtype=torch.long),
    }


def max_diff(a, b) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def at_positions(full: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return np.take_along_axis(full, positions[:, :, None], axis=1)


def run_torch(model, x: dict) -> dict[str, np.ndarray]:
    with torch.no_grad():
        out = model(**torch_inputs(x))
    names = {
        "prediction_logits": "mlm",
        "logits": "logits",
        "sop_logits": "sop",
        "start_logits": "start",
        "end_logits": "end",
    }
    res = {names[k]: v.numpy() for k, v in out.items() if k in names}
    if isinstance(model, transformers.AlbertForMaskedLM):
        res["mlm"] = res.pop("logits")
    return res


class LogCapture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def load_in_torch(cls, path: Path):
    """``cls.from_pretrained(path)``, asserting transformers reports no weight problems."""
    capture = LogCapture()
    root = logging.getLogger("transformers")
    root.addHandler(capture)
    try:
        model, info = cls.from_pretrained(path, output_loading_info=True)
    finally:
        root.removeHandler(capture)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(key), f"{cls.__name__}: {key}={info[key]}"
    assert not [m for m in capture.messages if "LOAD REPORT" in m or "weights" in m.lower()], (
        capture.messages
    )
    return model.eval()


# --------------------------------------------------------------------------- import
@pytest.mark.parametrize("name", list(CONFIGS))
def test_import_matches_pytorch(tmp_path, name):
    cfg = hf_config(**CONFIGS[name])
    x = inputs(cfg.vocab_size, seed=len(name))
    tx = torch_inputs(x)

    pt = randomise(transformers.AlbertForPreTraining(cfg), seed=1)
    pt.save_pretrained(tmp_path / "pre")
    model = hf.model_from_hf(tmp_path / "pre", "pretraining")
    with torch.no_grad():
        base = pt.albert(**tx)
        ref = pt(**tx)
    enc = model.albert(x)
    out = model(x)
    assert max_diff(enc["sequence_output"], base.last_hidden_state) <= TOL
    assert max_diff(enc["pooled_output"], base.pooler_output) <= TOL
    mlm_ref = at_positions(ref.prediction_logits.numpy(), x["masked_lm_positions"])
    assert max_diff(out["mlm_logits"], mlm_ref) <= TOL
    assert max_diff(model.full_mlm_logits(x), ref.prediction_logits) <= TOL
    assert max_diff(out["sop_logits"], ref.sop_logits) <= TOL
    # sanity: the comparison is not trivially small
    assert np.abs(ref.prediction_logits.numpy()).max() > 0.5

    qa_pt = randomise(transformers.AlbertForQuestionAnswering(cfg), seed=2)
    qa_pt.save_pretrained(tmp_path / "qa")
    qa = hf.model_from_hf(tmp_path / "qa", "question_answering")
    got, want = qa(x), run_torch(qa_pt, x)
    assert max_diff(got["start_logits"], want["start"]) <= TOL
    assert max_diff(got["end_logits"], want["end"]) <= TOL

    cls_pt = randomise(
        transformers.AlbertForSequenceClassification(hf_config(**CONFIGS[name], num_labels=3)),
        seed=3,
    )
    cls_pt.save_pretrained(tmp_path / "cls")
    cls = hf.model_from_hf(tmp_path / "cls", "classification")
    assert cls.num_labels == 3
    assert max_diff(cls(x)["logits"], run_torch(cls_pt, x)["logits"]) <= TOL


def test_import_base_model_and_missing_heads_warn(tmp_path):
    cfg = hf_config(num_hidden_layers=2)
    pt = randomise(transformers.AlbertModel(cfg), seed=4)
    pt.save_pretrained(tmp_path / "base")  # keys without the "albert." prefix
    model = AlbertForQuestionAnswering(hf.spec_from_hf_config(tmp_path / "base"))
    with pytest.warns(hf.HFImportWarning, match="qa_outputs.weight"):
        missing = hf.load_hf_weights(model, tmp_path / "base")
    assert missing == ["qa_outputs.weight", "qa_outputs.bias"]
    x = inputs(cfg.vocab_size)
    with torch.no_grad():
        ref = pt(**torch_inputs(x)).last_hidden_state
    assert max_diff(model.albert(x)["sequence_output"], ref) <= TOL
    enc = hf.model_from_hf(tmp_path / "base", "encoder")
    assert max_diff(enc(x)["sequence_output"], ref) <= TOL


def test_import_bfloat16_checkpoint(tmp_path):
    cfg = hf_config(num_hidden_layers=2)
    pt = randomise(transformers.AlbertForPreTraining(cfg), seed=5).to(torch.bfloat16)
    pt.save_pretrained(tmp_path / "bf16")
    model = hf.model_from_hf(tmp_path / "bf16", "pretraining")
    want = pt.albert.embeddings.word_embeddings.weight.detach().float().numpy()
    got = model.albert.embeddings.word_embeddings.embeddings.numpy()
    np.testing.assert_array_equal(got, want)
    want = pt.albert.encoder.embedding_hidden_mapping_in.weight.detach().float().numpy().T
    np.testing.assert_array_equal(model.albert.embedding_hidden_mapping_in.kernel.numpy(), want)


def test_import_sharded_checkpoint(tmp_path):
    cfg = hf_config(num_hidden_layers=2)
    pt = randomise(transformers.AlbertForQuestionAnswering(cfg), seed=6)
    pt.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    assert len(list((tmp_path / "sharded").glob("model-*.safetensors"))) > 1
    qa = hf.model_from_hf(tmp_path / "sharded", "question_answering")
    x = inputs(cfg.vocab_size)
    assert max_diff(qa(x)["start_logits"], run_torch(pt, x)["start"]) <= TOL


# --------------------------------------------------------------------------- export
# grouped layers (each group's weights must map to Hugging Face's); the vocabulary and FFN
# width are this file's own, the shapes its parity tolerance was checked on
SPEC = tiny_spec_with(**GROUPED_LAYERS, vocab_size=97, intermediate_size=40)


def compare_exported(model, path: Path, architecture: str, x: dict) -> None:
    cls = getattr(transformers, architecture)
    pt = load_in_torch(cls, path)
    want = run_torch(pt, x)
    got = model(x)
    if architecture in ("AlbertForPreTraining", "AlbertForMaskedLM"):
        assert (
            max_diff(got["mlm_logits"], at_positions(want["mlm"], x["masked_lm_positions"])) <= TOL
        )
        assert max_diff(model.full_mlm_logits(x), want["mlm"]) <= TOL
    if architecture == "AlbertForPreTraining":
        assert max_diff(got["sop_logits"], want["sop"]) <= TOL
    if architecture == "AlbertForQuestionAnswering":
        assert max_diff(got["start_logits"], want["start"]) <= TOL
        assert max_diff(got["end_logits"], want["end"]) <= TOL
    if architecture == "AlbertForSequenceClassification":
        assert max_diff(got["logits"], want["logits"]) <= TOL
    with torch.no_grad():
        hidden = pt.albert(**torch_inputs(x)).last_hidden_state
    assert max_diff(model.albert(x)["sequence_output"], hidden) <= TOL


@pytest.mark.parametrize(
    "kind,architecture",
    [
        ("pretraining", "AlbertForPreTraining"),
        ("pretraining", "AlbertForMaskedLM"),
        ("qa", "AlbertForQuestionAnswering"),
        ("cls3", "AlbertForSequenceClassification"),
        ("regression", "AlbertForSequenceClassification"),
    ],
)
def test_export_loads_in_pytorch_without_warnings(tmp_path, kind, architecture):
    keras.utils.set_random_seed(7)
    model = {
        "pretraining": lambda: AlbertForPretraining(SPEC),
        "qa": lambda: AlbertForQuestionAnswering(SPEC),
        "cls3": lambda: AlbertForSequenceClassification(SPEC, num_labels=3),
        "regression": lambda: AlbertForSequenceClassification(SPEC, num_labels=1),
    }[kind]()
    model.build_for(seq_length=16, max_predictions=4) if kind == "pretraining" else model.build()
    out = hf.export_to_hf(model, tmp_path / "out", architecture=architecture)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == [architecture]
    if kind == "regression":
        assert config["problem_type"] == "regression" and len(config["id2label"]) == 1
    compare_exported(model, out, architecture, inputs(SPEC.vocab_size, seed=3))
    assert not list(tmp_path.glob(".out.*"))  # no temporary directory left behind


def _train_a_few_steps(model, x: dict, labels: dict, steps: int = 3) -> float:
    """A plain Adam loop (the project's step lives in step.py; this only moves the weights)."""
    opt = keras.optimizers.Adam(learning_rate=1e-2)
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    first = None
    for _ in range(steps):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            if "mlm_logits" in out:
                loss = ce(labels["mlm"], out["mlm_logits"]) + ce(labels["sop"], out["sop_logits"])
            else:
                loss = ce(labels["cls"], out["logits"])
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        first = float(loss) if first is None else first
    return first


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_export_after_training_steps(tmp_path):
    keras.utils.set_random_seed(8)
    spec = SPEC.model_copy(update={"hidden_dropout_prob": 0.1, "initializer_range": 0.02})
    x = inputs(spec.vocab_size, seed=4)
    rng = np.random.default_rng(0)
    labels = {
        "mlm": rng.integers(0, spec.vocab_size, x["masked_lm_positions"].shape),
        "sop": np.array([0, 1, 1]),
        "cls": np.array([2, 0, 1]),
    }

    pre = AlbertForPretraining(spec)
    pre.build_for(seq_length=16, max_predictions=4)
    before = pre.albert.embedding_hidden_mapping_in.kernel.numpy().copy()
    _train_a_few_steps(pre, x, labels)
    assert np.abs(pre.albert.embedding_hidden_mapping_in.kernel.numpy() - before).max() > 1e-3
    out = hf.export_to_hf(pre, tmp_path / "pre")
    compare_exported(pre, out, "AlbertForPreTraining", inputs(spec.vocab_size, seed=5))

    cls = AlbertForSequenceClassification(spec, num_labels=3)
    cls.build()
    _train_a_few_steps(cls, x, labels)
    out = hf.export_to_hf(cls, tmp_path / "cls", id2label={0: "neg", 1: "neu", 2: "pos"})
    assert transformers.AlbertConfig.from_pretrained(out).id2label == {0: "neg", 1: "neu", 2: "pos"}
    compare_exported(cls, out, "AlbertForSequenceClassification", inputs(spec.vocab_size, seed=6))


# --------------------------------------------------------------------------- round trip
def read_all(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(path / "model.safetensors"))


@pytest.mark.parametrize(
    "cls_name,kind",
    [
        ("AlbertForPreTraining", "pretraining"),
        ("AlbertForQuestionAnswering", "question_answering"),
        ("AlbertForSequenceClassification", "classification"),
    ],
)
def test_round_trip_is_bit_identical(tmp_path, cls_name, kind):
    cfg = hf_config(**CONFIGS["groups_inner_gelu"])
    randomise(getattr(transformers, cls_name)(cfg), seed=9).save_pretrained(tmp_path / "src")
    model = hf.model_from_hf(tmp_path / "src", kind)
    hf.export_to_hf(model, tmp_path / "dst")
    src, dst = read_all(tmp_path / "src"), read_all(tmp_path / "dst")
    assert sorted(src) == sorted(dst)
    for key, value in src.items():
        assert value.dtype == dst[key].dtype and value.shape == dst[key].shape, key
        assert value.tobytes() == dst[key].tobytes(), key
    theirs = transformers.AlbertConfig.from_pretrained(tmp_path / "src").to_dict()
    ours = transformers.AlbertConfig.from_pretrained(tmp_path / "dst").to_dict()
    for key in ("architectures", "num_labels", *hf._SPEC_FIELDS):
        assert theirs.get(key) == ours.get(key), key


# --------------------------------------------------------------------------- refusals and files
def test_pytorch_bin_is_refused(tmp_path):
    cfg = hf_config(num_hidden_layers=2)
    pt = transformers.AlbertForPreTraining(cfg)
    cfg.save_pretrained(tmp_path)
    torch.save(pt.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pickle") as err:
        hf.model_from_hf(tmp_path, "pretraining")
    assert "save_pretrained" in str(err.value) and "pytorch_model.bin" in str(err.value)


def test_pre_layer_norm_is_refused(tmp_path):
    model = AlbertForPretraining(SPEC.model_copy(update={"pre_layer_norm": True}))
    model.build()
    with pytest.raises(ValueError, match="pre_layer_norm"):
        hf.export_to_hf(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    randomise(transformers.AlbertForPreTraining(hf_config()), 0).save_pretrained(tmp_path / "h")
    with pytest.raises(ValueError, match="pre_layer_norm"):
        hf.load_hf_weights(model, tmp_path / "h")


def test_mismatched_architecture_and_existing_output_are_refused(tmp_path):
    transformers.AlbertForPreTraining(hf_config()).save_pretrained(tmp_path / "h")
    model = AlbertForPretraining(SPEC)  # 3 layers vs the checkpoint's 12
    with pytest.raises(ValueError, match="num_hidden_layers: model 3 vs checkpoint 12"):
        hf.load_hf_weights(model, tmp_path / "h")
    qa = AlbertForQuestionAnswering(SPEC)
    with pytest.raises(ValueError, match="cannot be exported"):
        hf.export_to_hf(qa, tmp_path / "x", architecture="AlbertForPreTraining")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        hf.export_to_hf(qa, tmp_path / "busy")
    # overwrite replaces only a previous export (one holding the marker), never other files
    with pytest.raises(FileExistsError, match="not a previous albertkit export"):
        hf.export_to_hf(qa, tmp_path / "busy", overwrite=True)
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["keep.txt"]
    hf.export_to_hf(qa, tmp_path / "done")
    (tmp_path / "done" / "stale.txt").write_text("from the previous export")
    with pytest.raises(FileExistsError):
        hf.export_to_hf(qa, tmp_path / "done")
    hf.export_to_hf(qa, tmp_path / "done", overwrite=True)
    assert sorted(p.name for p in (tmp_path / "done").iterdir()) == [
        hf.EXPORT_MARKER,
        "config.json",
        "model.safetensors",
    ]


def test_tokenizer_files_are_copied(tmp_path):
    tok = tmp_path / "tok"
    tok.mkdir()
    files = {
        "spiece.model": b"\x00\x01sentencepiece",
        "tokenizer_config.json": b"{}",
        "special_tokens_map.json": b'{"mask_token": "[MASK]"}',
    }
    for name, data in files.items():
        (tok / name).write_bytes(data)
    model = AlbertForQuestionAnswering(SPEC)
    out = hf.export_to_hf(model, tmp_path / "out", tokenizer_dir=tok)
    for name, data in files.items():
        assert (out / name).read_bytes() == data
    assert [p.name for p in hf.hf_tokenizer_files(out)] == [
        "spiece.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ]
    (tok / "spiece.model").unlink()
    with pytest.raises(FileNotFoundError, match="spiece.model"):
        hf.export_to_hf(model, tmp_path / "out2", tokenizer_dir=tok)


def test_hf_defaults_match_transformers(tmp_path):
    default = transformers.AlbertConfig()
    for key, value in hf._HF_DEFAULTS.items():
        assert getattr(default, key) == value, key
    # a config.json that omits fields means transformers' defaults, not albertkit's presets
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "albert", "vocab_size": 50}))
    spec = hf.spec_from_hf_config(tmp_path)
    assert (spec.vocab_size, spec.hidden_size, spec.num_attention_heads) == (50, 4096, 64)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="model_type='bert'"):
        hf.spec_from_hf_config(tmp_path)
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "albert", "hidden_act": "quick_gelu"})
    )
    with pytest.raises(ValueError, match="hidden_act='quick_gelu'"):
        hf.spec_from_hf_config(tmp_path)


def test_encoder_exports_as_albert_model(tmp_path):
    keras.utils.set_random_seed(3)
    enc = AlbertEncoder(SPEC)
    enc.build()
    out = hf.export_to_hf(enc, tmp_path / "base")
    pt = load_in_torch(transformers.AlbertModel, out)
    x = inputs(SPEC.vocab_size)
    with torch.no_grad():
        ref = pt(**torch_inputs(x))
    got = enc(x)
    assert max_diff(got["sequence_output"], ref.last_hidden_state) <= TOL
    assert max_diff(got["pooled_output"], ref.pooler_output) <= TOL
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing missing: no warning
        back = hf.model_from_hf(out, "encoder")
    assert max_diff(back(x)["sequence_output"], got["sequence_output"]) == 0.0
