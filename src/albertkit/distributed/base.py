"""The Distributor protocol: everything the step and trainer need from a data-parallel backend."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # importing TensorFlow costs seconds; the CLI parser must not pay it
    import tensorflow as tf


class Distributor(Protocol):
    """One data-parallel backend (single process, Horovod, tf.distribute multi-worker).

    ``rank``/``size``/``local_rank`` describe this process. Reductions are called from inside
    the step's outer ``tf.function`` (never inside the XLA-compiled part: collectives have no
    XLA CPU kernels). Every rank must call every collective, in the same order.
    """

    rank: int
    size: int
    local_rank: int

    @property
    def is_chief(self) -> bool: ...

    @property
    def replicas(self) -> int:
        """Number of data-parallel replicas (model copies) in the whole job."""

    def scope(self) -> contextlib.AbstractContextManager:
        """Context in which models and optimizers are created."""

    def run(self, fn, *args):
        """Run ``fn(*args)`` once per local replica (MWMS: ``strategy.run``)."""

    def reduce_mean(self, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        """Mean of each tensor over all replicas (gradients)."""

    def reduce_sum(self, stats: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Sum of each scalar over all replicas (metric numerators/denominators)."""

    def broadcast_variables(self, variables: list) -> None:
        """Make every rank's variables equal to rank 0's."""

    def barrier(self) -> None: ...

    def shard(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """This rank's disjoint share of ``dataset`` (before batching)."""

    def distribute_dataset(self, dataset: tf.data.Dataset):
        """Wrap a batched per-replica dataset for ``run`` (identity except MWMS)."""

    def local_value(self, value):
        """A plain tensor from whatever ``run`` returned (identity except MWMS)."""
