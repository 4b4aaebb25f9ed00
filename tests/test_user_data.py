"""AlbertTrainer on examples and with an optimizer given in Python (train_data=, eval_data=,
optimizer=): the same weights as albertkit's own pipeline, exact resume with a factory of
position, the plain-Dataset fallback, one-line errors, and a user optimizer."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from albertkit.config import ConfigError, TrainerConfig
from albertkit.data.pretraining_dataset import build_synthetic_dataset
from albertkit.errors import CheckpointError, DatasetError, TrainingError
from albertkit.training import AlbertTrainer

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "howto" / "embed.md"
TINY = {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
SEQ, PREDS, MICRO = 16, 3, 2


def config(run_dir: Path, data: dict, steps: int = 4, **runtime) -> TrainerConfig:
    return TrainerConfig.from_dict({
        "run_dir": str(run_dir), "model": TINY, "data": data,
        "optimizer": {"kind": "adamw", "learning_rate": 0.01,
                      "schedule": {"warmup_steps": 0}},
        "runtime": {"micro_batch_size": MICRO, "global_batch_size": 2 * MICRO,
                    "max_steps": steps, "eval_every_steps": 0, "xla": False, "eager": True,
                    **runtime},
        "checkpoint": {"every_steps": 100},
        "logging": {"progress_bar": False, "tensorboard": False}})


def weights(run_dir: Path, group: str = "model") -> dict[str, np.ndarray]:
    newest = sorted((run_dir / "checkpoints").glob("ckpt-*"))[-1]
    return load_file(str(newest / f"{group}.safetensors"))


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# --------------------------------------------------------------------------- pretraining
SYNTHETIC = {"kind": "synthetic", "seq_length": SEQ, "max_predictions_per_seq": PREDS,
             "num_examples": 16, "eval_examples": 0}
USER_PRETRAINING = {"kind": "user_pretraining", "seq_length": SEQ,
                    "max_predictions_per_seq": PREDS}


def synthetic_examples() -> tf.data.Dataset:
    """albertkit's synthetic stream (what data.kind=synthetic trains on), as single examples."""
    return build_synthetic_dataset(vocab_size=101, seq_length=SEQ, max_predictions_per_seq=PREDS,
                                   batch_size=MICRO, num_examples=16, seed=0,
                                   repeat=True).unbatch()


@pytest.mark.slow  # two or three tiny runs: 25-50 s on a loaded machine
def test_a_user_dataset_trains_to_the_weights_of_albertkits_own_pipeline(tmp_path):
    AlbertTrainer(config(tmp_path / "own", SYNTHETIC, seed=0)).fit()
    user = AlbertTrainer(config(tmp_path / "user", USER_PRETRAINING, seed=0),
                         train_data=synthetic_examples()).fit()
    assert user.summary["status"] == "completed" and user.summary["step"] == 4
    assert_same(weights(tmp_path / "own"), weights(tmp_path / "user"))
    assert_same(weights(tmp_path / "own", "optimizer"), weights(tmp_path / "user", "optimizer"))


def test_pretraining_eval_data_is_scored(tmp_path):
    evals = build_synthetic_dataset(vocab_size=101, seq_length=SEQ, max_predictions_per_seq=PREDS,
                                    batch_size=MICRO, num_examples=6, seed=1,
                                    repeat=False).unbatch()
    trainer = AlbertTrainer(config(tmp_path / "r", USER_PRETRAINING, eval_steps=2),
                            train_data=synthetic_examples(), eval_data=evals)
    metrics = trainer.evaluate()
    assert metrics["eval_batches"] == 2.0 and 3.0 < metrics["mlm_loss"] < 6.0


# --------------------------------------------------------------------------- classification
USER_CLASSIFICATION = {"kind": "user_classification", "num_labels": 2, "max_seq_length": SEQ}
N = 10  # examples in the classification set


def classification_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    ids = rng.integers(5, 101, (N, SEQ)).astype(np.int32)
    mask = np.ones((N, SEQ), np.int32)
    mask[:, 12:] = 0
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": np.zeros_like(ids),
            "labels": (ids[:, 1] > 50).astype(np.int32)}


