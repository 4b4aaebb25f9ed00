"""The data sections of a ``TrainerConfig``: one per built-in data kind (a tagged union on
``kind``, which plugins extend through :mod:`albertkit.config.registry`), and the task each
kind trains (``TASK_OF_KIND``, read from the registry).

Example:
    >>> SquadData(train_file="train.json", tokenizer="tok").version
    '2.0'
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StrictBool, model_validator

from albertkit.config.base import Section
from albertkit.config.registry import TaskOfKind


# --------------------------------------------------------------------------- data
class _PretrainingShape(Section):
    seq_length: int = Field(
        128, gt=8,
        description="Tokens per sequence, [CLS]/[SEP] included; at most "
        "model.max_position_embeddings.",
    )
    max_predictions_per_seq: int = Field(
        20, gt=0, description="Masked positions per sequence (MLM targets are padded to this)."
    )

    @model_validator(mode="after")
    def _check_predictions(self):
        if self.max_predictions_per_seq > self.seq_length:
            raise ValueError(
                f"data.max_predictions_per_seq={self.max_predictions_per_seq} exceeds "
                f"data.seq_length={self.seq_length}"
            )
        return self


class SyntheticData(_PretrainingShape):
    """Random token ids in the pretraining feature format (smoke tests, benchmarks)."""

    kind: Literal["synthetic"] = Field(
        "synthetic", description="Selects random-token pretraining data."
    )
    num_examples: int = Field(
        1024, gt=0,
        description="Distinct training sequences (repeated for as many steps as needed).",
    )
    eval_examples: int = Field(
        128, ge=0, description="Held-out sequences for evaluation (0 = no evaluation)."
    )


class MaskingConfig(Section):
    """Masking rules of Google's ALBERT ``create_pretraining_data.py``."""

    masked_lm_prob: float = Field(
        0.15, gt=0.0, lt=1.0,
        description="Fraction of tokens to mask (capped by max_predictions_per_seq).",
    )
    max_ngram: int = Field(
        3, ge=1, le=3,
        description="Longest masked n-gram of whole words (n drawn with P(n) proportional to 1/n).",
    )
    mask_token_prob: float = Field(
        0.8, ge=0.0, le=1.0, description="Chance that a chosen token becomes [MASK]."
    )
    random_token_prob: float = Field(
        0.1, ge=0.0, le=1.0,
        description="Chance that a chosen token becomes a random token (else it stays itself).",
    )

    @model_validator(mode="after")
    def _check_split(self):
        if self.mask_token_prob + self.random_token_prob > 1.0:
            raise ValueError(
                f"masking.mask_token_prob={self.mask_token_prob} + masking.random_token_prob="
                f"{self.random_token_prob} exceeds 1"
            )
        return self


class TFRecordData(_PretrainingShape):
    """Pretraining TFRecords (Google ALBERT feature format), static or dynamic masking."""

    kind: Literal["tfrecord"] = Field(
        "tfrecord", description="Selects pretraining TFRecords (Google ALBERT feature format)."
    )
    train_files: list[str] = Field(
        ..., min_length=1, description="Training TFRecord files or glob patterns."
    )
    eval_files: list[str] = Field(
        [], description="Held-out TFRecord files or glob patterns (empty = no evaluation)."
    )
    masking: Literal["static", "dynamic"] = Field(
        "static",
        description="static: the masks stored in the records; dynamic: new masks each time a "
        "sequence is read.",
    )
    masking_rules: MaskingConfig = Field(
        MaskingConfig(), description="Masking rules for dynamic masking."
    )
    tokenizer: Path | None = Field(
        None,
        description="Tokenizer directory the records were made with (unset: the data's own, "
        "named in its manifest.json); copied to run_dir/tokenizer.",
    )
    shuffle_buffer: int = Field(
        10000, ge=0, description="Size of the training shuffle buffer, in examples."
    )
    deterministic: StrictBool = Field(
        True,
        description="Deterministic tf.data order (exact resume); false trades it for input speed.",
    )


