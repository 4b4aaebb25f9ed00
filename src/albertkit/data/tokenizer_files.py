"""The files of a tokenizer directory: what the directory may hold, which prepared data uses
it, the language it records, building it whole beside the old one, and the two fields albertkit
reads from ``spiece.model`` by hand.

Nothing here needs a loaded :class:`albertkit.data.tokenizer.Tokenizer`; that module builds on
this one (and re-exports its public names).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from albertkit.data.language import recorded_language
from albertkit.data.protobuf import fields, len_field
from albertkit.errors import TokenizerError
from albertkit.fileio import read_json, replace_dir, temp_dir_beside

MODEL_FILE = "spiece.model"
META_FILE = "albertkit_tokenizer.json"  # albertkit's record: settings, language, sentences


# ------------------------------------------------------------------ SentencePiece ModelProto
def without_model_prefix(model_proto: bytes) -> bytes:
    """Drop ``trainer_spec.model_prefix`` (a temporary path) so the model bytes depend only
    on the corpus and settings."""
    out = bytearray()
    for field in fields(model_proto):
        if field.number == 2:  # trainer_spec
            spec = field.value
            inner = b"".join(spec[f.start : f.end] for f in fields(spec) if f.number != 2)
            out += len_field(2, inner)
        else:
            out += model_proto[field.start : field.end]
    return bytes(out)


def precompiled_charsmap(model_proto: bytes) -> bytes:
    """``ModelProto.normalizer_spec.precompiled_charsmap`` (field 3 -> field 2).

    Read by hand: the generated ``sentencepiece_model_pb2`` modules shipped with
    sentencepiece and transformers need protobuf>=7, which TensorFlow 2.21 excludes.
    """
    for field in fields(model_proto):
        if field.number == 3:
            for inner in fields(field.value):  # type: ignore[arg-type]
                if inner.number == 2:
                    return bytes(inner.value)  # type: ignore[arg-type]
    return b""


def tokenizer_language(path: str | os.PathLike | None) -> str:
    """The language recorded with the tokenizer directory ``path`` (an export's included);
    ``"en"`` for a directory without a record, a bare model file or no tokenizer."""
    if path is None or not Path(path).is_dir():
        return "en"
    return recorded_language_of(Path(path))


def recorded_language_of(directory: Path) -> str:
    """The language in ``directory/albertkit_tokenizer.json``; ``"en"`` without a record."""
    meta_file = directory / META_FILE
    meta = read_json(meta_file, "tokenizer record", TokenizerError) if meta_file.is_file() else {}
    try:
        return recorded_language(meta.get("language") if isinstance(meta, dict) else None)
    except ValueError as e:
        raise TokenizerError(f"{meta_file}: {e}") from None


# ------------------------------------------------------------------ the directory on disk
# What a tokenizer directory may hold. Anything else means the directory is something else
# (a run, a project folder, the working directory): it is never replaced.
TOKENIZER_FILES = frozenset({
    MODEL_FILE, "spiece.vocab", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json", "albertkit_tokenizer.json",
})
# Written by prepare-data beside the tokenizer: the datasets whose token ids it defines.
USERS_FILE = "albertkit_datasets.json"


def datasets_using(directory: str | os.PathLike) -> list[Path]:
    """Prepared datasets whose ``manifest.json`` names ``directory`` as their tokenizer.

    ``prepare-data`` lists each dataset in ``directory/albertkit_datasets.json``; a listed
    dataset counts while its manifest still names this directory (moved or deleted data,
    or data prepared again with another tokenizer, no longer does).
    """
    from albertkit.data.manifest import MANIFEST, read_manifest

    directory = Path(directory)
    users = directory / USERS_FILE
    if not users.is_file():
        return []
    try:
        listed = json.loads(users.read_text(encoding="utf-8"))["datasets"]
        listed = [str(x) for x in listed]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TokenizerError(
            f"{users}: unreadable ({e}); it lists the prepared datasets that use this "
            "tokenizer, so the directory is not replaced. Check them, then delete the file"
        ) from None
    here = directory.resolve()
    found = []
    for d in listed:
        manifest = Path(d) / MANIFEST
        if not manifest.is_file():
            continue
        try:
            path = read_manifest(manifest)["tokenizer"]["path"]
        except ValueError:
            continue  # a damaged dataset cannot be read anyway
        if Path(path).resolve() == here:
            found.append(Path(d))
    return found


def check_replaceable(directory: str | os.PathLike, overwrite: bool = False) -> None:
    """Refuse to replace ``directory`` with a new tokenizer when it is not a tokenizer
    directory (other files in it would be lost) or, unless ``overwrite``, when prepared
    data still uses it (its token ids would silently change meaning)."""
    directory = Path(directory)
    if not directory.exists():
        return
    if not directory.is_dir():
        raise TokenizerError(f"{directory}: exists and is not a directory")
    others = sorted(
        p.name for p in directory.iterdir()
        if p.name not in TOKENIZER_FILES and p.name != USERS_FILE
        and not p.name.startswith((".spm-", ".hf-", f".{MODEL_FILE}."))
    )
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise TokenizerError(
            f"{directory}: holds files that are not a tokenizer's ({shown}); write the "
            "tokenizer to a new or empty directory"
        )
    if overwrite:
        return
    users = datasets_using(directory)
    if users:
        names = ", ".join(str(u) for u in users[:3])
        raise TokenizerError(
            f"{directory}: prepared data uses this tokenizer ({names}: its manifest.json names "
            "it); a new tokenizer here would change what the data's token ids mean. Write it "
            "to another directory, or delete or re-prepare that data first"
        )


def swap_in(directory: Path, fill) -> Path:
    """Build ``directory`` anew with ``fill(tmp)`` in a temporary sibling, then swap it in:
    the old directory stays whole until the new one is complete."""
    tmp = temp_dir_beside(directory)
    try:
        fill(tmp)
        return replace_dir(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
