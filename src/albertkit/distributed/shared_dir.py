"""Whether every node of a job sees the same run directory, checked before training starts.

Only the chief writes checkpoints, and every rank resumes from them: a ``run_dir`` that is
local to each node (``/tmp`` instead of the shared file system) would let rank 0 write
checkpoints the others never see, and a resumed job would start its ranks from different
steps. :func:`check_shared_run_dir` finds that out in three small all-reduces, the way
``albertkit doctor``'s ``shared_run_dir`` check does (it uses the same helpers):

1. rank 0 draws a token; every rank adds its host name: ranks on one node only (``--nproc``,
   one machine) end the check here, nothing is written;
2. every rank writes ``run_dir/.ranks/<token>-<rank>``; the all-reduce is the barrier;
3. every rank looks for every other rank's file, the all-reduce gathers who saw whom, each
   rank removes its file, and every rank raises the same ConfigError naming the first rank
   (and its host) that could not write or could not see the others.

This module needs TensorFlow only through the distributor it is given.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Callable
from pathlib import Path

import numpy as np

from albertkit.errors import ConfigError
from albertkit.fileio import atomic_write_text

HOST_BYTES = 64  # a host name travels in an all-reduce as this many character codes
RANKS_DIR = ".ranks"

Reduce = Callable[[np.ndarray], np.ndarray]  # the element-wise sum of a vector over ranks


def distributor_sum(dist) -> Reduce:
    """A float64 vector summed over the ranks of ``dist`` (any albertkit Distributor).

    Each worker of ``tf_multiworker`` counts once however many local replicas it drives.
    """
    import tensorflow as tf

    per_worker = max(1, dist.replicas // max(dist.size, 1))
    fn = tf.function(lambda x: dist.reduce_sum({"v": x}))  # one trace per vector length

    def reduce(values: np.ndarray) -> np.ndarray:
        out = dist.local_value(dist.run(fn, tf.constant(values, tf.float64)))["v"]
        return np.asarray(out.numpy(), np.float64) / per_worker

    return reduce


def encode_host(host: str) -> np.ndarray:
    """A host name as :data:`HOST_BYTES` character codes (zero padded), for an all-reduce."""
    codes = [min(ord(ch), 0x10FFFF) for ch in host[:HOST_BYTES]]
    return np.array(codes + [0] * (HOST_BYTES - len(codes)), np.float64)


def decode_host(codes: np.ndarray) -> str:
    return "".join(chr(int(c)) for c in codes if int(c) > 0)


def file_name(host: str, rank: int) -> str:
    """``<host>-<rank>`` with anything but letters, digits, ``._-`` replaced."""
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', host) or 'host'}-{rank}"


def slot(size: int, rank: int, value: float) -> np.ndarray:
    v = np.zeros(size, np.float64)
    v[rank] = value
    return v


def check_shared_run_dir(reduce: Reduce, rank: int, size: int, host: str,
                         run_dir: Path) -> bool:
    """Check that all ranks of a multi-node job see ``run_dir`` (see the module docstring).

    Every rank calls it with the job's sum (:func:`distributor_sum`). Returns False for a
    job on one node (nothing checked), True when every rank saw every other's file; raises
    the same ConfigError on every rank otherwise.
    """
    if size <= 1:
        return False
    token = float(secrets.randbits(40)) if rank == 0 else 0.0  # leaves random alone
    first = np.concatenate([[token], np.zeros(size * HOST_BYTES)])
    first[1 + rank * HOST_BYTES:1 + (rank + 1) * HOST_BYTES] = encode_host(host)
    summed = reduce(first)
    hosts = [decode_host(summed[1 + r * HOST_BYTES:1 + (r + 1) * HOST_BYTES])
             for r in range(size)]
    if len(set(hosts)) == 1:
        return False
    directory = Path(run_dir) / RANKS_DIR
    token_text = str(int(summed[0]))
    mine = directory / f"{token_text}-{rank}"
    wrote, error = 1.0, ""
    try:
        atomic_write_text(mine, host)
    except OSError as e:
        wrote, error = 0.0, e.strerror or str(e)
    written = reduce(slot(size, rank, wrote))  # also the barrier before reading
    seen = np.zeros((size, size))
    for r in range(size):
        seen[rank, r] = float((directory / f"{token_text}-{r}").is_file())
    seen = reduce(seen.ravel()).reshape(size, size)
    with contextlib.suppress(OSError):
        mine.unlink(missing_ok=True)
        directory.rmdir()  # the last rank to get here removes it
    for r in range(size):
        where = f"rank {r} on {hosts[r] or '?'}"
        if written[r] < 0.5:
            detail = f" ({error})" if r == rank and error else ""
            raise ConfigError(f"run_dir={run_dir}: {where} cannot write in it{detail}")
        blind = [p for p in range(size) if seen[r, p] < 0.5 and written[p] > 0.5]
        if blind:
            raise ConfigError(
                f"run_dir={run_dir} is not shared between the nodes: {where} cannot see the "
                f"files ranks {blind} wrote there; put run_dir on storage every node mounts "
                "(checkpoints are written by rank 0 and read by all)")
    return True