class DemoData(_PretrainingShape):
    """The built-in demo corpus (English prose shipped with Python), prepared on first use."""

    kind: Literal["demo"] = Field(
        "demo", description="Selects the built-in demo corpus (English prose shipped with Python)."
    )
    vocab_size: int = Field(
        3000, gt=100, description="Size of the SentencePiece vocabulary trained on the demo corpus."
    )
    dupe_factor: int = Field(
        10, gt=0,
        description="Times the corpus is duplicated when examples are written (Google's "
        "dupe_factor).",
    )
    eval_fraction: float = Field(
        0.05, gt=0.0, lt=0.5, description="Fraction of the corpus held out for evaluation."
    )
    masking: Literal["static", "dynamic"] = Field(
        "dynamic",
        description="dynamic: new masks each time a sequence is read; static: masks written once.",
    )
    shuffle_buffer: int = Field(
        10000, ge=0, description="Size of the training shuffle buffer, in examples."
    )
    seed: int | None = Field(
        None, ge=0,
        description="Seed of the corpus split, the tokenizer and the written examples; unset: "
        "runtime.seed. Set it to vary only the model's seed between runs on the same data.",
    )


class SquadData(Section):
    """SQuAD v1.1 / v2.0 question answering (official JSON format)."""

    kind: Literal["squad"] = Field("squad", description="Selects SQuAD question answering.")
    version: Literal["1.1", "2.0"] = Field(
        "2.0",
        description="SQuAD version: 1.1 (every question answerable) or 2.0 (some have no answer).",
    )
    train_file: Path = Field(description="Training set in the official SQuAD JSON format.")
    eval_file: Path | None = Field(
        None, description="Evaluation set (official JSON), scored with the official metric."
    )
    tokenizer: Path | None = Field(
        None,
        description="Tokenizer directory (Hugging Face format); unset: the one model.load_from "
        "carries (an albertkit export's tokenizer/, a Hugging Face directory's own files).",
    )
    max_seq_length: int = Field(
        384, gt=16, description="Tokens per window: [CLS] question [SEP] context [SEP]."
    )
    doc_stride: int = Field(
        128, gt=0, description="Stride between overlapping context windows of long documents."
    )
    max_query_length: int = Field(
        64, gt=0, description="Question tokens kept (longer questions are truncated)."
    )
    max_windows_per_example: int = Field(
        64, gt=0,
        description="Most windows one question's context may need; a longer context is an "
        "error naming the record (bounds memory before features are built).",
    )
    max_total_windows: int = Field(
        1_000_000, gt=0,
        description="Most windows (about 11 KB each) one SQuAD file may produce; more is an "
        "error before any is built.",
    )
    n_best_size: int = Field(
        20, gt=0, description="Start/end candidates considered per window when extracting answers."
    )
    max_answer_length: int = Field(30, gt=0, description="Longest answer span in tokens.")
    null_score_diff_threshold: float = Field(
        0.0,
        description="v2.0: predict no answer when null score minus best span score exceeds this.",
    )
    do_lower_case: StrictBool | None = Field(
        None,
        description="Lower-case text before tokenising (None = the tokenizer directory's setting).",
    )

    @model_validator(mode="after")
    def _check_lengths(self):
        if self.max_query_length + 3 >= self.max_seq_length:
            raise ValueError(
                f"data.max_query_length={self.max_query_length} leaves no room for context in "
                f"data.max_seq_length={self.max_seq_length}"
            )
        if self.doc_stride >= self.max_seq_length - self.max_query_length - 3:
            raise ValueError(
                f"data.doc_stride={self.doc_stride} must be smaller than the context window "
                f"({self.max_seq_length - self.max_query_length - 3} tokens)"
            )
        return self


GlueTaskName = Literal["cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"]
"""The GLUE tasks with a built-in preset (``data.task`` of a classification config)."""


