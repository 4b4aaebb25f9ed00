"""A full disk while a checkpoint is written: one clear error, nothing partial, the
previous checkpoint kept and restorable."""

from __future__ import annotations

import errno

import numpy as np
import pytest
from safetensors import SafetensorError

import albertkit.training.checkpoint as ck
from albertkit.errors import CheckpointError
from albertkit.training.checkpoint import CheckpointManager


class Var:
    def __init__(self, value):
        self.value = np.asarray(value, dtype=np.float32)
        self.shape = self.value.shape

    def numpy(self):
        return self.value

    def assign(self, value):
        self.value = np.asarray(value, dtype=np.float32)


def groups(fill: float):
    return {"model": [Var(np.full((3, 2), fill)), Var(fill)],
            "optimizer": [Var([fill, fill])], "step": [Var(1.0)]}


def fail_on_nth_write(monkeypatch, n: int, error: Exception):
    real, calls = ck.save_file, {"n": 0}

    def save_file(arrays, path, metadata=None):
        calls["n"] += 1
        if calls["n"] == n:
            with open(path, "wb") as fh:  # a partly written file, as a full disk leaves
                fh.write(b"\0" * 10)
            raise error
        return real(arrays, path, metadata=metadata)

    monkeypatch.setattr(ck, "save_file", save_file)


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    # what safetensors raises: the OS error only as text
    SafetensorError("Error while serializing: I/O error: No space left on device "
                    "(os error 28)"),
], ids=["oserror", "safetensors"])
def test_disk_full_names_the_checkpoint_and_keeps_the_previous(tmp_path, monkeypatch, error):
    mgr = CheckpointManager(tmp_path / "checkpoints")
    first = mgr.save(10, groups(1.0), {})
    fail_on_nth_write(monkeypatch, 2, error)  # the new checkpoint's optimizer file
    with pytest.raises(CheckpointError) as info:
        mgr.save(20, groups(2.0), {})
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"disk full while writing checkpoint step 20 "
                          f"({tmp_path / 'checkpoints' / 'ckpt-00000020'})")
    assert "No space left on device" in msg
    assert f"the newest complete checkpoint, {first}, is kept" in msg
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000010"]

    restored = groups(0.0)
    CheckpointManager.restore(mgr.latest(), restored)
    assert restored["model"][0].value.tolist() == [[1.0, 1.0]] * 3
    assert float(restored["optimizer"][0].value[0]) == 1.0


def test_disk_full_at_the_first_checkpoint_says_none_yet(tmp_path, monkeypatch):
    mgr = CheckpointManager(tmp_path / "checkpoints")
    fail_on_nth_write(monkeypatch, 1, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(CheckpointError, match=r"step 5 .*\(none yet\)"):
        mgr.save(5, groups(1.0), {})
    assert list((tmp_path / "checkpoints").iterdir()) == [] and mgr.latest() is None


def test_other_errors_are_not_called_a_full_disk(tmp_path, monkeypatch):
    mgr = CheckpointManager(tmp_path / "checkpoints")
    mgr.save(1, groups(1.0), {})
    fail_on_nth_write(monkeypatch, 1, OSError(errno.EACCES, "Permission denied"))
    with pytest.raises(CheckpointError, match="cannot write checkpoint .*Permission denied") \
            as info:
        mgr.save(2, groups(2.0), {})
    assert "disk full" not in str(info.value) and "ckpt-00000001, is kept" in str(info.value)
    fail_on_nth_write(monkeypatch, 1, SafetensorError("something else"))
    with pytest.raises(SafetensorError):
        mgr.save(3, groups(3.0), {})
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000001"]
