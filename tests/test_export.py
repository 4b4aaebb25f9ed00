"""Export a trained run (HF + albertkit formats) and start new runs from exports."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from albertkit.config import TrainerConfig
from albertkit.training.export import export_run, initialise_from, load_run_model
from albertkit.training.trainer import AlbertTrainer
from conftest import tiny_raw_config


def raw(run_dir, **extra):
    cfg = tiny_raw_config(
        run_dir,
        data={"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 5,
              "num_examples": 64, "eval_examples": 0},
        optimizer={"kind": "lamb", "learning_rate": 1e-2},
        runtime={"micro_batch_size": 4, "global_batch_size": 4, "max_steps": 4,
                 "eval_every_steps": 0, "xla": False},
    )
    cfg.update(extra)
    return cfg


def batch(n=3, seq=32, vocab=101):
    rng = np.random.default_rng(1)
    ids = rng.integers(5, vocab, size=(n, seq)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[0, 20:] = 0
    return ids, mask, np.zeros_like(ids)


@pytest.mark.torch
@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_trained_run_exports_to_pytorch_with_parity(tmp_path):
    import torch
    import transformers

    run = tmp_path / "run"
    AlbertTrainer(TrainerConfig.model_validate(raw(run))).fit()
    out = subprocess.run([sys.executable, "-m", "albertkit.cli", "export", "--format", "hf",
                          str(run), str(tmp_path / "hf")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == [
        "AlbertForPreTraining"]

    _, model = load_run_model(run)
    ids, mask, seg = batch()
    ours = model.full_mlm_logits({"input_ids": ids.astype(np.int32),
                                  "input_mask": mask.astype(np.int32),
                                  "segment_ids": seg.astype(np.int32)})
    pt = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        theirs = pt(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                    token_type_ids=torch.tensor(seg)).prediction_logits.numpy()
    real = mask.astype(bool)
    assert np.abs(np.asarray(ours)[real] - theirs[real]).max() <= 1e-5


def test_albertkit_export_starts_a_finetuning_run(tmp_path):
    run = tmp_path / "pre"
    AlbertTrainer(TrainerConfig.model_validate(raw(run))).fit()
    exported = export_run(run, tmp_path / "ak", format="albertkit")
    assert (exported / "config.yaml").is_file() and list((exported / "checkpoints").iterdir())

    # Continue pretraining from the export: weights are carried over exactly.
    _, source = load_run_model(exported)
    cont = raw(tmp_path / "cont")
    cont["model"]["load_from"] = str(exported)
    trainer = AlbertTrainer(TrainerConfig.model_validate(cont))
    from albertkit.tasks.pretraining import PretrainingTask
    from albertkit.training.builders import resolve_spec

    spec = resolve_spec(trainer.config)
    assert spec == source.spec
    fresh = PretrainingTask(spec, 32, 5, micro_batch_size=1).build_model()
    missing = initialise_from(fresh, exported)
    assert missing == []
    for a, b in zip(source.trainable_variables, fresh.trainable_variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_load_from_rejects_shape_changes(tmp_path):
    run = tmp_path / "pre"
    AlbertTrainer(TrainerConfig.model_validate(raw(run))).fit()
    cfg = raw(tmp_path / "next")
    cfg["model"]["load_from"] = str(run)
    cfg["model"]["hidden_size"] = 64
    with pytest.raises(Exception, match=r"model.hidden_size=64 disagrees"):
        AlbertTrainer(TrainerConfig.model_validate(cfg)).fit()
