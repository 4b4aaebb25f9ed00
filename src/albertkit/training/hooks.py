"""The small pieces the training loop runs after every step.

Each hook is a callable ``hook(step, out) -> reason | None``: ``step`` is the global step just
taken, ``out`` the step's outputs as floats (summed stats, ``grad_norm``, ``loss_scale``,
``finite``). A hook that returns a reason (a string) stops the loop; a hook that raises stops
training with an error. Each one owns one concern and its own cadence, and is built from
``(cfg, run)`` (the config and the :class:`~albertkit.training.state.Run`); the run's mutable
state (best checkpoint, data stream, sifting totals) lives in ``run.state``, not on a hook:

* :class:`MetricWindow`: sums the outputs between log lines, logs train metrics, drives the
  progress bar;
* :class:`NonFiniteGuard`: stops with :class:`TrainingError` after too many non-finite steps
  in a row;
* :class:`EvalAndBest`: evaluates every ``eval_every_steps`` and keeps the best checkpoint;
* :class:`Checkpointing`: periodic checkpoints (and every other save, with the run state);
* :class:`StopSignal`: a signal (SIGTERM/SIGINT/SIGUSR1), agreed by all ranks, or
  ``until_step``;
* :class:`ProfileWindow`: a TensorFlow profiler trace of ``runtime.profile``'s steps;
* :class:`~albertkit.training.state.SiftCounters`: smart sifting's run totals.

The loop's :class:`~albertkit.training.timing.StepClock` times each hook; a hook's
``time_part`` (``checkpoint``, ``eval``) says what its time counts as.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from albertkit.errors import TrainingError
from albertkit.training.state import resume_identity
from albertkit.training.timing import StepClock

if TYPE_CHECKING:
    from albertkit.config import TrainerConfig
    from albertkit.distributed import Distributor
    from albertkit.training.state import Run

log = logging.getLogger("albertkit")

Hook = Callable[[int, dict[str, float]], "str | None"]

# Step outputs that are not the task's summed stats.
_STEP_OUTPUTS = ("grad_norm", "loss_scale", "finite", "sift_seen", "sift_kept", "sift_scored")


class MetricWindow:
    """Sums step outputs between two log lines and turns them into train metrics.

    Every ``log_every`` steps and at the last step it logs the window's metrics (the task's
    metrics of the summed stats, plus gradient norm, loss scale, skipped steps, learning rate
    and throughput), shows the task's progress keys on the bar, and starts a new window.
    With ``logging.breakdown`` it also logs ``clock``'s time breakdown (kind ``time``).
    """

    def __init__(self, cfg: TrainerConfig, run: Run, bar: Any,
                 clock: StepClock | None = None) -> None:
        self.task, self.step_fn, self.optimizer = run.task, run.step, run.optimizer
        self.logger, self.bar = run.logger, bar
        self.log_every, self.max_steps = cfg.logging.log_every_steps, cfg.runtime.max_steps
        self.sequences_per_step = cfg.runtime.global_batch_size
        self.echo = not cfg.logging.progress_bar  # no bar: the log lines go to the console
        # the time breakdown, logged as kind "time" with each window
        self.clock = clock if cfg.logging.breakdown else None
        self.sifting = run.state.sifting  # run totals of smart sifting, logged with each window
        self.last: dict[str, float] = {}  # the latest logged train metrics
        self.last_time: dict[str, float] = {}  # the latest logged breakdown
        self._reset()

    def _reset(self) -> None:
        self.sums: dict[str, float] = {}
        self.steps = 0
        self.started = time.perf_counter()

    def __call__(self, step: int, out: dict[str, float]) -> None:
        for k, v in out.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.steps += 1
        self.bar.update(1)
        if step % self.log_every == 0 or step == self.max_steps:
            self.last = self.metrics()
            self.logger.scalars(step, self.last, echo=self.echo)
            self.bar.set_postfix({k: f"{self.last[k]:.4g}" for k in
                                  self.task.log_keys.progress_bar if k in self.last},
                                 refresh=False)
            if self.clock is not None:  # a collective with several ranks: every rank calls it
                self.last_time = self.clock.window()
                self.logger.scalars(step, self.last_time, kind="time", echo=False)
            self._reset()

    def metrics(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self.started
        stats = {k: v for k, v in self.sums.items() if k not in _STEP_OUTPUTS}
        metrics = dict(self.task.metrics(stats))
        metrics["grad_norm"] = self.sums["grad_norm"] / self.steps
        if self.step_fn.dynamic_loss_scale:
            metrics["loss_scale"] = float(self.step_fn.loss_scale.numpy())
        metrics["skipped_steps"] = float(self.step_fn.skipped_steps.numpy())
        metrics["learning_rate"] = float(np.asarray(self.optimizer.learning_rate))
        metrics["seq_per_s"] = self.steps * self.sequences_per_step / max(elapsed, 1e-9)
        if self.sifting is not None:
            metrics["sift_kept_share"] = self.sums["sift_kept"] / max(self.sums["sift_seen"], 1.0)
            metrics.update(self.sifting.totals())
        return metrics

    def flush(self, step: int) -> None:
        """Log what the window holds now (before an error ends the run)."""
        if self.steps:
            self.logger.scalars(step, self.metrics())
            self._reset()


class NonFiniteGuard:
    """Warns on every skipped (non-finite) step; raises after ``limit`` in a row.

    The shared step already skipped the update; this only decides when to give up, keeping
    the last good checkpoint.
    """

    def __init__(self, cfg: TrainerConfig, run: Run, window: MetricWindow) -> None:
        self.step_fn, self.limit, self.window = run.step, cfg.runtime.max_nonfinite_steps, window
        self.checkpoint_dir = run.checkpoint_manager.directory
        self.in_a_row = 0

    def __call__(self, step: int, out: dict[str, float]) -> None:
        self.in_a_row = 0 if out["finite"] else self.in_a_row + 1
        if self.in_a_row:
            log.warning("step %d skipped: non-finite gradients (%d in a row, %d in all)",
                        step, self.in_a_row, int(self.step_fn.skipped_steps.numpy()))
        if self.in_a_row >= self.limit:
            self.window.flush(step)
            raise TrainingError(
                f"loss/gradients were non-finite for {self.in_a_row} consecutive steps "
                f"(up to step {step}); the last good checkpoint is kept in "
                f"{self.checkpoint_dir}. Lower optimizer.learning_rate or use "
                "runtime.precision=mixed_bfloat16/float32.")


class Checkpointing:
    """Writes checkpoints: every ``checkpoint.every_steps`` (as a hook) and on request
    (:meth:`save`).

    Each checkpoint's state comes from ``run.state`` (:meth:`RunState.to_checkpoint`): the
    data position, the settings that must match to resume exactly, the best checkpoint so
    far (which pruning keeps) and why it was written; the path written becomes
    ``run.state.last_checkpoint``. Collective: every rank calls it, the chief writes.
    """

    time_part = "checkpoint"  # what StepClock counts this hook's time as

    def __init__(self, cfg: TrainerConfig, run: Run) -> None:
        self.manager, self.distributor, self.groups = (run.checkpoint_manager, run.distributor,
                                                       run.groups())
        self.accum, self.state = run.accum, run.state
        self.identity = {**resume_identity(cfg, run, run.distributor),
                         "model_spec": run.spec.model_dump(), "task": cfg.task}
        self.every, self.max_steps = cfg.checkpoint.every_steps, cfg.runtime.max_steps

    def __call__(self, step: int, out: dict[str, float]) -> None:
        if step % self.every == 0 and step < self.max_steps:
            self.save(step, "periodic")

    def save(self, step: int, reason: str) -> None:
        self.distributor.barrier()
        if not self.distributor.is_chief:
            return
        state = self.state.to_checkpoint(step, self.accum, self.identity, reason)
        best = self.state.best
        protect = {Path(best["path"])} if best else set()
        path = self.manager.save(step, self.groups, state, protect=protect)
        self.state.last_checkpoint = str(path)
        log.debug("checkpoint written: %s", path)


class EvalAndBest:
    """Evaluates every ``runtime.eval_every_steps`` (not at the last step: the run's end
    does; never without eval data) and, with ``checkpoint.keep_best``, calls ``save(step,
    "best")`` when the task's best metric improves, recording it as ``run.state.best``."""

    time_part = "eval"  # (a best checkpoint written here counts as eval time)

    def __init__(self, cfg: TrainerConfig, run: Run, evaluate: Callable[[int], dict[str, float]],
                 save: Callable[[int, str], None], has_eval: bool) -> None:
        self.evaluate, self.best_metric = evaluate, run.task.best_metric
        self.save, self.state = save, run.state
        self.every = cfg.runtime.eval_every_steps if has_eval else 0
        self.max_steps, self.keep_best = cfg.runtime.max_steps, cfg.checkpoint.keep_best
        self.last: dict[str, float] = {}  # the latest evaluation

    def __call__(self, step: int, out: dict[str, float]) -> None:
        if self.every and step % self.every == 0 and step < self.max_steps:
            self.run(step)

    def run(self, step: int) -> dict[str, float]:
        self.last = metrics = self.evaluate(step)
        key, higher = self.best_metric
        if key not in metrics or not self.keep_best:
            return metrics
        value = metrics[key]
        best = self.state.best
        if best is None or (value > best["value"] if higher else value < best["value"]):
            self.save(step, "best")
            self.state.best = {"metric": key, "value": value, "step": step,
                               "path": self.state.last_checkpoint}
        return metrics


