"""The ``tf_multiworker`` backend: ``tf.distribute.MultiWorkerMirroredStrategy``.

One process per machine (a *worker*) drives every local GPU as a replica; workers find
each other through ``TF_CONFIG`` and all-reduce over TensorFlow's collective runtime (NCCL
on GPUs, gRPC rings on CPUs). It needs nothing beyond TensorFlow, which makes it the
fallback wherever Horovod cannot be built.

The shared step runs under ``strategy.run`` (:meth:`MultiWorkerDistributor.run`); the
reductions it calls (:meth:`reduce_mean`, :meth:`reduce_sum`) are replica-context
all-reduces. They sit outside the XLA-compiled gradient function because XLA cannot
compile collectives on CPU.

The cluster comes from ``TF_CONFIG`` (:func:`tf_config_from_environ`, a pure function in
:mod:`albertkit.distributed.cluster`): the launchers write it (``albertkit.sagemaker.entrypoint``
translates SageMaker's host list into it); in a Slurm job step without one it is built from
the allocation.
"""

from __future__ import annotations

import contextlib
import json  # noqa: F401 - the class example uses it
import logging
from typing import Any, Literal

import tensorflow as tf

from albertkit.distributed.cluster import (  # noqa: F401 - re-exported, the backend's API
    cluster_position,
    tf_config_from_environ,
    validate_tf_config,
)
from albertkit.distributed.compression import compress_for_mean, decompress_mean

log = logging.getLogger("albertkit")

PACK_BYTES = 32 * 1024 * 1024  # gradients are packed into ~32 MiB chunks per all-reduce

Communication = Literal["auto", "ring", "nccl"]


# ============================================================================ strategy
def make_strategy(tf_config: dict[str, Any] | None, communication: Communication = "auto",
                  timeout_seconds: float | None = None
                  ) -> tf.distribute.MultiWorkerMirroredStrategy:
    """A MultiWorkerMirroredStrategy for ``tf_config`` (None: this machine only).

    The cluster is passed explicitly (SimpleClusterResolver), so nothing here reads or
    writes ``os.environ``.
    """
    impl = {
        "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[communication]
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=impl, timeout_seconds=timeout_seconds)
    gpus = len(tf.config.list_physical_devices("GPU"))
    if tf_config is None:
        spec, task_type, task_id = tf.train.ClusterSpec({}), None, None
    else:
        spec = tf.train.ClusterSpec(tf_config["cluster"])
        task_type, task_id = tf_config["task"]["type"], tf_config["task"]["index"]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        spec, task_type=task_type, task_id=task_id, rpc_layer="grpc",
        num_accelerators={"GPU": gpus} if gpus else None)
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver,
                                                     communication_options=options)


