"""The built-in demo: its corpus (English prose that ships with Python, no download) and its
run config (:func:`demo_config`, what ``albertkit demo`` trains).

Sources (read from this interpreter's standard library, so the corpus depends only on the
Python version):

* ``pydoc_data.topics``: the language reference topics behind ``help()`` (~0.5 MB); each
  topic is a document, its prose paragraphs are kept (grammar rules and indented code are
  dropped);
* docstrings of the standard library's modules, classes and functions, parsed with ``ast``
  (never imported); each docstring of at least two prose sentences is a document; doctest
  lines, indented blocks and symbol-heavy paragraphs are dropped; duplicates are removed.

Together about 2 MB of sentences, several times the 0.3 MB on which a tiny model was measured to
overfit. Documents are split once, by a seeded permutation, into training and held-out sets
(disjoint documents); the tokenizer is trained on the training documents only.

Example (building the data reads ~2 MB of text, trains a tokenizer on it and writes the
example shards: too slow to run as a test, so the first two lines are skipped):
    >>> files = prepare_demo_data(DemoData(), Path("runs/demo/data"), seed=0)  # doctest: +SKIP
    >>> files.vocab_size  # doctest: +SKIP
    3000
    >>> cfg = demo_config(max_steps=200)  # what ``albertkit demo --steps 200`` trains
    >>> cfg.model.size, cfg.data.kind, cfg.runtime.max_steps, cfg.runtime.eval_every_steps
    ('tiny', 'demo', 200, 50)
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from albertkit.config import DemoData, TrainerConfig
from albertkit.data.sentences import split_sentences
from albertkit.data.tokenizer import Tokenizer, TokenizerConfig, train_tokenizer
from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data, shard_files
from albertkit.fileio import atomic_write_text

DEMO_FORMAT = "albertkit-demo-v1"
DEMO_STEPS = 1500
_SKIP_DIRS = {
    "test",
    "tests",
    "idle_test",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "lib2to3",
    "turtledemo",
    "ensurepip",
}


@dataclass
class DemoFiles:
    """What :func:`prepare_demo_data` produced."""

    train_files: list[str]
    eval_files: list[str]
    tokenizer_dir: Path
    vocab_size: int


def _prose_paragraphs(text: str) -> list[str]:
    """Paragraphs of running prose: no doctests, code, tables or grammar rules."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        lines = [ln for ln in para.splitlines() if ln.strip()]
        if not lines:
            continue
        if any(ln.startswith((" ", "\t")) for ln in lines[1:]) and lines[0].startswith((" ", "\t")):
            continue  # indented block: code or a literal
        joined = " ".join(ln.strip() for ln in lines)
        if any(tok in joined for tok in (">>>", "::=", "...:", "|", "====", "----", "*args")):
            continue
        letters = sum(c.isalpha() or c == " " for c in joined)
        if len(joined) < 40 or letters < 0.85 * len(joined):
            continue
        if not re.search(r"[a-z][.!?]", joined):
            continue
        out.append(joined)
    return out


def _document(text: str) -> list[str]:
    sentences = [s for p in _prose_paragraphs(text) for s in split_sentences(p)]
    return [s for s in sentences if len(s) >= 12 and len(s.split()) >= 3]


