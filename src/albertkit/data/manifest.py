"""Reading a prepared dataset's ``manifest.json``: one loader whose errors name the file.

``albertkit prepare-data`` writes the manifest (:mod:`albertkit.data.writer`); the TFRecord
reader, the pretraining task and the tokenizer writer read it. A manifest edited by hand,
truncated by a full disk or copied from elsewhere must fail with the file's name and the
field at fault, never as a ``KeyError`` or ``JSONDecodeError`` from deep inside a reader.
Only what readers use is checked; everything else in the file passes through untouched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from albertkit.fileio import read_json

MANIFEST = "manifest.json"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Shard(_Open):
    file: str = Field(min_length=1)
    split: str
    examples: int = Field(ge=0)
    bytes: int = Field(ge=0)


class _Tokenizer(_Open):
    path: str
    sha256: str
    vocab_size: int = Field(gt=0)
    special_ids: dict[str, int]
    # the data's own copy of its tokenizer: a directory name inside the dataset directory
    # (absent in data prepared before albertkit kept one)
    copy_: str | None = Field(None, alias="copy", min_length=1)


class _Language(_Open):
    code: str = Field(min_length=1)


class _Manifest(_Open):
    # absent in data prepared before albertkit recorded languages: English
    language: _Language | None = None
    masking: Literal["static", "dynamic"]
    seq_length: int = Field(gt=0)
    max_predictions_per_seq: int = Field(gt=0)
    masking_rules: dict[str, Any]
    tokenizer: _Tokenizer
    shards: list[_Shard]


def read_manifest(path: str | os.PathLike, error: type[Exception] = ValueError) -> dict[str, Any]:
    """The parsed manifest at ``path``, checked; problems raise ``error`` naming the file.

    Shard names and the tokenizer copy's name must be plain names: a manifest may not
    point readers outside its own directory.
    """
    path = Path(path)
    raw = read_json(
        path, "dataset manifest", error, hint="prepare the data again (albertkit prepare-data)"
    )
    try:
        _Manifest.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<top level>"
        raise error(
            f"{path}: not a valid dataset manifest: {where}: {first['msg']}; prepare the "
            "data again (albertkit prepare-data)"
        ) from None
    copy = raw["tokenizer"].get("copy")
    if copy is not None and (copy != Path(copy).name or copy in (".", "..")):
        raise error(
            f"{path}: not a valid dataset manifest: tokenizer.copy={copy!r} is not a "
            "directory name inside the dataset directory"
        )
    for i, shard in enumerate(raw["shards"]):
        name = shard["file"]
        if name != Path(name).name or name in (".", ".."):
            raise error(
                f"{path}: not a valid dataset manifest: shards.{i}.file={name!r} is not a "
                "file name inside the dataset directory"
            )
    return raw


def manifest_language(manifest: dict[str, Any]) -> str:
    """The language code a (read) manifest records; ``"en"`` for data prepared before
    albertkit recorded languages."""
    from albertkit.data.language import recorded_language

    return recorded_language(manifest.get("language"))