class EpochFactory:
    """factory(position): the rest of the epoch holding example ``position`` (example i is
    row i % N), so the trainer must call it again at every epoch's end; records its calls."""

    def __init__(self) -> None:
        self.arrays = classification_arrays()
        self.calls: list[int] = []

    def __call__(self, position: int) -> tf.data.Dataset:
        self.calls.append(position)
        end = (position // N + 1) * N
        rows = {k: tf.constant(v) for k, v in self.arrays.items()}
        return tf.data.Dataset.range(position, end).map(
            lambda i: {k: tf.gather(v, i % N) for k, v in rows.items()})


@pytest.mark.slow  # two or three tiny runs: 25-50 s on a loaded machine
def test_factory_resume_after_an_interruption_is_bit_identical(tmp_path):
    # 4 examples a step, 10 an epoch: steps straddle the datasets the factory returns
    straight = EpochFactory()
    AlbertTrainer(config(tmp_path / "straight", USER_CLASSIFICATION, steps=6),
                  train_data=straight).fit()
    assert straight.calls == [0, 10, 20]

    first, second = EpochFactory(), EpochFactory()
    cut = AlbertTrainer(config(tmp_path / "cut", USER_CLASSIFICATION, steps=6),
                        train_data=first).fit(until_step=3)
    assert cut.summary["status"] == "interrupted"
    resumed = AlbertTrainer(config(tmp_path / "cut", USER_CLASSIFICATION, steps=6),
                            train_data=second).fit()
    assert resumed.summary["step"] == 6
    assert second.calls == [12, 20]  # position = step 3 x 4 examples: no re-reading
    assert_same(weights(tmp_path / "straight"), weights(tmp_path / "cut"))
    assert_same(weights(tmp_path / "straight", "optimizer"), weights(tmp_path / "cut",
                                                                      "optimizer"))


def test_plain_dataset_resume_skips_the_consumed_examples_with_a_warning(tmp_path, caplog):
    arrays = classification_arrays()
    plain = tf.data.Dataset.from_tensor_slices(arrays)  # repeated by the trainer
    AlbertTrainer(config(tmp_path / "straight", USER_CLASSIFICATION, steps=5),
                  train_data=plain).fit()
    AlbertTrainer(config(tmp_path / "cut", USER_CLASSIFICATION, steps=5),
                  train_data=plain).fit(until_step=2)
    with caplog.at_level(logging.WARNING, logger="albertkit"):
        AlbertTrainer(config(tmp_path / "cut", USER_CLASSIFICATION, steps=5),
                      train_data=plain).fit()
    said = [r.getMessage() for r in caplog.records if "not a factory" in r.getMessage()]
    assert len(said) == 1 and "dropping the 8 examples" in said[0]
    assert_same(weights(tmp_path / "straight"), weights(tmp_path / "cut"))


def test_classification_eval_data_gives_the_task_metrics(tmp_path):
    arrays = classification_arrays()
    trainer = AlbertTrainer(config(tmp_path / "r", {**USER_CLASSIFICATION, "task": "mrpc"}),
                            train_data=tf.data.Dataset.from_tensor_slices(arrays),
                            eval_data=tf.data.Dataset.from_tensor_slices(arrays))
    metrics = trainer.evaluate()
    assert metrics["examples"] == float(N)
    assert {"accuracy", "f1", "mcc", "loss"} <= set(metrics)


def test_keras_style_pairs_are_accepted(tmp_path):
    arrays = classification_arrays()
    features = {k: v for k, v in arrays.items() if k != "labels"}
    pairs = tf.data.Dataset.from_tensor_slices((features, arrays["labels"]))
    trainer = AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION, steps=2),
                            train_data=pairs).fit()
    assert trainer.summary["step"] == 2


