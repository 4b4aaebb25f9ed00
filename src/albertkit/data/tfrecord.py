"""TFRecord files and ``tf.train.Example`` records, written without importing TensorFlow.

Preparation runs in many spawned processes; importing TensorFlow costs each of them
seconds and hundreds of MB, so records are encoded here directly from the two public
formats (and read back by TensorFlow in the tests, which is the independent check):

* TFRecord framing (tensorflow/core/lib/io/record_writer.cc): ``uint64 length``,
  ``uint32 masked_crc32c(length)``, ``data``, ``uint32 masked_crc32c(data)``, little endian;
  ``masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8``.
* ``tf.train.Example`` (tensorflow/core/example/{example,feature}.proto): Example.features
  (field 1) -> Features.feature map (field 1, entries key=1/value=2) -> Feature oneof
  float_list=2 / int64_list=3 -> packed ``value`` (field 1).

Example:
    >>> rec = encode_example({"input_ids": np.array([2, 7, 3]), "w": np.array([1.0], np.float32)})
    >>> frame_record(rec)[:8] == len(rec).to_bytes(8, "little")
    True
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import google_crc32c
import numpy as np

from albertkit.data.protobuf import encode_varint_rows, len_field
from albertkit.errors import RecordError

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One TFRecord: length, its CRC, payload, payload CRC."""
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


# ------------------------------------------------------------------ Example encoding
def encode_examples(features: dict[str, np.ndarray]) -> list[bytes]:
    """Serialise N ``tf.train.Example`` records from [N, ...] arrays (int -> int64_list,
    float -> float_list), keys in the given order. Vectorised over examples."""
    arrays = {k: np.asarray(v).reshape(len(v), -1) for k, v in features.items()}
    n = len(next(iter(arrays.values())))
    columns: list[tuple[bytes, int, list[bytes]]] = []
    for key, arr in arrays.items():
        if len(arr) != n:
            raise ValueError(f"feature {key!r} has {len(arr)} rows, expected {n}")
        if arr.dtype.kind == "f":
            flat, kind = arr.astype("<f4").tobytes(), 2  # float_list
            lengths = np.full(n, arr.shape[1] * 4, np.int64)
        elif arr.dtype.kind in "iub":
            (flat, lengths), kind = encode_varint_rows(arr), 3  # int64_list
        else:
            raise TypeError(f"feature {key!r}: unsupported dtype {arr.dtype}")
        ends = np.cumsum(lengths).tolist()
        starts = [0, *ends[:-1]]
        rows = [flat[a:b] for a, b in zip(starts, ends, strict=True)]
        columns.append((len_field(1, key.encode("utf-8")), kind, rows))
    out = []
    for i in range(n):
        parts = []
        for key_field, kind, rows in columns:
            feature = len_field(kind, len_field(1, rows[i]))
            parts.append(len_field(1, key_field + len_field(2, feature)))
        out.append(len_field(1, b"".join(parts)))
    return out


def encode_example(features: dict[str, np.ndarray]) -> bytes:
    """Serialise one ``tf.train.Example`` from 1-D arrays."""
    return encode_examples({k: np.asarray(v).reshape(1, -1) for k, v in features.items()})[0]


# ------------------------------------------------------------------ files
class RecordWriter:
    """Write a TFRecord file under a temporary name; ``commit()`` renames it into place.

    A file at the final name is therefore always complete. Use as a context manager: an
    exception (or a killed process) leaves only a ``.tmp`` file that looks unfinished.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.tmp, "wb")  # noqa: SIM115
        self.count = 0
        self.bytes = 0
        self._hash = hashlib.sha256()

    def write(self, record: bytes) -> None:
        framed = frame_record(record)
        try:
            self._fh.write(framed)
        except OSError as e:  # e.g. ENOSPC: name the file (the temp file is removed on exit)
            raise OSError(e.errno, e.strerror, str(self.path)) from None
        self._hash.update(framed)
        self.count += 1
        self.bytes += len(framed)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    def commit(self) -> None:
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            os.replace(self.tmp, self.path)
        except OSError as e:
            self.abort()
            raise OSError(e.errno, e.strerror, str(self.path)) from None

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def read_records(path: str | os.PathLike, *, verify: bool = True) -> Iterator[bytes]:
    """Payloads of a TFRecord file; raises :class:`RecordError` naming file and offset."""
    path = str(path)
    with open(path, "rb") as fh:
        offset = 0
        while True:
            header = fh.read(12)
            if not header:
                return
            if len(header) < 12:
                raise RecordError(f"{path}: truncated record header at byte {offset}")
            (length,) = struct.unpack("<Q", header[:8])
            if verify and struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
                raise RecordError(f"{path}: corrupt record length at byte {offset}")
            data = fh.read(length)
            footer = fh.read(4)
            if len(data) < length or len(footer) < 4:
                raise RecordError(f"{path}: truncated record at byte {offset}")
            if verify and struct.unpack("<I", footer)[0] != masked_crc32c(data):
                raise RecordError(f"{path}: corrupt record data at byte {offset} (CRC mismatch)")
            yield data
            offset += 16 + length


def count_records(path: str | os.PathLike) -> int:
    """Number of records, checking the framing only (lengths and their CRCs), fast."""
    path = str(path)
    size = os.path.getsize(path)
    n = offset = 0
    with open(path, "rb") as fh:
        while offset < size:
            header = fh.read(12)
            if len(header) < 12:
                raise RecordError(f"{path}: truncated record header at byte {offset}")
            (length,) = struct.unpack("<Q", header[:8])
            if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
                raise RecordError(f"{path}: corrupt record length at byte {offset}")
            offset += 16 + length
            if offset > size:
                raise RecordError(f"{path}: truncated record at byte {offset - 16 - length}")
            fh.seek(offset)
            n += 1
    return n
