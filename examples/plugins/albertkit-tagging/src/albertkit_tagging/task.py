"""The ``tagging`` task: BIO token classification scored by entity-level F1 (seqeval).

Loss: softmax cross-entropy at the first word piece of each word, averaged over those
positions (``label_mask``), as Hugging Face's token-classification recipe does with its
``-100`` labels. Training logs the loss and the word accuracy; evaluation decodes one tag
per word of the eval file and scores the entities with ``seqeval`` (CoNLL-2000 rules, the
``conlleval`` script's: an ``I-X`` after ``O`` starts an entity), reporting micro-averaged
``precision``, ``recall`` and ``f1`` over all entity types, ``f1_<TYPE>`` per type, the word
``accuracy``, the ``loss`` and the number of ``sentences``. The best checkpoint is the one
with the highest ``f1``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.data import ExampleData
from albertkit.tasks import LogKeys, Task
from albertkit_tagging.config import BioTaggingData
from albertkit_tagging.data import (
    MODEL_INPUTS,
    Encoded,
    decode_tags,
    encode,
    infer_labels,
    read_sentences,
)

log = logging.getLogger("albertkit_tagging")


def entity_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """seqeval's micro-averaged entity precision, recall and F1, and F1 per entity type."""
    from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

    out = {"precision": float(precision_score(gold, predicted, zero_division=0)),
           "recall": float(recall_score(gold, predicted, zero_division=0)),
           "f1": float(f1_score(gold, predicted, zero_division=0))}
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    for name, row in sorted(report.items()):
        if isinstance(row, dict) and not name.endswith(" avg"):
            out[f"f1_{name}"] = float(row["f1-score"])
    return out


