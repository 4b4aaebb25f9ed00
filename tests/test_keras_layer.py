"""The encoder as a Keras building block (:class:`AlbertEncoderLayer`): loaded from a run or a
Hugging Face directory it computes what the run's model computes; in a user's functional
model it trains with ``model.fit`` (frozen or not) and survives the ``.keras`` format in a
fresh process; the how-to guide's code runs as written."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest

from albertkit.cli import main
from albertkit.config import ConfigError
from albertkit.errors import CheckpointError
from albertkit.models import AlbertEncoderLayer
from albertkit.models.albert import AlbertForQuestionAnswering, AlbertForSequenceClassification
from albertkit.training.export import load_run_model
from albertkit.training.trainer import AlbertTrainer
from conftest import TINY_SPEC, make_tiny_config, tiny_spec_with

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "howto" / "embed-encoder.md"
VOCAB = 1000  # the tiny tokenizer's, so that the guide can tokenize text for the run's model
NAMES = ("input_ids", "input_mask", "segment_ids")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 4-step tiny pretraining run with checkpoints at steps 2 and 4."""
    run_dir = tmp_path_factory.mktemp("keras_layer") / "run"
    AlbertTrainer(make_tiny_config(
        run_dir,
        model={"vocab_size": VOCAB},
        data={"num_examples": 64, "eval_examples": 0},
        optimizer={"kind": "lamb", "learning_rate": 1e-2},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 4,
                 "eval_every_steps": 0},
        checkpoint={"every_steps": 2, "keep_last": 3},
    )).fit()
    return run_dir


@pytest.fixture(scope="module")
def hf_dir(run, tmp_path_factory):
    """The run exported by ``albertkit export --format hf``."""
    out = tmp_path_factory.mktemp("keras_layer_hf") / "hf"
    assert main(["export", "--format", "hf", str(run), str(out)]) == 0
    return out


