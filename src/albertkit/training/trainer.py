"""AlbertTrainer: the public entry point that builds a run from a TrainerConfig and runs it.

``AlbertTrainer(cfg)`` only stores the config. ``fit()`` builds the distributor, then the task,
model, optimizer and shared step (:mod:`~albertkit.training.builders`) and the task's data,
resumes from the newest good checkpoint in ``run_dir/checkpoints`` if there is one, runs the
loop (:mod:`~albertkit.training.loop`) with its hooks (logging, evaluation and the best
checkpoint, periodic checkpoints, the stop signal), and writes ``run_dir/config.yaml`` and
``run_dir/summary.json``. Everything task-specific goes through the task's protocol
(:class:`~albertkit.tasks.base.Task`).

Example (a tiny model on synthetic data, run eagerly: nothing to trace for a few batches; the
evaluation of its initial weights runs here, training is skipped: it takes longer than a test
should):
    >>> tiny = {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
    ...         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
    >>> cfg = TrainerConfig.from_dict({
    ...     "run_dir": "runs/tiny", "model": tiny,
    ...     "data": {"kind": "synthetic", "seq_length": 16, "max_predictions_per_seq": 2,
    ...              "num_examples": 8, "eval_examples": 4},
    ...     "runtime": {"micro_batch_size": 2, "global_batch_size": 2, "max_steps": 3,
    ...                 "eval_steps": 1, "xla": False, "eager": True},
    ...     "logging": {"progress_bar": False, "tensorboard": False}})
    >>> trainer = AlbertTrainer(cfg)
    >>> metrics = trainer.evaluate()  # no checkpoint yet: the initial weights
    >>> metrics["eval_batches"], round(metrics["mlm_loss"], 1)  # untrained: about ln 101
    (1.0, 4.5)
    >>> trainer.fit().summary["status"], trainer.summary["step"]  # doctest: +SKIP
    ('completed', 3)
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.config import TrainerConfig
from albertkit.distributed import Distributor, build_distributor
from albertkit.errors import CheckpointError, ConfigError, TrainingError
from albertkit.fileio import atomic_write_text, replace_dir
from albertkit.hardware import bfloat16_warning, local_device_kind
from albertkit.tasks.base import TaskData
from albertkit.training.builders import ModelAndStep, build_model_and_step
from albertkit.training.checkpoint import (
    NEWEST,
    CheckpointManager,
    RunDirLock,
    parse_checkpoint_choice,
)
from albertkit.training.config_change import check_resumable
from albertkit.training.hooks import (
    Checkpointing,
    EvalAndBest,
    MetricWindow,
    NonFiniteGuard,
    ProfileWindow,
    StopSignal,
    stop_on_signals,
)
from albertkit.training.loop import train_loop
from albertkit.training.run_logger import RunLogger
from albertkit.training.state import Run, RunState, SiftCounters, resume_identity
from albertkit.training.summary import write_summary
from albertkit.training.timing import StepClock
from albertkit.training.tracking import MlflowTracker
from albertkit.training.user_data import (
    USER_DATA_KINDS,
    UserData,
    check_backend,
    check_inputs,
    check_train_data,
    user_optimizer,
)

log = logging.getLogger("albertkit")


class AlbertTrainer:
    """Pretrain or fine-tune ALBERT from one typed config.

    Args:
        config: the validated root config.
        distributor: optional backend instance (built from ``config.distributed`` if None).
        train_data: examples given in Python instead of files, for a config whose
            ``data.kind`` is ``user_pretraining`` or ``user_classification`` (which name the
            task and the shapes): a ``tf.data.Dataset`` of single examples (dicts of the
            task's features; albertkit batches them), or ``factory(position)`` returning the
            dataset that starts at example ``position`` (the examples already trained on:
            step x ``runtime.global_batch_size``), which makes a resume start exactly there.
            A plain dataset is repeated, and a resume re-reads it from its start and drops the
            consumed examples (with a warning). See :mod:`albertkit.training.user_data` and
            docs/howto/embed.md.
        eval_data: evaluation examples in the same form (a dataset, or a factory called with
            position 0); pretraining scores up to ``runtime.eval_steps`` micro-batches of it,
            classification all of it.
        optimizer: a Keras optimizer used instead of the config's ``optimizer`` section (of
            which only ``clip_norm`` still applies: clipping is the step's). ``fit()`` builds
            this instance on the model, so its ``iterations`` and slots are the run's;
            checkpoints save its variables (iterations, slots, a float learning rate) and a
            resume restores them into an optimizer of the same class (another class is
            refused). ``evaluate()`` and a second ``fit()`` use a copy from its
            ``get_config()``.

    User data and a user optimizer need ``distributed.backend=single``.
    """

    def __init__(self, config: TrainerConfig, distributor: Distributor | None = None, *,
                 train_data: Any = None, eval_data: Any = None, optimizer: Any = None) -> None:
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"AlbertTrainer expects a TrainerConfig, got {type(config).__name__}")
        check_inputs(config, train_data, eval_data, optimizer)
        self.config = config
        self._distributor = distributor
        self._train_data, self._eval_data, self._optimizer = train_data, eval_data, optimizer
        self.summary: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._signals: list[int] = []  # the stop signals received, in order
        self._signal_times: list[float] = []  # and when (time.time())
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
        check_train_data(self.config, self._train_data)
        with stop_on_signals(self._stop, self._signals, self._signal_times):
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
        self._requeue_after_usr1()
        return self

    def _requeue_after_usr1(self) -> None:
        """On the chief, after SIGUSR1 (Slurm's time-limit warning) stopped the run with its
        checkpoint: requeue the Slurm job as ``distributed.slurm_requeue`` says."""
        usr1 = getattr(signal, "SIGUSR1", None)
        if (usr1 not in self._signals or self.summary is None
                or self.summary.get("status") != "interrupted"
                or self._distributor is None or not self._distributor.is_chief):
            return
        from albertkit.distributed.requeue import requeue_job

        requeue_job(self.config.distributed.slurm_requeue)

    def evaluate(self, checkpoint: str | int = NEWEST) -> dict[str, float]:
        """Evaluate a checkpoint of the run on the eval data.

        Args:
            checkpoint: ``"newest"`` (the default: the newest checkpoint, or the initial
                weights when there is none), ``"best"`` (the one kept for the best eval
                metric) or a step number. A best or step checkpoint that does not exist
                raises :class:`CheckpointError`.
        """
        run = self._build(for_training=False, checkpoint=parse_checkpoint_choice(checkpoint))
        try:
            return self._evaluate(run)
        finally:
            run.logger.close()

    def to_sagemaker(self, **overrides: Any):
        """A SageMaker job for this config; ``.plan()`` builds the request, ``.fit()`` submits.

        Its settings are resolved as ``albertkit launch`` resolves them: ``overrides`` over
        the config's ``sagemaker:`` section over the ``ALBERTKIT_SM_*`` environment over the
        built-in defaults (:func:`albertkit.sagemaker.submit.to_sagemaker`)."""
        from albertkit.sagemaker.submit import to_sagemaker

        if isinstance(self.config.data, USER_DATA_KINDS) or self._optimizer is not None:
            raise ConfigError("to_sagemaker(): the job runs from the config alone, so examples "
                              "or an optimizer given in Python (data.kind="
                              f"{self.config.data.kind}) cannot go with it; use a data kind "
                              "that reads files and the config's optimizer")
        return to_sagemaker(self.config, **overrides)

    def export(self, out_dir: str | Path, format: str = "hf", overwrite: bool = False,
               checkpoint: str | int = NEWEST) -> Path:
        """Export a checkpoint as a Hugging Face directory (``format="hf"``).

        ``overwrite`` replaces a previous export in ``out_dir`` (never anything else);
        ``checkpoint`` is ``"newest"`` (the default), ``"best"`` or a step number.
        """
        from albertkit.training.export import export_run
        from albertkit.training.tracking import log_export

        out = export_run(self.run_dir, Path(out_dir), format=format, overwrite=overwrite,
                         checkpoint=checkpoint)
        log_export(self.run_dir, out, self.config)
        return out

    # ================================================================== building
    def _build(self, for_training: bool, checkpoint: str | int = NEWEST) -> Run:
        cfg = self.config
        if cfg.runtime.malloc_arenas:
            from albertkit.training.native import limit_malloc_arenas

            limit_malloc_arenas(cfg.runtime.malloc_arenas)
        distributor = self._distributor or build_distributor(cfg.distributed)
        self._distributor = distributor
        check_backend(distributor, self._train_data, self._eval_data, self._optimizer)
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
        if for_training:
            _check_run_dir_shared(distributor, self.run_dir)
        parts = build_model_and_step(
            cfg, distributor, optimizer=user_optimizer(self._optimizer, fresh=not for_training))
        if self._optimizer is not None and is_chief and for_training:
            log.info("optimizer: the given %s replaces the config's %s (optimizer.clip_norm=%s "
                     "still clips)", type(parts.optimizer).__name__, cfg.optimizer.kind,
                     cfg.optimizer.clip_norm)
        logger = RunLogger(self.run_dir, enabled=is_chief and for_training,
                           tensorboard=cfg.logging.tensorboard)
        sifting = SiftCounters(_forward_flops(parts)) if cfg.runtime.sifting is not None else None
        run = Run(**vars(parts), distributor=distributor, logger=logger,
                  checkpoint_manager=CheckpointManager(self.run_dir / "checkpoints",
                                                       cfg.checkpoint.keep_last),
                  state=RunState(sifting=sifting))
        if for_training and not cfg.checkpoint.resume:
            self._refuse_foreign_checkpoints(run)
        # a checkpoint named explicitly (evaluate/export) is loaded even with resume=false
        resumed = ((cfg.checkpoint.resume or checkpoint != NEWEST)
                   and self._restore(run, is_chief and for_training, checkpoint, for_training))
        if is_chief and for_training:
            # the steps after the checkpoint are trained again: their old records go
            logger.roll_back(run.state.start_step)
        model, spec = run.model, run.spec
        if not resumed and cfg.model.load_from is not None:
            from albertkit.training.export import initialise_from
            from albertkit.training.phases import warn_if_unfinished

            if is_chief:
                warn_if_unfinished(cfg.model.load_from)
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

    @staticmethod
    def _refuse_foreign_checkpoints(run: Run) -> None:
        """checkpoint.resume=false next to an earlier run's checkpoints would interleave the two
        runs' steps, and keep_last pruning (oldest step first) would then delete the new run's
        checkpoints, or the old run's: refuse before anything is written."""
        found = run.checkpoint_manager.list()
        if found:
            raise CheckpointError(
                f"{run.checkpoint_manager.directory} holds checkpoints of an earlier run "
                f"(steps {found[0].name} .. {found[-1].name}) and checkpoint.resume=false: "
                "this run's checkpoints would be mixed with them and pruning would delete one "
                "run's or the other's; use a new run_dir (model.load_from=<old run_dir> "
                "starts from its weights) or resume")

    def _restore(self, run: Run, writer: bool, checkpoint: str | int = NEWEST,
                 training: bool = False) -> bool:
        if checkpoint != NEWEST:  # evaluate/export of the best or of one step
            ckpt = run.checkpoint_manager.select(checkpoint)
        else:
            # only the process that writes checkpoints moves damaged ones aside
            ckpt = run.checkpoint_manager.resume_point(
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
        now = resume_identity(self.config, run, run.distributor)
        changed = {k: (ckpt.state[k], v) for k, v in now.items()
                   if k in ckpt.state and ckpt.state[k] != v}
        if changed:
            raise CheckpointError(
                f"{ckpt.path}: cannot resume exactly, the run changed since this checkpoint "
                f"(checkpoint vs now: {changed}); restore those settings, or start a new "
                "run_dir with model.load_from pointing at this run")
        if training:  # config.yaml is still the checkpointed run's: this run writes it later
            check_resumable(self.run_dir, self.config, ckpt.path)
        run.state.restore(ckpt)  # first: it refuses a data position newer than this albertkit
        run.checkpoint_manager.restore(ckpt, run.groups())
        log.info("resumed from %s (step %d)", ckpt.path, ckpt.step)
        return True

    # ================================================================== training
    def _train(self, run: Run, until_step: int | None = None) -> dict[str, Any]:
        cfg = self.config
        total = cfg.runtime.max_steps
        done = self.run_dir / "summary.json"
        if run.state.start_step >= total and done.is_file():
            log.info("run already complete at step %d (runtime.max_steps=%d): nothing to do; "
                     "raise runtime.max_steps to train further", run.state.start_step, total)
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

    def _train_tracked(self, run: Run, until_step: int | None) -> dict[str, Any]:
        from tqdm.auto import tqdm

        cfg = self.config
        total = cfg.runtime.max_steps
        data = self._data(run)
        self._snapshot_tokenizer(run, data)
        start = run.state.start_step
        batches = iter(data.train(skip_micro_batches=start * run.accum, accum=run.accum,
                                  stream_version=run.state.stream_version))
        checkpointing = Checkpointing(cfg, run)
        evals = EvalAndBest(cfg, run, lambda step: self._evaluate(run, data, step),
                            checkpointing.save, data.has_eval)
        rank = run.distributor.rank
        profiler = ProfileWindow(cfg.runtime.profile, rank, self.run_dir / "tensorboard"
                                 / ("" if rank == 0 else f"rank{rank}"))
        with tqdm(total=total, initial=start, unit="step", dynamic_ncols=True,
                  disable=not (run.distributor.is_chief and cfg.logging.progress_bar),
                  desc=cfg.task) as bar:
            breakdown = cfg.logging.breakdown
            clock = StepClock(cfg.logging.log_every_steps if breakdown else 0,
                              cfg.logging.input_bound_share, run.distributor, gpu=breakdown)
            window = MetricWindow(cfg, run, bar, clock)
            hooks = [
                *([run.state.sifting] if run.state.sifting else []),
                window,
                NonFiniteGuard(cfg, run, window),
                evals,
                checkpointing,
                StopSignal(self._stop, run.distributor, cfg.logging.log_every_steps,
                           until_step),
                profiler,
            ]
            profiler.begin(start + 1)
            try:
                result = train_loop(run.step, batches, start, total, hooks, clock)
            finally:
                profiler.close()
                clock.close()
        if result.stopped_by is None and data.has_eval:
            evals.run(result.step)
        checkpointing.save(result.step, "interrupted" if result.stopped_by else "final")
        if result.stopped_by == "signal" and self._signal_times and run.distributor.is_chief:
            log.info("stop checkpoint of step %d on disk %.1f s after the signal reached this "
                     "process", result.step, time.time() - self._signal_times[0])
        timing = ({**window.last_time, "input_bound": clock.ever_input_bound}
                  if window.last_time else None)
        return write_summary(cfg, run, result, window.last, evals.last, timing)

    def _data(self, run: Run) -> TaskData:
        """The task's own pipelines, or the examples given to the trainer."""
        if isinstance(self.config.data, USER_DATA_KINDS):
            return UserData(run.task, self._train_data, self._eval_data, run.distributor,
                            eval_steps=self.config.runtime.eval_steps)
        return run.task.datasets(self.config, run.distributor)

    def _snapshot_tokenizer(self, run: Run, data: TaskData) -> None:
        """Copy the run's tokenizer into ``run_dir/tokenizer`` so the run is self-contained."""
        from albertkit.data.tokenizer import TOKENIZER_FILES
        from albertkit.data.tokenizer_match import TOKENIZER_SUBDIR

        src = data.tokenizer_dir
        dst = self.run_dir / TOKENIZER_SUBDIR
        if src is None or not run.distributor.is_chief or dst.exists():
            return
        src = Path(src)
        tmp = self.run_dir / ".tokenizer.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        if src.is_dir():  # a tokenizer or Hugging Face model directory: its tokenizer files
            tmp.mkdir()
            for name in sorted(TOKENIZER_FILES):
                if (src / name).is_file():
                    shutil.copy2(src / name, tmp / name)
        elif src.is_file():  # a bare spiece.model
            tmp.mkdir()
            shutil.copy2(src, tmp / "spiece.model")
        else:
            raise ConfigError(f"tokenizer directory not found: {src}")
        replace_dir(tmp, dst)

    # ================================================================== evaluation
    def _evaluate(self, run: Run, data: TaskData | None = None,
                  step: int | None = None) -> dict[str, float]:
        if data is None:
            data = self._data(run)
        step = run.state.start_step if step is None else step
        if not data.has_eval:
            raise ConfigError("no evaluation data configured (data.eval_files / eval_file"
                              + (", or eval_data= for data given in Python)"
                                 if isinstance(self.config.data, USER_DATA_KINDS) else ")"))
        metrics = run.task.evaluate(run.model, run.step, data, self.config, self.run_dir)
        run.logger.scalars(step, metrics, kind="eval")
        return metrics


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


def _check_run_dir_shared(distributor: Distributor, run_dir: Path) -> None:
    """In a Slurm job of several nodes, stop every rank with one ConfigError before the
    model is built when ``run_dir`` is not the same directory on every node
    (:mod:`albertkit.distributed.shared_dir`). Not elsewhere: SageMaker's hosts have their
    own checkpoint directories on purpose (synchronised through S3)."""
    import os

    from albertkit.distributed.cluster import cluster_from_environ, in_slurm_step
    from albertkit.distributed.shared_dir import check_shared_run_dir, distributor_sum

    if distributor.size <= 1 or not in_slurm_step(os.environ):
        return
    host = cluster_from_environ(os.environ).host
    check_shared_run_dir(distributor_sum(distributor), distributor.rank, distributor.size,
                         host, run_dir)
