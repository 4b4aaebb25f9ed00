"""The data section of the ``multiple_choice`` task: RACE, SWAG and generic JSON Lines files.

Example:
    >>> data = MultipleChoiceData(train_file="RACE/train", tokenizer="tok", num_choices=4)
    >>> data.max_seq_length, data.sequences_per_example
    (512, 4)
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, StrictBool

from albertkit.config.base import Section

MultipleChoiceFormat = Literal["auto", "race", "swag", "jsonl"]
"""How a multiple-choice file is laid out (``data.format``)."""


class MultipleChoiceData(Section):
    """Multiple choice: an optional context, a question and N >= 2 choices per example.

    Formats: ``race`` (RACE's JSON objects with ``article``, ``questions``, ``options``,
    ``answers`` A-D: a directory of one file per article, read recursively, or a JSON
    Lines file of such objects), ``swag`` (SWAG's CSV: ``sent1`` the context, ``sent2`` the
    start of every ending, ``ending0`` ... , ``label``) and ``jsonl`` (one
    ``{"context", "question", "choices", "label"}`` object per line, ``context`` optional;
    ``choice0``, ``choice1``, ... instead of ``choices`` as in JGLUE's JCommonsenseQA).
    """

    kind: Literal["multiple_choice"] = Field(
        "multiple_choice",
        description="Selects multiple choice (RACE, SWAG, JSON Lines), scored per choice.",
    )
    format: MultipleChoiceFormat = Field(
        "auto",
        description="File layout: race, swag or jsonl (auto = race for a directory or for "
        "objects with 'article', swag for .csv, else jsonl).",
    )
    train_file: Path = Field(
        description="Training data: a file, or for RACE a directory of article files."
    )
    eval_file: Path | None = Field(
        None, description="Evaluation data in the same layouts (scored by accuracy)."
    )
    tokenizer: Path | None = Field(
        None,
        description="Tokenizer directory (Hugging Face format); unset: the one model.load_from "
        "carries (an albertkit export's tokenizer/, a Hugging Face directory's own files).",
    )
    max_seq_length: int = Field(
        512, gt=8,
        description="Tokens per choice, [CLS] context [SEP] question + choice [SEP]; a longer "
        "context is cut at its end (never the question or the choice).",
    )
    num_choices: int | None = Field(
        None, ge=2,
        description="Choices each example is padded to (padded choices are masked out); an "
        "example with more is an error. Unset: the most in each file. `albertkit plan` and "
        "the memory check need it: set it (RACE and SWAG: 4, JCommonsenseQA: 5).",
    )
    do_lower_case: StrictBool | None = Field(
        None,
        description="Lower-case text before tokenising (None = the tokenizer directory's setting).",
    )

    @property
    def sequences_per_example(self) -> int | None:
        """Encoder sequences one example costs (one per choice): what the memory planner
        multiplies a micro-batch by; None when ``num_choices`` is unset."""
        return self.num_choices