@pytest.mark.slow  # a tokenizer and two tiny runs: 25-50 s on a loaded machine
def test_a_factory_over_the_same_features_trains_to_the_weights_of_the_file_pipeline(tmp_path):
    """A GLUE-style file through albertkit's classification pipeline, and its features given
    as a factory that reads them in albertkit's order (data.stream.index_stream): the same
    weights."""
    from albertkit.data.stream import index_stream
    from albertkit.data.tokenizer import TokenizerConfig, train_tokenizer
    from albertkit.tasks import build_task

    good, bad = ["great", "fine", "warm", "bright", "lovely"], ["dull", "awful", "cold", "dark"]
    rows = [(f"a {word} film about {topic}.", int(word in good)) for word in good + bad
            for topic in ("love", "war", "ships")]
    tsv = tmp_path / "train.tsv"
    tsv.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    train_tokenizer(None, tmp_path / "tok", TokenizerConfig(vocab_size=40, num_threads=1),
                    sentences=[t for t, _ in rows])
    files = {"kind": "classification", "task": "sst2", "train_file": str(tsv),
             "tokenizer": str(tmp_path / "tok"), "max_seq_length": SEQ}
    own_cfg = config(tmp_path / "own", files, steps=5, seed=3)
    AlbertTrainer(own_cfg).fit()

    task = build_task(own_cfg, own_cfg.model.spec)
    arrays = task.features(task.train_examples)  # what the file pipeline trains on
    n = len(arrays["labels"])
    table = {k: tf.constant(v) for k, v in arrays.items()}

    def factory(position):
        order = index_stream(n, seed=3, rank=0, size=1, batch_size=1, start_batch=position)
        return order.unbatch().map(lambda i: {k: tf.gather(v, i) for k, v in table.items()})

    AlbertTrainer(config(tmp_path / "user", {"kind": "user_classification", "task": "sst2",
                                             "max_seq_length": SEQ}, steps=5, seed=3),
                  train_data=factory).fit()
    assert_same(weights(tmp_path / "own"), weights(tmp_path / "user"))


# --------------------------------------------------------------------------- optimizer
def test_a_user_optimizer_is_used_and_resumed(tmp_path):
    data = tf.data.Dataset.from_tensor_slices(classification_arrays())
    opt = keras.optimizers.Adam(1e-3)
    trainer = AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION, steps=4),
                            train_data=data, optimizer=opt)
    trainer.fit(until_step=2)
    assert int(opt.iterations.numpy()) == 2  # this very instance took the steps
    assert any(np.abs(v.numpy()).sum() > 0 for v in opt.variables if "momentum" in v.path)
    saved = weights(tmp_path / "r", "optimizer")
    assert any(k.endswith("iteration") for k in saved)  # Keras names it so

    again = keras.optimizers.Adam(1e-3)
    AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION, steps=4),
                  train_data=data, optimizer=again).fit()
    assert int(again.iterations.numpy()) == 4  # resumed at 2, two more steps

    with pytest.raises(CheckpointError, match="optimizer"):
        AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION, steps=6),
                      train_data=data, optimizer=keras.optimizers.SGD(0.1)).fit()


# --------------------------------------------------------------------------- refusals
def one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("change, expected", [
    (lambda d: {k: v for k, v in d.items() if k != "segment_ids"}, "misses 'segment_ids'"),
    (lambda d: {**d, "input_ids": d["input_ids"][:, :8]},
     r"'input_ids' has shape \(8,\), expected \(16,\)"),
    (lambda d: {**d, "input_ids": d["input_ids"].astype(np.float32)},
     "'input_ids' is float32, expected integers"),
])
def test_bad_elements_get_one_line_errors(tmp_path, change, expected):
    data = tf.data.Dataset.from_tensor_slices(change(classification_arrays()))
    with pytest.raises(DatasetError, match=expected) as e:
        AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION), train_data=data).fit()
    one_line(e)


def test_batched_data_is_refused_with_a_hint(tmp_path):
    data = tf.data.Dataset.from_tensor_slices(classification_arrays()).batch(2)
    with pytest.raises(DatasetError, match="looks batched") as e:
        AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION), train_data=data).fit()
    one_line(e)


def test_data_that_ends_too_soon_is_refused(tmp_path):
    data = tf.data.Dataset.from_tensor_slices(classification_arrays()).take(3)
    with pytest.raises(TrainingError, match="ended at example 3: one optimizer step needs 4"
                       ) as e:
        AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION, steps=2),
                      train_data=lambda position: data.skip(position)).fit()
    one_line(e)