# ============================================================================ backend
class MultiWorkerDistributor:
    """Data parallelism with ``tf.distribute.MultiWorkerMirroredStrategy``.

    ``rank``/``size`` count workers (processes); ``replicas`` counts model copies over the
    whole job (workers x local GPUs). Models and optimizers must be created inside
    :meth:`scope`; the step runs through :meth:`run`.

    Args:
        tf_config: the cluster (see :func:`tf_config_from_environ`); None = this machine.
        fp16_compression: all-reduce gradients as float16.
        communication: collective implementation (``auto`` picks NCCL on GPUs).
        timeout_seconds: abort a collective that waits longer (None: wait; peers that die
            are still detected by the strategy's health check).
        strategy: use this strategy instead of building one (tests inject a
            ``MirroredStrategy`` over logical CPUs to exercise several local replicas).

    Example (a launcher sets ``TF_CONFIG`` for each worker; here the second of two):
        >>> tf_config = tf_config_from_environ({"TF_CONFIG": json.dumps({
        ...     "cluster": {"worker": ["host1:2222", "host2:2222"]},
        ...     "task": {"type": "worker", "index": 1}})})
        >>> cluster_position(tf_config)  # (rank, size)
        (1, 2)

        Without ``TF_CONFIG`` this machine is the whole job, which runs here:

        >>> dist = MultiWorkerDistributor(tf_config_from_environ({}))
        >>> dist.rank, dist.size, dist.is_chief
        (0, 1, True)
        >>> with dist.scope():  # models and optimizers are built inside
        ...     weight = tf.Variable(1.0)
        >>> summed = dist.run(lambda x: dist.reduce_sum({"x": x}), tf.constant(2.0))
        >>> float(dist.local_value(summed)["x"])
        2.0
    """

    def __init__(self, tf_config: dict[str, Any] | None = None, fp16_compression: bool = False,
                 communication: Communication = "auto", timeout_seconds: float | None = None,
                 strategy: tf.distribute.Strategy | None = None) -> None:
        if tf_config is not None:
            tf_config = validate_tf_config(tf_config)
        self.tf_config = tf_config
        self.strategy = strategy or make_strategy(tf_config, communication, timeout_seconds)
        self.rank, self.size = cluster_position(tf_config)
        self.local_rank = 0
        self.fp16_compression = bool(fp16_compression)
        self._options = tf.distribute.experimental.CommunicationOptions(
            bytes_per_pack=PACK_BYTES, timeout_seconds=timeout_seconds)
        self._broadcast_fn = tf.function(self._broadcast_graph, reduce_retracing=True,
                                         autograph=False)
        self._barrier_fn = tf.function(self._barrier_graph, autograph=False)

    # ------------------------------------------------------------------ identity
    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    @property
    def replicas(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    @property
    def local_replicas(self) -> int:
        return len(self.strategy.extended.worker_devices)

    def scope(self) -> contextlib.AbstractContextManager:
        return self.strategy.scope()

    def run(self, fn, *args):
        # A tf.function `fn` is traced once for all replicas (tf.distribute unwraps it);
        # collectives inside must not sit in a *nested* tf.function or a tf.cond branch.
        return self.strategy.run(fn, args=args)

    def local_value(self, value):
        return tf.nest.map_structure(
            lambda v: self.strategy.experimental_local_results(v)[0], value)

    def shard(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        return dataset.shard(self.size, self.rank)

    def distribute_dataset(self, dataset: tf.data.Dataset):
        """Hand this worker's (already sharded) batches to its local replicas.

        With one replica per worker the batches are passed to ``strategy.run`` as they are;
        with several, consecutive batches go to consecutive local replicas.
        """
        if self.local_replicas == 1:
            return dataset
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = \
            tf.data.experimental.AutoShardPolicy.OFF  # sharded by rank already
        dataset = dataset.with_options(options)
        return self.strategy.distribute_datasets_from_function(lambda _ctx: dataset)

    # ------------------------------------------------------------------ collectives
    def _replica_context(self, what: str) -> tf.distribute.ReplicaContext:
        ctx = tf.distribute.get_replica_context()
        if ctx is None or ctx.strategy is not self.strategy:
            raise RuntimeError(f"MultiWorkerDistributor.{what} must be called inside "
                               "distributor.run(...) (a replica context)")
        return ctx

    def reduce_mean(self, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        ctx = self._replica_context("reduce_mean")
        tensors = [tf.convert_to_tensor(t) for t in tensors]
        n = self.replicas
        if n == 1 or not tensors:
            return tensors
        if self.fp16_compression:
            packed = compress_for_mean(tensors, n)
            summed = self._all_reduce(ctx, tf.distribute.ReduceOp.SUM, packed)
            return decompress_mean(summed, tensors, n)
        return self._all_reduce(ctx, tf.distribute.ReduceOp.MEAN, tensors)

    def reduce_sum(self, stats: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        ctx = self._replica_context("reduce_sum")
        if self.replicas == 1 or not stats:
            return dict(stats)
        keys = sorted(stats)
        summed = self._all_reduce(ctx, tf.distribute.ReduceOp.SUM,
                                  [tf.convert_to_tensor(stats[k]) for k in keys])
        return dict(zip(keys, summed, strict=True))

    def _all_reduce(self, ctx: tf.distribute.ReplicaContext, op: tf.distribute.ReduceOp,
                    tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        """One all-reduce per dtype (tensors of a dtype are packed into ~PACK_BYTES chunks;
        packing concatenates, so dtypes cannot be mixed)."""
        # tf.identity places constants (which carry no device) on this replica's device:
        # tf.distribute derives the reduction's destinations from the inputs' devices.
        tensors = [tf.identity(t) for t in tensors]
        groups: dict[tf.DType, list[int]] = {}
        for i, t in enumerate(tensors):
            groups.setdefault(t.dtype, []).append(i)
        out: list[tf.Tensor | None] = [None] * len(tensors)
        for dtype in sorted(groups, key=lambda d: d.name):  # the same order on every worker
            idx = groups[dtype]
            reduced = ctx.all_reduce(op, [tensors[i] for i in idx], options=self._options)
            for i, r in zip(idx, reduced, strict=True):
                out[i] = r
        return out

    def broadcast_variables(self, variables: list) -> None:
        """Replica 0's values (on the chief) assigned to every replica's variables.

        Variables created in :meth:`scope` already start equal (the strategy initialises
        them from the chief); this also covers values each worker loaded by itself (a
        resumed checkpoint, ``model.load_from``).
        """
        if self.replicas == 1 or not variables:
            return
        values = self.local_value(self._broadcast_fn([tf.convert_to_tensor(v)
                                                      for v in variables]))
        for v, value in zip(variables, values, strict=True):
            v.assign(tf.cast(value, v.dtype))

    def _broadcast_graph(self, tensors: list[tf.Tensor]):
        def replica(ts):
            ctx = tf.distribute.get_replica_context()
            first = tf.equal(ctx.replica_id_in_sync_group, 0)
            # Collectives sum numbers: bools travel as int32, everything else as itself.
            sent = [tf.cast(t, tf.int32) if t.dtype == tf.bool else t for t in ts]
            sent = [tf.where(first, t, tf.zeros_like(t)) for t in sent]
            return self._all_reduce(ctx, tf.distribute.ReduceOp.SUM, sent)

        return self.strategy.run(replica, args=(tensors,))

    def barrier(self) -> None:
        if self.replicas > 1:
            self._barrier_fn()

    def _barrier_graph(self):
        def replica():
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tf.constant(1.0))

        return self.strategy.run(replica)
