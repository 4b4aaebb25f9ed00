"""ALBERT pretraining: masked LM + sentence-order prediction (Lan et al. 2020, section 3).

Loss definitions follow Google's ALBERT ``run_pretraining.py``: the MLM loss is the
weighted mean of token cross-entropies over the gathered masked positions
(sum(w * ce) / (sum(w) + 1e-5)), the SOP loss the mean cross-entropy over the batch, and
the total loss their sum.

Evaluation sums the same stats over the held-out batches and compares the MLM accuracy with
the accuracy of always predicting the most frequent masked target of that held-out set
(:class:`MaskedTargetCounts`): a model below that baseline has learnt only unigram counts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from albertkit.config import TrainerConfig
from albertkit.config.sizes import AlbertSpec
from albertkit.data.batching import accumulation_batches
from albertkit.errors import ConfigError
from albertkit.tasks.base import Batch, LogKeys, Stats, Task

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from albertkit.distributed import Distributor
    from albertkit.models.options import RematMode

log = logging.getLogger(__name__)


class PretrainingTask(Task):
    """MLM + SOP pretraining of :class:`~albertkit.models.albert.AlbertForPretraining`.

    Args:
        spec: the model architecture.
        seq_length, max_predictions_per_seq: the feature shapes.
        micro_batch_size: examples per replica per micro-batch.
        dtype: Keras dtype policy name (``runtime.precision``).
        remat: what the backward pass recomputes (``RematMode``: none, selective, full).

    Example (a tiny model on a batch of random token ids, every prediction slot in use):
        >>> import keras
        >>> spec = AlbertSpec(vocab_size=101, embedding_size=16, hidden_size=32,
        ...                   num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        ...                   max_position_embeddings=64)
        >>> task = PretrainingTask(spec, seq_length=16, max_predictions_per_seq=3,
        ...                        micro_batch_size=4)
        >>> keras.utils.set_random_seed(0)
        >>> model = task.build_model()
        >>> rng = np.random.default_rng(0)
        >>> batch = {**task.dummy_batch(4), "input_ids": rng.integers(5, 101, (4, 16)),
        ...          "masked_lm_positions": np.tile([1, 5, 9], (4, 1)),
        ...          "masked_lm_ids": rng.integers(5, 101, (4, 3)),
        ...          "masked_lm_weights": np.ones((4, 3), np.float32)}
        >>> loss, stats = task.loss_and_stats(model, batch, training=True)
        >>> sorted(stats)  # sums, so that micro-batches and replicas add up
        ['examples', 'mlm_correct', 'mlm_loss_sum', 'mlm_weight', 'sop_correct', 'sop_loss_sum']
        >>> metrics = task.metrics(stats)
        >>> round(metrics["mlm_loss"], 1), round(metrics["sop_loss"], 1)  # untrained: ln 101, ln 2
        (4.6, 0.7)
    """

    name = "pretraining"
    log_keys = LogKeys(
        train=("loss", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"),
        eval=("loss", "mlm_accuracy", "sop_accuracy", "mlm_accuracy_over_baseline"),
        progress=("loss", "mlm_accuracy", "sop_accuracy"),
    )

    def __init__(self, spec: AlbertSpec, seq_length: int, max_predictions_per_seq: int, *,
                 micro_batch_size: int, dtype: str | None = None, remat: RematMode | bool = "none") -> None:
        self.remat = remat
        self.spec = spec
        self.seq_length = seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.micro_batch_size = micro_batch_size
        self.dtype = dtype

    @classmethod
    def for_data(cls, data: Any, spec: AlbertSpec, *, micro_batch_size: int,
                 dtype: str | None = None, remat: RematMode | bool = "none") -> PretrainingTask:
        return cls(spec, data.seq_length, data.max_predictions_per_seq,
                   micro_batch_size=micro_batch_size, dtype=dtype, remat=remat)

    @property
    def best_metric(self) -> tuple[str, bool]:
        """The held-out loss, lower is better."""
        return "loss", False

    def build_model(self) -> keras.Model:
        from albertkit.models.albert import AlbertForPretraining

        model = AlbertForPretraining(self.spec, dtype=self.dtype, remat=self.remat)
        model(self.dummy_batch(2), training=False)
        return model

    def dummy_batch(self, batch_size: int) -> Batch:
        import tensorflow as tf

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
        import tensorflow as tf

        from albertkit.models.kernels import sparse_cross_entropy

        out = model(batch, training=training)
        sop_logits = tf.cast(out["sop_logits"], tf.float32)  # [B, 2]
        weights = tf.cast(batch["masked_lm_weights"], tf.float32)
        labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1])

        # [B, P, V] logits in the compute dtype: the fused kernel computes in float32.
        mlm_ce, mlm_hit = sparse_cross_entropy(out["mlm_logits"], batch["masked_lm_ids"])
        mlm_sum = tf.reduce_sum(mlm_ce * weights)
        mlm_weight = tf.reduce_sum(weights)
        mlm_loss = mlm_sum / (mlm_weight + 1e-5)

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

    def example_losses(self, model: keras.Model, batch: Batch) -> tf.Tensor:
        """Per sequence: the MLM loss over that sequence's masked tokens (their weighted
        mean cross-entropy, as the batch loss but per row) plus its SOP cross-entropy."""
        import tensorflow as tf

        from albertkit.models.kernels import sparse_cross_entropy

        out = model(batch, training=False)
        mlm_ce, _ = sparse_cross_entropy(out["mlm_logits"], batch["masked_lm_ids"])  # [B, P]
        weights = tf.cast(batch["masked_lm_weights"], tf.float32)
        mlm = tf.reduce_sum(mlm_ce * weights, -1) / (tf.reduce_sum(weights, -1) + 1e-5)
        sop = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1]),
            logits=tf.cast(out["sop_logits"], tf.float32))
        return mlm + sop

    def metrics(self, stats: Mapping[str, float]) -> dict[str, float]:
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

    # ------------------------------------------------------------------ data
    def datasets(self, cfg: TrainerConfig, distributor: Distributor) -> PretrainingData:
        """Train / eval pipelines of the pretraining data kinds (demo, tfrecord, synthetic)."""
        return PretrainingData(cfg, self, distributor)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, model: keras.Model, step: Any, data: PretrainingData, cfg: TrainerConfig,
                 run_dir: str | Path | None) -> dict[str, float]:
        """Summed stats over up to ``runtime.eval_steps`` eval batches, plus the baseline.

        A collective: every rank must call it (the stats and the target counts are summed
        over all ranks). ``step`` is required: its compiled, all-reduced evaluation is used.
        """
        max_batches = cfg.runtime.eval_steps
        totals: dict[str, float] = {}
        targets = MaskedTargetCounts(self.spec.vocab_size)
        n = 0
        for batch in data.eval():
            stats = step.evaluate_batch(batch)
            for k, v in stats.items():
                totals[k] = totals.get(k, 0.0) + float(v)
            targets.add(batch)
            n += 1
            if n >= max_batches:
                break
        dist = step.distributor
        if dist.size > 1:
            # The stats above are already global; the baseline's target histogram and the
            # batch count are summed here, by every rank (a collective: all ranks call it).
            import tensorflow as tf

            summed = dist.local_value(dist.run(
                lambda h, b: dist.reduce_sum({"targets": h, "batches": b}),
                tf.constant(targets.counts, tf.float32), tf.constant(float(n))))
            targets = MaskedTargetCounts.from_counts(summed["targets"])
            n = int(summed["batches"])
        if n == 0 or not totals:
            raise ConfigError(
                "evaluation produced no batches: the eval data holds fewer examples than one "
                "batch (runtime.micro_batch_size per replica); add eval data, lower the "
                "micro-batch, or set runtime.eval_every_steps=0")
        metrics = self.metrics(totals)
        if targets.total > 0:
            metrics["mlm_baseline_accuracy"] = targets.baseline()["accuracy"]
            metrics["mlm_accuracy_over_baseline"] = metrics["mlm_accuracy"] / max(
                metrics["mlm_baseline_accuracy"], 1e-9)
        metrics["eval_batches"] = float(n)
        return metrics


class MaskedTargetCounts:
    """How often each token id is a masked-LM target (weight > 0) in the batches seen.

    The baseline it gives, always predicting the most frequent target, is the accuracy a
    model reaches from unigram counts alone.

    Example (two sequences of three prediction slots; the last slot of the second is padding):
        >>> counts = MaskedTargetCounts(vocab_size=10)
        >>> counts.add({"masked_lm_ids": np.array([[7, 7, 3], [7, 2, 0]]),
        ...             "masked_lm_weights": np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])})
        >>> counts.baseline()  # token 7 is 3 of the 5 targets
        {'token_id': 7, 'accuracy': 0.6, 'targets': 5}
    """

    def __init__(self, vocab_size: int) -> None:
        self.counts = np.zeros(vocab_size, np.float64)

    @classmethod
    def from_counts(cls, counts: Any) -> MaskedTargetCounts:
        out = cls(0)
        out.counts = np.asarray(counts, np.float64).copy()
        return out

    def add(self, batch: Mapping[str, Any]) -> None:
        ids = np.asarray(batch["masked_lm_ids"]).ravel()
        weights = np.asarray(batch["masked_lm_weights"]).ravel()
        np.add.at(self.counts, ids[weights > 0], 1.0)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def baseline(self) -> dict[str, float]:
        """``{"token_id", "accuracy", "targets"}``: the most frequent target (the smallest id
        on a tie), the accuracy of always predicting it, and the number of targets."""
        if self.total == 0:
            raise ValueError("no masked targets were counted")
        return {"token_id": int(np.argmax(self.counts)),
                "accuracy": float(self.counts.max() / self.counts.sum()),
                "targets": self.total}


def records_tokenizer(cfg: TrainerConfig, train_files: list[str], say: bool = True
                      ) -> Path | None:
    """The tokenizer of pretraining records: ``data.tokenizer`` when set (it must be the one
    the data's ``manifest.json`` records), else the data's own (its copy, or the path its
    manifest records while that still holds it). None, said once (``say``), when there is
    none to find: the run and its exports then carry no tokenizer.

    A tokenizer that is set or found must also be the one ``model.load_from`` carries.

    Raises:
        ConfigError: ``data.tokenizer`` or the data's tokenizer does not match, naming both.
    """
    from albertkit.data.tokenizer_match import (
        TokenizerIdentity,
        check_model_tokenizer,
        find_data_tokenizer,
        mismatch,
    )

    given = cfg.data.tokenizer
    found = find_data_tokenizer(train_files)
    if given is not None:
        if not Path(given).exists():
            raise ConfigError(f"tokenizer directory not found: {given}")
        ours = TokenizerIdentity.of(given)
        if found is not None:
            problem = mismatch(ours, found.record)
            if problem:
                raise ConfigError(f"data.tokenizer={given} is not the tokenizer the data was "
                                  f"prepared with ({found.manifest} records it): {problem}")
        check_model_tokenizer(ours, f"data.tokenizer={given}", cfg.model.load_from)
        return Path(given)
    if found is not None:
        check_model_tokenizer(found.record, f"the data's tokenizer ({found.manifest})",
                              cfg.model.load_from)
    if found is not None and found.directory is not None:
        if say:
            log.info("tokenizer: %s (the data's, from %s)", found.directory, found.manifest)
        return found.directory
    if say:
        why = (f"{found.manifest} names it but {found.problem}" if found is not None else
               f"no manifest.json beside {train_files[0]} names it")
        log.warning("data.tokenizer is not set and the data's tokenizer is not found (%s): "
                    "this run and its exports carry no tokenizer; set data.tokenizer", why)
    return None


class PretrainingData:
    """Train/eval tf.data pipelines for the pretraining data kinds (a :class:`TaskData`).

    ``demo`` prepares (once, cached) the built-in corpus under ``run_dir/data``; ``tfrecord``
    reads the shards named in the config and checks their tokenizer fits the model;
    ``synthetic`` generates random valid examples.
    """

    def __init__(self, cfg: TrainerConfig, task: PretrainingTask, distributor: Distributor) -> None:
        self.cfg = cfg
        self.task = task
        self.distributor = distributor
        d = cfg.data
        vocab_size = task.spec.vocab_size
        self.eval_files: list[str] = []
        self.train_files: list[str] = []
        self._tokenizer_dir: Path | None = None
        if d.kind == "demo":
            from albertkit.data.demo import prepare_demo_data

            data_seed = cfg.runtime.seed if d.seed is None else d.seed
            files = prepare_demo_data(d, Path(cfg.run_dir) / "data", seed=data_seed)
            self.train_files, self.eval_files = list(files.train_files), list(files.eval_files)
            self._tokenizer_dir = Path(files.tokenizer_dir)
            if files.vocab_size > vocab_size:
                raise ConfigError(
                    f"the demo tokenizer has {files.vocab_size} tokens but model.vocab_size="
                    f"{vocab_size}")
            if cfg.model.load_from is not None:
                from albertkit.data.tokenizer_match import TokenizerIdentity, check_model_tokenizer

                check_model_tokenizer(TokenizerIdentity.of(self._tokenizer_dir),
                                      "the demo tokenizer", cfg.model.load_from)
        elif d.kind == "tfrecord":
            from albertkit.data.pretraining_dataset import expand_files, read_manifests

            self.train_files = expand_files(d.train_files)
            self.eval_files = expand_files(d.eval_files) if d.eval_files else []
            manifest, _ = read_manifests(self.train_files)  # token ids must fit the model
            pieces = manifest["tokenizer"]["vocab_size"] if manifest else 0
            if pieces > vocab_size:
                raise ConfigError(
                    f"data.train_files: {Path(self.train_files[0]).parent / 'manifest.json'} "
                    f"says the data's tokenizer has {pieces} tokens but model.vocab_size="
                    f"{vocab_size}")
            self._tokenizer_dir = records_tokenizer(cfg, self.train_files,
                                                    say=distributor.is_chief)

    @property
    def tokenizer_dir(self) -> Path | None:
        return self._tokenizer_dir

    @property
    def has_eval(self) -> bool:
        d = self.cfg.data
        if d.kind == "synthetic":
            return d.eval_examples > 0
        return bool(self.eval_files)

    def _dataset(self, training: bool, start_batch: int = 0, stream_version: int = 2):
        from albertkit.data.pretraining_dataset import (
            build_pretraining_dataset,
            build_synthetic_dataset,
        )

        cfg, d, dist = self.cfg, self.cfg.data, self.distributor
        micro = self.task.micro_batch_size
        if d.kind == "synthetic":
            # Sharded by whole micro-batches of the single-process stream: N ranks with k
            # micro-batches each compute exactly the micro-batches (and per-micro-batch loss
            # normalisation) of one process with N*k, so the two runs are comparable.
            return build_synthetic_dataset(
                vocab_size=self.task.spec.vocab_size, seq_length=d.seq_length,
                max_predictions_per_seq=d.max_predictions_per_seq, batch_size=micro,
                num_examples=d.num_examples if training else d.eval_examples,
                seed=cfg.runtime.seed + (0 if training else 1), repeat=training,
                shard_index=dist.rank, num_shards=dist.size, start_batch=start_batch)
        rules = d.masking_rules if d.kind == "tfrecord" else None
        deterministic = d.deterministic if d.kind == "tfrecord" else True
        return build_pretraining_dataset(
            self.train_files if training else self.eval_files,
            seq_length=d.seq_length, max_predictions_per_seq=d.max_predictions_per_seq,
            batch_size=micro, masking=d.masking, masking_rules=rules,
            shuffle_buffer=d.shuffle_buffer if training else 0,
            seed=cfg.runtime.seed, deterministic=deterministic,
            shard_index=dist.rank, num_shards=dist.size, repeat=training, training=training,
            start_batch=start_batch, stream_version=stream_version)

    def train(self, skip_micro_batches: int = 0, accum: int = 1, stream_version: int = 2):
        # The streams start at the resume position themselves, in O(1) of the step (version
        # 1, the 0.1 stream of 0.1 checkpoints, re-reads and drops the consumed batches).
        ds = self._dataset(training=True, start_batch=skip_micro_batches,
                           stream_version=stream_version)
        return accumulation_batches(ds, accum, self.distributor)

    def eval(self):
        return self._dataset(training=False).take(self.cfg.runtime.eval_steps)