def batch(n=3, length=24, vocab=VOCAB, seed=1) -> dict[str, np.ndarray]:
    """Token ids with padding (row 0 after 15 tokens) and a second segment."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, size=(n, length)).astype("int32")
    mask = np.ones_like(ids)
    mask[0, 15:] = 0
    segments = np.zeros_like(ids)
    segments[:, length // 2:] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def numpy(outputs) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.float32) for k, v in outputs.items()}


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys() == {"sequence_output", "pooled_output"}
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


# --------------------------------------------------------------------------- loading
def test_from_run_computes_the_runs_encoder(run):
    x = batch()
    _, model = load_run_model(run)
    layer = AlbertEncoderLayer.from_run(run)
    assert layer.spec == model.spec and layer.built
    ours, theirs = numpy(layer(x)), numpy(model.albert(x))
    assert max_diff(ours, theirs) <= 1e-6
    # the Hugging Face input names are the same inputs
    hf_names = {"input_ids": x["input_ids"], "attention_mask": x["input_mask"],
                "token_type_ids": x["segment_ids"]}
    assert max_diff(numpy(layer(hf_names)), ours) == 0.0

    # the checkpoint asked for: step 2's weights, not the newest
    early = AlbertEncoderLayer.from_run(run, checkpoint=2)
    _, model_2 = load_run_model(run, checkpoint=2)
    assert max_diff(numpy(early(x)), numpy(model_2.albert(x))) <= 1e-6
    assert max_diff(numpy(early(x)), ours) > 1e-4


def test_from_hf_computes_the_runs_encoder(run, hf_dir):
    x = batch()
    layer = AlbertEncoderLayer.from_hf(hf_dir)
    _, model = load_run_model(run)
    assert layer.spec == model.spec
    assert max_diff(numpy(layer(x)), numpy(model.albert(x))) <= 1e-6


@pytest.mark.torch
def test_from_hf_matches_transformers(hf_dir):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    x = batch()
    ours = numpy(AlbertEncoderLayer.from_hf(hf_dir)(x))
    pt = transformers.AlbertModel.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        out = pt(input_ids=torch.tensor(x["input_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(x["input_mask"], dtype=torch.long),
                 token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long))
    real = x["input_mask"].astype(bool)  # padded positions' own vectors are not compared
    seq = np.abs(ours["sequence_output"][real] - out.last_hidden_state.numpy()[real]).max()
    pooled = np.abs(ours["pooled_output"] - out.pooler_output.numpy()).max()
    assert seq <= 1e-5 and pooled <= 1e-5, (seq, pooled)


def test_from_model_without_a_pooler_warns_or_goes_without(tmp_path):
    qa = AlbertForQuestionAnswering(TINY_SPEC)
    qa.build_for(seq_length=8)
    with pytest.warns(UserWarning, match=r"no weights for albert\.pooler\.weight.*"
                                         r"add_pooling_layer=False"):
        AlbertEncoderLayer.from_model(qa)
    bare = AlbertEncoderLayer.from_model(qa, add_pooling_layer=False)
    x = batch(vocab=TINY_SPEC.vocab_size)
    out = bare(x)
    assert set(out) == {"sequence_output"}
    expected = np.asarray(qa.albert(x)["sequence_output"])
    assert np.abs(np.asarray(out["sequence_output"]) - expected).max() == 0.0


def test_from_model_carries_a_pre_layer_norm_encoder():
    # pre-LN has no Hugging Face form; its final LayerNorm still comes across
    model = AlbertForSequenceClassification(tiny_spec_with(pre_layer_norm=True), num_labels=2)
    model.build_for(seq_length=8)
    x = batch(vocab=TINY_SPEC.vocab_size)
    layer = AlbertEncoderLayer.from_model(model)
    assert layer.encoder.final_layer_norm is not None
    assert max_diff(numpy(layer(x)), numpy(model.albert(x))) == 0.0


# --------------------------------------------------------------------------- the user's model
def user_model(encoder: AlbertEncoderLayer) -> keras.Model:
    inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in NAMES}
    pooled = encoder(inputs)["pooled_output"]
    return keras.Model(inputs, keras.layers.Dense(2, name="head")(pooled))


def labelled(n=16, length=12, vocab=VOCAB):
    """A learnable task: is the second token in the upper half of the vocabulary?"""
    x = batch(n, length, vocab, seed=2)
    x["input_mask"][:] = 1
    return x, (x["input_ids"][:, 1] >= vocab // 2).astype("int32")


@pytest.mark.parametrize("freeze", ["no", "argument", "attribute"])
def test_user_model_trains_with_fit(freeze):
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoderLayer(TINY_SPEC, trainable=freeze != "argument")
    model = user_model(encoder)
    if freeze == "attribute":
        encoder.trainable = False
    # the head's kernel and bias, plus the encoder's weights when it trains
    n_encoder = len(encoder.weights)
    assert len(model.trainable_weights) == 2 + (n_encoder if freeze == "no" else 0)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = labelled(vocab=TINY_SPEC.vocab_size)
    before = [w.numpy().copy() for w in encoder.weights]
    head_before = model.get_layer("head").kernel.numpy().copy()
    losses = model.fit(x, y, epochs=4, batch_size=8, verbose=0).history["loss"]
    assert losses[-1] < losses[0], losses
    changed = [not np.array_equal(a, w.numpy()) for a, w in zip(before, encoder.weights,
                                                                strict=True)]
    if freeze == "no":
        assert all(changed)
    else:
        assert not any(changed)
    assert not np.array_equal(head_before, model.get_layer("head").kernel.numpy())


def test_keras_file_loads_in_a_fresh_process(run, tmp_path):
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoderLayer.from_run(run, trainable=False, name="albert_encoder")
    model = user_model(encoder)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))
    x, y = labelled()
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    expected = model.predict(x, verbose=0)
    model.save(tmp_path / "m.keras")
    np.savez(tmp_path / "x.npz", **x)

    script = textwrap.dedent("""
        import json, sys
        import numpy as np
        import albertkit
        from albertkit.models import AlbertEncoderLayer  # registers the layer with Keras
        import keras

        model = keras.models.load_model(sys.argv[1])
        x = dict(np.load(sys.argv[2]))
        np.save(sys.argv[3], model.predict(x, verbose=0))
        layer = model.get_layer("albert_encoder")
        print(json.dumps({"type": type(layer).__name__, "trainable": layer.trainable,
                          "n_trainable": len(model.trainable_weights),
                          "spec": layer.spec.model_dump()}))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "m.keras"), str(tmp_path / "x.npz"),
         str(tmp_path / "pred.npy")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"type": "AlbertEncoderLayer", "trainable": False, "n_trainable": 2,
                      "spec": encoder.spec.model_dump()}
    np.testing.assert_array_equal(np.load(tmp_path / "pred.npy"), expected)


