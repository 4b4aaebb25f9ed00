"""AlbertTrainer: the public entry point that builds a run from a TrainerConfig and runs it.

``AlbertTrainer(cfg)`` only stores the config. ``fit()`` builds the distributor, task, model,
optimizer, the shared step and the data, resumes from the newest good checkpoint in
``run_dir/checkpoints`` if there is one, trains with a progress bar, evaluates, checkpoints,
and writes ``run_dir/config.yaml`` and ``run_dir/summary.json``.

Example:
    >>> from albertkit import AlbertTrainer, TrainerConfig
    >>> cfg = TrainerConfig.from_yaml("examples/configs/pretrain_tiny_synthetic.yaml")
    >>> trainer = AlbertTrainer(cfg).fit()
    >>> trainer.summary["eval"]["mlm_accuracy"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.checkpoint import CheckpointError, CheckpointManager
from albertkit.config import ConfigError, TrainerConfig, atomic_write_text
from albertkit.logging import RunLogger
from albertkit.models.sizes import AlbertSpec

log = logging.getLogger("albertkit")


class TrainingError(RuntimeError):
    """Training cannot continue (for example the loss stayed non-finite)."""


@dataclass
class _Run:
    """Everything ``fit``/``evaluate`` build once. Not public."""

    spec: AlbertSpec
    distributor: Any
    task: Any
    model: Any
    optimizer: Any
    step: Any
    accum: int
    checkpoints: CheckpointManager
    logger: RunLogger
    start_step: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    def groups(self) -> dict[str, list]:
        return {
            "model": list(self.model.variables),
            "optimizer": list(self.optimizer.variables),
            "step": self.step.state_variables,
        }


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
        with self._signals():
            run = self._build(for_training=True)
            try:
                self.summary = self._train(run, until_step)
            finally:
                run.logger.close()
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
        from albertkit.sagemaker.job import to_sagemaker

        return to_sagemaker(self.config, **overrides)

    def export(self, out_dir: str | Path, format: str = "hf") -> Path:
        """Export the newest checkpoint as a Hugging Face directory (``format="hf"``)."""
        from albertkit.export import export_run

        return export_run(self.run_dir, Path(out_dir), format=format)

    # ================================================================== building
    def _build(self, for_training: bool) -> _Run:
        import keras

        from albertkit.step import TrainStep
        from albertkit.tasks import build_task

        cfg = self.config
        if cfg.runtime.malloc_arenas:
            from albertkit.native import limit_malloc_arenas

            limit_malloc_arenas(cfg.runtime.malloc_arenas)
        distributor = self._distributor or _build_distributor(cfg)
        self._distributor = distributor
        keras.utils.set_random_seed(cfg.runtime.seed)
        accum = cfg.runtime.accumulation_steps(distributor.replicas)
        spec = resolve_spec(cfg)
        task = build_task(cfg, spec)
        total = cfg.runtime.max_steps
        with distributor.scope():
            model = task.build_model()
            optimizer = cfg.optimizer.build(total_steps=total)
            step = TrainStep(task, model, optimizer, distributor, cfg.runtime, accum,
                             cfg.optimizer.clip_norm)
        is_chief = distributor.is_chief
        if is_chief and for_training:
            try:
                self.run_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise TrainingError(f"run_dir={self.run_dir} cannot be created or written: "
                                    f"{e.strerror or e}") from None
        logger = RunLogger(self.run_dir, enabled=is_chief and for_training,
                           tensorboard=cfg.logging.tensorboard)
        run = _Run(spec, distributor, task, model, optimizer, step, accum,
                   CheckpointManager(self.run_dir / "checkpoints", cfg.checkpoint.keep_last),
                   logger)
        resumed = cfg.checkpoint.resume and self._restore(run)
        if not resumed and cfg.model.load_from is not None:
            from albertkit.export import initialise_from

            initialise_from(model, cfg.model.load_from, spec)
        distributor.broadcast_variables(list(model.variables) + list(optimizer.variables)
                                        + step.state_variables)
        if distributor.size > 1:
            _decorrelate_dropout(model, distributor.rank)
        if is_chief and for_training:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            cfg.to_yaml(self.run_dir / "config.yaml")
            atomic_write_text(self.run_dir / "model_spec.json", spec.model_dump_json(indent=2))
            log.info(
                "task=%s model=%s params=%s backend=%s replicas=%d micro_batch=%d "
                "accumulation=%d global_batch=%d precision=%s xla=%s",
                cfg.task,
                f"{spec.num_hidden_layers}x{spec.hidden_size} (E={spec.embedding_size}, "
                f"vocab={spec.vocab_size}"
                + (f", from {cfg.model.load_from})" if cfg.model.load_from else
                   f", size={cfg.model.size})"),
                f"{model.count_params():,}", cfg.distributed.backend,
                distributor.replicas, cfg.runtime.micro_batch_size, accum,
                cfg.runtime.global_batch_size, cfg.runtime.precision, cfg.runtime.xla)
        return run

    def _restore(self, run: _Run) -> bool:
        ckpt = run.checkpoints.latest()
        if ckpt is None:
            return False
        saved_spec = ckpt.state.get("model_spec")
        if saved_spec is not None and saved_spec != run.spec.model_dump():
            diff = {k: (saved_spec.get(k), v) for k, v in run.spec.model_dump().items()
                    if saved_spec.get(k) != v}
            raise CheckpointError(
                f"{ckpt.path}: checkpoint is for a different model (checkpoint vs config: "
                f"{diff}); use a new run_dir or set checkpoint.resume=false")
        # The data position is "skip N micro-batches of a seeded stream": it only means the
        # same thing if the stream is built the same way.
        now = {"seed": self.config.runtime.seed,
               "micro_batch_size": self.config.runtime.micro_batch_size,
               "global_batch_size": self.config.runtime.global_batch_size,
               "replicas": run.distributor.replicas,
               "shuffle_buffer": getattr(self.config.data, "shuffle_buffer", None)}
        changed = {k: (ckpt.state[k], v) for k, v in now.items()
                   if k in ckpt.state and ckpt.state[k] != v}
        if changed:
            raise CheckpointError(
                f"{ckpt.path}: cannot resume exactly, the run changed since this checkpoint "
                f"(checkpoint vs now: {changed}); restore those settings, or start a new "
                "run_dir with model.load_from pointing at this run")
        run.extras["stream_version"] = _stream_version(ckpt)
        run.checkpoints.restore(ckpt, run.groups())
        run.start_step = ckpt.step
        run.extras["best"] = ckpt.state.get("best")
        log.info("resumed from %s (step %d)", ckpt.path, ckpt.step)
        return True

    def _save(self, run: _Run, step: int, reason: str) -> None:
        run.distributor.barrier()
        if not run.distributor.is_chief:
            return
        state = {
            "consumed_micro_batches": step * run.accum,
            # where this rank's stream continues; see albertkit.data.stream
            "data_position": {"format": run.extras.get("stream_version", 2),
                              "consumed_micro_batches": step * run.accum},
            "shuffle_buffer": getattr(self.config.data, "shuffle_buffer", None),
            "seed": self.config.runtime.seed,
            "micro_batch_size": self.config.runtime.micro_batch_size,
            "global_batch_size": self.config.runtime.global_batch_size,
            "replicas": run.distributor.replicas,
            "model_spec": run.spec.model_dump(),
            "task": self.config.task,
            "best": run.extras.get("best"),
            "reason": reason,
        }
        protect = set()
        if run.extras.get("best"):
            protect.add(Path(run.extras["best"]["path"]))
        path = run.checkpoints.save(step, run.groups(), state, protect=protect)
        run.extras["last_checkpoint"] = str(path)
        log.debug("checkpoint written: %s", path)

    # ================================================================== training loop
    def _train(self, run: _Run, until_step: int | None = None) -> dict[str, Any]:
        from tqdm.auto import tqdm

        cfg = self.config
        total = cfg.runtime.max_steps
        done = self.run_dir / "summary.json"
        if run.start_step >= total and done.is_file():
            log.info("run already complete at step %d (runtime.max_steps=%d): nothing to do; "
                     "raise runtime.max_steps to train further", run.start_step, total)
            return json.loads(done.read_text())
        data = _datasets(cfg, run)
        self._snapshot_tokenizer(run, data)
        train_iter = iter(data.train(skip_micro_batches=run.start_step * run.accum,
                                     accum=run.accum,
                                     stream_version=run.extras.get("stream_version", 2)))
        chief = run.distributor.is_chief
        bar = tqdm(total=total, initial=run.start_step, unit="step", dynamic_ncols=True,
                   disable=not (chief and cfg.logging.progress_bar), desc=cfg.task)
        window: dict[str, float] = {}
        window_steps, window_start = 0, time.perf_counter()
        nonfinite_run = 0
        last_train: dict[str, float] = {}
        last_eval: dict[str, float] = {}
        step = run.start_step
        started = time.perf_counter()
        interrupted = False
        seqs_per_step = cfg.runtime.global_batch_size
        try:
            while step < total:
                batch = next(train_iter)
                out = run.step(batch)
                step += 1
                out = {k: float(v) for k, v in out.items()}
                for k, v in out.items():
                    window[k] = window.get(k, 0.0) + v
                window_steps += 1
                bar.update(1)
                nonfinite_run = 0 if out["finite"] else nonfinite_run + 1
                if nonfinite_run:
                    log.warning("step %d skipped: non-finite gradients (%d in a row, %d in all)",
                                step, nonfinite_run, int(run.step.skipped_steps.numpy()))
                if nonfinite_run >= cfg.runtime.max_nonfinite_steps:
                    run.logger.scalars(step, self._train_metrics(
                        run, window, window_steps, time.perf_counter() - window_start,
                        seqs_per_step))
                    raise TrainingError(
                        f"loss/gradients were non-finite for {nonfinite_run} consecutive steps "
                        f"(up to step {step}); the last good checkpoint is kept in "
                        f"{run.checkpoints.directory}. Lower optimizer.learning_rate or use "
                        "runtime.precision=mixed_bfloat16/float32.")
                if step % cfg.logging.log_every_steps == 0 or step == total:
                    elapsed = time.perf_counter() - window_start
                    last_train = self._train_metrics(run, window, window_steps, elapsed,
                                                     seqs_per_step)
                    run.logger.scalars(step, last_train, echo=not cfg.logging.progress_bar)
                    bar.set_postfix({k: f"{last_train[k]:.4g}" for k in _BAR_KEYS
                                     if k in last_train}, refresh=False)
                    window, window_steps, window_start = {}, 0, time.perf_counter()
                if cfg.runtime.eval_every_steps and step % cfg.runtime.eval_every_steps == 0 \
                        and step < total and data.has_eval:
                    last_eval = self._evaluate(run, data, step)
                    self._track_best(run, step, last_eval)
                if step % cfg.checkpoint.every_steps == 0 and step < total:
                    self._save(run, step, "periodic")
                if self._stop_requested(run, step) or (until_step is not None
                                                       and step >= until_step):
                    interrupted = True
                    log.warning("stopping at step %d (%s): writing a checkpoint", step,
                                "signal" if self._stop.is_set() else "until_step")
                    break
        finally:
            bar.close()
        wall = time.perf_counter() - started
        if not interrupted and data.has_eval:
            last_eval = self._evaluate(run, data, step)
            self._track_best(run, step, last_eval)
        self._save(run, step, "interrupted" if interrupted else "final")
        summary = {
            "task": cfg.task,
            "status": "interrupted" if interrupted else "completed",
            "step": step,
            "max_steps": total,
            "resumed_from_step": run.start_step,
            "train": last_train,
            "eval": last_eval,
            "best": run.extras.get("best"),
            "skipped_steps": int(run.step.skipped_steps.numpy()),
            "wall_seconds": round(wall, 2),
            "sequences_per_second": round((step - run.start_step) * seqs_per_step / max(wall, 1e-9), 2),
            "global_batch_size": seqs_per_step,
            "accumulation_steps": run.accum,
            "replicas": run.distributor.replicas,
            "parameters": int(run.model.count_params()),
            "last_checkpoint": run.extras.get("last_checkpoint"),
        }
        if run.distributor.is_chief:
            atomic_write_text(self.run_dir / "summary.json", json.dumps(summary, indent=2))
            log.info("summary written to %s", self.run_dir / "summary.json")
        return summary

    def _snapshot_tokenizer(self, run: _Run, data: Any) -> None:
        """Copy the run's tokenizer into ``run_dir/tokenizer`` so the run is self-contained."""
        # pretraining data knows its tokenizer; fine-tuning configs name it in data.tokenizer
        src = getattr(data, "tokenizer_dir", None) or getattr(self.config.data, "tokenizer", None)
        dst = self.run_dir / "tokenizer"
        if src is None or not run.distributor.is_chief or dst.exists():
            return
        import shutil

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
        tmp.rename(dst)

    def _train_metrics(self, run: _Run, window: dict[str, float], steps: int,
                       elapsed: float, seqs_per_step: int) -> dict[str, float]:
        stats = {k: v for k, v in window.items()
                 if k not in ("grad_norm", "loss_scale", "finite")}
        metrics = dict(run.task.metrics(stats))
        metrics["grad_norm"] = window["grad_norm"] / steps
        if run.step.dynamic_loss_scale:
            metrics["loss_scale"] = float(run.step.loss_scale.numpy())
        metrics["skipped_steps"] = float(run.step.skipped_steps.numpy())
        metrics["learning_rate"] = float(np.asarray(run.optimizer.learning_rate))
        metrics["seq_per_s"] = steps * seqs_per_step / max(elapsed, 1e-9)
        return metrics

    def _track_best(self, run: _Run, step: int, metrics: dict[str, float]) -> None:
        key, higher = getattr(run.task, "best_metric", ("loss", False))
        if key not in metrics or not self.config.checkpoint.keep_best:
            return
        best = run.extras.get("best")
        value = metrics[key]
        better = best is None or (value > best["value"] if higher else value < best["value"])
        if better:
            self._save(run, step, "best")
            run.extras["best"] = {"metric": key, "value": value, "step": step,
                                  "path": run.extras.get("last_checkpoint")}

    # ================================================================== evaluation
    def _evaluate(self, run: _Run, data: Any = None, step: int | None = None) -> dict[str, float]:
        data = data or _datasets(self.config, run)
        step = run.start_step if step is None else step
        if not data.has_eval:
            raise ConfigError("no evaluation data configured (data.eval_files / eval_file)")
        if hasattr(run.task, "evaluate"):
            metrics = run.task.evaluate(run.model, run.step, data, self.config, self.run_dir)
        else:
            metrics = _evaluate_stats(run, data, self.config.runtime.eval_steps)
        run.logger.scalars(step, metrics, kind="eval")
        return metrics

    # ================================================================== signals
    def _stop_requested(self, run: _Run, step: int) -> bool:
        """Whether to stop after ``step``. With several ranks the decision is collective
        (a signal reaches ranks at different steps; a rank that stopped alone would leave
        the others blocked in the next all-reduce), taken every ``log_every_steps``."""
        dist = run.distributor
        if dist.size == 1:
            return self._stop.is_set()
        if step % self.config.logging.log_every_steps:
            return False
        import tensorflow as tf

        flag = tf.constant(1.0 if self._stop.is_set() else 0.0)
        total = dist.local_value(dist.run(lambda f: dist.reduce_sum({"stop": f}), flag))
        if float(total["stop"]) > 0:
            self._stop.set()
        return self._stop.is_set()

    @contextmanager
    def _signals(self):
        """SIGTERM (spot interruption, job stop) and SIGINT ask the loop to checkpoint and stop."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {}

        def handler(signum, frame):
            if self._stop.is_set() and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self._stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
        try:
            yield
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)


_BAR_KEYS = ("loss", "mlm_accuracy", "sop_accuracy", "accuracy", "span_accuracy", "f1",
             "pearson", "learning_rate", "seq_per_s")


# ====================================================================== helpers
def _build_distributor(cfg: TrainerConfig):
    if cfg.distributed.backend == "single":
        from albertkit.distributed.single import SingleProcess

        return SingleProcess()
    from albertkit.distributed import build_distributor

    return build_distributor(cfg.distributed)


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


def resolve_spec(cfg: TrainerConfig) -> AlbertSpec:
    """The model architecture: the preset + overrides, or the ``load_from`` checkpoint's."""
    src = cfg.model.load_from
    if src is None:
        return cfg.model.spec
    src = Path(src)
    if (src / "model_spec.json").is_file():  # an albertkit run directory
        base = json.loads((src / "model_spec.json").read_text())
    elif (src / "config.json").is_file():  # a Hugging Face directory
        from albertkit.models.hf import spec_from_hf_config

        base = spec_from_hf_config(src).model_dump()
    else:
        raise ConfigError(f"model.load_from={src}: neither an albertkit run directory "
                          "(model_spec.json) nor a Hugging Face directory (config.json)")
    # Explicit overrides may only change regularisation, never the shapes of weights.
    shape_free = {"hidden_dropout_prob", "attention_probs_dropout_prob",
                  "classifier_dropout_prob"}
    for k, v in cfg.model.overrides().items():
        if k in shape_free:
            base[k] = v
        elif base.get(k) != v:
            raise ConfigError(f"model.{k}={v} disagrees with model.load_from={src} "
                              f"({k}={base.get(k)})")
    return AlbertSpec(**base)


