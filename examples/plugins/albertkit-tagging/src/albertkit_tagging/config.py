"""The plugin's config classes: the ``bio_tagging`` data kind, the ``lion`` optimizer and the
``tagger-small`` size. Importing this module imports no TensorFlow (the registration runs
whenever albertkit parses a config, CLI help and config tools included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from albertkit.config import OptimizerSection

TAGGER_SMALL = {
    "vocab_size": 1000,
    "embedding_size": 64,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 256,
    "max_position_embeddings": 128,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "classifier_dropout_prob": 0.1,
}
"""``model.size: tagger-small``: a 2-layer, 128-wide ALBERT (about 0.4 M parameters with a
1000-piece vocabulary) that trains on a CPU in minutes."""


class BioTaggingData(BaseModel):
    """Word-level BIO tags (``O``, ``B-PER``, ``I-PER``, ...) for token classification.

    Files are JSON Lines (one ``{"tokens": [...], "tags": [...]}`` object per sentence) or
    CoNLL-style text (one ``token TAG`` line per word, the tag in the last column, a blank
    line between sentences, ``-DOCSTART-`` lines skipped).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    kind: Literal["bio_tagging"] = Field(
        "bio_tagging", description="Selects BIO token classification (albertkit-tagging).")
    train_file: Path = Field(description="Training sentences (JSONL or CoNLL).")
    eval_file: Path | None = Field(None, description="Held-out sentences in the same format.")
    tokenizer: Path | None = Field(
        None,
        description="Tokenizer directory; unset: the one model.load_from carries.")
    format: Literal["auto", "jsonl", "conll"] = Field(
        "auto", description="File format (auto = .jsonl/.json is JSONL, anything else CoNLL).")
    labels: list[str] | None = Field(
        None,
        description="Tag names in label-id order, 'O' first (None = 'O', then the training "
        "file's B-/I- tags sorted by entity type).")
    max_seq_length: int = Field(
        64, gt=8,
        description="Word pieces per sentence, [CLS]/[SEP] included; words past it are "
        "predicted O.")
    do_lower_case: StrictBool | None = Field(
        None, description="Lower-case before tokenising (None = the tokenizer's setting).")
    spaced: StrictBool = Field(
        True,
        description="Words are separated by spaces. False for Japanese, Chinese or Thai "
        "(tags per word or per character): the sentence is encoded once and each word's tag "
        "goes to the first piece overlapping it.")

    @field_validator("labels")
    @classmethod
    def _bio_labels(cls, labels: list[str] | None) -> list[str] | None:
        if labels is None:
            return None
        if not labels or labels[0] != "O":
            raise ValueError(f"labels={labels!r}: the first tag must be 'O'")
        bad = [t for t in labels[1:] if not (t[:2] in ("B-", "I-") and len(t) > 2)]
        if bad or len(set(labels)) != len(labels):
            raise ValueError(f"labels={labels!r}: tags must be unique and B-TYPE or I-TYPE "
                             f"after 'O' (bad: {bad})")
        return labels


class LionConfig(OptimizerSection):
    """Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"): the sign of
    an interpolated momentum, with decoupled weight decay; albertkit's warmup + polynomial
    decay schedule. Its fields are its own: two betas, no epsilon (Lion divides by nothing)."""

    kind: Literal["lion"] = Field("lion", description="Selects Lion (albertkit-tagging).")
    learning_rate: float = Field(
        1e-4, gt=0.0,
        description="Peak learning rate (Lion's are 3-10x smaller than AdamW's).")
    beta_1: float = Field(
        0.9, gt=0.0, lt=1.0,
        description="Interpolation between the momentum and the gradient in each update.")
    beta_2: float = Field(
        0.99, gt=0.0, lt=1.0, description="Decay rate of the momentum Lion keeps.")
    weight_decay: float = Field(
        0.1, ge=0.0,
        description="Decoupled weight decay (Lion's are 3-10x larger than AdamW's); not "
        "applied to excluded variables.")

    def build(self, total_steps: int):
        from albertkit_tagging.optimizer import build_lion

        return build_lion(self, total_steps)