def stdlib_documents() -> list[list[str]]:
    """Documents (lists of sentences) from ``pydoc_data.topics`` and stdlib docstrings."""
    from pydoc_data import topics

    docs: list[list[str]] = []
    seen: set[str] = set()

    def add(sentences: list[str]) -> None:
        if len(sentences) < 2:
            return
        key = hashlib.sha1("\n".join(sentences).encode()).hexdigest()
        if key not in seen:
            seen.add(key)
            docs.append(sentences)

    for name in sorted(topics.topics):
        add(_document(topics.topics[name]))
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        if _SKIP_DIRS.intersection(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 150:
                    add(_document(doc))
    return docs


def _write_corpus(path: Path, docs: list[list[str]]) -> None:
    atomic_write_text(path, "\n\n".join("\n".join(d) for d in docs) + "\n")


def prepare_demo_data(
    cfg: DemoData,
    out_dir: Path,
    seed: int,
    *,
    progress: bool = True,
    num_workers: int | None = None,
) -> DemoFiles:
    """Build (or reuse) the demo corpus, tokenizer and train/held-out example files.

    Layout of ``out_dir``: ``corpus/{train,eval}.txt`` (one sentence per line, blank line
    between documents), ``tokenizer/`` (HF directory), ``train/`` and ``eval/`` (shards and
    manifests), ``demo.json`` (what was built, for reuse). Reuse is keyed on the settings,
    the seed, the Python version and the corpus text: a second call returns at once.
    """
    out_dir = Path(out_dir)
    stamp_file = out_dir / "demo.json"
    key = {
        "format": DEMO_FORMAT,
        "python": sys.version.split()[0],
        "seed": seed,
        "settings": cfg.model_dump(mode="json", exclude={"shuffle_buffer"}),
    }
    if stamp_file.is_file():
        stamp = json.loads(stamp_file.read_text(encoding="utf-8"))
        if stamp.get("key") == key and all(
            Path(f).is_file() for f in stamp["train_files"] + stamp["eval_files"]
        ):
            return DemoFiles(
                stamp["train_files"],
                stamp["eval_files"],
                Path(stamp["tokenizer_dir"]),
                stamp["vocab_size"],
            )

    docs = stdlib_documents()
    order = np.random.default_rng([seed, 31]).permutation(len(docs))
    n_eval = max(1, int(round(len(docs) * cfg.eval_fraction)))
    eval_docs = [docs[i] for i in sorted(order[:n_eval])]
    train_docs = [docs[i] for i in sorted(order[n_eval:])]
    corpus = out_dir / "corpus"
    _write_corpus(corpus / "train.txt", train_docs)
    _write_corpus(corpus / "eval.txt", eval_docs)

    tok_dir = out_dir / "tokenizer"
    tok_cfg = TokenizerConfig(
        vocab_size=cfg.vocab_size, input_format="sentence_per_line", seed=seed
    )
    tok_meta = tok_dir / "albertkit_tokenizer.json"
    corpus_sha = hashlib.sha256((corpus / "train.txt").read_bytes()).hexdigest()
    reuse = False
    if tok_meta.is_file():
        meta = json.loads(tok_meta.read_text(encoding="utf-8"))
        reuse = (
            meta.get("config") == tok_cfg.model_dump(mode="json")
            and meta.get("corpus_sha256") == corpus_sha
        )
    if reuse:
        tok = Tokenizer.load(tok_dir)
    else:
        # the demo prepares its data again right below, with this tokenizer
        tok = train_tokenizer([corpus / "train.txt"], tok_dir, tok_cfg, overwrite=True)
        meta = json.loads(tok_meta.read_text(encoding="utf-8"))
        meta["corpus_sha256"] = corpus_sha
        atomic_write_text(tok_meta, json.dumps(meta, indent=2))

    workers = num_workers or min(2, os.cpu_count() or 1)
    common = {
        "input_format": "sentence_per_line",
        "seq_length": cfg.seq_length,
        "max_predictions_per_seq": cfg.max_predictions_per_seq,
        "masking": cfg.masking,
        "seed": seed,
        "min_document_tokens": 8,
    }
    train_cfg = PretrainingDataConfig(
        inputs=[str(corpus / "train.txt")], dupe_factor=cfg.dupe_factor, num_shards=4, **common
    )
    # Held-out pairs: several A/B cuts per document so SOP accuracy is measured on enough pairs.
    eval_cfg = PretrainingDataConfig(
        inputs=[str(corpus / "eval.txt")],
        dupe_factor=cfg.dupe_factor,
        num_shards=1,
        split="eval",
        **{**common, "seed": seed + 1},
    )
    for name, pcfg in (("train", train_cfg), ("eval", eval_cfg)):
        prepare_pretraining_data(
            pcfg, tok, out_dir / name, num_workers=workers, progress=progress, overwrite=True
        )
    files = DemoFiles(
        shard_files(out_dir / "train"),
        shard_files(out_dir / "eval", "eval"),
        tok_dir,
        tok.vocab_size,
    )
    atomic_write_text(
        stamp_file,
        json.dumps(
            {
                "key": key,
                "documents": {"train": len(train_docs), "eval": len(eval_docs)},
                "train_files": files.train_files,
                "eval_files": files.eval_files,
                "tokenizer_dir": str(tok_dir),
                "vocab_size": files.vocab_size,
            },
            indent=2,
        ),
    )
    return files


# --------------------------------------------------------------------------- the demo run
def demo_config(run_dir: str | Path = "runs/demo", max_steps: int | None = None,
                overrides: list[str] | None = None) -> TrainerConfig:
    """The demo's full config (``albertkit demo`` runs exactly this).

    Chosen to avoid ALBERT's unigram plateau on CPU (transformers issues #4727/#5984): a
    small model, AdamW with warmup and a modest peak rate, dynamic masking so the small
    corpus is not memorised.
    """
    steps = max_steps or DEMO_STEPS
    raw = {
        "run_dir": str(run_dir),
        "model": {"size": "tiny", "vocab_size": 3000},
        "data": {"kind": "demo", "vocab_size": 3000, "seq_length": 128,
                 "max_predictions_per_seq": 20, "masking": "dynamic"},
        "optimizer": {"kind": "adamw", "learning_rate": 5e-4, "weight_decay": 0.01,
                      "schedule": {"warmup_steps": min(100, steps // 10)}},
        "runtime": {"micro_batch_size": 32, "global_batch_size": 32, "max_steps": steps,
                    "eval_every_steps": max(steps // 4, 1), "eval_steps": 40, "xla": True},
        "checkpoint": {"every_steps": max(steps // 4, 1), "keep_last": 2},
        "logging": {"log_every_steps": 25},
    }
    return TrainerConfig.from_dict(raw, overrides or [], source="albertkit demo")
