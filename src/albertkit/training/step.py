"""The ONE training step shared by every task (pretraining, SQuAD, classification) and backend.

This module alone decides ``tf.function``, ``jit_compile``, loss scaling and gradient
accumulation. A step has two parts, for every backend:

1. ``compute`` (XLA-compiled when ``runtime.xla``): loops over the ``accum`` micro-batches of
   one optimizer step *inside the graph* (a ``tf.while_loop``, no Python loop per
   micro-batch, no host-side accumulators), returning the mean gradient and summed stats.
2. ``apply`` (a plain ``tf.function``): mean-reduces gradients across replicas, unscales,
   checks finiteness, clips by global norm, applies the optimizer and updates the dynamic
   loss scale.

They are split because collectives cannot be compiled by XLA on CPU ("Collectives are not
yet implemented for CPU devices when compiling with XLA") and Horovod's all-reduce has no
XLA kernel at all: the math that benefits from fusion is compiled, the communication is not.

Every function here is traced without AutoGraph (``autograph=False``, as Keras 3's
``Model.fit`` does): the control flow that depends on tensors is written as ``tf.while_loop``
/ ``tf.cond`` already, and converting the model's, the tasks' and the data pipelines' Python
to graph code took about 2 s of every training process's start (a tiny model's 4-step
``albertkit pretrain`` on a 2-core AMD EPYC: 12.6 s with AutoGraph, 10.3 s without, medians
of five alternating runs).

Batches given to :meth:`TrainStep.__call__` carry a leading accumulation axis:
``[accum, micro_batch, ...]``.

Smart sifting (``runtime.sifting``) happens inside ``compute``, so it is compiled like the
rest and needs nothing from the backend: a forward pass without gradients gives each of the
step's ``accum x micro_batch`` examples its loss (:meth:`Task.example_losses`), the highest
``1 - beta`` share is gathered into ``m`` micro-batches of ``b`` examples (fixed shapes, from
:meth:`SiftingConfig.kept_per_step`) and those get the usual accumulation. Every replica
keeps the same number of examples, so the all-reduced mean stays the mean over all kept
examples. The step then trains on fewer examples (the optimizer step is not refilled from
more data): refilling would make the data a step consumes depend on the losses, and exact
resume by data position would be lost.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albertkit.config import RuntimeConfig
from albertkit.distributed.base import Distributor
from albertkit.tasks.base import Batch, Stats, Task
from albertkit.training.native import release_free_memory


class TrainStep:
    """Forward, backward, accumulate, reduce, clip and apply: one optimizer step.

    Args:
        task: supplies ``loss_and_stats(model, batch, training)``.
        model: the built Keras model.
        optimizer: a built-or-unbuilt Keras 3 optimizer (built here on the trainable vars).
        distributor: the data-parallel backend (``SingleProcess`` for one process).
        runtime: precision, XLA, eager, loss-scale settings.
        accumulation_steps: micro-batches per optimizer step on each replica.
        clip_norm: global-norm clipping threshold after reduction (``None`` = no clipping).

    Example (a tiny pretraining model, two micro-batches of 4 per step, run eagerly: no
    graph to trace, so it starts at once):
        >>> import numpy as np
        >>> from albertkit.config import AlbertSpec, DistributedConfig
        >>> from albertkit.distributed import build_distributor
        >>> from albertkit.tasks import task_class
        >>> spec = AlbertSpec(vocab_size=101, embedding_size=16, hidden_size=32,
        ...                   num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        ...                   max_position_embeddings=64)
        >>> task = task_class("pretraining")(spec, seq_length=16, max_predictions_per_seq=3,
        ...                                  micro_batch_size=4)
        >>> keras.utils.set_random_seed(0)
        >>> model = task.build_model()
        >>> step = TrainStep(task, model, keras.optimizers.SGD(0.1),
        ...                  build_distributor(DistributedConfig()), RuntimeConfig(eager=True),
        ...                  accumulation_steps=2, clip_norm=1.0)
        >>> rng = np.random.default_rng(0)
        >>> batch = {**task.dummy_batch(8), "input_ids": rng.integers(5, 101, (8, 16)),
        ...          "masked_lm_positions": np.tile([1, 5, 9], (8, 1)),
        ...          "masked_lm_ids": rng.integers(5, 101, (8, 3)),
        ...          "masked_lm_weights": np.ones((8, 3), np.float32)}
        >>> batch = {k: np.reshape(v, (2, 4, *np.shape(v)[1:])) for k, v in batch.items()}
        >>> out = step(batch)  # sums over the step's 8 examples
        >>> float(out["examples"]), float(out["finite"]), round(float(out["grad_norm"]), 2)
        (8.0, 1.0, 1.84)
        >>> round(float(out["mlm_loss_sum"] / out["mlm_weight"]), 2)  # mean MLM loss, ~ln 101
        4.62
        >>> out = step(batch)  # the same batch again, after one update: a lower loss
        >>> round(float(out["mlm_loss_sum"] / out["mlm_weight"]), 2)
        4.54
    """

    def __init__(
        self,
        task: Task,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        distributor: Distributor,
        runtime: RuntimeConfig,
        accumulation_steps: int,
        clip_norm: float | None,
    ) -> None:
        self.task = task
        self.model = model
        self.optimizer = optimizer
        self.distributor = distributor
        self.accumulation_steps = int(accumulation_steps)
        self.clip_norm = clip_norm
        self.dynamic_loss_scale = runtime.precision == "mixed_float16"
        self.growth_interval = runtime.loss_scale_growth_interval
        self.variables = list(model.trainable_variables)
        self.sifting = runtime.sifting
        with distributor.scope():
            if not optimizer.built:
                optimizer.build(self.variables)
            # Step-level state that must survive a restart (saved in checkpoints).
            init_scale = runtime.initial_loss_scale if self.dynamic_loss_scale else 1.0
            # Updated inside strategy.run with replica-identical values: "only_first_replica"
            # lets tf.distribute (tf_multiworker) accept the assignment in a replica context.
            sync = {"trainable": False, "aggregation": "only_first_replica"}
            self.loss_scale = keras.Variable(init_scale, dtype="float32", name="loss_scale",
                                             **sync)
            self.good_steps = keras.Variable(0, dtype="int64", name="good_steps", **sync)
            self.skipped_steps = keras.Variable(0, dtype="int64", name="skipped_steps", **sync)
        self.xla = runtime.xla_plan()  # which parts jit_compile (runtime.xla "auto": per device)
        if runtime.eager:
            self._compute, self._apply, self._eval = self.compute, self.apply, self.eval_stats
            self._predict = self._forward
        else:
            self._compute = tf.function(self.compute, jit_compile=self.xla.compute,
                                        reduce_retracing=True, autograph=False)
            # `apply` is traced inside `_train`, not as a nested tf.function: tf.distribute
            # forbids collectives (merge_call) in a tf.function nested in strategy.run.
            self._apply = self.apply
            self._eval = tf.function(self.eval_stats, jit_compile=self.xla.eval,
                                     reduce_retracing=True, autograph=False)
            self._predict = tf.function(self._forward, jit_compile=self.xla.eval,
                                        reduce_retracing=True, autograph=False)
        self._train = (self._replica_step if runtime.eager
                       else tf.function(self._replica_step, autograph=False))
        self._halves = None  # (compute, apply) for split(), made at its first call
        # Entry points whose first call (the compilation) has been followed by a heap trim.
        self._trimmed: set[str] = set()

    @property
    def state_variables(self) -> list:
        return [self.loss_scale, self.good_steps, self.skipped_steps]

    # ------------------------------------------------------------------ compute (XLA)
    def _micro(self, batch: Batch, scale: tf.Tensor) -> tuple[list[tf.Tensor], Stats]:
        with tf.GradientTape() as tape:
            loss, stats = self.task.loss_and_stats(self.model, batch, training=True)
            scaled = loss * scale
        grads = tape.gradient(scaled, self.variables)
        grads = [
            tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(grads, self.variables, strict=True)
        ]
        return [tf.cast(g, tf.float32) for g in grads], stats

    def compute(self, batch: Batch, scale: tf.Tensor) -> tuple[list[tf.Tensor], Stats]:
        """Mean (scaled) gradient over the step's micro-batches and summed stats (with
        ``runtime.sifting``: over the kept examples, after the warm-up)."""
        if self.sifting is None:
            return self._accumulate(batch, scale)
        n = self._examples(batch)

        def everything():
            grads, stats = self._accumulate(batch, scale)
            return grads, {**stats, "sift_seen": tf.constant(n, tf.float32),
                           "sift_kept": tf.constant(n, tf.float32),
                           "sift_scored": tf.constant(0.0)}

        if self.sifting.warmup_steps == 0:
            return self._sift(batch, scale)
        return tf.cond(self.optimizer.iterations < self.sifting.warmup_steps,
                       everything, lambda: self._sift(batch, scale))

    def _accumulate(self, batch: Batch, scale: tf.Tensor) -> tuple[list[tf.Tensor], Stats]:
        """Mean gradient over the micro-batches of ``batch`` (its leading axis)."""
        steps = _leading(batch, 0, self.accumulation_steps)

        def micro(i):
            return self._micro({k: v[i] for k, v in batch.items()}, scale)

        grads, stats = micro(0)
        if steps > 1:
            # In-graph accumulation: one while_loop, the accumulators are loop variables.
            def body(i, g_acc, s_acc):
                g, s = micro(i)
                g_acc = [a + b for a, b in zip(g_acc, g, strict=True)]
                s_acc = {k: s_acc[k] + s[k] for k in s_acc}
                return i + 1, g_acc, s_acc

            _, grads, stats = tf.while_loop(
                lambda i, *_: i < steps,
                body,
                (tf.constant(1), grads, stats),
            )
            grads = [g / float(steps) for g in grads]
        return grads, stats

    # ------------------------------------------------------------------ smart sifting
    def _examples(self, batch: Batch) -> int:
        return (_leading(batch, 0, self.accumulation_steps)
                * _leading(batch, 1, self.task.micro_batch_size))

    def example_losses(self, batch: Batch) -> tf.Tensor:
        """Each example's loss ``[accum, micro_batch]`` (inference mode, no gradient)."""
        if _leading(batch, 0, self.accumulation_steps) == 1:
            losses = self.task.example_losses(self.model, {k: v[0] for k, v in batch.items()})
            return tf.stop_gradient(losses[tf.newaxis])
        losses = tf.map_fn(lambda b: self.task.example_losses(self.model, b), dict(batch),
                           fn_output_signature=tf.float32)
        return tf.stop_gradient(losses)

    def _sift(self, batch: Batch, scale: tf.Tensor) -> tuple[list[tf.Tensor], Stats]:
        """Score every example, keep the highest-loss ones, train on them (see
        :class:`~albertkit.config.SiftingConfig`): fixed shapes, no per-example Python."""
        accum = _leading(batch, 0, self.accumulation_steps)
        micro = _leading(batch, 1, self.task.micro_batch_size)
        n = accum * micro
        m, b = self.sifting.kept_per_step(micro, accum)
        keep = kept_indices(tf.reshape(self.example_losses(batch), [n]), m * b)
        kept = {}
        for k, v in batch.items():
            rest = v.shape[2:]
            flat = tf.reshape(v, [n, *rest])
            kept[k] = tf.reshape(tf.gather(flat, keep), [m, b, *rest])
        grads, stats = self._accumulate(kept, scale)
        return grads, {**stats, "sift_seen": tf.constant(n, tf.float32),
                       "sift_kept": tf.constant(m * b, tf.float32),
                       "sift_scored": tf.constant(n, tf.float32)}

    # ------------------------------------------------------------------ apply (no XLA)
    def apply(self, grads: list[tf.Tensor], stats: Stats) -> dict[str, tf.Tensor]:
        """Reduce across replicas, unscale, skip if non-finite, clip, apply, update scale."""
        # Each replica holds the mean over its own micro-batches; the mean over replicas is
        # then the mean over the global batch (all replicas see equally many examples).
        grads = self.distributor.reduce_mean(grads)
        stats = self.distributor.reduce_sum(stats)
        scale = tf.convert_to_tensor(self.loss_scale)
        if self.dynamic_loss_scale:
            grads = [g / scale for g in grads]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
        if self.clip_norm is not None:
            grads, grad_norm = tf.clip_by_global_norm(grads, self.clip_norm)
        else:
            grad_norm = tf.linalg.global_norm(grads)

        def do_apply(grads):
            self.optimizer.apply(grads, self.variables)

        applied = _run_if(finite, do_apply, grads)
        self._update_loss_scale(applied)
        out = dict(stats)
        out["grad_norm"] = grad_norm
        out["loss_scale"] = tf.convert_to_tensor(self.loss_scale)
        out["finite"] = tf.cast(applied, tf.float32)
        return out

    def _update_loss_scale(self, finite: tf.Tensor) -> None:
        if not self.dynamic_loss_scale:
            self.skipped_steps.assign_add(tf.cast(tf.logical_not(finite), tf.int64))
            return
        # Dynamic loss scaling (Micikevicius et al. 2018): halve on overflow and skip the
        # update; double after `growth_interval` consecutive finite steps.
        grown = self.good_steps + 1 >= self.growth_interval
        new_scale = tf.where(
            finite,
            tf.where(grown, self.loss_scale * 2.0, self.loss_scale),
            tf.maximum(self.loss_scale / 2.0, 1.0),
        )
        self.loss_scale.assign(new_scale)
        self.good_steps.assign(tf.where(finite & ~grown, self.good_steps + 1, 0))
        self.skipped_steps.assign_add(tf.cast(tf.logical_not(finite), tf.int64))

    # ------------------------------------------------------------------ entry points
    def _replica_step(self, batch: Batch) -> dict[str, tf.Tensor]:
        grads, stats = self._compute(batch, tf.convert_to_tensor(self.loss_scale))
        return self._apply(grads, stats)

    def __call__(self, batch: Batch) -> dict[str, tf.Tensor]:
        """Run one optimizer step; returns summed stats plus grad_norm/loss_scale/finite."""
        out = self.distributor.local_value(self.distributor.run(self._train, batch))
        self._after_first_call("train", out)
        return out

    def _after_first_call(self, name: str, out: dict[str, tf.Tensor]) -> None:
        """After an entry point's first call (its compilation), give the memory the
        compiler freed back to the system, so it is not resident for the whole run
        (:func:`albertkit.training.native.release_free_memory`)."""
        if name in self._trimmed:
            return
        self._trimmed.add(name)
        for value in tf.nest.flatten(out):  # the call has finished once a result is read
            if hasattr(value, "numpy"):
                value.numpy()
                break
        release_free_memory()

    def split(self, batch: Batch) -> tuple[dict[str, tf.Tensor], dict[str, float]]:
        """One optimizer step run as its two halves, each timed to its end: the same
        computation as :meth:`__call__` (same ops, same order), for the step-time breakdown.

        Returns the step's outputs and ``{"compute": s, "apply": s}``: ``compute`` is the
        compiled forward/backward over the accumulated micro-batches, ``apply`` the
        cross-replica reduction (the communication), clipping and the optimizer update. The
        first call builds the two functions (``compute`` reuses the step's compiled one).
        """
        import time

        dist = self.distributor
        if self._halves is None:
            if self._train is self._replica_step:  # eager
                self._halves = (self._compute, self._apply)
            else:
                self._halves = (tf.function(lambda b, s: self._compute(b, s), autograph=False),
                                tf.function(self._apply, autograph=False))
        compute, apply = self._halves
        started = time.perf_counter()
        grads, stats = dist.run(compute, batch, tf.convert_to_tensor(self.loss_scale))
        _wait(dist.local_value(stats))
        computed = time.perf_counter()
        out = dist.local_value(dist.run(apply, grads, stats))
        _wait(out)
        return out, {"compute": computed - started, "apply": time.perf_counter() - computed}

    def eval_stats(self, batch: Batch) -> Stats:
        _, stats = self.task.loss_and_stats(self.model, batch, training=False)
        return stats

    def _forward(self, batch: Batch) -> dict[str, tf.Tensor]:
        return self.model(batch, training=False)

    def predict(self, batch: Batch) -> dict[str, tf.Tensor]:
        """The model's outputs (inference mode) for one local batch, compiled like training."""
        out = self.distributor.local_value(self.distributor.run(self._predict, batch))
        self._after_first_call("predict", out)
        return out

    def evaluate_batch(self, batch: Batch) -> Stats:
        """Summed stats of one evaluation batch ``[micro_batch, ...]``, over all replicas."""

        def replica(b):
            return self.distributor.reduce_sum(self._eval(b))

        out = self.distributor.local_value(self.distributor.run(replica, batch))
        self._after_first_call("eval", out)
        return out


