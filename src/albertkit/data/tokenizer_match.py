"""Which tokenizer belongs to prepared data or to a model, and refusing pairs that do not.

Token ids mean something only with the tokenizer that made them, so the tokenizer travels
with the ids: ``prepare-data`` keeps a copy beside the shards (``<data>/tokenizer/``, named
in ``manifest.json``), a run keeps one in ``run_dir/tokenizer``, an albertkit export in its
``tokenizer/`` and a Hugging Face export beside ``config.json``. This module finds them
(:func:`find_data_tokenizer`, :func:`model_tokenizer_dir`) and compares two by what decides
the ids (:class:`TokenizerIdentity`): the vocabulary size, the special token ids and the
tokenizer's sha256 (model bytes plus normalisation flags, :attr:`Tokenizer.sha256`).

Example (a tokenizer compared with itself and with a record that differs in one id):
    >>> from albertkit.data import TokenizerConfig, train_tokenizer
    >>> lines = [f"a {a} cat sat on a {b} mat." for a in ("red", "big", "old", "shy", "tall",
    ...          "small") for b in ("blue", "flat", "new", "wet", "soft", "warm")]
    >>> _ = train_tokenizer(None, "tok", TokenizerConfig(vocab_size=36, num_threads=1),
    ...                     sentences=lines)
    >>> ours = TokenizerIdentity.of("tok")
    >>> ours.vocab_size, ours.differences(TokenizerIdentity.of("tok"))
    (36, [])
    >>> other = TokenizerIdentity(Path("x"), 36, {**ours.special_ids, "mask": 5}, None)
    >>> ours.differences(other)
    ['special_ids (mask=4 vs mask=5)']
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albertkit.data.manifest import MANIFEST, read_manifest
from albertkit.data.tokenizer import MODEL_FILE, SPECIAL_TOKENS, Tokenizer
from albertkit.errors import ConfigError, DatasetError, TokenizerError

# Where a run, an albertkit export and prepared data keep their tokenizer.
TOKENIZER_SUBDIR = "tokenizer"
HF_TOKENIZER_MARKERS = (MODEL_FILE, "tokenizer.json")


@dataclass(frozen=True)
class TokenizerIdentity:
    """What decides the meaning of token ids: vocabulary size, special ids and the sha256 of
    the tokenization (None when only a ``tokenizer.json`` is there to read).

    Attributes:
        path: where it was read (or the path a manifest records).
    """

    path: Path
    vocab_size: int
    special_ids: dict[str, int]
    sha256: str | None

    @classmethod
    def of(cls, path: str | os.PathLike) -> TokenizerIdentity:
        """Read the tokenizer at ``path``: a directory with ``spiece.model`` (or only the
        Hugging Face ``tokenizer.json``), or a bare ``spiece.model``."""
        path = Path(path)
        if path.is_dir() and not (path / MODEL_FILE).is_file() \
                and (path / "tokenizer.json").is_file():
            return _from_tokenizer_json(path)
        tok = Tokenizer.load(path)
        return cls(path, tok.vocab_size, dict(tok.special_ids), tok.sha256)

    @classmethod
    def from_manifest(cls, record: dict[str, Any]) -> TokenizerIdentity:
        """The tokenizer a manifest's ``tokenizer`` entry records."""
        return cls(Path(record["path"]), int(record["vocab_size"]),
                   dict(record["special_ids"]), record["sha256"])

    def differences(self, other: TokenizerIdentity) -> list[str]:
        """What differs, each as ``"field (ours vs theirs)"``; empty when they match. The
        sha256 is named only when sizes and ids agree (and both are known)."""
        out = []
        if self.vocab_size != other.vocab_size:
            out.append(f"vocab_size ({self.vocab_size} vs {other.vocab_size})")
        if self.special_ids != other.special_ids:
            keys = sorted(set(self.special_ids) | set(other.special_ids))
            diff = [k for k in keys if self.special_ids.get(k) != other.special_ids.get(k)]
            ours = ", ".join(f"{k}={self.special_ids.get(k)}" for k in diff)
            theirs = ", ".join(f"{k}={other.special_ids.get(k)}" for k in diff)
            out.append(f"special_ids ({ours} vs {theirs})")
        if not out and self.sha256 and other.sha256 and self.sha256 != other.sha256:
            out.append(f"sha256 ({self.sha256[:12]}... vs {other.sha256[:12]}...: other "
                       "pieces or normalisation)")
        return out


def _from_tokenizer_json(directory: Path) -> TokenizerIdentity:
    """Size and special ids of a Hugging Face Unigram ``tokenizer.json`` (no sha256)."""
    path = directory / "tokenizer.json"
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
        pieces = [entry[0] for entry in vocab]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise TokenizerError(
            f"{path}: not a SentencePiece (Unigram) tokenizer.json ({e})") from None
    index = {piece: i for i, piece in reversed(list(enumerate(pieces)))}
    missing = [p for p in SPECIAL_TOKENS.values() if p not in index]
    if missing:
        raise TokenizerError(f"{path}: has no {', '.join(missing)} piece; ALBERT tokenizers "
                             f"need {', '.join(SPECIAL_TOKENS.values())}")
    return TokenizerIdentity(directory, len(pieces),
                             {name: index[p] for name, p in SPECIAL_TOKENS.items()}, None)


