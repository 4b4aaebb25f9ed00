"""Checkpoints: safetensors + JSON, written atomically, verified on load. No pickle.

Layout of one checkpoint (a directory)::

    checkpoints/ckpt-00000500/
        model.safetensors       model variables (trainable + non-trainable incl. RNG state)
        optimizer.safetensors   optimizer slots and iteration counter
        step.safetensors        loss scale and skipped-step counters
        state.json              step, data position, seed, model spec hash, free-form extras
        MANIFEST.json           sha256 and size of every file above (written last)

A checkpoint is written into a hidden temporary directory and renamed into place, so a
killed process never leaves a directory named ``ckpt-*`` that is incomplete. On load the
manifest is verified: it must list exactly the files above (plain names) and each must match
its size and sha256. A damaged checkpoint is skipped with a warning naming the bad file and
the previous good one is used; a resuming trainer moves damaged ones to
``checkpoints/damaged/`` (kept for inspection, never counted toward ``keep_last``) and refuses
to start from scratch when checkpoints exist but none verifies.

``RunDirLock`` keeps a second trainer out of a run directory that one is training in.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from albertkit.errors import CheckpointError, TrainingError
from albertkit.fileio import fsync_dir, replace_dir, write_synced

log = logging.getLogger("albertkit")

FILES = ("model", "optimizer", "step")
PREFIX = "ckpt-"
# A valid checkpoint holds exactly these files (besides MANIFEST.json): anything else in its
# manifest is either damage or a name that could point outside the checkpoint.
EXPECTED_FILES = frozenset({*(f"{name}.safetensors" for name in FILES), "state.json"})
DAMAGED_SUBDIR = "damaged"
LOCK_FILE = ".albertkit.lock"
DISK_FULL_TEXT = "No space left on device"  # strerror(ENOSPC), also inside wrapped errors
# which checkpoint of a run ``evaluate`` and ``export`` read: these names or a step number
NEWEST, BEST = "newest", "best"


def parse_checkpoint_choice(value: str | int) -> str | int:
    """``"newest"``, ``"best"`` or a step number (an int, or a string of digits).

    Example:
        >>> parse_checkpoint_choice("best"), parse_checkpoint_choice("500")
        ('best', 500)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        if value in (NEWEST, BEST):
            return value
        if value.isdigit():
            return int(value)
    raise ValueError(f"checkpoint={value!r}: expected 'newest', 'best' or a step number")


@dataclass(frozen=True)
class Checkpoint:
    """One verified checkpoint, as :meth:`CheckpointManager.latest` and
    :meth:`CheckpointManager.select` return it: its directory, its training step and the
    contents of its ``state.json`` (where the data stream stood, among others)."""

    path: Path
    step: int
    state: dict[str, Any]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _keys(variables: list) -> list[str]:
    """Stable unique keys: index plus the variable path (paths alone may repeat)."""
    return [f"{i:05d}:{getattr(v, 'path', getattr(v, 'name', 'var'))}" for i, v in enumerate(variables)]


def _same_optimizer_keys(keys: list[str], saved: dict[str, Any]) -> list[str]:
    """``keys`` of optimizer variables, each replaced by the saved key that differs from it
    only in the optimizer's name (``00003:adam_1/x`` -> ``00003:adam/x``) when it is not
    saved itself; the index still pins the order."""

    def unnamed(key: str) -> str:
        index, _, path = key.partition(":")
        return f"{index}:{path.partition('/')[2]}"

    by_unnamed = {unnamed(k): k for k in saved}
    return [k if k in saved else by_unnamed.get(unnamed(k), k) for k in keys]


