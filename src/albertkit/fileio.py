"""Crash-safe file writes, the directory swap and the YAML loader: written once, used everywhere.

A reader (a resumed run, ``albertkit report``, another rank) must never see half a file or
half a directory, even when the writer is killed or the disk fills up. Every file albertkit
writes therefore goes to a temporary name beside its destination, is flushed to disk and
then renamed over the destination (``os.replace`` is atomic on POSIX file systems).
Directories (checkpoints, exports, the run's tokenizer) are built under a temporary name
and swapped in with :func:`replace_dir`.

:func:`load_yaml` is the one reader of YAML config files and :func:`read_json` the one
reader of JSON files a user may hand over or edit: their errors name the file and, for
malformed text, the line and column.

This module imports nothing from albertkit but its errors, so every layer may use it.

Example:
    >>> atomic_write_json(Path("a.json"), {"step": 1})
    >>> Path("a.json").read_text()
    '{\\n  "step": 1\\n}\\n'
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from albertkit.errors import ConfigError


# --------------------------------------------------------------------------- files
def write_synced(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` and flush it to disk, without a rename.

    For files inside a temporary directory that :func:`replace_dir` later swaps in as a
    whole: the swap is the atomic step, but the files must be on disk before it.
    """
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers never see a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` so that readers never see a partial file."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, value: Any, indent: int | None = 2) -> None:
    """Write ``value`` as JSON (with a final newline) to ``path``, atomically."""
    atomic_write_text(path, json.dumps(value, indent=indent) + "\n")


# --------------------------------------------------------------------------- directories
def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory's entries (renames into it) to disk, where the platform allows it.

    Without it a rename can be lost in a power cut although the renamed data survived.
    Some file systems refuse to open or sync directories; that is not an error here.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_dir_beside(dst: str | os.PathLike) -> Path:
    """A new empty directory next to ``dst`` (same file system, so the swap is a rename)."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp"))


def replace_dir(tmp: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Swap the finished directory ``tmp`` in at ``dst``; return ``dst``.

    ``tmp`` must be on the same file system as ``dst`` (e.g. from :func:`temp_dir_beside`).
    A reader sees the old ``dst`` or the complete new one, never a mix: an existing ``dst``
    is first renamed to ``.old-<name>-<pid>`` beside it and deleted only once the new one
    is in place (if that second rename fails the old one is put back). A crash between the
    two renames leaves the old directory under its ``.old-`` name, where a later cleanup
    can find it.
    """
    tmp, dst = Path(tmp), Path(dst)
    fsync_dir(tmp)
    if not dst.exists() and not dst.is_symlink():
        os.replace(tmp, dst)
        fsync_dir(dst.parent)
        return dst
    old = dst.with_name(f".old-{dst.name}-{os.getpid()}")
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old)
    os.replace(dst, old)
    try:
        os.replace(tmp, dst)
    except BaseException:
        os.replace(old, dst)
        raise
    fsync_dir(dst.parent)
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink(missing_ok=True)
    return dst


# --------------------------------------------------------------------------- JSON
def _read_text(path: Path, what: str, error: type[Exception], tail: str = "") -> str:
    """A user's text file (UTF-8); missing, undecodable or unreadable raise ``error``."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{what} not found: {path}{tail}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}){tail}") from None
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror or e}){tail}") from None


def read_json(
    path: str | os.PathLike,
    what: str,
    error: type[Exception] = ConfigError,
    hint: str = "",
) -> Any:
    """The parsed JSON file at ``path``; every problem raises ``error`` naming the file.

    ``what`` names the file's role in the messages: ``"<what> not found: <path>"``,
    ``"<path>: not UTF-8 text (...)"`` and ``"<path>: line L, column C: malformed JSON in the
    <what>: <reason>"``; ``hint`` (what to do about it) is appended to the last two.

    Example:
        >>> bad = Path("x.json")
        >>> _ = bad.write_text('{"a": 1,\\n "b": }')
        >>> read_json(bad, "settings file")
        Traceback (most recent call last):
        ...
        albertkit.errors.ConfigError: ...x.json: line 2, column 7: malformed JSON in the settings file: Expecting value
    """
    path = Path(path)
    tail = f"; {hint}" if hint else ""
    text = _read_text(path, what, error, tail)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(
            f"{path}: line {e.lineno}, column {e.colno}: malformed JSON in the {what}: "
            f"{e.msg}{tail}"
        ) from None


# --------------------------------------------------------------------------- YAML
def load_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """The mapping at the top of a YAML (or JSON) file; an empty file is ``{}``.

    Raises ``ConfigError`` naming the file: missing, not UTF-8, malformed (with line and
    column) or not a mapping at the top level.
    """
    path = Path(path)
    text = _read_text(path, "config file", ConfigError)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{path}:{where}: malformed YAML: {problem}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    return raw
