"""albertkit-tagging: BIO token classification for albertkit, as an outside package.

* :mod:`albertkit_tagging.plugin` -- ``register()``, the ``albertkit.plugins`` entry point;
* :mod:`albertkit_tagging.config` -- the ``bio_tagging`` data kind, ``lion``, ``tagger-small``;
* :mod:`albertkit_tagging.data` -- reading JSONL / CoNLL files, word-piece alignment, batches;
* :mod:`albertkit_tagging.model` -- ``AlbertForTokenClassification`` (Keras), Hugging Face
  exportable as transformers' class of the same name;
* :mod:`albertkit_tagging.task` -- the task: loss over first word pieces, seqeval F1;
* :mod:`albertkit_tagging.optimizer` -- Keras' Lion with albertkit's schedule;
* :mod:`albertkit_tagging.example` -- the synthetic PER/LOC/ORG data set and its config.

Importing the package imports neither TensorFlow nor albertkit's task machinery.
"""

__version__ = "0.1.0"
