"""SQuAD v1.1 / v2.0 fine-tuning: span loss, post-processing, official evaluation.

Loss (Google's ``run_squad.py``): the mean of the start- and end-position cross-entropies
over the window positions. Unanswerable questions (v2.0) and windows that do not contain the
answer have both positions at 0 ([CLS]), so the [CLS] logits learn the no-answer score.

Post-processing (``write_predictions`` in Google's ``run_squad.py``): for every window take
the ``n_best_size`` highest start and end logits, keep the pairs that lie inside the context,
with ``start <= end``, length <= ``max_answer_length`` and a start token that has its maximal
context in that window; rank by ``start_logit + end_logit`` over all windows of a question,
dedupe by text, keep the ``n_best_size`` best. v2.0: the null score is the smallest
``start_logits[0] + end_logits[0]`` over the windows; ``null_odds = null score - best
non-null score`` and the prediction is "" when it exceeds ``null_score_diff_threshold``.
Evaluation reports the official metrics and, for v2.0, the best threshold found by the
official threshold search over ``null_odds``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from albertkit.config import SquadData, TrainerConfig
from albertkit.config.sizes import AlbertSpec
from albertkit.data.examples import ExampleData
from albertkit.data.finetune import load_task_tokenizer, padded_batches
from albertkit.data.language import resolve_language
from albertkit.data.squad import (
    FEATURE_NAMES,
    SquadExample,
    SquadFeatures,
    convert_squad_examples,
    parse_squad,
    read_squad,
    read_squad_json,
)
from albertkit.data.tokenizer import tokenizer_language
from albertkit.fileio import atomic_write_text
from albertkit.tasks import squad_metrics
from albertkit.tasks.base import Batch, LogKeys, Stats, Task, forward_fn

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from albertkit.distributed import Distributor
    from albertkit.models.options import RematMode

log = logging.getLogger(__name__)

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")

# null_odds of a question whose windows offer no valid non-null span at all: "certainly no
# answer". A large finite number because JSON has no infinity.
NO_SPAN_ODDS = 1e6


# --------------------------------------------------------------------------- post-processing
@dataclass
class SquadPredictions:
    """Post-processed answers in the official file formats.

    Attributes:
        predictions: question id -> answer text ("" = no answer, v2.0).
        nbest: question id -> list of {text, probability, start_logit, end_logit}.
        null_odds: v2.0 question id -> null score minus best non-null score (None for v1.1).
        best_non_null: question id -> best non-empty answer text (for the threshold search).
    """

    predictions: dict[str, str]
    nbest: dict[str, list[dict[str, Any]]]
    null_odds: dict[str, float] | None
    best_non_null: dict[str, str]

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """Write predictions.json, nbest_predictions.json and (v2.0) null_odds.json."""
        out_dir = Path(out_dir)
        files = {
            "predictions": out_dir / "predictions.json",
            "nbest": out_dir / "nbest_predictions.json",
        }
        atomic_write_text(
            files["predictions"], json.dumps(self.predictions, indent=2, ensure_ascii=False) + "\n"
        )
        atomic_write_text(
            files["nbest"], json.dumps(self.nbest, indent=2, ensure_ascii=False) + "\n"
        )
        if self.null_odds is not None:
            files["null_odds"] = out_dir / "null_odds.json"
            atomic_write_text(files["null_odds"], json.dumps(self.null_odds, indent=2) + "\n")
        return files


def _softmax(scores: list[float]) -> list[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def postprocess_squad(
    features: SquadFeatures,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    version_2: bool,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float = 0.0,
) -> SquadPredictions:
    """Turn per-window logits ``[N, L]`` into answers (see the module docstring)."""
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    if start_logits.shape != (len(features), features.token_spans.shape[1]):
        raise ValueError(
            f"logits shape {start_logits.shape} does not match the {len(features)} features"
        )
    by_example: dict[int, list[int]] = {}
    for row, ei in enumerate(features.example_index):
        by_example.setdefault(int(ei), []).append(row)

    predictions: dict[str, str] = {}
    nbest_out: dict[str, list[dict[str, Any]]] = {}
    null_odds: dict[str, float] = {}
    best_non_null: dict[str, str] = {}
    for ei, ex in enumerate(features.examples):
        candidates = []  # (score, start_logit, end_logit, row, start, end)
        null_score, null_start, null_end = math.inf, 0.0, 0.0
        for row in by_example.get(ei, []):
            s_log, e_log = start_logits[row], end_logits[row]
            spans, is_max = features.token_spans[row], features.max_context[row]
            if version_2:
                score = s_log[0] + e_log[0]
                if score < null_score:
                    null_score, null_start, null_end = score, s_log[0], e_log[0]
            starts = np.argsort(-s_log, kind="stable")[:n_best_size]
            ends = np.argsort(-e_log, kind="stable")[:n_best_size]
            for s in starts:
                if spans[s, 0] < 0 or not is_max[s]:
                    continue
                for e in ends:
                    if spans[e, 0] < 0 or e < s or e - s + 1 > max_answer_length:
                        continue
                    candidates.append((s_log[s] + e_log[e], s_log[s], e_log[e], row, s, e))
        candidates.sort(key=lambda c: c[0], reverse=True)

        entries: list[dict[str, Any]] = []
        seen: set[str] = set()
        for _, s_l, e_l, row, s, e in candidates:
            if len(entries) >= n_best_size:
                break
            text = features.answer_text(row, s, e).strip()
            if not text or text in seen:
                continue
            seen.add(text)
            entries.append({"text": text, "start_logit": float(s_l), "end_logit": float(e_l)})
        non_null = entries[0] if entries else None
        if version_2:
            # The null answer competes in the n-best list with its own score (so the list
            # holds up to n_best_size + 1 entries, as in Google's run_squad).
            entries.append(
                {"text": "", "start_logit": float(null_start), "end_logit": float(null_end)}
            )
            entries.sort(key=lambda x: x["start_logit"] + x["end_logit"], reverse=True)
        probs = _softmax([x["start_logit"] + x["end_logit"] for x in entries])
        nbest_out[ex.qid] = [
            {
                "text": x["text"],
                "probability": p,
                "start_logit": x["start_logit"],
                "end_logit": x["end_logit"],
            }
            for x, p in zip(entries, probs, strict=True)
        ]
        best_non_null[ex.qid] = non_null["text"] if non_null else ""
        if not version_2:
            predictions[ex.qid] = best_non_null[ex.qid]
            continue
        if non_null is None:
            diff = NO_SPAN_ODDS
        else:
            diff = float(null_score - non_null["start_logit"] - non_null["end_logit"])
        null_odds[ex.qid] = diff
        predictions[ex.qid] = "" if diff > null_score_diff_threshold else non_null["text"]
    return SquadPredictions(predictions, nbest_out, null_odds if version_2 else None, best_non_null)


# --------------------------------------------------------------------------- the task
class SquadTask(Task):
    """Question answering on SQuAD v1.1 / v2.0 with :class:`AlbertForQuestionAnswering`.

    Args:
        spec: the model architecture.
        data: the ``data`` section (files, tokenizer, window sizes, n-best settings).
        micro_batch_size: examples per replica per micro-batch (training and evaluation).
        dtype: Keras dtype policy name (``runtime.precision``).
        remat: what the backward pass recomputes (``RematMode``: none, selective, full).

    Example (five SQuAD v1.1 questions, a tokenizer trained on their text, a tiny model):
        >>> from albertkit.data import TokenizerConfig, train_tokenizer
        >>> from albertkit.distributed import build_distributor
        >>> def paragraph(i, color, port):
        ...     context = f"The {color} ship sailed to {port} in the spring."
        ...     answer = {"text": port, "answer_start": context.index(port)}
        ...     question = f"Where did the {color} ship sail?"
        ...     return {"context": context,
        ...             "qas": [{"id": f"q{i}", "question": question, "answers": [answer]}]}
        >>> paragraphs = [paragraph(i, color, port) for i, (color, port) in enumerate(
        ...     zip(["red", "blue", "green", "white", "black"],
        ...         ["Lisbon", "Genoa", "Bergen", "Tunis", "Riga"]))]
        >>> squad = {"version": "1.1", "data": [{"title": "Ships", "paragraphs": paragraphs}]}
        >>> _ = Path("dev.json").write_text(json.dumps(squad))
        >>> texts = [t for p in paragraphs for t in (p["context"], p["qas"][0]["question"])]
        >>> _ = train_tokenizer(None, "tok", TokenizerConfig(vocab_size=40, num_threads=1),
        ...                     sentences=texts)
        >>> cfg = TrainerConfig.from_dict({
        ...     "model": {"size": "tiny", "vocab_size": 101, "hidden_size": 32,
        ...               "embedding_size": 16, "num_attention_heads": 2,
        ...               "intermediate_size": 64, "max_position_embeddings": 64},
        ...     "data": {"kind": "squad", "version": "1.1", "train_file": "dev.json",
        ...              "eval_file": "dev.json", "tokenizer": "tok", "max_seq_length": 32,
        ...              "max_query_length": 12, "doc_stride": 8},
        ...     "logging": {"progress_bar": False}})
        >>> task = SquadTask(cfg.model.spec, cfg.data, micro_batch_size=4, dtype="float32")
        >>> task.best_metric
        ('f1', True)
        >>> model = task.build_model()
        >>> data = task.datasets(cfg, build_distributor(cfg.distributed))
        >>> metrics = task.evaluate(model, None, data, cfg, "run")  # the official keys
        >>> sorted(metrics)
        ['exact_match', 'f1']
        >>> sorted(path.name for path in Path("run/squad_eval").iterdir())
        ['eval_results.json', 'nbest_predictions.json', 'predictions.json']
    """

    name = "squad"
    log_keys = LogKeys(
        train=("loss", "span_accuracy"),
        # the official script's keys: v1.1 exact_match/f1; v2.0 exact/f1/HasAns_*/NoAns_*/best_*
        eval=("exact_match", "exact", "f1", "HasAns_f1", "NoAns_f1", "best_exact", "best_f1"),
        progress=("loss", "span_accuracy"),
    )

    def __init__(self, spec: AlbertSpec, data: SquadData, *, micro_batch_size: int,
                 dtype: str | None = None, remat: RematMode | bool = "none") -> None:
        self.remat = remat
        self.spec = spec
        self.data = data
        self.micro_batch_size = micro_batch_size
        self.dtype = dtype
        self._tokenizer = None
        self._eval: tuple[dict[str, Any], SquadFeatures] | None = None

    @property
    def version_2(self) -> bool:
        return self.data.version == "2.0"

    @property
    def best_metric(self) -> tuple[str, bool]:
        """(metric key, higher is better) for keeping the best checkpoint."""
        return ("best_f1", True) if self.version_2 else ("f1", True)

    # ------------------------------------------------------------------ model and loss
    def build_model(self) -> keras.Model:
        from albertkit.models.albert import AlbertForQuestionAnswering

        model = AlbertForQuestionAnswering(self.spec, dtype=self.dtype, remat=self.remat)
        model.build_for(seq_length=self.data.max_seq_length)
        return model

    def dummy_batch(self, batch_size: int) -> Batch:
        import tensorflow as tf

        L = self.data.max_seq_length
        return {
            "input_ids": tf.zeros([batch_size, L], tf.int32),
            "input_mask": tf.ones([batch_size, L], tf.int32),
            "segment_ids": tf.zeros([batch_size, L], tf.int32),
            "start_positions": tf.zeros([batch_size], tf.int32),
            "end_positions": tf.zeros([batch_size], tf.int32),
        }

    def loss_and_stats(
        self, model: keras.Model, batch: Batch, training: bool
    ) -> tuple[tf.Tensor, Stats]:
        import tensorflow as tf

        out = model({k: batch[k] for k in MODEL_INPUTS}, training=training)
        start_logits = tf.cast(out["start_logits"], tf.float32)  # [B, L]
        end_logits = tf.cast(out["end_logits"], tf.float32)
        starts = tf.reshape(tf.cast(batch["start_positions"], tf.int32), [-1])
        ends = tf.reshape(tf.cast(batch["end_positions"], tf.int32), [-1])
        ce = 0.5 * (
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=starts, logits=start_logits)
            + tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ends, logits=end_logits)
        )
        start_hit = tf.equal(tf.argmax(start_logits, -1, output_type=tf.int32), starts)
        end_hit = tf.equal(tf.argmax(end_logits, -1, output_type=tf.int32), ends)
        stats = {
            "loss_sum": tf.reduce_sum(ce),
            "examples": tf.cast(tf.shape(starts)[0], tf.float32),
            "start_correct": tf.reduce_sum(tf.cast(start_hit, tf.float32)),
            "end_correct": tf.reduce_sum(tf.cast(end_hit, tf.float32)),
            "span_correct": tf.reduce_sum(tf.cast(start_hit & end_hit, tf.float32)),
        }
        return tf.reduce_mean(ce), stats

    def example_losses(self, model: keras.Model, batch: Batch) -> tf.Tensor:
        """Per feature: the mean of its start and end cross-entropies."""
        import tensorflow as tf

        out = model({k: batch[k] for k in MODEL_INPUTS}, training=False)
        ce = [tf.nn.sparse_softmax_cross_entropy_with_logits(
                  labels=tf.reshape(tf.cast(batch[key], tf.int32), [-1]),
                  logits=tf.cast(out[logits], tf.float32))
              for key, logits in (("start_positions", "start_logits"),
                                  ("end_positions", "end_logits"))]
        return 0.5 * (ce[0] + ce[1])

    def metrics(self, stats: Mapping[str, float]) -> dict[str, float]:
        n = max(float(stats["examples"]), 1.0)
        return {
            "loss": float(stats["loss_sum"]) / n,
            "start_accuracy": float(stats["start_correct"]) / n,
            "end_accuracy": float(stats["end_correct"]) / n,
            "span_accuracy": float(stats["span_correct"]) / n,
        }

    # ------------------------------------------------------------------ data
    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_task_tokenizer(self.data, self.spec.vocab_size)
        return self._tokenizer

    def features(
        self,
        examples: list[SquadExample],
        progress: bool = False,
        with_spans: bool = True,
        source: str = "<examples>",
    ) -> SquadFeatures:
        d = self.data
        return convert_squad_examples(
            examples,
            self.tokenizer,
            d.max_seq_length,
            d.doc_stride,
            d.max_query_length,
            progress=progress,
            with_spans=with_spans,
            max_windows_per_example=d.max_windows_per_example,
            max_total_windows=d.max_total_windows,
            source=source,
        )

    def eval_set(self, progress: bool = False) -> tuple[dict[str, Any], SquadFeatures]:
        """The parsed eval JSON (for the official metric) and its features, built once."""
        if self._eval is None:
            if self.data.eval_file is None:
                raise ValueError("no evaluation data configured (data.eval_file)")
            raw = read_squad_json(self.data.eval_file)
            examples = parse_squad(raw, self.data.version, source=str(self.data.eval_file))
            self._eval = (
                raw, self.features(examples, progress, source=str(self.data.eval_file))
            )
        return self._eval

    def datasets(self, cfg: TrainerConfig, distributor: Distributor) -> ExampleData:
        """Train / eval pipelines (an :class:`~albertkit.data.ExampleData`).

        The training set is read and converted on the first ``train()`` call, so evaluating a
        run never converts it.
        """
        progress = bool(distributor.is_chief and cfg.logging.progress_bar)

        def train_arrays():
            d = self.data
            train = self.features(
                read_squad(d.train_file, d.version), progress, with_spans=False,
                source=str(d.train_file),
            )
            log.info("SQuAD v%s: %d training windows from %s", d.version, len(train), d.train_file)
            return {k: train.arrays[k] for k in FEATURE_NAMES}

        eval_arrays = None
        if self.data.eval_file is not None:
            eval_arrays = {k: self.eval_set(progress)[1].arrays[k] for k in FEATURE_NAMES}
        return ExampleData(
            train_arrays, eval_arrays, micro_batch_size=self.micro_batch_size,
            seed=cfg.runtime.seed, distributor=distributor, eval_steps=cfg.runtime.eval_steps,
            tokenizer_dir=self.data.tokenizer)

    # ------------------------------------------------------------------ evaluation
    def predict_logits(
        self,
        model: keras.Model,
        features: SquadFeatures,
        batch_size: int,
        step: Any = None,
        progress: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Start/end logits ``[N, L]`` for every window (all of them, on every rank)."""
        from tqdm.auto import tqdm

        predict = forward_fn(model, step)
        starts, ends = [], []
        batches = padded_batches({k: features.arrays[k] for k in MODEL_INPUTS}, batch_size)
        for batch, rows in tqdm(
            batches, desc="SQuAD eval", unit="batch", disable=not progress, leave=False
        ):
            out = predict(batch)
            starts.append(np.asarray(out["start_logits"])[:rows])
            ends.append(np.asarray(out["end_logits"])[:rows])
        L = self.data.max_seq_length
        if not starts:
            return np.zeros((0, L)), np.zeros((0, L))
        return np.concatenate(starts), np.concatenate(ends)

    def evaluate(
        self,
        model: keras.Model,
        step: Any,
        data: ExampleData | None,
        cfg: TrainerConfig,
        run_dir: str | Path | None,
        write: bool | None = None,
    ) -> dict[str, float]:
        """Run the model over every eval window, post-process, score with the official metric.

        Makes no collective calls: every rank may run it (each computes the full result) or
        only the chief. The chief writes ``run_dir/squad_eval/{predictions,nbest_predictions,
        null_odds,eval_results}.json`` (the latest evaluation).

        Returns the official keys (v1.1: ``exact_match``, ``f1``; v2.0: ``exact``, ``f1``,
        ``HasAns_*``, ``NoAns_*``, ``best_exact``, ``best_exact_thresh``, ``best_f1``,
        ``best_f1_thresh``) as floats.
        """
        chief = step is None or step.distributor.is_chief
        write = chief if write is None else write
        progress = bool(chief and cfg.logging.progress_bar)
        raw, features = self.eval_set(progress)
        start, end = self.predict_logits(model, features, self.micro_batch_size, step, progress)
        preds = postprocess_squad(
            features,
            start,
            end,
            self.version_2,
            self.data.n_best_size,
            self.data.max_answer_length,
            self.data.null_score_diff_threshold,
        )
        source = str(self.data.eval_file)
        # ja/zh answers are scored per character (CMRC 2018 / DRCD); every other language by
        # the official definitions. auto: the language recorded with the tokenizer
        language = resolve_language(
            self.data.language, fallback=tokenizer_language(self.data.tokenizer)).code
        if self.version_2:
            # Score the best non-null answers with null_odds as the no-answer probability and
            # the threshold used for predictions.json: `exact`/`f1` are then exactly the
            # scores of predictions.json, and the threshold search sees every answer.
            result = squad_metrics.evaluate(
                raw,
                preds.best_non_null,
                preds.null_odds,
                "2.0",
                na_prob_thresh=self.data.null_score_diff_threshold,
                source=source,
                language=language,
            )
        else:
            result = squad_metrics.evaluate(
                raw, preds.predictions, None, "1.1", source=source, language=language
            )
        result = {k: float(v) for k, v in result.items()}
        if write and run_dir is not None:
            out = Path(run_dir) / "squad_eval"
            preds.write(out)
            atomic_write_text(out / "eval_results.json", json.dumps(result, indent=2) + "\n")
        return result

