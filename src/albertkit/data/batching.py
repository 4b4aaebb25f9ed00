"""Grouping micro-batches into optimizer steps: the one place a pipeline meets accumulation.

The shared training step takes one optimizer step's worth of data per replica, shaped
``[accum, micro_batch, ...]``; every task's training pipeline ends here.
"""

from __future__ import annotations

from typing import Any


def accumulation_batches(micro_batches: Any, accum: int, distributor: Any) -> Any:
    """``[accum, micro_batch, ...]`` batches from a ``tf.data`` stream of micro-batches,
    distributed to the replicas by ``distributor`` (a ``Distributor``: typed ``Any`` because
    data/ sits below distributed/ in the import layers).

    Incomplete groups are dropped: a step always sees ``accum`` full micro-batches, so the
    resume position (micro-batches consumed) is ``step * accum`` exactly.
    """
    grouped = micro_batches.batch(accum, drop_remainder=True).prefetch(2)
    return distributor.distribute_dataset(grouped)
