"""Raw text -> sharded pretraining TFRecords, in parallel processes, resumable.

Two phases, each a list of independent tasks run by a ``spawn`` process pool (or in this
process when ``num_workers == 1``):

1. **tokenize**: the inputs are cut into chunks (:func:`albertkit.data.corpus.plan_chunks`);
   each chunk is read, split into sentences, normalised and tokenised, and saved under
   ``<out>/.work/`` as ``.npy`` arrays (no pickle), with a ``.json`` marker written last.
2. **write**: all documents are put in one seeded order; the first ``eval_fraction`` of them
   go to the held-out split, the rest are dealt into ``num_shards`` shards. Each shard task
   builds the SOP pairs of its documents ``dupe_factor`` times, shuffles them, masks them
   (static) or keeps them unmasked (dynamic), and writes ``<split>-NNNNN-of-MMMMM.tfrecord``
   under a temporary name that is renamed when complete, then a marker.

Words for whole-word masking (``word_segmenter``, :mod:`albertkit.data.segmenters`): in
languages that space their words, Google's rule on the pieces, as the reference scripts do;
in Japanese, Chinese and Thai, the words of a segmenter (an optional extra), found in the
tokenize phase and saved beside the ids as one word-start flag per piece. ``none`` masks
single pieces. The manifest records what was used (``word_segmentation``).

Every random choice of a shard comes from ``numpy.random.default_rng([seed, split, shard])``,
and what a shard holds does not depend on how many processes ran: same inputs + tokenizer +
settings + seed give byte-identical shards. A copy of the tokenizer goes to ``tokenizer/``
(the data carries it wherever it is copied). ``manifest.json`` is written last (example counts
and SHA-256 per shard, all settings, tokenizer hash, special ids and the copy's name); a
directory without it is unfinished. Re-running with the same settings skips finished
tokenize chunks and shards; a finished directory returns its manifest at once (adding the
tokenizer copy if it was prepared without one). Different settings in the same directory
are refused unless ``overwrite=True``.

The directory's settings (:class:`PretrainingDataConfig`), plan, resume checks and readers
(:func:`load_manifest`, :func:`shard_files`) are in :mod:`albertkit.data.pretraining_dir`;
this module re-exports them.

Feature format (Google ALBERT): static files hold ``input_ids``, ``input_mask``,
``segment_ids``, ``masked_lm_positions``, ``masked_lm_ids``, ``masked_lm_weights`` (float),
``next_sentence_labels`` (1 = swapped); dynamic files hold ``input_ids`` (unmasked),
``input_mask``, ``segment_ids``, ``token_boundary`` (1 = word start) and
``next_sentence_labels``, and are masked by the reader.

Example (a corpus of 40 small documents, one per line, and a tokenizer trained on it):
    >>> from albertkit.data import TokenizerConfig, train_tokenizer
    >>> docs = [" ".join(f"Document {d} has sentence {s}, a short one." for s in range(6))
    ...         for d in range(40)]
    >>> _ = Path("corpus.txt").write_text("\\n".join(docs) + "\\n")
    >>> tok = train_tokenizer(["corpus.txt"], "tok", TokenizerConfig(vocab_size=40, num_threads=1))
    >>> cfg = PretrainingDataConfig(inputs=["corpus.txt"], seq_length=32,
    ...                             max_predictions_per_seq=5, dupe_factor=1, num_shards=2)
    >>> manifest = prepare_pretraining_data(cfg, tok, "data", num_workers=1, progress=False)
    >>> shard_files("data")
    ['data/train-00000-of-00002.tfrecord', 'data/train-00001-of-00002.tfrecord']
    >>> manifest["documents"], [shard["examples"] for shard in manifest["shards"]]
    ({'train': 40}, [120, 120])
    >>> manifest["tokenizer"]["copy"], Tokenizer.load("data/tokenizer").sha256 == tok.sha256
    ('tokenizer', True)
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from albertkit.data.corpus import (
    Chunk,
    ReadStats,
    expand_inputs,
    plan_chunks,
    read_chunk,
    sample_lines,
)
from albertkit.data.instances import create_pairs
from albertkit.data.language import resolve_language
from albertkit.data.manifest import MANIFEST
from albertkit.data.masking import VocabInfo, mask_sequence
from albertkit.data.pretraining_dir import (  # noqa: F401 - re-exported names of this module
    FORMAT,
    SPLITS,
    TOKENIZER_COPY,
    WORK,
    PretrainingDataConfig,
    inputs_fingerprint,
    load_manifest,
    plan_sha256,
    prepare_directory,
    shard_files,
    shard_name,
)
from albertkit.data.segmenters import (
    WordSegmentation,
    encode_with_word_starts,
    resolve_word_segmentation,
    segmenter_config_class,
)
from albertkit.data.tfrecord import RecordWriter, encode_examples
from albertkit.data.tokenized import TokenizedCorpus
from albertkit.data.tokenizer import (
    Tokenizer,
    check_copy_target,
    copy_tokenizer,
    record_dataset_user,
)
from albertkit.errors import CorpusError, DataPreparationError
from albertkit.fileio import atomic_write_text

log = logging.getLogger(__name__)

_BATCH = 256
_EXAMPLES_PER_SHARD = 20_000  # target when num_shards is chosen automatically


# ------------------------------------------------------------------ helpers
def _run(
    fn: Callable,
    tasks: list,
    num_workers: int,
    desc: str,
    unit: str,
    progress: bool,
    on_result: Callable[[Any], None],
) -> None:
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(tasks),
        desc=desc,
        unit=unit,
        disable=not progress or not tasks,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    try:
        if num_workers <= 1 or len(tasks) <= 1:
            for t in tasks:
                on_result(fn(t))
                bar.update(1)
        else:
            ctx = multiprocessing.get_context("spawn")
            with ctx.Pool(min(num_workers, len(tasks))) as pool:
                for r in pool.imap_unordered(fn, tasks):
                    on_result(r)
                    bar.update(1)
    finally:
        bar.close()


# ------------------------------------------------------------------ phase 1: tokenize
def _tokenize_task(task: dict[str, Any]) -> dict[str, Any]:
    """Worker: read, split and tokenise one chunk; save arrays, then the marker."""
    work = Path(task["work"])
    stem = work / f"tok-{task['index']:05d}"
    marker = stem.with_suffix(".json")
    if marker.is_file():
        return json.loads(marker.read_text())
    tok = Tokenizer(
        task["model_file"], lowercase=task["lowercase"], keep_accents=task["keep_accents"]
    )
    segmenter = None
    if task["segmenter"] is not None:
        config = task["segmenter"]
        segmenter = segmenter_config_class(config["kind"]).model_validate(config).build()
    stats = ReadStats()
    ids: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    sent_ends: list[int] = []
    doc_ends: list[int] = []
    n_tokens = 0
    dropped = 0
    chunk = Chunk(**task["chunk"])
    for doc in read_chunk(
        chunk, task["input_format"], task["encoding_errors"], stats, task["max_line_bytes"],
        task["language"],
    ):
        if segmenter is None:
            encoded = [(np.asarray(x, np.int32), None) for x in tok.encode_batch(doc.sentences)]
        else:
            encoded = encode_with_word_starts(tok, segmenter, doc.sentences)
        encoded = [e for e in encoded if len(e[0])]
        if sum(len(p) for p, _ in encoded) < task["min_document_tokens"]:
            dropped += 1
            continue
        for p, flags in encoded:
            ids.append(p)
            if flags is not None:
                starts.append(flags)
            n_tokens += len(p)
            sent_ends.append(n_tokens)
        doc_ends.append(len(sent_ends))
    flat = np.concatenate(ids) if ids else np.zeros(0, np.int32)
    arrays = [
        ("ids", flat),
        ("sent", np.asarray(sent_ends, np.int64)),
        ("doc", np.asarray(doc_ends, np.int64)),
    ]
    if segmenter is not None:  # one word-start flag per piece
        arrays.append(("starts", np.concatenate(starts) if starts else np.zeros(0, bool)))
    for name, arr in arrays:
        tmp = work / f".{stem.name}.{name}.{os.getpid()}.tmp.npy"
        np.save(tmp, arr, allow_pickle=False)
        os.replace(tmp, work / f"{stem.name}.{name}.npy")
    result = {
        "index": task["index"],
        "documents": len(doc_ends),
        "dropped_documents": dropped,
        "sentences": len(sent_ends),
        "tokens": int(n_tokens),
        "read": stats.to_dict(),
    }
    atomic_write_text(marker, json.dumps(result))
    return result


# ------------------------------------------------------------------ phase 2: write
def _write_task(task: dict[str, Any]) -> dict[str, Any]:
    """Worker: build, mask and write one shard (temporary name, rename, then marker)."""
    out_dir = Path(task["out_dir"])
    work = out_dir / WORK
    name = task["name"]
    marker = work / f"{name}.json"
    if marker.is_file() and (out_dir / name).is_file():
        info = json.loads(marker.read_text())
        if (out_dir / name).stat().st_size == info["bytes"]:
            return info
    cfg = PretrainingDataConfig.model_validate(task["config"])
    tok = Tokenizer(
        task["model_file"], lowercase=task["lowercase"], keep_accents=task["keep_accents"]
    )
    segmentation = task["segmentation"]
    table = None if segmentation == "segmenter" else (
        WordSegmentation(segmentation).word_start_table(tok))
    info = VocabInfo(tok.vocab_size, dict(tok.special_ids))
    corpus = TokenizedCorpus(work, task["doc_counts"], word_starts=table is None)
    rng = np.random.default_rng([cfg.seed, SPLITS[task["split"]], task["shard"]])
    docs = [corpus.document(int(g)) for g in np.load(work / f"{name}.docs.npy", allow_pickle=False)]
    pairs = []
    for _ in range(task["dupe_factor"]):
        for doc, doc_starts in docs:
            pairs.extend(
                create_pairs(
                    doc,
                    seq_length=cfg.seq_length,
                    short_seq_prob=cfg.short_seq_prob,
                    word_start_table=table,
                    word_starts=doc_starts,
                    cls_id=tok.cls_id,
                    sep_id=tok.sep_id,
                    rng=rng,
                )
            )
    order = rng.permutation(len(pairs))
    L, P = cfg.seq_length, cfg.max_predictions_per_seq
    real_tokens = masked_tokens = 0
    with RecordWriter(out_dir / name) as writer:
        for b0 in range(0, len(order), _BATCH):
            batch = [pairs[i] for i in order[b0 : b0 + _BATCH]]
            n = len(batch)
            input_ids = np.zeros((n, L), np.int64)
            input_mask = np.zeros((n, L), np.int64)
            segment_ids = np.zeros((n, L), np.int64)
            labels = np.array([[p.sop_label] for p in batch], np.int64)
            feats: dict[str, np.ndarray]
            if cfg.masking == "static":
                positions = np.zeros((n, P), np.int64)
                lm_ids = np.zeros((n, P), np.int64)
                weights = np.zeros((n, P), np.float32)
                for r, p in enumerate(batch):
                    m = mask_sequence(
                        p.input_ids,
                        word_starts=p.word_starts,
                        info=info,
                        rules=cfg.masking_rules,
                        max_predictions=P,
                        rng=rng,
                    )
                    t = len(p.input_ids)
                    input_ids[r, :t] = m.input_ids
                    input_mask[r, :t] = 1
                    segment_ids[r, :t] = p.segment_ids
                    k = len(m.positions)
                    positions[r, :k] = m.positions
                    lm_ids[r, :k] = m.labels
                    weights[r, :k] = 1.0
                feats = {
                    "input_ids": input_ids,
                    "input_mask": input_mask,
                    "segment_ids": segment_ids,
                    "masked_lm_positions": positions,
                    "masked_lm_ids": lm_ids,
                    "masked_lm_weights": weights,
                    "next_sentence_labels": labels,
                }
                masked_tokens += int(weights.sum())
            else:
                boundary = np.zeros((n, L), np.int64)
                for r, p in enumerate(batch):
                    t = len(p.input_ids)
                    input_ids[r, :t] = p.input_ids
                    input_mask[r, :t] = 1
                    segment_ids[r, :t] = p.segment_ids
                    boundary[r, :t] = p.word_starts
                feats = {
                    "input_ids": input_ids,
                    "input_mask": input_mask,
                    "segment_ids": segment_ids,
                    "token_boundary": boundary,
                    "next_sentence_labels": labels,
                }
                # masks are drawn when read; each sequence's budget is what the masker aims at
                n_real = input_mask.sum(1)
                budget = np.minimum(
                    P, np.maximum(1, np.round(n_real * cfg.masking_rules.masked_lm_prob)))
                masked_tokens += int(budget.sum())
            real_tokens += int(input_mask.sum())
            for rec in encode_examples(feats):
                writer.write(rec)
        count, nbytes = writer.count, writer.bytes
    result = {
        "file": name,
        "split": task["split"],
        "shard": task["shard"],
        "examples": count,
        "documents": len(docs),
        "bytes": nbytes,
        "sha256": writer.sha256,
        "real_tokens": real_tokens,
        "masked_tokens": masked_tokens,
    }
    atomic_write_text(marker, json.dumps(result))
    return result


# ------------------------------------------------------------------ driver
def prepare_pretraining_data(
    config: PretrainingDataConfig,
    tokenizer: str | os.PathLike | Tokenizer,
    out_dir: str | os.PathLike,
    *,
    num_workers: int | None = None,
    progress: bool = True,
    overwrite: bool = False,
    keep_work: bool = False,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Prepare pretraining TFRecords from raw text; returns the manifest (also on disk).

    Args:
        config: what to build (inputs, lengths, masking, shards, seed, word segmenter).
        tokenizer: a tokenizer directory, ``spiece.model`` or loaded :class:`Tokenizer`.
        out_dir: output directory (shards + ``manifest.json``).
        num_workers: processes (default: all CPUs); never changes the output.
        progress: show tqdm progress bars.
        overwrite: replace data prepared with other settings in ``out_dir``.
        keep_work: keep the tokenised intermediate arrays in ``out_dir/.work``.
        say: where the language line goes (default: the module's logger).

    Raises:
        CorpusError: unreadable input (names file and line).
        DataPreparationError: nothing usable left, or ``out_dir`` conflicts.
        TokenizerError: ``out_dir/tokenizer`` exists and is not a tokenizer copy that may be
            replaced (other files in it, or other prepared data uses it).
        LanguageError: an unknown language code, or a corpus not in the language given.
    """
    t0 = time.time()
    out_dir = Path(out_dir)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.load(tokenizer)
    num_workers = num_workers or os.cpu_count() or 1
    files = expand_inputs(config.inputs)
    guess = resolve_language(config.language, sample_lines(
        files, max_line_bytes=config.max_line_bytes))  # before any file is written
    (say or log.info)(f"language: {guess.describe()}" + ("" if guess.detected else " (given)"))
    if guess.code != tok.language:
        log.warning("the tokenizer was trained for %r, this corpus is %r: its pieces may fit "
                    "this text badly", tok.language, guess.code)
    segmentation = resolve_word_segmentation(config.word_segmenter, guess.code)
    if segmentation.uses_segmenter:
        segmentation.build()  # a missing extra stops here, before any work
    # the setting is part of the plan through what it resolved to; Google's rule (the
    # default for spaced languages) leaves the plan as data prepared before it existed
    settings = config.model_dump(mode="json",
                                 exclude={"max_line_bytes", "language", "word_segmenter"})
    plan = {
        "format": FORMAT,
        "settings": settings,
        "inputs": inputs_fingerprint(files),
        "tokenizer_sha256": tok.sha256,
    }
    if guess.code != "en":  # data prepared before languages were asked is English
        plan["language"] = guess.code
    if segmentation.name != "whitespace":
        plan["word_segmentation"] = segmentation.describe()
    plan["plan_sha256"] = plan_sha256(plan)
    check_copy_target(tok, out_dir / TOKENIZER_COPY)  # before hours of work, not after
    done = prepare_directory(out_dir, plan, overwrite)
    if done is not None:
        if not done["tokenizer"].get("copy") or not (out_dir / TOKENIZER_COPY).is_dir():
            # finished before the data kept its tokenizer (or the copy was deleted): add it
            try:
                copy_tokenizer(tok, out_dir / TOKENIZER_COPY)
                done["tokenizer"]["copy"] = TOKENIZER_COPY
                atomic_write_text(out_dir / MANIFEST, json.dumps(done, indent=2))
            except OSError as e:
                log.warning("%s: cannot add a copy of the tokenizer to this data (%s)",
                            out_dir, e)
        record_dataset_user(tok, out_dir)
        return done
    work = out_dir / WORK
    common = {
        "model_file": str(tok.model_file.resolve()),
        "lowercase": tok.lowercase,
        "keep_accents": tok.keep_accents,
    }

    # phase 1: tokenize
    chunks = plan_chunks(files, config.input_format, config.chunk_bytes)
    tasks = [
        {
            **common,
            "index": i,
            "chunk": {"path": c.path, "start": c.start, "end": c.end},
            "work": str(work),
            "input_format": config.input_format,
            "encoding_errors": config.encoding_errors,
            "max_line_bytes": config.max_line_bytes,
            "min_document_tokens": config.min_document_tokens,
            "language": guess.code,
            "segmenter": (segmentation.config.model_dump(mode="json")
                          if segmentation.config is not None else None),
        }
        for i, c in enumerate(chunks)
    ]
    results: dict[int, dict] = {}
    _run(
        _tokenize_task,
        tasks,
        num_workers,
        "tokenize",
        "chunk",
        progress,
        lambda r: results.__setitem__(r["index"], r),
    )
    stats = ReadStats()
    for i in range(len(chunks)):
        stats.merge(ReadStats.from_dict(results[i]["read"]))
    doc_counts = [results[i]["documents"] for i in range(len(chunks))]
    n_docs = sum(doc_counts)
    dropped = sum(results[i]["dropped_documents"] for i in range(len(chunks)))
    if n_docs == 0:
        raise DataPreparationError(
            f"no documents left after filtering: {stats.lines} lines read from {len(files)} "
            f"file(s), {stats.documents} documents found, {dropped} shorter than "
            f"min_document_tokens={config.min_document_tokens}, {stats.skipped_lines} lines "
            f"skipped (encoding_errors={config.encoding_errors!r}); check input_format="
            f"{config.input_format!r}"
        )

    # phase 2: deal documents into shards
    order = np.random.default_rng([config.seed, 7]).permutation(n_docs)
    n_eval = int(round(n_docs * config.eval_fraction))
    if config.eval_fraction > 0 and n_eval == 0 and n_docs >= 2:
        n_eval = 1
    if config.split == "eval":
        n_eval = 0  # the whole output is a held-out set
    if n_docs - n_eval < 1:
        raise DataPreparationError(
            f"eval_fraction={config.eval_fraction} leaves no training documents ({n_docs} total)"
        )
    total_tokens = sum(results[i]["tokens"] for i in range(len(chunks)))
    n_train_shards = config.num_shards or max(
        1,
        math.ceil(
            total_tokens * config.dupe_factor / (config.seq_length - 3) / _EXAMPLES_PER_SHARD
        ),
    )
    n_train_shards = min(n_train_shards, n_docs - n_eval)
    splits = {config.split: (order[n_eval:], n_train_shards, config.dupe_factor)}
    if n_eval and config.split == "train":
        splits["eval"] = (order[:n_eval], min(config.eval_shards, n_eval), config.eval_dupe_factor)
    write_tasks = []
    for split, (doc_ids, n_shards, dupe) in splits.items():
        for s, part in enumerate(np.array_split(doc_ids, n_shards)):
            name = shard_name(split, s, n_shards)
            np.save(work / f"{name}.docs.npy", part.astype(np.int64), allow_pickle=False)
            write_tasks.append(
                {
                    **common,
                    "out_dir": str(out_dir),
                    "name": name,
                    "split": split,
                    "shard": s,
                    "dupe_factor": dupe,
                    "doc_counts": doc_counts,
                    "config": settings,
                    "segmentation": ("segmenter" if segmentation.uses_segmenter
                                     else segmentation.name),
                }
            )
    shards: list[dict] = []
    bar_examples = [0]

    def collect(r: dict) -> None:
        shards.append(r)
        bar_examples[0] += r["examples"]

    _run(_write_task, write_tasks, num_workers, "write shards", "shard", progress, collect)
    shards.sort(key=lambda r: (SPLITS[r["split"]], r["shard"]))
    examples = {
        split: sum(r["examples"] for r in shards if r["split"] == split) for split in splits
    }
    # the data carries its tokenizer: training, exports and fine-tuning find it here even
    # where the tokenizer's own directory is not (another machine, a SageMaker channel)
    copy_tokenizer(tok, out_dir / TOKENIZER_COPY)
    manifest = {
        **plan,
        "language": guess.to_record(),
        "masking": config.masking,
        "seq_length": config.seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "masking_rules": config.masking_rules.model_dump(mode="json"),
        "word_segmentation": segmentation.describe(),
        "tokenizer": {
            "path": str(tok.model_file.resolve().parent),
            "sha256": tok.sha256,
            "vocab_size": tok.vocab_size,
            "special_ids": dict(tok.special_ids),
            "lowercase": tok.lowercase,
            "keep_accents": tok.keep_accents,
            "copy": TOKENIZER_COPY,
        },
        "read": {**stats.to_dict(), "dropped_documents": dropped, "tokens": int(total_tokens)},
        "documents": {split: int(len(v[0])) for split, v in splits.items()},
        "examples": examples,
        "masked_share": _masked_share(shards, splits, config.masking),
        "shards": shards,
        "seconds": round(time.time() - t0, 2),
    }
    atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=2))
    # the tokenizer's directory learns that this data depends on it: re-training a
    # tokenizer into it is then refused (the ids here would change meaning)
    record_dataset_user(tok, out_dir)
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return manifest


def _masked_share(shards: list[dict], splits, masking: str) -> dict[str, Any]:
    """Masked tokens / real tokens per split: measured in the records (static masking), or
    the masking budget per sequence (dynamic masking: drawn at read time, an upper bound)."""
    out: dict[str, Any] = {"basis": "records" if masking == "static" else "budget"}
    for split in splits:
        part = [r for r in shards if r["split"] == split]
        if any("real_tokens" not in r for r in part):  # shards of an older albertkit
            continue
        real = sum(r["real_tokens"] for r in part)
        out[split] = round(sum(r["masked_tokens"] for r in part) / max(real, 1), 4)
    return out


__all__: Iterable[str] = [
    "CorpusError",
    "DataPreparationError",
    "PretrainingDataConfig",
    "load_manifest",
    "prepare_pretraining_data",
    "shard_files",
]
