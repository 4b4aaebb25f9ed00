"""AlbertTrainer: the public entry point that builds a run from a TrainerConfig and runs it.

``AlbertTrainer(cfg)`` only stores the config. ``fit()`` builds the distributor, then the task,
model, optimizer and shared step (:mod:`~albertkit.training.builders`) and the task's data,
resumes from the newest good checkpoint in ``run_dir/checkpoints`` if there is one, runs the
loop (:mod:`~albertkit.training.loop`) with its hooks (logging, evaluation and the best
checkpoint, periodic checkpoints, the stop signal), and writes ``run_dir/config.yaml`` and
``run_dir/summary.json``. Everything task-specific goes through the task's protocol
(:class:`~albertkit.tasks.base.Task`).

Example:
    >>> from albertkit import AlbertTrainer, TrainerConfig
    >>> cfg = TrainerConfig.from_yaml("examples/configs/pretrain_tiny_synthetic.yaml")
    >>> trainer = AlbertTrainer(cfg).fit()
    >>> trainer.summary["eval"]["mlm_accuracy"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.config import ConfigError, TrainerConfig
from albertkit.distributed import build_distributor
from albertkit.errors import CheckpointError, TrainingError
from albertkit.fileio import atomic_write_text, replace_dir
from albertkit.hardware import bfloat16_warning, local_device_kind
from albertkit.tasks.base import TaskData
from albertkit.training.builders import ModelAndStep, build_model_and_step
from albertkit.training.checkpoint import CheckpointManager, RunDirLock
from albertkit.training.hooks import (
    Checkpointing,
    EvalAndBest,
    MetricWindow,
    NonFiniteGuard,
    ProfileWindow,
    SiftCounters,
    StopSignal,
    Summary,
    stop_on_signals,
)
from albertkit.training.loop import train_loop
from albertkit.training.run_logger import RunLogger
from albertkit.training.timing import StepClock
from albertkit.training.tracking import MlflowTracker

log = logging.getLogger("albertkit")

@dataclass
class _Run(ModelAndStep):
    """Everything ``fit``/``evaluate`` build once. Not public."""

    distributor: Any
    checkpoints: Checkpointing
    logger: RunLogger
    start_step: int = 0


class AlbertTrainer:
    """Pretrain or fine-tune ALBERT from one typed config.

    Args:
        config: the validated root config.
        distributor: optional backend instance (built from ``config.distributed`` if None).
    """

    def __init__(self, config: TrainerConfig, distributor: Any = None) -> None:
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"AlbertTrainer expects a TrainerConfig, got {type(config).__name__}")
        self.config = config
        self._distributor = distributor
        self.summary: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._lock: RunDirLock | None = None

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run_dir)

    # ================================================================== public API
    def fit(self, until_step: int | None = None) -> AlbertTrainer:
        """Train to ``runtime.max_steps`` (resuming if a checkpoint exists); returns self.

        Args:
            until_step: stop early at this global step with a checkpoint, as if interrupted
                (the schedule still runs to ``runtime.max_steps``; a later ``fit()`` resumes).
        """
        with stop_on_signals(self._stop):
            try:
                run = self._build(for_training=True)
                try:
                    self.summary = self._train(run, until_step)
                finally:
                    run.logger.close()
            finally:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None
        return self

    def evaluate(self) -> dict[str, float]:
        """Evaluate the newest checkpoint (or the initial weights) on the eval data."""
        run = self._build(for_training=False)
        try:
            return self._evaluate(run)
        finally:
            run.logger.close()

    def to_sagemaker(self, **overrides: Any):
        """A SageMaker job for this config; ``.plan()`` builds the request, ``.fit()`` submits."""
        from albertkit.sagemaker.submit import to_sagemaker

        return to_sagemaker(self.config, **overrides)

    def export(self, out_dir: str | Path, format: str = "hf", overwrite: bool = False) -> Path:
        """Export the newest checkpoint as a Hugging Face directory (``format="hf"``).

        ``overwrite`` replaces a previous export in ``out_dir`` (never anything else).
        """
        from albertkit.training.export import export_run
        from albertkit.training.tracking import log_export

        out = export_run(self.run_dir, Path(out_dir), format=format, overwrite=overwrite)
        log_export(self.run_dir, out, self.config)
        return out

    # ================================================================== building
    def _build(self, for_training: bool) -> _Run:
        cfg = self.config
        if cfg.runtime.malloc_arenas:
            from albertkit.training.native import limit_malloc_arenas

            limit_malloc_arenas(cfg.runtime.malloc_arenas)
        distributor = self._distributor or build_distributor(cfg.distributed)
        self._distributor = distributor
        is_chief = distributor.is_chief
        if is_chief and for_training:
            try:
                self.run_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise TrainingError(f"run_dir={self.run_dir} cannot be created or written: "
                                    f"{e.strerror or e}") from None
            # held until fit() returns: a second trainer here is refused before it builds a
            # model or touches the checkpoints (only the chief writes, so only the chief locks)
            self._lock = RunDirLock(self.run_dir).acquire()
        parts = build_model_and_step(cfg, distributor)
        logger = RunLogger(self.run_dir, enabled=is_chief and for_training,
                           tensorboard=cfg.logging.tensorboard)
        checkpoints = Checkpointing(
            CheckpointManager(self.run_dir / "checkpoints", cfg.checkpoint.keep_last),
            distributor, parts.groups(), parts.accum,
            {**self._resume_identity(parts, distributor), "model_spec": parts.spec.model_dump(),
             "task": cfg.task},
            cfg.checkpoint.every_steps, cfg.runtime.max_steps)
        if cfg.runtime.sifting is not None:
            checkpoints.sifting = SiftCounters(_forward_flops(parts))
        run = _Run(**vars(parts), distributor=distributor, checkpoints=checkpoints,
                   logger=logger)
        if for_training and not cfg.checkpoint.resume:
            self._refuse_foreign_checkpoints(run)
        resumed = cfg.checkpoint.resume and self._restore(run, is_chief and for_training)
        model, spec = run.model, run.spec
        if not resumed and cfg.model.load_from is not None:
            from albertkit.training.export import initialise_from

            initialise_from(model, cfg.model.load_from, spec)
        distributor.broadcast_variables(list(model.variables) + list(run.optimizer.variables)
                                        + run.step.state_variables)
        if distributor.size > 1:
            _decorrelate_dropout(model, distributor.rank)
        if is_chief and for_training:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            cfg.to_yaml(self.run_dir / "config.yaml")
            atomic_write_text(self.run_dir / "model_spec.json", spec.model_dump_json(indent=2))
            log.info(
                "task=%s model=%s params=%s backend=%s replicas=%d micro_batch=%d "
                "accumulation=%d global_batch=%d precision=%s xla: %s",
                cfg.task,
                f"{spec.num_hidden_layers}x{spec.hidden_size} (E={spec.embedding_size}, "
                f"vocab={spec.vocab_size}"
                + (f", from {cfg.model.load_from})" if cfg.model.load_from else
                   f", size={cfg.model.size})"),
                f"{model.count_params():,}", cfg.distributed.backend,
                distributor.replicas, run.task.micro_batch_size, run.accum,
                cfg.runtime.global_batch_size, cfg.runtime.precision,
                run.step.xla.describe(cfg.runtime.xla))
            slow = bfloat16_warning(local_device_kind(), cfg.runtime.precision)
            if slow:
                log.warning(slow)
        return run

    def _resume_identity(self, parts: ModelAndStep, distributor: Any) -> dict[str, Any]:
        """What must not change for a resume to continue the same data stream: the data
        position is "micro-batch N of this rank's seeded stream", which only means the same
        thing if the stream is built the same way (rank count and shuffle window included)."""
        return {"seed": self.config.runtime.seed,
                "micro_batch_size": parts.task.micro_batch_size,
                "global_batch_size": self.config.runtime.global_batch_size,
                "replicas": distributor.replicas,
                "shuffle_buffer": getattr(self.config.data, "shuffle_buffer", None)}

    @staticmethod
    def _refuse_foreign_checkpoints(run: _Run) -> None:
        """checkpoint.resume=false next to an earlier run's checkpoints would interleave the two
        runs' steps, and keep_last pruning (oldest step first) would then delete the new run's
        checkpoints, or the old run's: refuse before anything is written."""
        found = run.checkpoints.manager.list()
        if found:
            raise CheckpointError(
                f"{run.checkpoints.manager.directory} holds checkpoints of an earlier run "
                f"(steps {found[0].name} .. {found[-1].name}) and checkpoint.resume=false: "
                "this run's checkpoints would be mixed with them and pruning would delete one "
                "run's or the other's; use a new run_dir (model.load_from=<old run_dir> "
                "starts from its weights) or resume")

    def _restore(self, run: _Run, writer: bool) -> bool:
        # only the process that writes checkpoints moves damaged ones aside
        ckpt = run.checkpoints.manager.resume_point(
            allow_fresh_start=self.config.checkpoint.allow_fresh_start_if_damaged,
            quarantine=writer)
        if ckpt is None:
            return False
        saved_spec = ckpt.state.get("model_spec")
        if saved_spec is not None and saved_spec != run.spec.model_dump():
            diff = {k: (saved_spec.get(k), v) for k, v in run.spec.model_dump().items()
                    if saved_spec.get(k) != v}
            raise CheckpointError(
                f"{ckpt.path}: checkpoint is for a different model (checkpoint vs config: "
                f"{diff}); use a new run_dir for a different model")
        now = self._resume_identity(run, run.distributor)
        changed = {k: (ckpt.state[k], v) for k, v in now.items()
                   if k in ckpt.state and ckpt.state[k] != v}
        if changed:
            raise CheckpointError(
                f"{ckpt.path}: cannot resume exactly, the run changed since this checkpoint "
                f"(checkpoint vs now: {changed}); restore those settings, or start a new "
                "run_dir with model.load_from pointing at this run")
        run.checkpoints.stream_version = _stream_version(ckpt)
        run.checkpoints.manager.restore(ckpt, run.groups())
        run.start_step = ckpt.step
        run.checkpoints.best = ckpt.state.get("best")
        if run.checkpoints.sifting is not None:
            run.checkpoints.sifting.restore(ckpt.state.get("sifting"))
        log.info("resumed from %s (step %d)", ckpt.path, ckpt.step)
        return True

    # ================================================================== training
    def _train(self, run: _Run, until_step: int | None = None) -> dict[str, Any]:
        cfg = self.config
        total = cfg.runtime.max_steps
        done = self.run_dir / "summary.json"
        if run.start_step >= total and done.is_file():
            log.info("run already complete at step %d (runtime.max_steps=%d): nothing to do; "
                     "raise runtime.max_steps to train further", run.start_step, total)
            return json.loads(done.read_text())
        tracker = MlflowTracker.start(cfg, self.run_dir) if run.distributor.is_chief else None
        if tracker is not None:
            run.logger.sinks.append(tracker)
        try:
            summary = self._train_tracked(run, until_step)
        except BaseException:
            if tracker is not None:
                tracker.finish("failed", [self.run_dir / "config.yaml"])
            raise
        if tracker is not None:
            tracker.finish(summary["status"],
                           [self.run_dir / "summary.json", self.run_dir / "config.yaml"])
        return summary

    def _train_tracked(self, run: _Run, until_step: int | None) -> dict[str, Any]:
        from tqdm.auto import tqdm

        cfg = self.config
        total = cfg.runtime.max_steps
        data = run.task.datasets(cfg, run.distributor)
        self._snapshot_tokenizer(run, data)
        batches = iter(data.train(skip_micro_batches=run.start_step * run.accum,
                                  accum=run.accum,
                                  stream_version=run.checkpoints.stream_version))
        chief = run.distributor.is_chief
        evals = EvalAndBest(lambda step: self._evaluate(run, data, step), run.task.best_metric,
                            run.checkpoints, cfg.runtime.eval_every_steps if data.has_eval else 0,
                            total, cfg.checkpoint.keep_best)
        with tqdm(total=total, initial=run.start_step, unit="step", dynamic_ncols=True,
                  disable=not (chief and cfg.logging.progress_bar), desc=cfg.task) as bar:
            breakdown = cfg.logging.breakdown
            clock = StepClock(cfg.logging.log_every_steps if breakdown else 0,
                              cfg.logging.input_bound_share, run.distributor, gpu=breakdown)
            window = MetricWindow(run.task, run.step, run.optimizer, run.logger, bar,
                                  cfg.logging.log_every_steps, total,
                                  cfg.runtime.global_batch_size,
                                  echo=not cfg.logging.progress_bar,
                                  clock=clock if breakdown else None,
                                  sifting=run.checkpoints.sifting)
            rank = run.distributor.rank
            profiler = ProfileWindow(cfg.runtime.profile, rank, self.run_dir / "tensorboard"
                                     / ("" if rank == 0 else f"rank{rank}"))
            hooks = [
                *([run.checkpoints.sifting] if run.checkpoints.sifting else []),
                window,
                NonFiniteGuard(run.step, cfg.runtime.max_nonfinite_steps, window,
                               run.checkpoints.manager.directory),
                evals,
                run.checkpoints,
                StopSignal(self._stop, run.distributor, cfg.logging.log_every_steps,
                           until_step),
                profiler,
            ]
            profiler.begin(run.start_step + 1)
            try:
                result = train_loop(run.step, batches, run.start_step, total, hooks, clock)
            finally:
                profiler.close()
                clock.close()
        if result.stopped_by is None and data.has_eval:
            evals.run(result.step)
        run.checkpoints.save(result.step, "interrupted" if result.stopped_by else "final")
        summary = Summary(self.run_dir / "summary.json", cfg.task, total, run.start_step,
                          cfg.runtime.global_batch_size, run.accum, run.distributor.replicas,
                          int(run.model.count_params()), chief)
        timing = ({**window.last_time, "input_bound": clock.ever_input_bound}
                  if window.last_time else None)
        return summary(result.step, result.stopped_by, result.wall_seconds, window.last,
                       evals.last, run.checkpoints.best, int(run.step.skipped_steps.numpy()),
                       run.checkpoints.last_path, timing,
                       run.checkpoints.sifting.totals() if run.checkpoints.sifting else None)

    def _snapshot_tokenizer(self, run: _Run, data: TaskData) -> None:
        """Copy the run's tokenizer into ``run_dir/tokenizer`` so the run is self-contained."""
        src = data.tokenizer_dir
        dst = self.run_dir / "tokenizer"
        if src is None or not run.distributor.is_chief or dst.exists():
            return
        src = Path(src)
        tmp = self.run_dir / ".tokenizer.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        if src.is_dir():  # a tokenizer or Hugging Face model directory: not its weights
            shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("*.safetensors*", "*.bin"))
        elif src.is_file():  # a bare spiece.model
            tmp.mkdir()
            shutil.copy2(src, tmp / "spiece.model")
        else:
            raise ConfigError(f"tokenizer directory not found: {src}")
        replace_dir(tmp, dst)

    # ================================================================== evaluation
    def _evaluate(self, run: _Run, data: TaskData | None = None,
                  step: int | None = None) -> dict[str, float]:
        if data is None:
            data = run.task.datasets(self.config, run.distributor)
        step = run.start_step if step is None else step
        if not data.has_eval:
            raise ConfigError("no evaluation data configured (data.eval_files / eval_file)")
        metrics = run.task.evaluate(run.model, run.step, data, self.config, self.run_dir)
        run.logger.scalars(step, metrics, kind="eval")
        return metrics


def _stream_version(ckpt) -> int:
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


def _decorrelate_dropout(model: Any, rank: int) -> None:
    """Give each rank its own dropout stream after the broadcast made all RNG states equal.

    A Keras seed-generator state is ``[seed, counter]`` and every call advances only the
    counter, so offsetting the seed by the rank keeps ranks distinct and reproducible: after a
    resume (which restores rank 0's state) the same offset recreates every rank's stream.
    """
    for var in model.variables:
        if var.path.endswith("seed_generator_state"):
            offset = np.zeros(var.shape, dtype=var.dtype)
            offset[0] = 1_000_003 * rank
            var.assign(var.numpy() + offset)


def _forward_flops(parts: ModelAndStep) -> float:
    """Matmul FLOPs of one example's forward pass (what sifting's FLOP counter counts in):
    the encoder at the task's sequence length, plus the MLM head when pretraining."""
    from albertkit.models.footprint import training_flops

    dummy = parts.task.dummy_batch(1)
    predictions = dummy["masked_lm_positions"].shape[1] if "masked_lm_positions" in dummy else 0
    count = training_flops(parts.spec, int(dummy["input_ids"].shape[1]), max(predictions, 1))
    return count.forward - (0.0 if predictions else count.parts["mlm_head"])
