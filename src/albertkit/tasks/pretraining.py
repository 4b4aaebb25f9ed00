"""ALBERT pretraining: masked LM + sentence-order prediction (Lan et al. 2020, section 3).

Loss definitions follow Google's ALBERT ``run_pretraining.py``: the MLM loss is the
weighted mean of token cross-entropies over the gathered masked positions
(sum(w * ce) / (sum(w) + 1e-5)), the SOP loss the mean cross-entropy over the batch, and
the total loss their sum.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albertkit.models.sizes import AlbertSpec
from albertkit.tasks.base import Batch, Stats

PRETRAINING_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)


class PretrainingTask:
    """MLM + SOP pretraining of :class:`~albertkit.models.albert.AlbertForPretraining`.

    Example:
        >>> task = PretrainingTask(spec, seq_length=128, max_predictions_per_seq=20)
        >>> model = task.build_model()
        >>> loss, stats = task.loss_and_stats(model, batch, training=True)
    """

    name = "pretraining"

    def __init__(self, spec: AlbertSpec, seq_length: int, max_predictions_per_seq: int,
                 dtype: str | None = None, remat: bool = False) -> None:
        self.remat = remat
        self.spec = spec
        self.seq_length = seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.dtype = dtype

    def build_model(self) -> keras.Model:
        from albertkit.models.albert import AlbertForPretraining

        model = AlbertForPretraining(self.spec, dtype=self.dtype, remat=self.remat)
        model(self.dummy_batch(2), training=False)
        return model

    def dummy_batch(self, batch_size: int) -> Batch:
        seq, preds = self.seq_length, self.max_predictions_per_seq
        return {
            "input_ids": tf.zeros([batch_size, seq], tf.int32),
            "input_mask": tf.ones([batch_size, seq], tf.int32),
            "segment_ids": tf.zeros([batch_size, seq], tf.int32),
            "masked_lm_positions": tf.zeros([batch_size, preds], tf.int32),
            "masked_lm_ids": tf.zeros([batch_size, preds], tf.int32),
            "masked_lm_weights": tf.zeros([batch_size, preds], tf.float32),
            "next_sentence_labels": tf.zeros([batch_size], tf.int32),
        }

    def loss_and_stats(self, model: keras.Model, batch: Batch, training: bool
                       ) -> tuple[tf.Tensor, Stats]:
        out = model(batch, training=training)
        mlm_logits = tf.cast(out["mlm_logits"], tf.float32)  # [B, P, V]
        sop_logits = tf.cast(out["sop_logits"], tf.float32)  # [B, 2]
        ids = tf.cast(batch["masked_lm_ids"], tf.int32)
        weights = tf.cast(batch["masked_lm_weights"], tf.float32)
        labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1])

        mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=mlm_logits)
        mlm_sum = tf.reduce_sum(mlm_ce * weights)
        mlm_weight = tf.reduce_sum(weights)
        mlm_loss = mlm_sum / (mlm_weight + 1e-5)
        mlm_hit = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids),
                          tf.float32)

        sop_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=sop_logits)
        sop_hit = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), labels),
                          tf.float32)
        examples = tf.cast(tf.shape(labels)[0], tf.float32)

        stats = {
            "mlm_loss_sum": mlm_sum,
            "mlm_weight": mlm_weight,
            "mlm_correct": tf.reduce_sum(mlm_hit * weights),
            "sop_loss_sum": tf.reduce_sum(sop_ce),
            "sop_correct": tf.reduce_sum(sop_hit),
            "examples": examples,
        }
        return mlm_loss + tf.reduce_mean(sop_ce), stats

    def metrics(self, stats: dict[str, float]) -> dict[str, float]:
        mlm_w = max(float(stats["mlm_weight"]), 1e-5)
        n = max(float(stats["examples"]), 1.0)
        mlm_loss = float(stats["mlm_loss_sum"]) / mlm_w
        sop_loss = float(stats["sop_loss_sum"]) / n
        return {
            "loss": mlm_loss + sop_loss,
            "mlm_loss": mlm_loss,
            "mlm_accuracy": float(stats["mlm_correct"]) / mlm_w,
            "sop_loss": sop_loss,
            "sop_accuracy": float(stats["sop_correct"]) / n,
        }