class ClassificationData(Section):
    """GLUE-style sentence / sentence-pair classification or regression."""

    kind: Literal["classification"] = Field(
        "classification",
        description="Selects GLUE-style sentence / sentence-pair classification or regression.",
    )
    task: GlueTaskName | None = Field(
        None,
        description="GLUE task preset: columns, labels and metric (None = set the columns "
        "yourself).",
    )
    train_file: Path = Field(description="Training file (TSV, CSV or JSONL).")
    eval_file: Path | None = Field(None, description="Evaluation file in a supported format.")
    tokenizer: Path | None = Field(
        None,
        description="Tokenizer directory (Hugging Face format); unset: the one model.load_from "
        "carries (an albertkit export's tokenizer/, a Hugging Face directory's own files).",
    )
    format: Literal["auto", "tsv", "csv", "jsonl"] = Field(
        "auto",
        description="File format (auto = from the extension: .tsv/.txt, .csv, .jsonl/.json).",
    )
    text_a: str | None = Field(
        None, description="Column of the first sentence (None = the preset's)."
    )
    text_b: str | None = Field(
        None, description="Column of the second sentence of a pair (None = the preset's, or none)."
    )
    label: str | None = Field(None, description="Label column (None = the preset's).")
    labels: list[str] | None = Field(
        None,
        description="Class names in label-id order (None = the preset's, else the training "
        "file's).",
    )
    regression: StrictBool | None = Field(
        None,
        description="One-output regression instead of classification (None = from the preset).",
    )
    max_seq_length: int = Field(
        128, gt=8,
        description="Tokens per example, [CLS]/[SEP] included; longer inputs are truncated.",
    )
    do_lower_case: StrictBool | None = Field(
        None,
        description="Lower-case text before tokenising (None = the tokenizer directory's setting).",
    )


class UserPretrainingData(_PretrainingShape):
    """Pretraining examples given in Python (``AlbertTrainer(cfg, train_data=...)``).

    The config only states the shapes the examples have; the examples themselves are a
    ``tf.data.Dataset`` (or a factory of one) passed to the trainer (docs/howto/embed.md).
    """

    kind: Literal["user_pretraining"] = Field(
        "user_pretraining",
        description="Selects pretraining on examples passed to AlbertTrainer(train_data=...).",
    )


class UserClassificationData(Section):
    """Classification examples given in Python (``AlbertTrainer(cfg, train_data=...)``).

    The config states the labels and the sequence length; the examples (token ids, not text)
    are a ``tf.data.Dataset`` (or a factory of one) passed to the trainer
    (docs/howto/embed.md). The number of outputs comes from ``labels``, ``num_labels``, the
    GLUE preset ``task`` or ``regression``.

    Example:
        >>> UserClassificationData(num_labels=3).max_seq_length
        128
    """

    kind: Literal["user_classification"] = Field(
        "user_classification",
        description="Selects classification on examples passed to "
        "AlbertTrainer(train_data=...).",
    )
    task: GlueTaskName | None = Field(
        None, description="GLUE task preset: labels and metric (None = set num_labels or labels)."
    )
    num_labels: int | None = Field(
        None, ge=2, description="Number of classes (labels are ids 0 .. num_labels-1)."
    )
    labels: list[str] | None = Field(
        None, description="Class names in label-id order (None = num_labels or the preset's)."
    )
    regression: StrictBool | None = Field(
        None,
        description="One-output regression instead of classification (None = from the preset).",
    )
    max_seq_length: int = Field(
        128, gt=8, description="Tokens per example, [CLS]/[SEP] included."
    )

    @model_validator(mode="after")
    def _check_outputs(self):
        if self.labels is not None and self.num_labels is not None \
                and len(self.labels) != self.num_labels:
            raise ValueError(f"data.labels has {len(self.labels)} names but data.num_labels="
                             f"{self.num_labels}")
        if self.regression and (self.labels is not None or self.num_labels is not None):
            raise ValueError("data.regression=true has one output: drop data.labels / "
                             "data.num_labels")
        if (self.task is None and self.regression is None and self.labels is None
                and self.num_labels is None):
            raise ValueError("data.kind=user_classification needs its outputs: set "
                             "data.num_labels, data.labels, data.task or data.regression")
        return self


# The built-in kinds (the type checkers' view); a config accepts every registered kind.
DataConfig = Annotated[
    SyntheticData | TFRecordData | DemoData | SquadData | ClassificationData
    | UserPretrainingData | UserClassificationData,
    Field(discriminator="kind"),
]
"""The ``data`` section: one of the data kinds, chosen by its ``kind`` field."""

# The built-in tasks; plugins may register more (`albertkit.config.registry`).
TaskName = Literal["pretraining", "squad", "classification", "multiple_choice"]
"""What a config trains (``TrainerConfig.task``): albertkit's own tasks."""

TASK_OF_KIND: Mapping[str, str] = TaskOfKind()
"""What each data kind (``data.kind``) trains: the one mapping (the config's ``task``, the
task builder and the report read it here), a read-only view of the registry, so it also
holds the kinds plugins register."""
