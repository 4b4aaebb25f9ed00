"""Fine-tuning helpers shared by SQuAD and classification: the Hugging Face tokenizer and
the padded batches of an evaluation.

Fine-tuning sets are small (SQuAD v2.0 train: ~130k windows x 384 int32 x 3 = 0.6 GB at
most), so the features live in NumPy arrays; their training and evaluation pipelines are
:class:`albertkit.data.ExampleData`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np


# --------------------------------------------------------------------------- tokenizer
def load_hf_tokenizer(path: str | Path, do_lower_case: bool | None = None):
    """The Hugging Face ``AlbertTokenizer`` in directory ``path`` (fast, with char offsets).

    Fine-tuning needs character offsets, which the ``tokenizers`` backend of transformers v5
    gives and SentencePiece's own API does not give for normalised text; so this loads the
    directory's ``tokenizer.json`` (written by :func:`albertkit.data.tokenizer.train_tokenizer`
    and by every Hub ALBERT checkpoint). ``do_lower_case=None`` keeps the directory's setting.
    """
    from transformers import AlbertTokenizer

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"tokenizer directory not found: {path}")
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"{path}: no tokenizer.json (fine-tuning needs the fast tokenizer's character "
            "offsets; write it with albertkit.data.tokenizer.export_hf_directory)"
        )
    kwargs = {} if do_lower_case is None else {"do_lower_case": do_lower_case}
    try:
        return AlbertTokenizer.from_pretrained(str(path), **kwargs)
    except Exception as e:  # transformers raises many kinds; name the directory
        raise ValueError(f"{path}: cannot load an ALBERT tokenizer: {e}") from e


def load_task_tokenizer(data, vocab_size: int):
    """``load_hf_tokenizer(data.tokenizer, data.do_lower_case)``, refused if it has more tokens
    than the model's ``vocab_size`` (ids past the embedding table would be garbage)."""
    tokenizer = load_hf_tokenizer(data.tokenizer, data.do_lower_case)
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"data.tokenizer={data.tokenizer} has {len(tokenizer)} tokens but "
            f"model.vocab_size={vocab_size}"
        )
    return tokenizer


# --------------------------------------------------------------------------- batches
def padded_batches(
    arrays: Mapping[str, np.ndarray], batch_size: int
) -> list[tuple[dict[str, np.ndarray], int]]:
    """Ordered full-size batches (the last one zero-padded) and the count of real rows.

    Padding keeps every batch the same shape, so a compiled predict function is traced once.
    """
    n = len(next(iter(arrays.values())))
    out = []
    for i in range(0, n, batch_size):
        rows = min(batch_size, n - i)
        batch = {}
        for k, v in arrays.items():
            part = v[i : i + rows]
            if rows < batch_size:
                pad = np.zeros((batch_size - rows, *v.shape[1:]), v.dtype)
                part = np.concatenate([part, pad])
            batch[k] = part
        out.append((batch, rows))
    return out

