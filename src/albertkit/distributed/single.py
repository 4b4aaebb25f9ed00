"""The single-process backend: one replica, reductions are identities."""

from __future__ import annotations

import contextlib

import tensorflow as tf


class SingleProcess:
    """One process, one replica. Same interface as the multi-process backends."""

    rank = 0
    size = 1
    local_rank = 0

    @property
    def is_chief(self) -> bool:
        return True

    @property
    def replicas(self) -> int:
        return 1

    def scope(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def run(self, fn, *args):
        return fn(*args)

    def reduce_mean(self, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        return list(tensors)

    def reduce_sum(self, stats: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return dict(stats)

    def broadcast_variables(self, variables: list) -> None:
        return None

    def barrier(self) -> None:
        return None

    def shard(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        return dataset

    def distribute_dataset(self, dataset: tf.data.Dataset):
        return dataset

    def local_value(self, value):
        return value
