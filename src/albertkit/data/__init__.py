"""Data for ALBERT: corpora, tokenizer, pretraining examples and tf.data pipelines.

The public names (``__all__``) are importable from here: ``from albertkit.data import
Tokenizer, train_tokenizer``. Each is imported on first use: importing this package imports
none of its modules.

Modules (imported on demand; only ``pretraining_dataset`` and ``stream`` import TensorFlow
when imported, ``finetune`` when it builds a pipeline):

* ``language``: a corpus's language from its Unicode scripts, the languages albertkit knows;
* ``corpus`` / ``sentences``: raw-text readers and sentence splitting per language;
* ``normalization``: the text normalisation before SentencePiece;
* ``tokenizer``: SentencePiece with the ALBERT recipe, saved as a Hugging Face directory;
* ``instances`` / ``masking``: sentence-order pairs and n-gram whole-word masking;
* ``segmenters``: word boundaries for whole-word masking (word segmenters for Japanese,
  Chinese and Thai, optional extras) and pieces mapped to characters;
* ``tfrecord`` / ``protobuf`` / ``writer`` / ``tokenized``: sharded, resumable TFRecord
  preparation in parallel processes; ``manifest``: reading a prepared dataset's
  ``manifest.json``;
* ``tokenizer_match``: the tokenizer that belongs to prepared data or to a model;
* ``stream``: position-addressable training streams (resume at any element);
* ``examples``: :class:`ExampleData`, a task's data from its examples (the resumable
  stream of every fine-tuning task, and of a plugin's);
* ``pretraining_dataset``: the tf.data reader (static or dynamic masking) and a synthetic source;
* ``batching``: micro-batches grouped into optimizer steps;
* ``squad`` / ``glue`` / ``multiple_choice`` / ``finetune``: fine-tuning readers, features
  and pipelines (``multiple_choice`` also writes a synthetic set);
* ``demo``: the built-in corpus from Python's own documentation.

The ``train-tokenizer`` and ``prepare-data`` commands are :mod:`albertkit.cli.data`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.data.demo import stdlib_documents
    from albertkit.data.examples import ExampleData
    from albertkit.data.finetune import load_hf_tokenizer
    from albertkit.data.language import (
        LanguageGuess,
        detect_language,
        known_languages,
        resolve_language,
    )
    from albertkit.data.multiple_choice import (
        MultipleChoiceExample,
        read_multiple_choice,
        write_synthetic_multiple_choice,
    )
    from albertkit.data.pretraining_dataset import build_pretraining_dataset
    from albertkit.data.pretraining_dir import PretrainingDataConfig, shard_files
    from albertkit.data.segmenters import (
        FugashiSegmenter,
        JiebaSegmenter,
        PyThaiNLPSegmenter,
        piece_spans,
        resolve_word_segmentation,
    )
    from albertkit.data.squad import (
        SquadExample,
        SquadFeatures,
        convert_squad_examples,
        read_squad,
    )
    from albertkit.data.tokenizer import Tokenizer, TokenizerConfig, train_tokenizer
    from albertkit.data.writer import prepare_pretraining_data

__all__ = [
    "ExampleData",
    "FugashiSegmenter",
    "JiebaSegmenter",
    "LanguageGuess",
    "MultipleChoiceExample",
    "PretrainingDataConfig",
    "PyThaiNLPSegmenter",
    "SquadExample",
    "SquadFeatures",
    "Tokenizer",
    "TokenizerConfig",
    "build_pretraining_dataset",
    "convert_squad_examples",
    "detect_language",
    "known_languages",
    "load_hf_tokenizer",
    "piece_spans",
    "prepare_pretraining_data",
    "read_multiple_choice",
    "read_squad",
    "resolve_language",
    "resolve_word_segmentation",
    "shard_files",
    "stdlib_documents",
    "train_tokenizer",
    "write_synthetic_multiple_choice",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ExampleData": "examples",
    "FugashiSegmenter": "segmenters",
    "JiebaSegmenter": "segmenters",
    "LanguageGuess": "language",
    "MultipleChoiceExample": "multiple_choice",
    "PretrainingDataConfig": "pretraining_dir",
    "PyThaiNLPSegmenter": "segmenters",
    "SquadExample": "squad",
    "SquadFeatures": "squad",
    "Tokenizer": "tokenizer",
    "TokenizerConfig": "tokenizer",
    "build_pretraining_dataset": "pretraining_dataset",
    "convert_squad_examples": "squad",
    "detect_language": "language",
    "known_languages": "language",
    "load_hf_tokenizer": "finetune",
    "piece_spans": "segmenters",
    "prepare_pretraining_data": "writer",
    "read_multiple_choice": "multiple_choice",
    "read_squad": "squad",
    "resolve_language": "language",
    "resolve_word_segmentation": "segmenters",
    "shard_files": "pretraining_dir",
    "stdlib_documents": "demo",
    "train_tokenizer": "tokenizer",
    "write_synthetic_multiple_choice": "multiple_choice",
}, deprecated={
    # the names of albertkit 0.2, deprecated in 0.3 (docs/api-policy.md)
    "convert_examples": ("albertkit.data:convert_squad_examples", "0.4"),
})
