"""Move trained weights in and out of runs: export a run, initialise a model from elsewhere.

* ``export_run(run_dir, out_dir, "hf")`` writes a Hugging Face directory (``config.json``,
  ``model.safetensors``, tokenizer files) that transformers' PyTorch classes load.
* ``export_run(..., checkpoint="best")`` exports the checkpoint kept for the best eval metric
  instead of the newest (or ``checkpoint=STEP`` that step's).
* ``export_run(run_dir, out_dir, "albertkit")`` writes a self-contained albertkit directory
  (``config.yaml``, ``model_spec.json``, ``tokenizer/``, ``checkpoints/ckpt-N``) that a
  config can name in ``model.load_from``.
* Every export is written into a temporary sibling directory, marked with
  ``.albertkit-export.json`` and swapped in whole. ``out_dir`` must not be the run, inside it
  or above it, nor the working directory or above it; an existing non-empty ``out_dir`` is
  replaced only with ``overwrite=True`` and only if it is a previous export (holds the
  marker), so an export never deletes what it did not write.
* ``initialise_from(model, src)`` fills a model from a Hugging Face directory or an albertkit
  run/export: weights are matched by their Hugging Face names, so a pretraining run can start
  a SQuAD or classification model (the new head keeps its initialisation, with a warning).
"""

from __future__ import annotations

import logging
import shutil
import warnings
from pathlib import Path
from typing import Any

from albertkit.config import TASK_OF_KIND, TrainerConfig, registry
from albertkit.data.tokenizer_match import TOKENIZER_SUBDIR
from albertkit.errors import CheckpointError, ConfigError
from albertkit.fileio import load_yaml, replace_dir, temp_dir_beside
from albertkit.training.checkpoint import NEWEST, CheckpointManager, parse_checkpoint_choice

log = logging.getLogger("albertkit")


def load_run_model(run_dir: str | Path,
                   checkpoint: str | int = NEWEST) -> tuple[TrainerConfig, Any]:
    """The task model of an albertkit run (or albertkit export) with the weights of its
    ``checkpoint``: ``"newest"`` (the default), ``"best"`` or a step number."""
    from albertkit.config.sizes import AlbertSpec
    from albertkit.tasks import build_task

    run_dir = Path(run_dir)
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file():
        raise ConfigError(f"{run_dir}: not an albertkit run (no config.yaml)")
    values: dict[str, Any] = {"run_dir": str(run_dir), "model.load_from": None}
    data = load_yaml(cfg_path).get("data")
    if isinstance(data, dict) and TASK_OF_KIND.get(data.get("kind")) not in (None, "pretraining") \
            and data.get("tokenizer") is None \
            and "tokenizer" in registry.data_kinds()[data["kind"]].model_fields:
        # fine-tuned with the tokenizer of its model.load_from: the run keeps a copy
        values["data.tokenizer"] = str(run_dir / TOKENIZER_SUBDIR)
    cfg = TrainerConfig.from_yaml(cfg_path, values=values)
    spec = AlbertSpec.model_validate_json((run_dir / "model_spec.json").read_text())
    ckpt = CheckpointManager(run_dir / "checkpoints").select(checkpoint)
    if ckpt is None:
        raise CheckpointError(f"{run_dir / 'checkpoints'}: no usable checkpoint to load")
    task = build_task(cfg, spec)
    model = task.build_model()
    CheckpointManager.restore(ckpt, {"model": list(model.variables)})
    log.info("loaded %s (step %d)", ckpt.path, ckpt.step)
    return cfg, model


def run_tokenizer_dir(run_dir: Path) -> Path | None:
    """The run's copy of its tokenizer (``run_dir/tokenizer``), or None (with a warning: the
    export will carry none) when the run has none (synthetic data, or data whose tokenizer
    was not found)."""
    tok = Path(run_dir) / TOKENIZER_SUBDIR
    if tok.is_dir():
        return tok
    log.warning("%s has no %s/ (synthetic data, or data whose tokenizer was not found): the "
                "export carries no tokenizer, so fine-tuning from it needs data.tokenizer",
                run_dir, TOKENIZER_SUBDIR)
    return None


def export_run(run_dir: str | Path, out_dir: str | Path, format: str = "hf",
               overwrite: bool = False, checkpoint: str | int = NEWEST) -> Path:
    """Export a checkpoint of ``run_dir`` to ``out_dir`` (``hf`` or ``albertkit``).

    ``checkpoint`` is ``"newest"`` (the default), ``"best"`` (the one kept for the best
    eval metric) or a step number; a best or step checkpoint that does not exist raises
    :class:`CheckpointError`. ``overwrite`` replaces a previous export in ``out_dir``;
    anything else there is refused.
    """
    checkpoint = parse_checkpoint_choice(checkpoint)
    from albertkit.models.hf import check_export_target, write_export_marker

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if format not in ("hf", "albertkit"):
        raise ValueError(f"format={format!r}: expected 'hf' or 'albertkit'")
    check_export_target(out_dir, overwrite=overwrite, protect=(run_dir,))
    if format == "hf":
        from albertkit.models.hf import export_to_hf

        cfg, model = load_run_model(run_dir, checkpoint)
        id2label = None
        labels = getattr(cfg.data, "labels", None)
        if labels and len(labels) == getattr(model, "num_labels", -1):
            id2label = dict(enumerate(labels))
        return export_to_hf(model, out_dir, tokenizer_dir=run_tokenizer_dir(run_dir),
                            id2label=id2label, overwrite=overwrite)
    if format == "albertkit":
        ckpt = CheckpointManager(run_dir / "checkpoints").select(checkpoint)
        if ckpt is None:
            raise CheckpointError(f"{run_dir / 'checkpoints'}: no usable checkpoint to export")
        tmp = temp_dir_beside(out_dir)
        try:
            write_export_marker(tmp, {"format": "albertkit", "run_dir": str(run_dir),
                                      "step": ckpt.step})
            for name in ("config.yaml", "model_spec.json"):
                shutil.copy2(run_dir / name, tmp / name)
            tok = run_tokenizer_dir(run_dir)
            if tok is not None:
                shutil.copytree(tok, tmp / TOKENIZER_SUBDIR)
            shutil.copytree(ckpt.path, tmp / "checkpoints" / ckpt.path.name)
            # swap, then delete the old export: a crash in between never loses both
            replace_dir(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return out_dir


def initialise_from(model: Any, src: str | Path, spec: Any = None) -> list[str]:
    """Fill ``model`` from a Hugging Face directory or an albertkit run; returns missing names."""
    from albertkit.models.hf import hf_weight_map, load_hf_weights

    src = Path(src)
    if (src / "config.yaml").is_file() and (src / "model_spec.json").is_file():
        _, source = load_run_model(src)
        have = hf_weight_map(source)
        want = hf_weight_map(model)
        missing = []
        for name, (var, _) in want.items():
            if name in have and tuple(have[name][0].shape) == tuple(var.shape):
                var.assign(have[name][0].numpy())
            else:
                missing.append(name)
        if missing:
            warnings.warn(f"{src}: no weights for {len(missing)} variables of "
                          f"{type(model).__name__}, left at their initialisation: "
                          + ", ".join(missing), stacklevel=2)
        log.info("initialised %s from albertkit run %s", type(model).__name__, src)
        return missing
    if (src / "config.json").is_file():
        missing = load_hf_weights(model, src)
        log.info("initialised %s from Hugging Face directory %s", type(model).__name__, src)
        return missing
    raise ConfigError(f"model.load_from={src}: neither an albertkit run (config.yaml + "
                      "model_spec.json) nor a Hugging Face directory (config.json)")
