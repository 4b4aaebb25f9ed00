"""The Horovod backend: one process per GPU (or per CPU slot), ring all-reduce between them.

Launch it with ``horovodrun`` (Gloo or MPI) or ``mpirun``; every process builds the same
model and runs the same step. Horovod 0.28.1 is built from source against the installed
TensorFlow by ``scripts/build_horovod.sh`` (it needs a header shim on TF 2.21).

Why it looks the way it does:

* ``HorovodAllreduce`` has no XLA kernel, so reductions happen in the step's outer
  ``tf.function`` after the XLA-compiled gradient computation returns
  (:class:`albertkit.training.step.TrainStep`). All gradients go through one
  ``hvd.grouped_allreduce``; Horovod's tensor fusion packs them into few ring passes.
* ``hvd.broadcast_variables`` reads ``tf.Variable`` internals that Keras 3 variables do not
  have (horovod#4290), so initial state is broadcast as plain tensors and assigned.
* Each process sees only GPU ``local_rank`` (``tf.config.set_visible_devices``), as
  Horovod's TensorFlow guide prescribes; CUDA_VISIBLE_DEVICES would also hide the peers
  NCCL uses for peer-to-peer copies.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from albertkit.distributed.compression import compress_for_mean, decompress_mean
from albertkit.errors import ConfigError

log = logging.getLogger("albertkit")

INSTALL_HINT = (
    "distributed.backend=horovod needs Horovod built against this TensorFlow: run "
    "`scripts/build_horovod.sh` from the albertkit repository (about 4 minutes; add --gpu "
    "for NCCL on GPU machines), or use distributed.backend=tf_multiworker, which needs "
    "nothing extra. See docs/distributed.md."
)


def import_horovod() -> Any:
    """``horovod.tensorflow``, or an ImportError that says how to build it."""
    try:
        import horovod.tensorflow as hvd
    except ImportError as e:  # also raised when horovod was built without TensorFlow
        raise ImportError(f"{INSTALL_HINT} (import failed: {e})") from e
    return hvd


def check_horovod_build(environ: Mapping[str, str], hvd: Any) -> None:
    """A one-line ConfigError naming what to change when ``HOROVOD_CONTROLLER`` asks for a
    controller (``mpi`` or ``gloo``) that this build of Horovod lacks.

    Call it before ``hvd.init()``: Horovod 0.28.1 built without MPI and asked for it
    crashes inside ``hvd.init()`` with a segmentation fault and no message.
    """
    asked = (environ.get("HOROVOD_CONTROLLER") or "").strip().lower()
    built = {"mpi": bool(hvd.mpi_built()), "gloo": bool(hvd.gloo_built())}
    if built.get(asked, True):
        return
    label = {"mpi": "MPI", "gloo": "Gloo"}
    other = "gloo" if asked == "mpi" else "mpi"
    rebuild = (f"rebuild Horovod with {label[asked]} (`scripts/build_horovod.sh "
               + ("--mpi` with Open MPI's mpicc on PATH)" if asked == "mpi" else
                  "`, which includes Gloo by default)"))
    fix = (f"unset HOROVOD_CONTROLLER (or set it to {other}) to use {label[other]}, or "
           f"{rebuild}" if built[other] else rebuild)
    raise ConfigError(f"HOROVOD_CONTROLLER={asked} but this Horovod was built without "
                      f"{label[asked]} (horovod.tensorflow.{asked}_built() is False): {fix}")


def pin_gpu(local_rank: int) -> str | None:
    """Make only GPU ``local_rank`` visible to TensorFlow in this process (None: no GPU).

    Must run before TensorFlow initialises its GPUs; later calls raise RuntimeError, which
    is reported as a clear error instead of silently sharing GPU 0 between processes.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    gpu = gpus[local_rank % len(gpus)]
    try:
        tf.config.set_visible_devices(gpu, "GPU")
        tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError as e:
        visible = tf.config.get_visible_devices("GPU")
        if visible == [gpu]:
            return gpu.name  # already pinned by an earlier distributor in this process
        raise RuntimeError(
            f"cannot pin Horovod local rank {local_rank} to {gpu.name}: TensorFlow already "
            f"initialised its GPUs ({e}). Build the distributor before any other "
            "TensorFlow work.") from e
    return gpu.name


