"""The tokenize phase's arrays on disk (``<out>/.work/tok-NNNNN.*.npy``), read back by
the write phase of :mod:`albertkit.data.writer`.

Per chunk: ``ids`` (all pieces, int32), ``sent`` (the end of each sentence in ``ids``),
``doc`` (the end of each document in ``sent``) and, when a word segmenter was used,
``starts`` (one word-start flag per piece).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class TokenizedCorpus:
    """Tokenised documents of all chunks, memory-mapped, addressed by global index; with
    ``word_starts``, each piece's word-start flag saved by the tokenize phase."""

    def __init__(self, work: Path, doc_counts: list[int], word_starts: bool = False) -> None:
        self.work = work
        self.starts = np.concatenate([[0], np.cumsum(doc_counts)]).astype(np.int64)
        self.names = ("ids", "sent", "doc", "starts") if word_starts else ("ids", "sent", "doc")
        self._cache: dict[int, tuple[np.ndarray, ...]] = {}

    def _chunk(self, c: int) -> tuple[np.ndarray, ...]:
        if c not in self._cache:
            stem = self.work / f"tok-{c:05d}"
            self._cache[c] = tuple(
                np.load(f"{stem}.{n}.npy", mmap_mode="r", allow_pickle=False)
                for n in self.names
            )
        return self._cache[c]

    def document(self, g: int) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """The sentences of document ``g`` and (when saved) their word-start flags."""
        c = int(np.searchsorted(self.starts, g, side="right")) - 1
        ids, sent, doc, *flags = self._chunk(c)
        d = g - int(self.starts[c])
        s0 = int(doc[d - 1]) if d else 0
        s1 = int(doc[d])
        bounds = [int(sent[s0 - 1]) if s0 else 0, *(int(x) for x in sent[s0:s1])]
        base = bounds[0]
        pairs = list(zip(bounds[:-1], bounds[1:], strict=True))
        block = np.array(ids[bounds[0] : bounds[-1]], np.int32)
        sentences = [block[a - base : b - base] for a, b in pairs]
        if not flags:
            return sentences, None
        fblock = np.array(flags[0][bounds[0] : bounds[-1]], bool)
        return sentences, [fblock[a - base : b - base] for a, b in pairs]
