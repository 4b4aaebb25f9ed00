"""Multiple choice (RACE, SWAG, JCommonsenseQA): one shared score per choice, softmax over them.

Each choice of an example is its own encoder sequence ``[CLS] context [SEP] question choice
[SEP]`` (:mod:`albertkit.data.multiple_choice`); :class:`AlbertForMultipleChoice` gives each
a score from its pooled output with one dense unit shared by all choices. The loss is the
softmax cross-entropy of the example's scores against the right choice, averaged over the
micro-batch (google-research/albert ``race_utils.create_model``, transformers'
``AlbertForMultipleChoice``).

Varying N: every batch has one choice axis C (``data.num_choices``, else the most choices in
the file); an example with fewer is padded with empty choices, ``choice_mask`` 0, whose
scores become -inf before the softmax. They get probability 0, add nothing to the loss and
no gradient, and can never be predicted, so a padded example is scored exactly as on its
own. Accuracy is the metric and keeps the best checkpoint; when an eval file mixes numbers
of choices, ``accuracy_n<k>`` is the accuracy on its k-choice examples (chance 1/k).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from albertkit.config import TrainerConfig
from albertkit.config.multiple_choice import MultipleChoiceData
from albertkit.config.sizes import AlbertSpec
from albertkit.data.examples import ExampleData
from albertkit.data.finetune import load_task_tokenizer, padded_batches
from albertkit.data.multiple_choice import encode_multiple_choice, read_multiple_choice
from albertkit.tasks.base import Batch, LogKeys, Stats, Task, forward_fn

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from albertkit.distributed import Distributor
    from albertkit.models.options import RematMode

log = logging.getLogger(__name__)

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")
FEATURE_NAMES = (*MODEL_INPUTS, "choice_mask", "labels")


def masked_log_softmax(logits: np.ndarray, choice_mask: np.ndarray) -> np.ndarray:
    """Log-probabilities over the real choices (padded ones -inf), in float64."""
    z = np.where(choice_mask > 0, np.asarray(logits, np.float64), -np.inf)
    z = z - z.max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def multiple_choice_metrics(logits: np.ndarray, choice_mask: np.ndarray,
                            labels: np.ndarray) -> dict[str, float]:
    """``accuracy``, ``loss`` (mean cross-entropy) and ``examples``; with more than one
    number of choices, ``accuracy_n<k>`` and ``examples_n<k>`` per number k.

    Example:
        >>> logits = np.array([[2.0, 1.0, 0.0, 9.0], [0.0, 3.0, 1.0, 0.0]])
        >>> mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]])  # the first has 3 choices
        >>> m = multiple_choice_metrics(logits, mask, np.array([0, 2]))
        >>> m["accuracy"], m["accuracy_n3"], m["accuracy_n4"]
        (0.5, 1.0, 0.0)
    """
    labels = np.asarray(labels, np.int64)
    logp = masked_log_softmax(logits, choice_mask)
    preds = logp.argmax(axis=-1)
    right = preds == labels
    n = len(labels)
    out = {"accuracy": float(right.mean()) if n else 0.0,
           "loss": float(-logp[np.arange(n), labels].mean()) if n else 0.0,
           "examples": float(n)}
    counts = np.asarray(choice_mask).sum(axis=-1)
    kinds = sorted(set(counts.tolist()))
    if len(kinds) > 1:
        for k in kinds:
            rows = counts == k
            out[f"accuracy_n{k}"] = float(right[rows].mean())
            out[f"examples_n{k}"] = float(rows.sum())
    return out


class MultipleChoiceTask(Task):
    """Multiple choice with :class:`~albertkit.models.multiple_choice.AlbertForMultipleChoice`.

    Args:
        spec: the model architecture.
        data: the ``data`` section (:class:`~albertkit.config.multiple_choice.MultipleChoiceData`).
        micro_batch_size: examples (not sequences: each is C of them) per replica per
            micro-batch, training and evaluation.
        dtype: Keras dtype policy name (``runtime.precision``).
        remat: what the backward pass recomputes (``RematMode``: none, selective, full).

    Example (a synthetic set whose right choice repeats a word of the question):
        >>> from albertkit.config import DistributedConfig
        >>> from albertkit.data import write_synthetic_multiple_choice
        >>> from albertkit.distributed import build_distributor
        >>> _ = write_synthetic_multiple_choice("mc", train=400, eval=8)
        >>> cfg = TrainerConfig.from_dict({
        ...     "model": {"size": "tiny", "vocab_size": 101, "hidden_size": 32,
        ...               "embedding_size": 16, "num_attention_heads": 2,
        ...               "intermediate_size": 64, "max_position_embeddings": 64},
        ...     "data": {"kind": "multiple_choice", "train_file": "mc/train.jsonl",
        ...              "eval_file": "mc/dev.jsonl", "tokenizer": "mc/tokenizer",
        ...              "max_seq_length": 32}})
        >>> task = MultipleChoiceTask(cfg.model.spec, cfg.data, micro_batch_size=4)
        >>> task.num_choices, task.best_metric
        (4, ('accuracy', True))
        >>> model = task.build_model()
        >>> metrics = task.evaluate(model, None, task.datasets(cfg, build_distributor(DistributedConfig())),
        ...                          cfg, None)
        >>> sorted(metrics), metrics["examples"]
        (['accuracy', 'examples', 'loss'], 8.0)
    """

    name = "multiple_choice"
    log_keys = LogKeys(train=("loss", "accuracy"), eval=("loss", "accuracy"),
                       progress=("loss", "accuracy"))

    def __init__(
        self, spec: AlbertSpec, data: MultipleChoiceData, *, micro_batch_size: int,
        dtype: str | None = None, remat: RematMode | bool = "none",
    ) -> None:
        self.spec = spec
        self.data = data
        self.micro_batch_size = micro_batch_size
        self.dtype = dtype
        self.remat = remat
        self._tokenizer = None
        self._train_examples = None
        self._eval_arrays: dict[str, np.ndarray] | None = None

    @property
    def best_metric(self) -> tuple[str, bool]:
        """(metric key, higher is better) for keeping the best checkpoint: accuracy."""
        return "accuracy", True

    @property
    def num_choices(self) -> int:
        """The choice axis of the training batches: ``data.num_choices``, else the most
        choices of any training example (read on first use)."""
        if self.data.num_choices is not None:
            return self.data.num_choices
        return max(len(ex.choices) for ex in self.train_examples)

    # ------------------------------------------------------------------ model and loss
    def build_model(self) -> keras.Model:
        from albertkit.models.multiple_choice import AlbertForMultipleChoice

        model = AlbertForMultipleChoice(self.spec, dtype=self.dtype, remat=self.remat)
        model.build_for(seq_length=self.data.max_seq_length)
        return model

    def dummy_batch(self, batch_size: int) -> Batch:
        import tensorflow as tf

        shape = [batch_size, self.num_choices, self.data.max_seq_length]
        return {
            "input_ids": tf.zeros(shape, tf.int32),
            "input_mask": tf.ones(shape, tf.int32),
            "segment_ids": tf.zeros(shape, tf.int32),
            "choice_mask": tf.ones(shape[:2], tf.int32),
            "labels": tf.zeros([batch_size], tf.int32),
        }

    def _scores(self, model: keras.Model, batch: Batch, training: bool) -> tf.Tensor:
        """[B, C] float32 scores, padded choices -inf."""
        import tensorflow as tf

        out = model({k: batch[k] for k in MODEL_INPUTS}, training=training)
        logits = tf.cast(out["logits"], tf.float32)
        real = tf.cast(batch["choice_mask"], tf.bool)
        return tf.where(real, logits, tf.fill(tf.shape(logits), float("-inf")))

    def loss_and_stats(
        self, model: keras.Model, batch: Batch, training: bool
    ) -> tuple[tf.Tensor, Stats]:
        import tensorflow as tf

        logits = self._scores(model, batch, training)
        labels = tf.reshape(tf.cast(batch["labels"], tf.int32), [-1])
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        preds = tf.argmax(logits, -1, output_type=tf.int32)
        stats = {
            "loss_sum": tf.reduce_sum(ce),
            "examples": tf.cast(tf.shape(logits)[0], tf.float32),
            "correct": tf.reduce_sum(tf.cast(tf.equal(preds, labels), tf.float32)),
        }
        return tf.reduce_mean(ce), stats

    def example_losses(self, model: keras.Model, batch: Batch) -> tf.Tensor:
        """Per example: the cross-entropy of its right choice."""
        import tensorflow as tf

        logits = self._scores(model, batch, training=False)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(tf.cast(batch["labels"], tf.int32), [-1]), logits=logits)

    def metrics(self, stats: Mapping[str, float]) -> dict[str, float]:
        n = max(float(stats["examples"]), 1.0)
        return {"loss": float(stats["loss_sum"]) / n, "accuracy": float(stats["correct"]) / n}

    # ------------------------------------------------------------------ data
    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_task_tokenizer(self.data, self.spec.vocab_size)
        return self._tokenizer

    def read(self, path: str | Path):
        return read_multiple_choice(path, self.data.format, self.data.num_choices)

    @property
    def train_examples(self):
        if self._train_examples is None:
            self._train_examples = self.read(self.data.train_file)
        return self._train_examples

    def features(self, examples, what: str, num_choices: int | None = None
                 ) -> dict[str, np.ndarray]:
        """Per-choice features (see :func:`encode_multiple_choice`); logs how many
        examples had their context cut to fit ``max_seq_length``."""
        arrays, truncated = encode_multiple_choice(
            examples, self.tokenizer, self.data.max_seq_length,
            num_choices or self.data.num_choices)
        log.info("multiple_choice: %d %s examples from %s, %d choices per example; %d had "
                 "their context cut to fit max_seq_length=%d", len(examples), what,
                 examples[0].where.split(":")[0], arrays["choice_mask"].shape[1], truncated,
                 self.data.max_seq_length)
        return arrays

    def eval_arrays(self) -> dict[str, np.ndarray]:
        if self._eval_arrays is None:
            if self.data.eval_file is None:
                raise ValueError("no evaluation data configured (data.eval_file)")
            self._eval_arrays = self.features(self.read(self.data.eval_file), "evaluation")
        return self._eval_arrays

    def datasets(self, cfg: TrainerConfig, distributor: Distributor) -> ExampleData:
        """Train / eval pipelines over the per-choice features (an
        :class:`~albertkit.data.ExampleData` of ``[N, choices, L]`` arrays); training features
        are built on the first ``train()`` call, padded to :attr:`num_choices`."""
        evals = self.eval_arrays() if self.data.eval_file is not None else None
        return ExampleData(
            lambda: self.features(self.train_examples, "training", self.num_choices),
            evals, micro_batch_size=self.micro_batch_size, seed=cfg.runtime.seed,
            distributor=distributor, eval_steps=cfg.runtime.eval_steps,
            tokenizer_dir=self.data.tokenizer)

    # ------------------------------------------------------------------ evaluation
    def predict(self, model: keras.Model, arrays: Mapping[str, np.ndarray], batch_size: int,
                step: Any = None) -> np.ndarray:
        """The model's scores ``[n, C]`` for every example, in order (padded choices keep
        the score the model gives them; :func:`multiple_choice_metrics` masks them)."""
        predict = forward_fn(model, step)
        outs = [np.asarray(predict(batch)["logits"])[:rows]
                for batch, rows in padded_batches({k: arrays[k] for k in MODEL_INPUTS},
                                                  batch_size)]
        return np.concatenate(outs) if outs else np.zeros((0, arrays["choice_mask"].shape[1]))

    def evaluate(
        self,
        model: keras.Model,
        step: Any,
        data: ExampleData | None,
        cfg: TrainerConfig,
        run_dir: str | Path | None,
    ) -> dict[str, float]:
        """Accuracy and loss over the whole eval file, per number of choices when it
        varies (no collectives: any rank may run it)."""
        given = getattr(data, "eval_arrays", None)
        arrays = given if given is not None else self.eval_arrays()
        logits = self.predict(model, arrays, self.micro_batch_size, step)
        return multiple_choice_metrics(logits, arrays["choice_mask"], arrays["labels"])