def _evaluate_stats(run: _Run, data: Any, max_batches: int) -> dict[str, float]:
    """Sum the task's stats over up to ``max_batches`` eval batches; add the MLM baseline."""
    totals: dict[str, float] = {}
    target_counts = np.zeros(run.spec.vocab_size, np.float64)
    n = 0
    for batch in data.eval():
        stats = run.step.evaluate_batch(batch)
        for k, v in stats.items():
            totals[k] = totals.get(k, 0.0) + float(v)
        if "masked_lm_ids" in batch:
            ids = np.asarray(batch["masked_lm_ids"]).ravel()
            w = np.asarray(batch["masked_lm_weights"]).ravel()
            np.add.at(target_counts, ids[w > 0], 1.0)
        n += 1
        if n >= max_batches:
            break
    if run.distributor.size > 1:
        # The stats above are already global; the baseline's target histogram and the batch
        # count are summed here, by every rank (a collective: all ranks must call it).
        import tensorflow as tf

        dist = run.distributor
        summed = dist.local_value(dist.run(
            lambda h, b: dist.reduce_sum({"targets": h, "batches": b}),
            tf.constant(target_counts, tf.float32), tf.constant(float(n))))
        target_counts, n = np.asarray(summed["targets"]), int(summed["batches"])
    if n == 0 or not totals:
        raise ConfigError(
            "evaluation produced no batches: the eval data holds fewer examples than one "
            "batch (runtime.micro_batch_size per replica); add eval data, lower the "
            "micro-batch, or set runtime.eval_every_steps=0")
    metrics = run.task.metrics(totals)
    if target_counts.sum() > 0:
        # Baseline: always predict the most frequent masked target of the held-out set.
        metrics["mlm_baseline_accuracy"] = float(target_counts.max() / target_counts.sum())
        metrics["mlm_accuracy_over_baseline"] = metrics["mlm_accuracy"] / max(
            metrics["mlm_baseline_accuracy"], 1e-9)
    metrics["eval_batches"] = float(n)
    return metrics