class CheckpointManager:
    """Saves, lists, verifies and restores checkpoints in ``directory``.

    Example (three saves of a small variable, keeping the last two; a damaged newest
    checkpoint is skipped with a warning):
        >>> import keras
        >>> weights = [keras.Variable(np.zeros(3, np.float32), name="w")]
        >>> groups = {"model": weights, "optimizer": [keras.Variable(0, dtype="int64")],
        ...           "step": [keras.Variable(1.0)]}
        >>> mgr = CheckpointManager("run/checkpoints", keep_last=2)
        >>> for step in (10, 20, 30):
        ...     _ = weights[0].assign(np.full(3, step, np.float32))
        ...     _ = mgr.save(step, groups, {"consumed_batches": step})
        >>> [path.name for path in mgr.list()]
        ['ckpt-00000020', 'ckpt-00000030']
        >>> _ = (mgr.list()[-1] / "model.safetensors").write_bytes(b"damaged")
        >>> ckpt = mgr.latest()
        >>> ckpt.step, ckpt.state["consumed_batches"]
        (20, 20)
        >>> CheckpointManager.restore(ckpt, groups)
        >>> weights[0].numpy()
        array([20., 20., 20.], dtype=float32)
    """

    def __init__(self, directory: str | os.PathLike, keep_last: int = 3) -> None:
        self.directory = Path(directory)
        self.keep_last = keep_last

    # ------------------------------------------------------------------ save
    def save(self, step: int, groups: dict[str, list], state: dict[str, Any],
             protect: set[Path] | None = None) -> Path:
        """Write checkpoint ``step`` atomically and prune old ones (keeping ``protect``)."""
        if set(groups) != set(FILES):
            # verify() accepts exactly these files, so anything else could never be restored
            raise ValueError(f"checkpoint groups must be {sorted(FILES)}, got {sorted(groups)}")
        final = self.directory / f"{PREFIX}{step:08d}"
        tmp = self.directory / f".tmp-{PREFIX}{step:08d}-{os.getpid()}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
            manifest: dict[str, Any] = {"step": step, "files": {}}
            for name, variables in groups.items():
                # np.array (not ascontiguousarray, which turns 0-d scalars into shape (1,))
                arrays = {k: np.array(v.numpy() if hasattr(v, "numpy") else v, order="C")
                          for k, v in zip(_keys(variables), variables, strict=True)}
                path = tmp / f"{name}.safetensors"
                save_file(arrays, str(path), metadata={"albertkit": "1"})
            (tmp / "state.json").write_text(json.dumps({"step": step, **state}, indent=2))
            for f in sorted(tmp.iterdir()):
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
                manifest["files"][f.name] = {"sha256": _sha256(f), "bytes": f.stat().st_size}
            write_synced(tmp / "MANIFEST.json", json.dumps(manifest, indent=2).encode("utf-8"))
            # the same step saved again (e.g. best + periodic) swaps in over the first one
            replace_dir(tmp, final)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if e.errno == errno.ENOSPC:
                raise self._disk_full(step, final) from e
            raise CheckpointError(
                f"cannot write checkpoint {final}: {e.strerror or e} (directory not "
                f"writable?); nothing partial was left behind; {self._kept()}") from e
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            # safetensors reports a full disk as its own error ("Error while serializing:
            # I/O error: No space left on device (os error 28)"), not as an OSError
            if isinstance(e, Exception) and DISK_FULL_TEXT in str(e):
                raise self._disk_full(step, final) from e
            raise
        self._prune(protect or set())
        return final

    def _kept(self) -> str:
        """Which checkpoint a failed save leaves as the newest: listed checkpoints were all
        renamed into place complete (not re-hashed here: that could read gigabytes; a save
        of an existing step leaves that step's earlier copy in place)."""
        done = self.list()
        return (f"the newest complete checkpoint, {done[-1]}, is kept and a new run resumes "
                "from it" if done else "no earlier checkpoint to keep (none yet)")

    def _disk_full(self, step: int, final: Path) -> CheckpointError:
        return CheckpointError(
            f"disk full while writing checkpoint step {step} ({final}): No space left on "
            f"device in {self.directory}; its partial copy was removed and {self._kept()}"
            "; free space (or lower checkpoint.keep_last) and run again")

    def _prune(self, protect: set[Path]) -> None:
        ckpts = self.list()
        for path in ckpts[: max(0, len(ckpts) - self.keep_last)]:
            if path not in protect:
                shutil.rmtree(path, ignore_errors=True)
        for pattern in (f".tmp-{PREFIX}*", f".old-{PREFIX}*"):
            for stale in self.directory.glob(pattern):
                shutil.rmtree(stale, ignore_errors=True)

    # ------------------------------------------------------------------ load
    def list(self) -> list[Path]:
        """Checkpoint directories, oldest first."""
        if not self.directory.is_dir():
            return []
        found = []
        for p in self.directory.iterdir():
            if p.is_dir() and p.name.startswith(PREFIX) and p.name[len(PREFIX):].isdigit():
                found.append(p)
        return sorted(found, key=lambda p: int(p.name[len(PREFIX):]))

    @staticmethod
    def verify(path: Path) -> Checkpoint:
        """Check a checkpoint's manifest, files and state; raise CheckpointError naming the
        bad file. Every way a damaged checkpoint can fail to parse ends up here as a
        CheckpointError, so callers can fall back to an older one."""
        path = Path(path)
        mpath = path / "MANIFEST.json"
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:  # UnicodeDecodeError is a ValueError
            raise CheckpointError(f"{mpath}: missing or unreadable manifest ({e})") from None
        files = manifest.get("files") if isinstance(manifest, dict) else None
        if not isinstance(files, dict):
            raise CheckpointError(f"{mpath}: not a checkpoint manifest (no 'files' mapping)")
        names = set(files)
        if names != EXPECTED_FILES:
            # names are compared to a fixed set, so a listed name can never be a path
            # ('../x', '/etc/...') that the hashing below would read
            missing, extra = sorted(EXPECTED_FILES - names), sorted(names - EXPECTED_FILES)
            raise CheckpointError(
                f"{mpath}: must list exactly {sorted(EXPECTED_FILES)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unexpected {extra}" if extra else ""))
        for name in sorted(names):
            meta, f = files[name], path / name
            if not (isinstance(meta, dict) and type(meta.get("bytes")) is int
                    and isinstance(meta.get("sha256"), str)):
                raise CheckpointError(f"{mpath}: entry for {name} needs an integer 'bytes' "
                                      "and a string 'sha256'")
            if f.is_symlink() or not f.is_file():
                raise CheckpointError(f"{f}: file listed in the manifest is missing")
            try:
                ok = f.stat().st_size == meta["bytes"] and _sha256(f) == meta["sha256"]
            except OSError as e:
                raise CheckpointError(f"{f}: cannot be read ({e.strerror or e})") from None
            if not ok:
                raise CheckpointError(f"{f}: size or checksum differs from the manifest "
                                      "(truncated or corrupt)")
        spath = path / "state.json"
        try:
            state = json.loads(spath.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{spath}: unreadable ({e})") from None
        step = state.get("step") if isinstance(state, dict) else None
        if type(step) is not int or path.name != f"{PREFIX}{step:08d}":
            raise CheckpointError(f"{spath}: 'step' must be the integer in the directory name "
                                  f"{path.name} (got {step!r})")
        return Checkpoint(path=path, step=step, state=state)

    def scan(self) -> tuple[Checkpoint | None, list[tuple[Path, str]]]:
        """The newest checkpoint that verifies, and every damaged one with its reason.

        Read-only: every checkpoint is verified (not only the ones newer than the first good
        one) so that a resuming trainer can move all damaged ones out of the keep_last count.
        """
        self._recover_interrupted_swaps()
        good: Checkpoint | None = None
        damaged: list[tuple[Path, str]] = []
        for path in reversed(self.list()):
            try:
                ckpt = self.verify(path)
            except CheckpointError as e:
                damaged.append((path, str(e)))
                if good is None:
                    log.warning("skipping damaged checkpoint: %s; falling back to an older one", e)
                continue
            if good is None:
                good = ckpt
        return good, damaged

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint that verifies; damaged newer ones are skipped with a warning."""
        for path in reversed(self.list()):
            try:
                return self.verify(path)
            except CheckpointError as e:
                log.warning("skipping damaged checkpoint: %s; falling back to an older one", e)
        return None

    def select(self, which: str | int = NEWEST) -> Checkpoint | None:
        """The checkpoint ``which`` names: ``"newest"`` (the newest that verifies; None when
        there is none), ``"best"`` (the one kept for the best eval metric, as recorded by the
        newest checkpoint) or a step number. Raises :class:`CheckpointError` in one line when
        a best or step checkpoint does not exist or does not verify."""
        which = parse_checkpoint_choice(which)
        run_dir = self.directory.parent
        if which == NEWEST:
            return self.latest()
        if which == BEST:
            newest = self.latest()
            best = newest.state.get("best") if newest is not None else None
            if not (isinstance(best, dict) and type(best.get("step")) is int):
                raise CheckpointError(
                    f"run_dir={run_dir} kept no best checkpoint: its config has no best "
                    "metric to keep one by (checkpoint.keep_best=false or no eval data) or "
                    "no evaluation ran before its newest checkpoint; use checkpoint "
                    "'newest' or a step number")
            which = best["step"]
        path = self.directory / f"{PREFIX}{which:08d}"
        if path not in self.list():
            steps = ", ".join(str(int(p.name[len(PREFIX):])) for p in self.list()) or "none"
            raise CheckpointError(f"run_dir={run_dir} has no checkpoint at step {which} "
                                  f"(steps present: {steps})")
        return self.verify(path)

    def resume_point(self, allow_fresh_start: bool = False,
                     quarantine: bool = True) -> Checkpoint | None:
        """The checkpoint a trainer resumes from (None: no checkpoints, start fresh).

        Damaged checkpoints are moved to ``damaged/`` when ``quarantine`` (the chief of a
        training run; readers and other ranks leave the directory alone). If checkpoints exist
        but none verifies, starting over would silently throw the run away, so this raises
        unless ``allow_fresh_start``; nothing is moved in that case, so a second attempt
        refuses again.
        """
        good, damaged = self.scan()
        if good is None and damaged and not allow_fresh_start:
            reasons = "; ".join(reason for _, reason in damaged)
            raise CheckpointError(
                f"{self.directory}: {len(damaged)} checkpoint(s) but none verifies ({reasons}). "
                "Refusing to start from step 0 over them: repair or move them away, or set "
                "checkpoint.allow_fresh_start_if_damaged=true to set them aside and start over")
        if quarantine:
            for path, reason in damaged:
                self.quarantine(path, reason)
        return good

    def quarantine(self, path: Path, reason: str = "") -> Path:
        """Move a damaged checkpoint to ``damaged/<name>-<time>``: kept for inspection, out of
        the listing (so it never takes a keep_last slot or blocks a new save of its step)."""
        dest_dir = self.directory / DAMAGED_SUBDIR
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"{path.name}-{time.strftime('%Y%m%dT%H%M%S')}"
        n = 1
        while dest.exists():
            dest = dest_dir / f"{path.name}-{time.strftime('%Y%m%dT%H%M%S')}-{n}"
            n += 1
        os.replace(path, dest)
        fsync_dir(self.directory)
        log.warning("moved damaged checkpoint %s to %s (%s)", path, dest, reason or "damaged")
        return dest

    def _recover_interrupted_swaps(self) -> None:
        """A save of an existing step renames the old checkpoint to ``.old-ckpt-N-<pid>``
        before the new one is renamed in; a crash between the two leaves the only copy under
        the ``.old-`` name. Put it back so it is found (and not pruned as a leftover)."""
        if not self.directory.is_dir():
            return
        for old in self.directory.glob(f".old-{PREFIX}*"):
            name = old.name[len(".old-"):].rsplit("-", 1)[0]
            final = self.directory / name
            if old.is_dir() and not final.exists() and name[len(PREFIX):].isdigit():
                try:
                    os.replace(old, final)
                    log.warning("recovered checkpoint %s from an interrupted save", final)
                except OSError:
                    pass

    @staticmethod
    def restore(ckpt: Checkpoint, groups: dict[str, list]) -> None:
        """Assign saved values to ``groups`` (same structure as at save time).

        Everything is read and checked before the first variable is assigned, so a refused
        checkpoint never leaves a half-restored model.
        """
        loaded: dict[str, dict[str, np.ndarray]] = {}
        for name, variables in groups.items():
            path = ckpt.path / f"{name}.safetensors"
            try:
                arrays = load_file(str(path))
            except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
                raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
            keys = _keys(variables)
            if len(arrays) != len(keys):
                raise CheckpointError(
                    f"{path}: holds {len(arrays)} tensors but the {name} has {len(keys)} "
                    "variables (checkpoint from a different model or optimizer?)"
                )
            if name == "optimizer":
                # Keras names an optimizer's variables after the optimizer, and names a second
                # Adam() in a process "adam_1": the same optimizer's state, another prefix
                keys = _same_optimizer_keys(keys, arrays)
            for key, var in zip(keys, variables, strict=True):
                if key not in arrays:
                    raise CheckpointError(f"{path}: no tensor named {key!r} "
                                          "(checkpoint from a different model?)")
                value = arrays[key]
                if tuple(value.shape) != tuple(var.shape):
                    raise CheckpointError(
                        f"{path}: {key} has shape {tuple(value.shape)} but the model expects "
                        f"{tuple(var.shape)} (checkpoint from a different model size?)"
                    )
                # Training never writes non-finite weights (such steps are skipped), so they
                # can only come from damage that matched the manifest: never load them.
                if name == "model" and np.issubdtype(value.dtype, np.floating) \
                        and not np.isfinite(value).all():
                    raise CheckpointError(f"{path}: {key} holds NaN or Inf values (damaged "
                                          "checkpoint); refusing to restore it")
            loaded[name] = arrays
        for name, variables in groups.items():
            keys = _keys(variables)
            if name == "optimizer":
                keys = _same_optimizer_keys(keys, loaded[name])
            for key, var in zip(keys, variables, strict=True):
                var.assign(loaded[name][key])


class RunDirLock:
    """An exclusive ``flock`` on ``run_dir/.albertkit.lock`` for as long as a trainer runs.

    Two trainers in one run directory would delete each other's temporary checkpoints and
    prune each other's; the second one gets a clear error at once instead. The kernel drops
    the lock when the process dies (even by ``kill -9``), so a stale file never blocks a
    resume. The file holds the owner's pid and host only for the error message.
    """

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunDirLock:
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                # e.g. a network file system without flock: warn rather than refuse to train
                os.close(fd)
                log.warning("cannot lock %s (%s); not protected against a second trainer "
                            "in the same run_dir", self.path, e.strerror or e)
                return self
            try:
                owner = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise TrainingError(
                f"run_dir={self.path.parent} is in use by another trainer ({owner}; lock "
                f"{self.path}); wait for it to finish, stop it, or use another run_dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            # the file stays (deleting it could race with a new owner); closing drops the lock
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