def test_ambiguous_or_missing_sources_are_refused(tmp_path):
    data = tf.data.Dataset.from_tensor_slices(classification_arrays())
    with pytest.raises(ConfigError, match="data.kind=synthetic reads its own data") as e:
        AlbertTrainer(config(tmp_path / "a", SYNTHETIC), train_data=data)
    one_line(e)
    with pytest.raises(ConfigError, match="pass train_data="):
        AlbertTrainer(config(tmp_path / "b", USER_CLASSIFICATION)).fit()
    assert not (tmp_path / "b").exists()  # refused before the run directory is made
    with pytest.raises(TypeError, match="tf.data.Dataset or a factory"):
        AlbertTrainer(config(tmp_path / "c", USER_CLASSIFICATION), train_data=[1, 2])
    with pytest.raises(TypeError, match="keras.optimizers.Optimizer, got str"):
        AlbertTrainer(config(tmp_path / "d", USER_CLASSIFICATION), train_data=data,
                      optimizer="adam")
    with pytest.raises(ConfigError, match="cannot go with it"):
        AlbertTrainer(config(tmp_path / "e", USER_CLASSIFICATION), train_data=data
                      ).to_sagemaker()
    with pytest.raises(ValueError, match="needs its outputs"):
        TrainerConfig.from_dict({"data": {"kind": "user_classification"}})


def test_a_sagemaker_job_of_a_user_data_kind_is_refused_from_the_config_alone(tmp_path, capsys):
    # `albertkit launch` has only the config: no examples given in Python can travel
    from albertkit.cli import main as cli_main
    from albertkit.sagemaker import to_sagemaker

    cfg = config(tmp_path / "j", USER_CLASSIFICATION)
    sm = {"role_arn": "arn:aws:iam::123456789012:role/r", "output_path": "s3://my-bucket/albertkit",
          "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"}
    refusal = ("data.kind=user_classification trains on examples given in Python "
               "(AlbertTrainer(train_data=...)), which a job does not have")
    with pytest.raises(ConfigError, match=re.escape(refusal)):
        to_sagemaker(cfg, env_defaults={}, **sm)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(cfg.to_dict() | {"sagemaker": sm}), encoding="utf-8")
    assert cli_main(["launch", "--config", str(path), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and refusal in err


def test_several_processes_are_refused(tmp_path):
    class TwoProcesses:  # only what the trainer reads before it refuses
        size, rank, replicas, is_chief = 2, 0, 2, True

    data = tf.data.Dataset.from_tensor_slices(classification_arrays())
    with pytest.raises(ConfigError, match="distributed.backend=single only") as e:
        AlbertTrainer(config(tmp_path / "r", USER_CLASSIFICATION), TwoProcesses(),
                      train_data=data).fit()
    one_line(e)


# --------------------------------------------------------------------------- the guide
@pytest.mark.slow  # two or three tiny runs: 25-50 s on a loaded machine
def test_the_embed_guide_runs_as_written(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(blocks[0], str(GUIDE), "exec"), scope)  # noqa: S102 - our own guide
    trainer = scope["trainer"]
    assert trainer.summary["status"] == "completed" and trainer.summary["step"] == 8
    assert "completed 8" in capsys.readouterr().out
    steps = [int(p.name.split("-")[1]) for p in (tmp_path / "runs/my-classifier/checkpoints"
                                                 ).glob("ckpt-*")]
    assert 4 in steps and 8 in steps
    # the factory starts anywhere: the examples from position 32 are those an uninterrupted
    # stream has there
    factory = scope["train_data"]
    whole = [int(e["input_ids"][0]) for e in factory(0).take(48)]
    assert [int(e["input_ids"][0]) for e in factory(32).take(16)] == whole[32:]
    # an ordinary run directory: it exports, and it reports
    out = trainer.export(tmp_path / "exported")
    assert (out / "config.json").is_file()
    from albertkit.report import write_run_report

    write_run_report(tmp_path / "runs/my-classifier")
    assert (tmp_path / "runs/my-classifier/report/report.md").is_file()
