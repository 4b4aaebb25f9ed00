"""``AlbertForMultipleChoice`` IS transformers' PyTorch ``AlbertForMultipleChoice``: an
albertkit model (fresh and after training steps) exported to Hugging Face loads without
missing or unexpected weights and gives the same logits (max abs difference <= 1e-5, same
argmax) on held-out inputs; a PyTorch model imported gives its own logits back."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from albertkit.models import hf
from albertkit.models.multiple_choice import AlbertForMultipleChoice
from test_hf_parity import CONFIGS, SPEC, hf_config, load_in_torch, max_diff, randomise

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.torch

TOL = 1e-5


def choice_inputs(vocab: int, b: int = 3, c: int = 4, t: int = 16, seed: int = 0) -> dict:
    """[b, c, t] features with padding and two segments of varying lengths per choice."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(t // 2, t + 1, size=(b, c))
    mask = (np.arange(t)[None, None, :] < lengths[..., None]).astype("int32")
    split = rng.integers(2, t // 2, size=(b, c))
    segments = ((np.arange(t)[None, None, :] >= split[..., None]) * mask).astype("int32")
    return {"input_ids": (rng.integers(5, vocab, (b, c, t)) * mask).astype("int32"),
            "input_mask": mask, "segment_ids": segments}


def torch_logits(model, x: dict) -> np.ndarray:
    with torch.no_grad():
        out = model(input_ids=torch.tensor(x["input_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(x["input_mask"], dtype=torch.long),
                    token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long))
    return out.logits.numpy()


def assert_same_logits(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.shape == theirs.shape
    assert max_diff(ours, theirs) <= TOL
    np.testing.assert_array_equal(np.argmax(ours, -1), np.argmax(theirs, -1))
    assert np.ptp(theirs, axis=-1).min() > 1e-3, "the choices' scores must differ to compare"


def test_export_gives_transformers_the_same_logits(tmp_path):
    keras.utils.set_random_seed(11)
    model = AlbertForMultipleChoice(SPEC)
    model.build_for(seq_length=16, num_choices=4)
    out = hf.export_to_hf(model, tmp_path / "mc")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["AlbertForMultipleChoice"]
    assert "id2label" not in config  # one shared score per choice, no label set
    pt = load_in_torch(transformers.AlbertForMultipleChoice, out)
    for seed, choices in ((21, 4), (22, 5), (23, 2)):  # held-out inputs, any number of choices
        x = choice_inputs(SPEC.vocab_size, c=choices, seed=seed)
        assert_same_logits(np.asarray(model(x)["logits"]), torch_logits(pt, x))


@pytest.mark.slow  # a few optimizer steps of a tiny model, then transformers: ~25 s on 2 cores
def test_export_after_training_steps_gives_the_same_logits(tmp_path):
    keras.utils.set_random_seed(12)
    spec = SPEC.model_copy(update={"classifier_dropout_prob": 0.1, "initializer_range": 0.02})
    model = AlbertForMultipleChoice(spec)
    model.build_for(seq_length=16, num_choices=4)
    x, labels = choice_inputs(spec.vocab_size, seed=3), np.array([1, 3, 0])
    opt = keras.optimizers.Adam(learning_rate=1e-2)
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    before = model.classifier.kernel.numpy().copy()
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = ce(labels, model(x, training=True)["logits"])
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    assert np.abs(model.classifier.kernel.numpy() - before).max() > 1e-3
    pt = load_in_torch(transformers.AlbertForMultipleChoice,
                       hf.export_to_hf(model, tmp_path / "trained"))
    x = choice_inputs(spec.vocab_size, seed=31)
    assert_same_logits(np.asarray(model(x)["logits"]), torch_logits(pt, x))


@pytest.mark.parametrize("name", ["shared_gelu_new", "groups_inner_gelu"])
def test_import_from_pytorch_and_round_trip(tmp_path, name):
    pt = randomise(transformers.AlbertForMultipleChoice(hf_config(**CONFIGS[name])), seed=4)
    pt.save_pretrained(tmp_path / "src")
    model = hf.model_from_hf(tmp_path / "src", "multiple_choice")
    assert isinstance(model, AlbertForMultipleChoice)
    x = choice_inputs(pt.config.vocab_size, seed=5)
    assert_same_logits(np.asarray(model(x)["logits"]), torch_logits(pt, x))
    # import then export reproduces every tensor bit for bit
    from safetensors.numpy import load_file

    hf.export_to_hf(model, tmp_path / "back")
    a, b = load_file(str(tmp_path / "src" / "model.safetensors")), load_file(
        str(tmp_path / "back" / "model.safetensors"))
    assert set(a) - {"albert.embeddings.position_ids"} == set(b)
    for k in b:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
