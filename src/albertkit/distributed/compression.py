"""fp16 gradient compression shared by the Horovod and multi-worker backends.

Compression halves the bytes on the wire: each float32 gradient is divided by the replica
count *before* it is cast to float16 and summed, so the all-reduce adds numbers that are
already averaged. Dividing after the sum (what ``hvd.Compression.fp16`` + ``op=Average``
does) overflows float16 (max 65504) as soon as ``size`` loss-scaled gradients are added.
An overflow still shows up as inf/nan and makes the step skip the update and halve the
loss scale, exactly as for an overflow in the backward pass.
"""

from __future__ import annotations

import tensorflow as tf


def compress_for_mean(tensors: list[tf.Tensor], size: int) -> list[tf.Tensor]:
    """``t / size`` in float16 for float32 tensors; other dtypes pass through unchanged."""
    out = []
    for t in tensors:
        t = tf.convert_to_tensor(t)
        if t.dtype == tf.float32:
            t = tf.cast(t / float(size), tf.float16)
        out.append(t)
    return out


def decompress_mean(reduced: list[tf.Tensor], originals: list[tf.Tensor], size: int) -> list[tf.Tensor]:
    """Undo :func:`compress_for_mean` after a SUM all-reduce: back to float32 means.

    Tensors that were not compressed (not float32) were summed in their own dtype and are
    divided by ``size`` here.
    """
    out = []
    for r, o in zip(reduced, originals, strict=True):
        if o.dtype == tf.float32:
            out.append(tf.cast(r, tf.float32))
        else:
            out.append(r / tf.cast(size, r.dtype))
    return out