class StopSignal:
    """Stops the loop when asked (``event``: set by a signal handler) or at ``until_step``.

    With several ranks the decision is collective (a signal reaches ranks at different
    steps; a rank that stopped alone would leave the others blocked in the next all-reduce),
    taken every ``check_every`` steps.
    """

    def __init__(self, event: threading.Event, distributor: Distributor, check_every: int,
                 until_step: int | None = None) -> None:
        self.event, self.distributor = event, distributor
        self.check_every, self.until_step = check_every, until_step

    def requested(self, step: int) -> bool:
        """Whether any rank was asked to stop (a collective on several ranks)."""
        dist = self.distributor
        if dist.size == 1:
            return self.event.is_set()
        if step % self.check_every:
            return False
        import tensorflow as tf

        flag = tf.constant(1.0 if self.event.is_set() else 0.0)
        total = dist.local_value(dist.run(lambda f: dist.reduce_sum({"stop": f}), flag))
        if float(total["stop"]) > 0:
            self.event.set()
        return self.event.is_set()

    def __call__(self, step: int, out: dict[str, float]) -> str | None:
        if self.requested(step) or (self.until_step is not None and step >= self.until_step):
            reason = "signal" if self.event.is_set() else "until_step"
            log.warning("stopping at step %d (%s): writing a checkpoint", step, reason)
            return reason
        return None


