"""Checks for a run that starts from another run's weights (``model.load_from``), such as
phase 2 of two-phase pretraining (docs/howto/two-phase.md).

A run started this way takes the architecture and the weights of the source and nothing
else: its optimizer (iterations, slots) and learning-rate schedule are built fresh from its
own config. Two things can only be found out once the source is known, so they are checked
here rather than when the config is parsed:

* the data's sequence length must fit the source's ``max_position_embeddings`` (the position
  table is a weight: it cannot grow between runs, so phase 1 must already be built for
  phase 2's length) — :func:`check_seq_fits`;
* an albertkit run whose newest checkpoint is short of its ``runtime.max_steps`` (stopped or
  crashed, or an export of an earlier step) still has weights to start from, but not its
  final ones: say so —
  :func:`warn_if_unfinished`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from albertkit.errors import ConfigError

log = logging.getLogger("albertkit")


def check_seq_fits(cfg: Any, spec: Any, src: str | Path) -> None:
    """Refuse a data sequence length beyond the ``max_position_embeddings`` of the model
    ``cfg.model.load_from`` (``src``) brings; ``spec`` is that model's architecture."""
    for field in ("seq_length", "max_seq_length"):
        seq = getattr(cfg.data, field, None)
        if seq is not None:
            break
    else:
        return
    if seq > spec.max_position_embeddings:
        raise ConfigError(
            f"data.{field}={seq} exceeds max_position_embeddings="
            f"{spec.max_position_embeddings} of model.load_from={src}: position embeddings "
            "cannot grow between runs; build the first run with max_position_embeddings >= "
            "the longest sequence length any later run uses")


def warn_if_unfinished(src: str | Path) -> None:
    """Log a warning when the albertkit run ``src`` stopped before its ``runtime.max_steps``:
    its newest checkpoint, which ``model.load_from`` takes, is then not its final one."""
    from albertkit.fileio import load_yaml
    from albertkit.training.checkpoint import NEWEST, CheckpointManager

    src = Path(src)
    if not (src / "config.yaml").is_file() or not (src / "checkpoints").is_dir():
        return  # a Hugging Face directory: nothing to say
    try:
        total = int(load_yaml(src / "config.yaml")["runtime"]["max_steps"])
    except (KeyError, TypeError, ValueError):
        return
    ckpt = CheckpointManager(src / "checkpoints").select(NEWEST)
    if ckpt is not None and ckpt.step < total:
        log.warning("model.load_from=%s: its newest checkpoint is step %d of runtime.max_steps="
                    "%d, not the run's final one (it stopped early, or this is an export of an "
                    "earlier step); starting from those weights", src, ckpt.step, total)