class TaggingTask(Task):
    """BIO tagging with :class:`~albertkit_tagging.model.AlbertForTokenClassification`.

    Args:
        spec: the model architecture.
        data: the ``data`` section (a :class:`~albertkit_tagging.config.BioTaggingData`).
        micro_batch_size: sentences per replica per micro-batch.
        dtype: Keras dtype policy name (``runtime.precision``).
        remat: the encoder's rematerialisation mode (``runtime.remat``).
    """

    name = "tagging"
    log_keys = LogKeys(train=("loss", "accuracy"),
                       eval=("loss", "accuracy", "precision", "recall", "f1"),
                       progress=("loss", "accuracy"))

    def __init__(self, spec, data: BioTaggingData, *, micro_batch_size: int,
                 dtype: str | None = None, remat: Any = "none") -> None:
        self.spec = spec
        self.data = data
        self.micro_batch_size = micro_batch_size
        self.dtype = dtype
        self.remat = remat
        self._tokenizer = None
        self._train_sentences = None
        self._labels: list[str] | None = None
        self._eval: Encoded | None = None

    @property
    def best_metric(self) -> tuple[str, bool]:
        return "f1", True

    # ------------------------------------------------------------------ labels and data
    @property
    def labels(self) -> list[str]:
        """The tag names in label-id order: ``data.labels``, else inferred from training."""
        if self._labels is None:
            self._labels = list(self.data.labels or infer_labels(self.train_sentences))
        return self._labels

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from albertkit.data import Tokenizer

            if self.data.tokenizer is None:
                raise ValueError("data.tokenizer is not set (nor given by model.load_from)")
            tok = Tokenizer.load(self.data.tokenizer, lowercase=self.data.do_lower_case)
            if tok.vocab_size > self.spec.vocab_size:
                raise ValueError(f"data.tokenizer={self.data.tokenizer} has {tok.vocab_size} "
                                 f"pieces but model.vocab_size={self.spec.vocab_size}")
            self._tokenizer = tok
        return self._tokenizer

    @property
    def train_sentences(self):
        if self._train_sentences is None:
            self._train_sentences = read_sentences(self.data.train_file, self.data.format)
        return self._train_sentences

    def encoded(self, sentences) -> Encoded:
        return encode(sentences, self.tokenizer, self.labels, self.data.max_seq_length,
                      spaced=self.data.spaced)

    def eval_encoded(self) -> Encoded:
        if self._eval is None:
            if self.data.eval_file is None:
                raise ValueError("no evaluation data configured (data.eval_file)")
            self._eval = self.encoded(read_sentences(self.data.eval_file, self.data.format))
        return self._eval

    def datasets(self, cfg, distributor) -> ExampleData:
        """albertkit's resumable stream over the encoded sentences (the training file is
        encoded on first use, so an evaluation alone never reads it)."""

        def train_arrays():
            arrays = self.encoded(self.train_sentences).arrays
            log.info("tagging: %d training sentences from %s, tags %s",
                     len(arrays["input_ids"]), self.data.train_file, self.labels)
            return arrays

        evals = self.eval_encoded().arrays if self.data.eval_file is not None else None
        return ExampleData(train_arrays, evals, micro_batch_size=self.micro_batch_size,
                           seed=cfg.runtime.seed, distributor=distributor,
                           eval_steps=cfg.runtime.eval_steps,
                           tokenizer_dir=self.data.tokenizer)

    # ------------------------------------------------------------------ model and loss
    def build_model(self):
        from albertkit_tagging.model import AlbertForTokenClassification

        model = AlbertForTokenClassification(self.spec, len(self.labels), self.labels,
                                             dtype=self.dtype, remat=self.remat)
        model.build_for(seq_length=self.data.max_seq_length)
        return model

    def dummy_batch(self, batch_size: int):
        import tensorflow as tf

        shape = [batch_size, self.data.max_seq_length]
        return {"input_ids": tf.zeros(shape, tf.int32), "input_mask": tf.ones(shape, tf.int32),
                "segment_ids": tf.zeros(shape, tf.int32), "labels": tf.zeros(shape, tf.int32),
                "label_mask": tf.ones(shape, tf.float32)}

    def _word_losses(self, model, batch, training: bool):
        """Cross-entropy at every position, the mask of first pieces, and the logits."""
        import tensorflow as tf

        out = model({k: batch[k] for k in MODEL_INPUTS}, training=training)
        logits = tf.cast(out["logits"], tf.float32)  # [B, T, num_labels]
        labels = tf.cast(batch["labels"], tf.int32)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return ce, tf.cast(batch["label_mask"], tf.float32), logits, labels

    def loss_and_stats(self, model, batch, training: bool):
        import tensorflow as tf

        ce, mask, logits, labels = self._word_losses(model, batch, training)
        words = tf.reduce_sum(mask)
        loss_sum = tf.reduce_sum(ce * mask)
        right = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels),
                        tf.float32)
        stats = {"loss_sum": loss_sum, "words": words, "correct": tf.reduce_sum(right * mask)}
        return loss_sum / tf.maximum(words, 1.0), stats

    def example_losses(self, model, batch):
        """Per sentence: the mean cross-entropy over its words."""
        import tensorflow as tf

        ce, mask, _, _ = self._word_losses(model, batch, training=False)
        return tf.reduce_sum(ce * mask, -1) / tf.maximum(tf.reduce_sum(mask, -1), 1.0)

    def metrics(self, stats: Mapping[str, float]) -> dict[str, float]:
        words = max(float(stats["words"]), 1.0)
        return {"loss": float(stats["loss_sum"]) / words,
                "accuracy": float(stats["correct"]) / words}

    # ------------------------------------------------------------------ evaluation
    def predict(self, model, arrays: dict[str, np.ndarray], step: Any = None) -> np.ndarray:
        """Logits ``[N, T, num_labels]`` for every sentence, in order (batches padded to the
        micro-batch size, so a compiled forward pass is traced once)."""
        forward = step.predict if step is not None else (
            lambda batch: model(batch, training=False))
        n, b = len(arrays["input_ids"]), self.micro_batch_size
        outs = []
        for start in range(0, n, b):
            batch = {}
            for k in MODEL_INPUTS:
                part = arrays[k][start:start + b]
                pad = np.zeros((b - len(part), *part.shape[1:]), part.dtype)
                batch[k] = np.concatenate([part, pad])
            outs.append(np.asarray(forward(batch)["logits"])[: min(b, n - start)])
        return np.concatenate(outs)

    def evaluate(self, model, step, data, cfg, run_dir: str | Path | None) -> dict[str, float]:
        """seqeval's entity scores over the whole eval file (no collectives: any rank may
        run it)."""
        encoded = self.eval_encoded()
        arrays = encoded.arrays
        logits = self.predict(model, arrays, step)
        gold = [list(s.tags) for s in encoded.sentences]
        predicted = decode_tags(logits, encoded, self.labels)
        result = entity_scores(gold, predicted)
        mask = arrays["label_mask"] > 0
        z = logits - logits.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        picked = np.take_along_axis(logp, arrays["labels"][..., None], -1)[..., 0]
        result["loss"] = float(-picked[mask].mean()) if mask.any() else 0.0
        right = logits.argmax(-1) == arrays["labels"]
        result["accuracy"] = float(right[mask].mean()) if mask.any() else 0.0
        result["sentences"] = float(len(gold))
        return result