@contextmanager
def stop_on_signals(event: threading.Event, received: list[int] | None = None,
                    received_at: list[float] | None = None) -> Iterator[None]:
    """SIGTERM (spot interruption, job stop), SIGINT and SIGUSR1 (Slurm's warning before the
    time limit, ``--signal=USR1@N``) set ``event``: the loop then checkpoints and stops. A
    second SIGINT interrupts at once. Each signal's number is appended to ``received`` and
    its arrival time (``time.time()``) to ``received_at``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum, frame):
        if received_at is not None:
            received_at.append(time.time())
        if received is not None:
            received.append(signum)
        if event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        event.set()

    usr1 = getattr(signal, "SIGUSR1", None)  # not on Windows
    for sig in (signal.SIGTERM, signal.SIGINT, *([usr1] if usr1 is not None else [])):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)


class ProfileWindow:
    """Traces steps ``profile.start_step ..`` with TensorFlow's profiler on the ranks asked.

    The trace starts after the step before the first traced one (or before the loop, see
    :meth:`begin`) and stops after the last traced step, so it covers exactly those steps;
    it is written under ``logdir`` (``run_dir/tensorboard``) as TensorBoard's profile plugin
    expects (``plugins/profile/<time>/<host>.xplane.pb``).
    """

    def __init__(self, profile: Any, rank: int, logdir: Path) -> None:
        self.steps = profile.steps() if profile is not None and rank in profile.ranks else None
        self.logdir = Path(logdir)
        self.active = False

    def begin(self, next_step: int) -> None:
        """Start tracing if ``next_step`` is the first traced step (or inside the window,
        for a run resumed there)."""
        if self.steps is None or self.active or next_step not in self.steps:
            return
        import tensorflow as tf

        self.logdir.mkdir(parents=True, exist_ok=True)
        tf.profiler.experimental.start(str(self.logdir))
        self.active = True
        log.info("profiling steps %d..%d into %s", next_step, self.steps[-1], self.logdir)

    def __call__(self, step: int, out: dict[str, float]) -> None:
        if self.active and step >= self.steps[-1]:
            self.close()
        elif not self.active and self.steps is not None:
            self.begin(step + 1)

    def close(self) -> None:
        """Stop and write the trace (also when the loop ends inside the window)."""
        if not self.active:
            return
        import tensorflow as tf

        tf.profiler.experimental.stop()
        self.active = False
        log.info("profile trace written under %s (TensorBoard: Profile tab)",
                 self.logdir / "plugins" / "profile")
