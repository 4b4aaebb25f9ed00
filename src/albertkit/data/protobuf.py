"""The few protobuf wire-format pieces albertkit needs, without the protobuf package.

Two readers of serialised protobuf messages live in albertkit: the TFRecord writer encodes
``tf.train.Example`` records (``data/tfrecord.py``) and the tokenizer reads and rewrites
SentencePiece's ``ModelProto`` (``data/tokenizer.py``). Generated protobuf modules would
drag in TensorFlow (spawned preparation workers must not import it) or a protobuf version
TensorFlow excludes, and the wire format they need is small
(https://protobuf.dev/programming-guides/encoding/):

* a *varint* is an unsigned integer in little-endian groups of 7 bits, the high bit of each
  byte set when more bytes follow;
* a field is a varint key ``(field number << 3) | wire type`` followed by its value: a varint
  (type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5).

Example:
    >>> encode_varint(300)
    b'\\xac\\x02'
    >>> decode_varint(b"\\xac\\x02", 0)
    (300, 2)
    >>> [(f.number, f.value) for f in fields(len_field(1, b"hi") + len_field(2, b""))]
    [(1, b'hi'), (2, b'')]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from albertkit.errors import ProtobufError

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


# ------------------------------------------------------------------ encoding
def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | 0x80 if n else low)
        if not n:
            return bytes(out)


# Keys and lengths of Example records are almost always below 2**14: look them up.
_SMALL_VARINTS = [_encode_varint(i) for i in range(1 << 14)]


def encode_varint(n: int) -> bytes:
    """The varint bytes of the non-negative integer ``n``."""
    if n < 0:
        raise ValueError(f"varints here encode non-negative integers, got {n}")
    return _SMALL_VARINTS[n] if n < len(_SMALL_VARINTS) else _encode_varint(n)


def len_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): key, length, payload."""
    return encode_varint((number << 3) | LENGTH_DELIMITED) + encode_varint(len(payload)) + payload


_THRESHOLDS = np.array([1 << k for k in range(7, 63, 7)], np.int64)
_SHIFTS = np.arange(0, 70, 7, dtype=np.int64)
_COLS = np.arange(10, dtype=np.int64)


def encode_varint_rows(a: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Varints of a [rows, cols] array of non-negative ints, all rows at once (numpy).

    Returns the concatenated bytes (row-major) and the byte length of every row: the packed
    payloads of many records are encoded in one vectorised pass.
    """
    a = np.asarray(a, dtype=np.int64)
    if a.size and a.min() < 0:
        raise ValueError("negative values are not supported in int64 features here")
    if a.size == 0 or a.max() < 0x80:
        return a.astype(np.uint8).tobytes(), np.full(a.shape[0], a.shape[1], np.int64)
    nbytes = 1 + np.searchsorted(_THRESHOLDS, a, side="right")
    width = int(nbytes.max())
    cols = _COLS[:width]
    groups = (a[..., None] >> _SHIFTS[:width]) & 0x7F
    groups |= (nbytes[..., None] > cols + 1).astype(np.int64) << 7
    out = groups.astype(np.uint8)[cols < nbytes[..., None]]
    return out.tobytes(), nbytes.sum(axis=1)


# ------------------------------------------------------------------ decoding
def decode_varint(buf: bytes, i: int) -> tuple[int, int]:
    """(value, index after it) of the varint starting at ``buf[i]``."""
    result = shift = 0
    while True:
        if i >= len(buf):
            raise ProtobufError("truncated protobuf message (a varint runs past the end)")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


class Field(NamedTuple):
    """One top-level field of a message: number, wire type, its raw byte range, its value
    (an int for varints, the bytes of the value otherwise)."""

    number: int
    wire_type: int
    start: int
    end: int
    value: int | bytes


def fields(buf: bytes) -> Iterator[Field]:
    """The top-level fields of a serialised message, in order."""
    i = 0
    while i < len(buf):
        start = i
        key, i = decode_varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, i = decode_varint(buf, i)
        elif wire == FIXED64:
            value, i = buf[i : i + 8], i + 8
        elif wire == LENGTH_DELIMITED:
            n, i = decode_varint(buf, i)
            value, i = buf[i : i + n], i + n
        elif wire == FIXED32:
            value, i = buf[i : i + 4], i + 4
        else:
            raise ProtobufError(f"unsupported protobuf wire type {wire}")
        if i > len(buf):
            raise ProtobufError(f"truncated protobuf message (field {number} runs past the end)")
        yield Field(number, wire, start, i, value)
