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
manifest is verified; a damaged newest checkpoint is skipped with a warning naming the bad
file and the previous good one is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from albertkit.errors import CheckpointError
from albertkit.fileio import replace_dir, write_synced

log = logging.getLogger("albertkit")

FILES = ("model", "optimizer", "step")
PREFIX = "ckpt-"


@dataclass(frozen=True)
class Checkpoint:
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


class CheckpointManager:
    """Saves, lists, verifies and restores checkpoints in ``directory``.

    Example:
        >>> mgr = CheckpointManager(run_dir / "checkpoints", keep_last=3)
        >>> mgr.save(100, {"model": model.variables, "optimizer": opt.variables,
        ...                "step": step.state_variables}, {"consumed_batches": 100})
        >>> ckpt = mgr.latest()
    """

    def __init__(self, directory: str | os.PathLike, keep_last: int = 3) -> None:
        self.directory = Path(directory)
        self.keep_last = keep_last

    # ------------------------------------------------------------------ save
    def save(self, step: int, groups: dict[str, list], state: dict[str, Any],
             protect: set[Path] | None = None) -> Path:
        """Write checkpoint ``step`` atomically and prune old ones (keeping ``protect``)."""
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
            raise CheckpointError(
                f"cannot write checkpoint {final}: {e.strerror or e} (disk full or directory "
                "not writable?); nothing partial was left behind") from e
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._prune(protect or set())
        return final

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
        """Check a checkpoint's manifest and hashes; raise CheckpointError naming the bad file."""
        mpath = path / "MANIFEST.json"
        try:
            manifest = json.loads(mpath.read_text())
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{mpath}: missing or unreadable manifest ({e})") from None
        for name, meta in manifest.get("files", {}).items():
            f = path / name
            if not f.is_file():
                raise CheckpointError(f"{f}: file listed in the manifest is missing")
            if f.stat().st_size != meta["bytes"] or _sha256(f) != meta["sha256"]:
                raise CheckpointError(f"{f}: size or checksum differs from the manifest "
                                      "(truncated or corrupt)")
        state = json.loads((path / "state.json").read_text())
        return Checkpoint(path=path, step=int(state["step"]), state=state)

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint that verifies; damaged newer ones are skipped with a warning."""
        for path in reversed(self.list()):
            try:
                return self.verify(path)
            except CheckpointError as e:
                log.warning("skipping damaged checkpoint: %s; falling back to an older one", e)
        return None

    @staticmethod
    def restore(ckpt: Checkpoint, groups: dict[str, list]) -> None:
        """Assign saved values to ``groups`` (same structure as at save time)."""
        for name, variables in groups.items():
            path = ckpt.path / f"{name}.safetensors"
            arrays = load_file(str(path))
            keys = _keys(variables)
            if len(arrays) != len(keys):
                raise CheckpointError(
                    f"{path}: holds {len(arrays)} tensors but the {name} has {len(keys)} "
                    "variables (checkpoint from a different model or optimizer?)"
                )
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
            for key, var in zip(keys, variables, strict=True):
                var.assign(arrays[key])