def test_config_is_the_spec_not_the_weights():
    # the precision, remat and from_config checks of every model are test_model_common's
    layer = AlbertEncoderLayer(TINY_SPEC, dtype="mixed_bfloat16", trainable=False)
    layer.build()
    config = layer.get_config()
    assert json.loads(json.dumps(config)) == {
        "name": layer.name, "trainable": False, "dtype": "mixed_bfloat16",
        "spec": TINY_SPEC.model_dump(), "add_pooling_layer": True, "remat": "none"}
    clone = AlbertEncoderLayer.from_config(config)
    assert not clone.trainable and clone.get_config() == config


# --------------------------------------------------------------------------- bad input
def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text, text
    return text


def test_a_run_without_checkpoints_is_one_line_naming_it(run, tmp_path):
    empty = tmp_path / "empty-run"
    empty.mkdir()
    for name in ("config.yaml", "model_spec.json"):
        shutil.copy2(run / name, empty / name)
    with pytest.raises(CheckpointError) as e:
        AlbertEncoderLayer.from_run(empty)
    assert str(empty / "checkpoints") in one_line(e) and "no usable checkpoint" in str(e.value)
    with pytest.raises(ConfigError) as e:
        AlbertEncoderLayer.from_run(tmp_path)
    assert f"{tmp_path}: not an albertkit run" in one_line(e)


def test_an_hf_directory_that_is_not_albert_is_one_line_naming_it(tmp_path):
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    with pytest.raises(ValueError) as e:
        AlbertEncoderLayer.from_hf(bert)
    assert f"{bert / 'config.json'}: model_type='bert', expected 'albert'" in one_line(e)
    with pytest.raises(FileNotFoundError) as e:
        AlbertEncoderLayer.from_hf(tmp_path)
    assert f"{tmp_path}: no config.json" in one_line(e)


def test_unknown_or_missing_inputs_are_refused_when_the_model_is_built():
    layer = AlbertEncoderLayer(TINY_SPEC)
    ids = keras.Input((None,), dtype="int32", name="input_ids")
    with pytest.raises(ValueError, match=r"unknown input 'input_masks'"):
        layer({"input_ids": ids, "input_masks": ids})
    with pytest.raises(ValueError, match=r"'input_mask' given twice"):
        layer({"input_ids": ids, "input_mask": ids, "attention_mask": ids})
    with pytest.raises(ValueError, match=r"no 'input_ids'"):
        layer({"input_mask": ids})
    assert set(layer(ids)) == {"sequence_output", "pooled_output"}  # a tensor is input_ids


# --------------------------------------------------------------------------- the guide
@pytest.mark.slow  # a minute on two cores (four short fits): CI's second pass
def test_the_guide_runs_as_written(run, tiny_tokenizer_dir, tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 2, "the guide's example, then the loading in another process"
    # the run the guide names, with a tokenizer of its vocabulary
    shutil.copytree(run, tmp_path / "runs" / "pretrain-local")
    shutil.copytree(tiny_tokenizer_dir(VOCAB), tmp_path / "runs" / "pretrain-local" / "tokenizer")
    monkeypatch.chdir(tmp_path)
    example, loading = {}, {}
    exec(compile(blocks[0], str(GUIDE), "exec"), example)  # noqa: S102 - our own guide
    assert (tmp_path / "sentiment.keras").is_file()
    assert any(isinstance(layer, AlbertEncoderLayer) for layer in example["restored"].layers)
    exec(compile(blocks[1], str(GUIDE), "exec"), loading)  # noqa: S102 - our own guide
    probe = example["probe"]
    np.testing.assert_array_equal(loading["model"].predict(probe, verbose=0),
                                  example["restored"].predict(probe, verbose=0))
