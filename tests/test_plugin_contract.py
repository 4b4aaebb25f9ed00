"""The plugin contract's data half, from outside: a task written only against albertkit's
public API (``tests/fixtures/outside_task``, found through its entry point) resumes
bit-identically after kill -9, because its data is :class:`albertkit.data.ExampleData`;
and an :class:`albertkit.models.HFExportable` model that is not built yet loads weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from test_resume_kill import assert_bit_identical, latest_step, processes_of

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(__file__).with_name("fixtures") / "outside_task"
PACKAGE = SITE / "albertkit_outside_task"


def test_the_outside_task_imports_only_public_names():
    sys.path.insert(0, str(ROOT / "examples" / "plugins" / "albertkit-tagging" / "tests"))
    try:
        from test_tagging_public_api import private_imports
    finally:
        sys.path.pop(0)
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) == 2
    for path in files:
        assert private_imports(path.read_text(encoding="utf-8"), path.name) == []
    assert "from albertkit.data import ExampleData" in (PACKAGE / "task.py").read_text()


def raw_config(run_dir: Path, max_steps: int) -> dict:
    return {
        "run_dir": str(run_dir),
        "model": {"size": "tiny", "vocab_size": 64, "hidden_size": 32, "embedding_size": 16,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 16, "hidden_dropout_prob": 0.1,
                  "classifier_dropout_prob": 0.1},
        "data": {"kind": "parity", "num_train": 26, "num_eval": 8, "seq_length": 8},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3, "schedule": {"warmup_steps": 3}},
        "runtime": {"micro_batch_size": 4, "global_batch_size": 8, "max_steps": max_steps,
                    "eval_every_steps": 0, "xla": False, "seed": 11},
        "checkpoint": {"every_steps": 4, "keep_last": 2},
        "logging": {"log_every_steps": 4, "progress_bar": False, "tensorboard": False},
    }


def command(config: Path) -> list[str]:
    return [sys.executable, "-m", "albertkit.cli", "finetune", "--config", str(config)]


def environment() -> dict[str, str]:
    """This environment, with the outside task's "installed" distribution on the path."""
    path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def write_config(tmp_path: Path, name: str, max_steps: int) -> Path:
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps(raw_config(tmp_path / name, max_steps)))
    return config


@pytest.mark.slow  # three training processes of about 20 s each on two loaded cores
def test_an_outside_task_resumes_bit_identically_after_kill9(tmp_path):
    # 26 examples, 8 per step: an epoch ends inside a step, the kill lands in epoch 2 or 3
    max_steps, kill_after = 24, 8
    reference = write_config(tmp_path, "reference", max_steps)
    done = subprocess.run(command(reference), env=environment(), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "reference" / "summary.json").read_text())
    assert summary["task"] == "parity" and summary["step"] == max_steps

    config, run = write_config(tmp_path, "killed", max_steps), tmp_path / "killed"
    proc = subprocess.Popen(command(config), env=environment(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 600
    while latest_step(run) < kill_after and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training finished before it could be killed"
    for pid in processes_of(str(config), exclude=proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    killed_at = latest_step(run)
    assert kill_after <= killed_at < max_steps

    again = subprocess.run(command(config), env=environment(), capture_output=True,
                           text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from_step"] == killed_at and summary["step"] == max_steps
    assert_bit_identical(tmp_path / "reference", run)


# --------------------------------------------------------------------------- HFExportable
def test_load_hf_weights_builds_an_unbuilt_exportable_model(tmp_path):
    import keras

    from albertkit.config import AlbertSpec
    from albertkit.models import AlbertEncoder, HFExportable, export_to_hf, load_hf_weights

    class Tagger(keras.Model):  # no build_for, no argument-free build()
        hf_architectures = ("AlbertForTokenClassification",)

        def __init__(self, spec, num_labels):
            super().__init__()
            self.spec, self.num_labels = spec, num_labels
            self.albert = AlbertEncoder(spec, add_pooling_layer=False)
            self.classifier = keras.layers.Dense(num_labels, name="classifier")

        def call(self, inputs, training=False):
            hidden = self.albert(inputs, training=training)["sequence_output"]
            return {"logits": self.classifier(hidden)}

        def hf_head_weights(self):
            return {"classifier.weight": (self.classifier.kernel, True),
                    "classifier.bias": (self.classifier.bias, False)}

    spec = AlbertSpec(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    source = Tagger(spec, 3)
    batch = {"input_ids": np.arange(12, dtype=np.int32).reshape(2, 6)}
    expected = np.asarray(source(batch)["logits"])
    export_to_hf(source, tmp_path / "hf")

    target = Tagger(spec, 3)
    assert isinstance(target, HFExportable) and not target.built
    assert load_hf_weights(target, tmp_path / "hf") == []
    np.testing.assert_array_equal(np.asarray(target(batch)["logits"]), expected)


def test_a_model_that_cannot_be_built_from_token_ids_says_how_to_fix_it(tmp_path):
    import keras

    from albertkit.config import AlbertSpec
    from albertkit.models import AlbertEncoder, export_to_hf, load_hf_weights

    class NeedsImages(keras.Model):
        hf_architectures = ("AlbertModel",)

        def __init__(self, spec):
            super().__init__()
            self.spec = spec
            self.albert = AlbertEncoder(spec, add_pooling_layer=False)

        def call(self, inputs):
            return self.albert({"input_ids": inputs["pixels"]})

        def hf_head_weights(self):
            return {}

    spec = AlbertSpec(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    hf = export_to_hf(AlbertEncoder(spec), tmp_path / "hf")
    with pytest.raises(TypeError, match=r"NeedsImages is not built.*KeyError.*build_for"):
        load_hf_weights(NeedsImages(spec), hf)