class _PretrainingData:
    """Train/eval tf.data pipelines for the pretraining data kinds."""

    def __init__(self, cfg: TrainerConfig, run: _Run) -> None:
        self.cfg = cfg
        self.run = run
        d = cfg.data
        self.eval_files: list[str] = []
        self.train_files: list[str] = []
        self.tokenizer_dir: Path | None = getattr(d, "tokenizer", None)
        if d.kind == "demo":
            from albertkit.data.demo import prepare_demo_data

            files = prepare_demo_data(d, Path(cfg.run_dir) / "data", seed=cfg.runtime.seed)
            self.train_files, self.eval_files = list(files.train_files), list(files.eval_files)
            self.tokenizer_dir = Path(files.tokenizer_dir)
            if files.vocab_size > run.spec.vocab_size:
                raise ConfigError(
                    f"the demo tokenizer has {files.vocab_size} tokens but model.vocab_size="
                    f"{run.spec.vocab_size}")
        elif d.kind == "tfrecord":
            from albertkit.data.pretraining_dataset import expand_files, read_manifests

            self.train_files = expand_files(d.train_files)
            self.eval_files = expand_files(d.eval_files) if d.eval_files else []
            manifest, _ = read_manifests(self.train_files)  # token ids must fit the model
            pieces = manifest["tokenizer"]["vocab_size"] if manifest else 0
            if pieces > run.spec.vocab_size:
                raise ConfigError(
                    f"data.train_files: {Path(self.train_files[0]).parent / 'manifest.json'} "
                    f"says the data's tokenizer has {pieces} tokens but model.vocab_size="
                    f"{run.spec.vocab_size}")

    @property
    def has_eval(self) -> bool:
        d = self.cfg.data
        if d.kind == "synthetic":
            return d.eval_examples > 0
        return bool(self.eval_files)

    def _dataset(self, training: bool, start_batch: int = 0, stream_version: int = 2):
        from albertkit.data.pretraining_dataset import (
            build_pretraining_dataset,
            build_synthetic_dataset,
        )

        cfg, d, dist = self.cfg, self.cfg.data, self.run.distributor
        micro = cfg.runtime.micro_batch_size
        if d.kind == "synthetic":
            # Sharded by whole micro-batches of the single-process stream: N ranks with k
            # micro-batches each compute exactly the micro-batches (and per-micro-batch loss
            # normalisation) of one process with N*k, so the two runs are comparable.
            return build_synthetic_dataset(
                vocab_size=self.run.spec.vocab_size, seq_length=d.seq_length,
                max_predictions_per_seq=d.max_predictions_per_seq, batch_size=micro,
                num_examples=d.num_examples if training else d.eval_examples,
                seed=cfg.runtime.seed + (0 if training else 1), repeat=training,
                shard_index=dist.rank, num_shards=dist.size, start_batch=start_batch)
        masking = d.masking
        rules = getattr(d, "masking_rules", None)
        return build_pretraining_dataset(
            self.train_files if training else self.eval_files,
            seq_length=d.seq_length, max_predictions_per_seq=d.max_predictions_per_seq,
            batch_size=micro, masking=masking, masking_rules=rules,
            shuffle_buffer=d.shuffle_buffer if training else 0,
            seed=cfg.runtime.seed, deterministic=getattr(d, "deterministic", True),
            shard_index=dist.rank, num_shards=dist.size, repeat=training, training=training,
            start_batch=start_batch, stream_version=stream_version)

    def train(self, skip_micro_batches: int, accum: int, stream_version: int = 2):
        # The streams start at the resume position themselves (O(1) of the step; version 1
        # re-reads the consumed micro-batches of the 0.1 stream).
        ds = self._dataset(training=True, start_batch=skip_micro_batches,
                           stream_version=stream_version)
        ds = ds.batch(accum, drop_remainder=True).prefetch(2)
        return self.run.distributor.distribute_dataset(ds)

    def eval(self):
        return self._dataset(training=False).take(self.cfg.runtime.eval_steps)


def _datasets(cfg: TrainerConfig, run: _Run):
    if cfg.task == "pretraining":
        return _PretrainingData(cfg, run)
    return run.task.datasets(cfg, run.distributor)