class HorovodDistributor:
    """Data parallelism with Horovod: ``size`` processes, one replica each.

    Args:
        fp16_compression: all-reduce gradients as float16 (half the bytes; see
            :mod:`albertkit.distributed.compression`).
        pin_gpus: show each process only GPU ``local_rank``.

    Example (each of two processes started by ``horovodrun -np 2 --gloo python ...`` runs
    this; not run here, it needs the launcher):
        >>> dist = HorovodDistributor()  # doctest: +SKIP
        >>> [float(t) for t in dist.reduce_mean([tf.constant(float(dist.rank))])]  # doctest: +SKIP
        [0.5]

        A process started without a launcher is a job of one (and logs a warning saying so):

        >>> dist = HorovodDistributor(pin_gpus=False)
        >>> dist.rank, dist.size, dist.is_chief
        (0, 1, True)
        >>> [float(t) for t in dist.reduce_mean([tf.constant(3.0)])]
        [3.0]
    """

    def __init__(self, fp16_compression: bool = False, pin_gpus: bool = True) -> None:
        hvd = import_horovod()
        check_horovod_build(os.environ, hvd)  # what hvd.init() reads
        hvd.init()
        self._hvd = hvd
        self.rank: int = hvd.rank()
        self.size: int = hvd.size()
        self.local_rank: int = hvd.local_rank()
        self.local_size: int = hvd.local_size()
        self.fp16_compression = bool(fp16_compression)
        self.device = pin_gpu(self.local_rank) if pin_gpus else None
        self._broadcast_fn = tf.function(self._broadcast_tensors, reduce_retracing=True,
                                         autograph=False)
        self._barrier_fn = tf.function(self._barrier_graph, autograph=False)
        if self.size == 1:
            log.warning("distributed.backend=horovod with a single process: start the job with "
                        "horovodrun/mpirun (or `albertkit ... --nproc N`) to use several")

    # ------------------------------------------------------------------ identity
    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    @property
    def replicas(self) -> int:
        return self.size

    def scope(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def run(self, fn, *args):
        return fn(*args)

    def distribute_dataset(self, dataset: tf.data.Dataset):
        return dataset

    def local_value(self, value):
        return value

    def shard(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        return dataset.shard(self.size, self.rank)

    # ------------------------------------------------------------------ collectives
    def reduce_mean(self, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        tensors = [tf.convert_to_tensor(t) for t in tensors]
        if self.size == 1 or not tensors:
            return tensors
        hvd = self._hvd
        if self.fp16_compression:
            packed = compress_for_mean(tensors, self.size)
            return decompress_mean(hvd.grouped_allreduce(packed, op=hvd.Sum), tensors, self.size)
        return list(hvd.grouped_allreduce(tensors, op=hvd.Average))

    def reduce_sum(self, stats: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        if self.size == 1 or not stats:
            return dict(stats)
        keys = sorted(stats)  # the same order on every rank
        summed = self._hvd.grouped_allreduce([tf.convert_to_tensor(stats[k]) for k in keys],
                                             op=self._hvd.Sum)
        return dict(zip(keys, summed, strict=True))

    def broadcast_variables(self, variables: list) -> None:
        """Rank 0's values, assigned on every rank (by tensors: horovod#4290)."""
        if self.size == 1 or not variables:
            return
        values = self._broadcast_fn([tf.convert_to_tensor(v) for v in variables])
        for v, value in zip(variables, values, strict=True):
            v.assign(value)

    def _broadcast_tensors(self, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        out = []
        for i, t in enumerate(tensors):
            if t.dtype == tf.bool:  # Horovod has no bool broadcast
                out.append(tf.cast(self._hvd.broadcast(tf.cast(t, tf.int32), 0,
                                                       name=f"albertkit_bcast_{i}"), tf.bool))
            else:
                out.append(self._hvd.broadcast(t, 0, name=f"albertkit_bcast_{i}"))
        return out

    def barrier(self) -> None:
        if self.size > 1:
            self._barrier_fn()

    def _barrier_graph(self) -> tf.Tensor:
        return self._hvd.allreduce(tf.constant(1.0), op=self._hvd.Sum, name="albertkit_barrier")
