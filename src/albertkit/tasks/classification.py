"""GLUE-style sequence classification and regression, and the GLUE metrics in NumPy.

Loss: softmax cross-entropy over the classes, or the squared error of the single output for
regression (STS-B), each averaged over the micro-batch (as Hugging Face's
``AlbertForSequenceClassification``). Metrics, from their definitions:

* accuracy: fraction of exact class matches;
* F1 (MRPC, QQP): of the positive class (index 1), 2 TP / (2 TP + FP + FN);
* Matthews correlation (CoLA): Gorodkin's multi-class R_K from the confusion matrix C,
  ``(c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t))`` with ``c = trace C``, ``s = sum C``, ``t``/``p``
  the true/predicted class counts; 0 when a denominator term is 0 (the binary case is the
  usual ``(TP TN - FP FN) / sqrt(...)``);
* Pearson r and Spearman rho (STS-B): rho is Pearson's r of the ranks, ties given their
  average rank.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from albertkit.config import ClassificationData, TrainerConfig
from albertkit.config.sizes import AlbertSpec
from albertkit.data.examples import ExampleData
from albertkit.data.finetune import load_task_tokenizer, padded_batches
from albertkit.data.glue import GLUE_PRESETS, LabelMap, encode_examples, read_examples
from albertkit.tasks.base import Batch, LogKeys, Stats, Task, forward_fn

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from albertkit.distributed import Distributor
    from albertkit.models.options import RematMode

log = logging.getLogger(__name__)

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")
FEATURE_NAMES = (*MODEL_INPUTS, "labels")


# --------------------------------------------------------------------------- metrics
def accuracy(labels: np.ndarray, preds: np.ndarray) -> float:
    labels, preds = np.asarray(labels), np.asarray(preds)
    return float(np.mean(labels == preds)) if labels.size else 0.0


def f1_binary(labels: np.ndarray, preds: np.ndarray, positive: int = 1) -> float:
    """F1 of the ``positive`` class; 0.0 when there is no positive label or prediction."""
    labels, preds = np.asarray(labels), np.asarray(preds)
    tp = float(np.sum((preds == positive) & (labels == positive)))
    fp = float(np.sum((preds == positive) & (labels != positive)))
    fn = float(np.sum((preds != positive) & (labels == positive)))
    return 2.0 * tp / (2.0 * tp + fp + fn) if tp else 0.0


def matthews_corrcoef(labels: np.ndarray, preds: np.ndarray) -> float:
    """Matthews correlation (multi-class R_K); 0.0 when undefined."""
    labels, preds = np.asarray(labels, np.int64), np.asarray(preds, np.int64)
    k = int(max(labels.max(initial=0), preds.max(initial=0))) + 1
    confusion = np.zeros((k, k), np.float64)
    np.add.at(confusion, (labels, preds), 1.0)
    c, s = np.trace(confusion), confusion.sum()
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    denom = (s * s - p @ p) * (s * s - t @ t)
    return float((c * s - t @ p) / np.sqrt(denom)) if denom > 0 else 0.0


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r; 0.0 when either input is constant."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt((dx @ dx) * (dy @ dy))
    return float(dx @ dy / denom) if denom > 0 else 0.0


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their ranks."""
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), np.float64)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of the average ranks."""
    return pearson(average_ranks(x), average_ranks(y))


def classification_metrics(
    labels: np.ndarray, outputs: np.ndarray, regression: bool
) -> dict[str, float]:
    """Every applicable metric from gold labels and model outputs (logits or scores)."""
    outputs = np.asarray(outputs, np.float64)
    if regression:
        scores = outputs.reshape(-1)
        labels = np.asarray(labels, np.float64).reshape(-1)
        p, s = pearson(scores, labels), spearman(scores, labels)
        return {
            "pearson": p,
            "spearman": s,
            "pearson_spearman": (p + s) / 2.0,
            "mse": float(np.mean((scores - labels) ** 2)) if labels.size else 0.0,
        }
    preds = outputs.argmax(axis=-1)
    labels = np.asarray(labels, np.int64).reshape(-1)
    out = {"accuracy": accuracy(labels, preds), "mcc": matthews_corrcoef(labels, preds)}
    if outputs.shape[-1] == 2:
        out["f1"] = f1_binary(labels, preds)
        out["accuracy_f1"] = (out["accuracy"] + out["f1"]) / 2.0
    return out


# --------------------------------------------------------------------------- the task
class ClassificationTask(Task):
    """Sentence / sentence-pair classification or regression with
    :class:`AlbertForSequenceClassification`.

    The label set comes from ``data.labels``, else the GLUE preset, else the distinct labels
    of the training file; ``data.regression`` (or the ``stsb`` preset) makes it a one-output
    regression.

    Args:
        spec: the model architecture.
        data: the ``data`` section.
        micro_batch_size: examples per replica per micro-batch (training and evaluation).
        dtype: Keras dtype policy name (``runtime.precision``).
        remat: what the backward pass recomputes (``RematMode``: none, selective, full).

    Example (SST-2-style files, a tokenizer trained on their sentences, a tiny model):
        >>> from albertkit.data import TokenizerConfig, train_tokenizer
        >>> from albertkit.distributed import build_distributor
        >>> good = ["great", "fine", "warm", "bright", "lovely"]
        >>> bad = ["dull", "awful", "cold", "dark", "boring"]
        >>> rows = [(f"a {word} film about {topic}.", int(word in good)) for word in good + bad
        ...         for topic in ("love", "war", "ships", "kings")]
        >>> tsv = "sentence\\tlabel\\n" + "".join(f"{text}\\t{label}\\n" for text, label in rows)
        >>> for name in ("train.tsv", "dev.tsv"):
        ...     _ = Path(name).write_text(tsv)
        >>> _ = train_tokenizer(None, "tok", TokenizerConfig(vocab_size=40, num_threads=1),
        ...                     sentences=[text for text, _ in rows])
        >>> cfg = TrainerConfig.from_dict({
        ...     "model": {"size": "tiny", "vocab_size": 101, "hidden_size": 32,
        ...               "embedding_size": 16, "num_attention_heads": 2,
        ...               "intermediate_size": 64, "max_position_embeddings": 64},
        ...     "data": {"kind": "classification", "task": "sst2", "train_file": "train.tsv",
        ...              "eval_file": "dev.tsv", "tokenizer": "tok", "max_seq_length": 16}})
        >>> task = ClassificationTask(cfg.model.spec, cfg.data, micro_batch_size=8)
        >>> task.num_labels, task.best_metric
        (2, ('accuracy', True))
        >>> model = task.build_model()
        >>> metrics = task.evaluate(model, None, task.datasets(cfg, build_distributor(cfg.distributed)), cfg, None)
        >>> sorted(metrics), metrics["examples"]
        (['accuracy', 'accuracy_f1', 'examples', 'f1', 'loss', 'mcc'], 40.0)
    """

    name = "classification"
    log_keys = LogKeys(
        train=("loss", "accuracy"),
        eval=("loss", "accuracy", "f1", "mcc", "pearson", "spearman"),
        progress=("loss", "accuracy", "f1", "pearson"),
    )

    def __init__(
        self, spec: AlbertSpec, data: ClassificationData, *, micro_batch_size: int,
        dtype: str | None = None, remat: RematMode | bool = "none",
    ) -> None:
        self.remat = remat
        self.spec = spec
        self.data = data
        self.micro_batch_size = micro_batch_size
        self.dtype = dtype
        self.preset = GLUE_PRESETS[data.task] if data.task else None
        self._tokenizer = None
        self._train_examples = None
        self._label_map: LabelMap | None = None
        self._eval_arrays: dict[str, np.ndarray] | None = None

    # ------------------------------------------------------------------ labels
    @property
    def regression(self) -> bool:
        if self.data.regression is not None:
            return self.data.regression
        return bool(self.preset and self.preset.regression)

    @property
    def label_map(self) -> LabelMap:
        if self._label_map is None:
            if self.regression:
                if self.data.labels:
                    raise ValueError(
                        "data.labels is set but the task is a regression "
                        "(data.regression / task stsb)"
                    )
                self._label_map = LabelMap(None)
            elif self.data.labels:
                self._label_map = LabelMap(self.data.labels)
            elif getattr(self.data, "num_labels", None):  # user_classification: ids only
                self._label_map = LabelMap([str(i) for i in range(self.data.num_labels)])
            elif self.preset is not None and self.preset.labels is not None:
                self._label_map = LabelMap(self.preset.labels)
            else:
                self._label_map = LabelMap.infer(self.train_examples)
                log.info(
                    "labels inferred from %s: %s", self.data.train_file, self._label_map.labels
                )
        return self._label_map

    @property
    def num_labels(self) -> int:
        return self.label_map.num_labels

    @property
    def best_metric(self) -> tuple[str, bool]:
        """(metric key, higher is better) for keeping the best checkpoint."""
        if self.preset is not None:
            return self.preset.metric, True
        return ("pearson", True) if self.regression else ("accuracy", True)

    # ------------------------------------------------------------------ model and loss
    def build_model(self) -> keras.Model:
        from albertkit.models.albert import AlbertForSequenceClassification

        model = AlbertForSequenceClassification(
            self.spec, self.num_labels, dtype=self.dtype, remat=self.remat
        )
        model.build_for(seq_length=self.data.max_seq_length)
        return model

    def dummy_batch(self, batch_size: int) -> Batch:
        import tensorflow as tf

        L = self.data.max_seq_length
        return {
            "input_ids": tf.zeros([batch_size, L], tf.int32),
            "input_mask": tf.ones([batch_size, L], tf.int32),
            "segment_ids": tf.zeros([batch_size, L], tf.int32),
            "labels": tf.zeros([batch_size], tf.float32 if self.regression else tf.int32),
        }

    def loss_and_stats(
        self, model: keras.Model, batch: Batch, training: bool
    ) -> tuple[tf.Tensor, Stats]:
        import tensorflow as tf

        out = model({k: batch[k] for k in MODEL_INPUTS}, training=training)
        logits = tf.cast(out["logits"], tf.float32)  # [B, num_labels]
        n = tf.cast(tf.shape(logits)[0], tf.float32)
        if self.regression:
            # Pearson's r follows from these sums, so it survives summing over micro-batches
            # and replicas like every other stat (float32 sums: a training-time indicator;
            # evaluate() computes it exactly in float64).
            x = tf.reshape(logits, [-1])
            y = tf.reshape(tf.cast(batch["labels"], tf.float32), [-1])
            se = tf.square(x - y)
            stats = {
                "loss_sum": tf.reduce_sum(se),
                "examples": n,
                "sum_x": tf.reduce_sum(x),
                "sum_y": tf.reduce_sum(y),
                "sum_xx": tf.reduce_sum(x * x),
                "sum_yy": tf.reduce_sum(y * y),
                "sum_xy": tf.reduce_sum(x * y),
            }
            return tf.reduce_mean(se), stats
        labels = tf.reshape(tf.cast(batch["labels"], tf.int32), [-1])
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        preds = tf.argmax(logits, -1, output_type=tf.int32)
        stats = {
            "loss_sum": tf.reduce_sum(ce),
            "examples": n,
            "correct": tf.reduce_sum(tf.cast(tf.equal(preds, labels), tf.float32)),
        }
        if self.num_labels == 2:
            pos_p, pos_l = tf.equal(preds, 1), tf.equal(labels, 1)
            stats["tp"] = tf.reduce_sum(tf.cast(pos_p & pos_l, tf.float32))
            stats["fp"] = tf.reduce_sum(tf.cast(pos_p & ~pos_l, tf.float32))
            stats["fn"] = tf.reduce_sum(tf.cast(~pos_p & pos_l, tf.float32))
        return tf.reduce_mean(ce), stats

    def example_losses(self, model: keras.Model, batch: Batch) -> tf.Tensor:
        """Per example: its squared error (regression) or cross-entropy."""
        import tensorflow as tf

        out = model({k: batch[k] for k in MODEL_INPUTS}, training=False)
        logits = tf.cast(out["logits"], tf.float32)
        if self.regression:
            y = tf.reshape(tf.cast(batch["labels"], tf.float32), [-1])
            return tf.square(tf.reshape(logits, [-1]) - y)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(tf.cast(batch["labels"], tf.int32), [-1]), logits=logits)

    def metrics(self, stats: Mapping[str, float]) -> dict[str, float]:
        n = max(float(stats["examples"]), 1.0)
        out = {"loss": float(stats["loss_sum"]) / n}
        if "sum_xy" in stats:
            sx, sy = float(stats["sum_x"]), float(stats["sum_y"])
            cov = float(stats["sum_xy"]) - sx * sy / n
            vx = float(stats["sum_xx"]) - sx * sx / n
            vy = float(stats["sum_yy"]) - sy * sy / n
            out["pearson"] = cov / np.sqrt(vx * vy) if vx > 0 and vy > 0 else 0.0
            return out
        out["accuracy"] = float(stats["correct"]) / n
        if "tp" in stats:
            tp, fp, fn = (float(stats[k]) for k in ("tp", "fp", "fn"))
            out["f1"] = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        return out

    # ------------------------------------------------------------------ data
    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_task_tokenizer(self.data, self.spec.vocab_size)
        return self._tokenizer

    def read(self, path: str | Path):
        d = self.data
        return read_examples(path, d.format, d.task, d.text_a, d.text_b, d.label)

    @property
    def train_examples(self):
        if self._train_examples is None:
            self._train_examples = self.read(self.data.train_file)
        return self._train_examples

    def features(self, examples) -> dict[str, np.ndarray]:
        return encode_examples(examples, self.tokenizer, self.label_map, self.data.max_seq_length)

    def eval_arrays(self) -> dict[str, np.ndarray]:
        if self._eval_arrays is None:
            if self.data.eval_file is None:
                raise ValueError("no evaluation data configured (data.eval_file)")
            self._eval_arrays = self.features(self.read(self.data.eval_file))
        return self._eval_arrays

    def datasets(self, cfg: TrainerConfig, distributor: Distributor) -> ExampleData:
        """Train / eval pipelines (an :class:`~albertkit.data.ExampleData`).

        Training features are built on the first ``train()`` call.
        """

        def train_arrays():
            train = self.features(self.train_examples)
            kind = "regression" if self.regression else f"labels {self.label_map.labels}"
            log.info(
                "classification: %d training records from %s (%s)",
                len(train["labels"]),
                self.data.train_file,
                kind,
            )
            return train

        evals = self.eval_arrays() if self.data.eval_file is not None else None
        return ExampleData(
            train_arrays, evals, micro_batch_size=self.micro_batch_size,
            seed=cfg.runtime.seed, distributor=distributor, eval_steps=cfg.runtime.eval_steps,
            tokenizer_dir=self.data.tokenizer)

    # ------------------------------------------------------------------ evaluation
    def predict(
        self, model: keras.Model, arrays: dict[str, np.ndarray], batch_size: int, step: Any = None
    ) -> np.ndarray:
        """Model outputs (logits, or scores ``[N, 1]``) for every record, in order."""
        predict = forward_fn(model, step)
        outs = [
            np.asarray(predict(batch)["logits"])[:rows]
            for batch, rows in padded_batches({k: arrays[k] for k in MODEL_INPUTS}, batch_size)
        ]
        return np.concatenate(outs) if outs else np.zeros((0, self.num_labels))

    def evaluate(
        self,
        model: keras.Model,
        step: Any,
        data: ExampleData | None,
        cfg: TrainerConfig,
        run_dir: str | Path | None,
    ) -> dict[str, float]:
        """Metrics over the whole eval file (no collectives: any rank may run it).

        Returns ``accuracy``, ``mcc``, and for two classes ``f1``/``accuracy_f1``; for
        regression ``pearson``, ``spearman``, ``pearson_spearman``, ``mse``; plus ``loss``
        and ``examples``.
        """
        # the pipelines' own arrays (examples given in Python), else the eval file's
        given = getattr(data, "eval_arrays", None)
        arrays = given if given is not None else self.eval_arrays()
        outputs = self.predict(model, arrays, self.micro_batch_size, step)
        labels = arrays["labels"]
        result = classification_metrics(labels, outputs, self.regression)
        if self.regression:
            result["loss"] = result["mse"]
        else:
            z = outputs - outputs.max(axis=-1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
            result["loss"] = float(-np.mean(logp[np.arange(len(labels)), labels]))
        result["examples"] = float(len(labels))
        return result
