"""A run's objects and its mutable state, in one place.

:class:`RunState` is what a run carries from step to step and across a resume: the step it
resumed from, the best checkpoint so far, the data stream it reads, the newest checkpoint
written and smart sifting's totals. A checkpoint's ``state.json`` is written from it
(:meth:`RunState.to_checkpoint`) and read back into it (:meth:`RunState.restore`).

:class:`Run` is everything ``AlbertTrainer`` builds once (task, model, optimizer, step,
distributor, logger, checkpoint manager) plus its :class:`RunState`; hooks are built from
``(cfg, run)``.

Example:
    >>> state = RunState()
    >>> saved = state.to_checkpoint(step=4, accum=2, identity={"seed": 1}, reason="periodic")
    >>> saved["data_position"]
    {'format': 2, 'consumed_micro_batches': 8}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from albertkit.errors import CheckpointError
from albertkit.training.builders import ModelAndStep

if TYPE_CHECKING:
    from albertkit.config import TrainerConfig
    from albertkit.distributed import Distributor
    from albertkit.training.checkpoint import Checkpoint, CheckpointManager
    from albertkit.training.run_logger import RunLogger

log = logging.getLogger("albertkit")

# The data stream a checkpoint's position refers to: 2, the position-addressable streams;
# 1 for checkpoints of albertkit 0.1, whose position only counts micro-batches of that stream.
STREAM_VERSION = 2


class SiftCounters:
    """Smart sifting's totals over the run: examples seen, kept, dropped and scored, and the
    training FLOPs saved (resumed from the checkpoint, whose state records them).

    It is also a hook: called with each step's outputs, it adds their sifting counts.

    A dropped example saves its forward and backward pass (3 forward passes: the backward
    costs two); every example of a sifted step costs one scoring forward pass. So the saving
    is ``forward_flops x (3 x dropped - scored)``, with ``forward_flops`` the matmul FLOPs of
    one example's forward pass (:func:`albertkit.models.footprint.training_flops`).
    """

    def __init__(self, forward_flops: float) -> None:
        self.forward_flops = float(forward_flops)
        self.seen = self.kept = self.scored = 0

    def __call__(self, step: int, out: dict[str, float]) -> None:
        self.seen += int(out["sift_seen"])
        self.kept += int(out["sift_kept"])
        self.scored += int(out["sift_scored"])

    def state(self) -> dict[str, int]:
        return {"seen": self.seen, "kept": self.kept, "scored": self.scored}

    def restore(self, state: dict[str, int] | None) -> None:
        """Continue the totals of a checkpoint (none: it was written without sifting)."""
        state = state or {}
        self.seen, self.kept, self.scored = (int(state.get(k, 0))
                                             for k in ("seen", "kept", "scored"))

    def totals(self) -> dict[str, float]:
        dropped = self.seen - self.kept
        full = 3.0 * self.forward_flops * self.seen  # the same examples without sifting
        saved = self.forward_flops * (3.0 * dropped - self.scored)
        return {"sift_examples_seen": float(self.seen), "sift_examples_kept": float(self.kept),
                "sift_examples_dropped": float(dropped),
                "sift_examples_scored": float(self.scored), "sift_flops_saved": saved,
                "sift_flops_saved_share": saved / full if full else 0.0}


@dataclass
class RunState:
    """The run's mutable state: what a checkpoint saves and a resume restores.

    Attributes:
        start_step: the global step this process started from (a resumed checkpoint's; 0).
        best: the best checkpoint so far (``metric``, ``value``, ``step``, ``path``) or None.
        last_checkpoint: the path of the newest checkpoint this run wrote (chief only).
        stream_version: the data stream the position counts in: 2, or 1 after resuming an
            albertkit 0.1 checkpoint, whose run goes on reading the 0.1 stream (and says so
            in every later checkpoint).
        sifting: smart sifting's totals (None when sifting is off).
    """

    start_step: int = 0
    best: dict[str, Any] | None = None
    last_checkpoint: str | None = None
    stream_version: int = STREAM_VERSION
    sifting: SiftCounters | None = None

    def to_checkpoint(self, step: int, accum: int, identity: dict[str, Any],
                      reason: str) -> dict[str, Any]:
        """The ``state.json`` of a checkpoint at ``step``: the data position (micro-batches
        consumed), the settings that must match to resume exactly (``identity``), the best
        checkpoint so far, why it was written and the sifting totals."""
        consumed = step * accum
        state = {"consumed_micro_batches": consumed,
                 "data_position": {"format": self.stream_version,
                                   "consumed_micro_batches": consumed},
                 **identity,
                 "best": self.best, "reason": reason}
        if self.sifting is not None:
            state["sifting"] = self.sifting.state()
        return state

    def restore(self, ckpt: Checkpoint) -> None:
        """Continue from ``ckpt``: its step, data stream, best checkpoint and sifting totals.
        Raises :class:`CheckpointError` (before changing anything) for a data position
        newer than this albertkit."""
        self.stream_version = stream_version(ckpt)
        self.start_step = ckpt.step
        self.best = ckpt.state.get("best")
        if self.sifting is not None:
            self.sifting.restore(ckpt.state.get("sifting"))


def stream_version(ckpt: Checkpoint) -> int:
    """The data stream a checkpoint's position refers to: 2 (position-addressable), or 1 for
    checkpoints of albertkit 0.1, whose position only counts micro-batches of the 0.1 stream."""
    position = ckpt.state.get("data_position")
    if position is None:
        log.info("%s was written by albertkit 0.1 (no data_position): resuming its data "
                 "stream the 0.1 way, re-reading and skipping %d consumed micro-batches",
                 ckpt.path, ckpt.state.get("consumed_micro_batches", 0))
        return 1
    if position.get("format") not in (1, 2):
        raise CheckpointError(f"{ckpt.path}: data_position format {position.get('format')!r} "
                              "is newer than this albertkit (1 or 2); upgrade albertkit")
    return int(position["format"])


def resume_identity(cfg: TrainerConfig, parts: ModelAndStep,
                    distributor: Distributor) -> dict[str, Any]:
    """What must not change for a resume to continue the same data stream: the data
    position is "micro-batch N of this rank's seeded stream", which only means the same
    thing if the stream is built the same way (rank count and shuffle window included); and
    the optimizer's class (its saved slots only mean the same thing to the same kind of
    optimizer, the config's or one given to ``AlbertTrainer``)."""
    return {"seed": cfg.runtime.seed,
            "micro_batch_size": parts.task.micro_batch_size,
            "global_batch_size": cfg.runtime.global_batch_size,
            "replicas": distributor.replicas,
            "shuffle_buffer": getattr(cfg.data, "shuffle_buffer", None),
            "optimizer": type(parts.optimizer).__name__}


@dataclass
class Run(ModelAndStep):
    """Everything ``fit``/``evaluate`` build once, and the run's state. Not public."""

    distributor: Distributor
    logger: RunLogger
    checkpoint_manager: CheckpointManager
    state: RunState = field(default_factory=RunState)
