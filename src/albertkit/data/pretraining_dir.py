"""The directory ``prepare-data`` writes: its settings, the plan that identifies it, what a
re-run finds there (finished, resumable, or prepared differently) and reading a finished one.

:mod:`albertkit.data.writer` runs the pipeline that fills it (and re-exports these names).
A plan is the format, the settings, the inputs' fingerprints and the tokenizer's hash; its
SHA-256 names the directory's contents: the same plan finds its finished shards and chunks,
another one is refused unless ``overwrite``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from albertkit.config import MaskingConfig
from albertkit.data.corpus import DEFAULT_MAX_LINE_BYTES, EncodingErrors, InputFormat
from albertkit.data.language import AUTO, language_info
from albertkit.data.manifest import MANIFEST, manifest_language, read_manifest
from albertkit.data.masking import default_max_predictions
from albertkit.data.segmenters import check_setting
from albertkit.errors import DataPreparationError
from albertkit.fileio import atomic_write_text

FORMAT = "albertkit-pretraining-v1"
WORK = ".work"
TOKENIZER_COPY = "tokenizer"  # the data's own copy of its tokenizer (manifest: tokenizer.copy)
SPLITS = {"train": 0, "eval": 1}


class PretrainingDataConfig(BaseModel):
    """Settings of :func:`prepare_pretraining_data` (Google's flag names where they exist)."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(..., min_length=1)
    # "auto" (from the corpus's scripts) or a language code (albertkit.data.language): how
    # sentences are split. Resolved once; recorded in the manifest, not in "settings" (an
    # English plan keeps the identity it had before languages were asked)
    language: str = "auto"
    input_format: InputFormat = "document_per_line"
    encoding_errors: EncodingErrors = "fail"
    # a guard, not a setting of the output: left out of the plan's identity
    max_line_bytes: int = Field(DEFAULT_MAX_LINE_BYTES, gt=0)
    seq_length: int = Field(512, gt=8)
    # None: ceil(masked_lm_prob x seq_length), so the cap never cuts the masking rate
    # (Google's fixed 20 masks only ~4.6% of real tokens at seq 512; pass 20 to get it).
    max_predictions_per_seq: int | None = Field(None, gt=0)
    short_seq_prob: float = Field(0.1, ge=0.0, le=1.0)
    dupe_factor: int = Field(10, gt=0)
    masking: Literal["static", "dynamic"] = "static"
    masking_rules: MaskingConfig = MaskingConfig()
    num_shards: int | None = Field(None, gt=0)
    split: Literal["train", "eval"] = "train"  # name of the main output's shards
    eval_fraction: float = Field(0.0, ge=0.0, lt=0.5)
    eval_shards: int = Field(1, gt=0)
    eval_dupe_factor: int = Field(1, gt=0)
    min_document_tokens: int = Field(4, ge=2)
    seed: int = 12345
    chunk_bytes: int = Field(32 << 20, gt=0)
    # words for whole-word masking: auto (by language), none (single pieces), whitespace
    # (Google's rule on the pieces) or a registered word segmenter (fugashi, jieba, ...)
    word_segmenter: str = "auto"

    @field_validator("word_segmenter")
    @classmethod
    def _known_segmenter(cls, value: str) -> str:
        return check_setting(value)

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        if value != AUTO:
            language_info(value)  # an unknown code lists the known ones
        return value

    @model_validator(mode="after")
    def _check(self) -> PretrainingDataConfig:
        if self.max_predictions_per_seq is None:
            self.max_predictions_per_seq = default_max_predictions(
                self.seq_length, self.masking_rules.masked_lm_prob)
        if self.max_predictions_per_seq > self.seq_length:
            raise ValueError(
                f"max_predictions_per_seq={self.max_predictions_per_seq} exceeds "
                f"seq_length={self.seq_length}"
            )
        return self


# ------------------------------------------------------------------ the plan
def shard_name(split: str, index: int, count: int) -> str:
    """``<split>-NNNNN-of-MMMMM.tfrecord``."""
    return f"{split}-{index:05d}-of-{count:05d}.tfrecord"


def inputs_fingerprint(files: list[Path]) -> list[dict[str, Any]]:
    """Path, size and modification time of each input: the plan's view of the corpus."""
    out = []
    for f in files:
        st = f.stat()
        out.append({"path": str(f), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


def plan_sha256(obj: Any) -> str:
    """SHA-256 of ``obj`` as sorted JSON (the plan's identity)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------ a re-run
def prepare_directory(out_dir: Path, plan: dict[str, Any], overwrite: bool) -> dict | None:
    """Make ``out_dir`` ready for ``plan``: the manifest when it is already finished with
    this plan (None otherwise); other data or an unfinished run with other settings is
    refused unless ``overwrite`` (then wiped). Writes ``.work/plan.json``."""
    manifest_file = out_dir / MANIFEST
    plan_sha = plan["plan_sha256"]
    if manifest_file.is_file():
        try:
            old = read_manifest(manifest_file, DataPreparationError)
        except DataPreparationError as e:
            if not overwrite:
                raise DataPreparationError(
                    f"{e} (or use overwrite=True / --overwrite to replace this directory)"
                ) from None
            old = {}
        if old and old.get("plan_sha256") == plan_sha:
            return old
        if not overwrite:
            diff = [
                k for k in plan["settings"] if old.get("settings", {}).get(k) != plan["settings"][k]
            ]
            if old.get("inputs") != plan["inputs"]:
                diff.append("inputs (paths, sizes or modification times)")
            if old.get("tokenizer_sha256") != plan["tokenizer_sha256"]:
                diff.append("tokenizer")
            if manifest_language(old) != plan.get("language", "en"):
                diff.append("language")
            raise DataPreparationError(
                f"{out_dir} already holds pretraining data prepared differently (differs in: "
                f"{', '.join(diff) or 'format'}); use another directory or overwrite=True "
                "(--overwrite)"
            )
        wipe(out_dir)
    work = out_dir / WORK
    plan_file = work / "plan.json"
    if plan_file.is_file():
        old_plan = json.loads(plan_file.read_text(encoding="utf-8"))
        if old_plan.get("plan_sha256") != plan_sha:
            if not overwrite:
                raise DataPreparationError(
                    f"{out_dir} holds an unfinished preparation with different settings; use "
                    "another directory or overwrite=True (--overwrite)"
                )
            wipe(out_dir)
    work.mkdir(parents=True, exist_ok=True)
    for stale in list(out_dir.glob(".*.tmp")) + list(work.glob(".*.tmp*")):
        stale.unlink(missing_ok=True)  # left by a killed run: never complete
    atomic_write_text(plan_file, json.dumps(plan, indent=2))
    return None


def wipe(out_dir: Path) -> None:
    """Delete what a preparation wrote (manifest, shards, work files)."""
    (out_dir / MANIFEST).unlink(missing_ok=True)
    for f in out_dir.glob("*-of-*.tfrecord"):
        f.unlink()
    shutil.rmtree(out_dir / WORK, ignore_errors=True)


# ------------------------------------------------------------------ a finished directory
def load_manifest(directory: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a finished output directory."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise DataPreparationError(
            f"{directory}: no {MANIFEST} (preparation unfinished or not run)"
        )
    return read_manifest(path, DataPreparationError)


def shard_files(manifest_dir: str | os.PathLike, split: str = "train") -> list[str]:
    """Paths of the shards of one split, in order."""
    m = load_manifest(manifest_dir)
    return [str(Path(manifest_dir) / s["file"]) for s in m["shards"] if s["split"] == split]