def mismatch(ours: TokenizerIdentity, theirs: TokenizerIdentity) -> str | None:
    """``"<ours> vs <theirs> differ in <fields>"`` when the two do not match, else None."""
    diff = ours.differences(theirs)
    return f"{ours.path} vs {theirs.path} differ in {'; '.join(diff)}" if diff else None


# --------------------------------------------------------------------------- models
def check_model_tokenizer(tokenizer: TokenizerIdentity, what: str,
                          source: str | os.PathLike | None) -> None:
    """Refuse ``tokenizer`` (``what`` names where it comes from, e.g. ``data.tokenizer=x``)
    for a model started from ``source`` (``model.load_from``) that carries another one.

    Raises:
        ConfigError: naming both tokenizers and what differs.
    """
    if source is None:
        return
    own = model_tokenizer_dir(source)
    if own is None:
        return
    problem = mismatch(tokenizer, TokenizerIdentity.of(own))
    if problem:
        raise ConfigError(f"{what} does not belong to model.load_from={source}: {problem}")


def model_tokenizer_dir(source: str | os.PathLike) -> Path | None:
    """The tokenizer a starting checkpoint carries: ``tokenizer/`` of an albertkit run or
    export, the directory itself for a Hugging Face directory with tokenizer files; None
    when it carries none."""
    source = Path(source)
    if (source / "model_spec.json").is_file():  # an albertkit run or export
        tok = source / TOKENIZER_SUBDIR
        return tok if tok.is_dir() else None
    if any((source / name).is_file() for name in HF_TOKENIZER_MARKERS):
        return source
    return None


# --------------------------------------------------------------------------- prepared data
@dataclass(frozen=True)
class DataTokenizer:
    """The tokenizer of prepared data, as its manifest records it and where its files are.

    Attributes:
        manifest: the ``manifest.json`` that records it.
        record: what the manifest says (``record.path``: where the data was prepared from).
        directory: its files: the data's copy, else the recorded path while that still
            holds the same tokenizer; None when neither does (``problem`` says why).
    """

    manifest: Path
    record: TokenizerIdentity
    directory: Path | None
    problem: str | None = None


def find_data_tokenizer(files: Sequence[str | os.PathLike]) -> DataTokenizer | None:
    """The tokenizer of the prepared data ``files`` belong to (the first ``manifest.json``
    beside them); None when no file has a manifest.

    Raises:
        DatasetError: the data's copy of its tokenizer is not the tokenizer the manifest
            records (damaged or replaced).
    """
    seen = set()
    for f in files:
        parent = Path(f).parent
        if parent in seen:
            continue
        seen.add(parent)
        if (parent / MANIFEST).is_file():
            return _data_tokenizer(parent / MANIFEST)
    return None


def _data_tokenizer(manifest_file: Path) -> DataTokenizer:
    entry = read_manifest(manifest_file, DatasetError)["tokenizer"]
    record = TokenizerIdentity.from_manifest(entry)
    copy = entry.get("copy")
    tried = []
    if copy:  # a plain name inside the dataset directory (read_manifest checks)
        directory = manifest_file.parent / copy
        if directory.is_dir():
            try:
                found = TokenizerIdentity.of(directory)
            except TokenizerError as e:
                raise DatasetError(f"{directory}: the copy of the data's tokenizer is damaged "
                                   f"({e}); prepare the data again") from None
            diff = found.differences(record)
            if diff:
                raise DatasetError(
                    f"{directory}: holds another tokenizer than {manifest_file} records "
                    f"(differs in {'; '.join(diff)}); prepare the data again")
            return DataTokenizer(manifest_file, record, directory)
        tried.append(f"{directory} is missing")
    recorded = record.path
    if recorded.exists():
        try:
            found = TokenizerIdentity.of(recorded)
        except TokenizerError as e:
            tried.append(f"{recorded} (recorded in {MANIFEST}) cannot be read: {e}")
        else:
            diff = found.differences(record)
            if not diff:
                return DataTokenizer(manifest_file, record, recorded)
            tried.append(f"{recorded} (recorded in {MANIFEST}) now holds another tokenizer "
                         f"({'; '.join(diff)})")
    else:
        tried.append(f"{recorded} (recorded in {MANIFEST}) does not exist")
    return DataTokenizer(manifest_file, record, None, "; ".join(tried))


__all__ = [
    "TOKENIZER_SUBDIR",
    "DataTokenizer",
    "TokenizerIdentity",
    "check_model_tokenizer",
    "find_data_tokenizer",
    "mismatch",
    "model_tokenizer_dir",
]