def kept_indices(losses: tf.Tensor, keep: int) -> tf.Tensor:
    """Positions of the ``keep`` highest ``losses`` (1-D), in ascending order (so keeping
    everything keeps the original order). Ties go to the earlier position."""
    return tf.sort(tf.math.top_k(losses, k=keep, sorted=False).indices)


def _leading(batch: Batch, axis: int, default: int) -> int:
    """The static size of ``axis`` of the batch's leaves (``default`` when unknown)."""
    size = next(iter(batch.values())).shape[axis]
    return int(size) if size is not None else int(default)


def _wait(values: dict[str, tf.Tensor]) -> None:
    """Block until the step that produced ``values`` has finished (reading one value back
    waits for its kernel, and the halves end with these outputs)."""
    for v in values.values():
        v.numpy()


def _run_if(pred: tf.Tensor, fn, *args) -> tf.Tensor:
    """``fn(*args)`` if ``pred`` (the same on every replica), as a bool tensor.

    A plain ``tf.cond`` without a strategy. Under tf.distribute (tf_multiworker) a Keras
    optimizer update synchronises through ``merge_call``, which is not allowed inside a
    ``tf.cond`` branch in a replica context; so the branch is taken in the cross-replica
    context and each replica re-entered for the update, as
    ``keras.optimizers.LossScaleOptimizer`` does.
    """

    def cross_replica(strategy, pred, *args):
        pred = strategy.experimental_local_results(pred)[0]

        def run():
            strategy.extended.call_for_each_replica(fn, args=args)
            return tf.constant(True)

        return tf.cond(pred, run, lambda: tf.constant(False))

    return tf.distribute.get_replica_context().merge_call(cross_replica, args=(pred, *args))
