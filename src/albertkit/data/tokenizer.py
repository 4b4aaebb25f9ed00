"""SentencePiece tokenizer with the ALBERT recipe, saved as a Hugging Face tokenizer directory.

Recipe (Google ALBERT README, ``spm_train`` flags): unigram model, ``pad_id=0`` ("<pad>"),
``unk_id=1`` ("<unk>"), no BOS/EOS, control symbols ``[CLS] [SEP] [MASK]`` (ids 2, 3, 4),
user-defined symbols ``( ) " - . – £ €``, ``character_coverage=0.99995``. Text is
normalised before SentencePiece exactly as Hugging Face's ``AlbertTokenizer`` (v5,
tokenizers backend) does: replace ``` `` ``` and ``''`` by ``"``, NFKD and strip
non-spacing marks (unless ``keep_accents``), lower-case (if ``lowercase``), collapse
whitespace; SentencePiece then applies its own ``nmt_nfkc`` rules, which the HF tokenizer
carries as its "precompiled charsmap". ``tests/test_data_tokenizer.py`` checks that both
give the same ids.

A tokenizer on disk is a directory with ``spiece.model`` (what albertkit and Google's code
read) plus ``tokenizer.json`` and ``tokenizer_config.json`` (what
``transformers.AlbertTokenizer.from_pretrained`` reads). ``tokenizer.json`` matters here:
transformers converts a bare ``spiece.model`` through protobuf classes that need
``protobuf>=7`` while TensorFlow 2.21 pins ``protobuf<7``; with ``tokenizer.json`` present
no conversion happens.

One deliberate difference: literal ``[CLS]``/``[SEP]``/``[MASK]``/``<pad>``/``<unk>``
strings inside raw text are ordinary text for albertkit (as for Google's tokenizer), while
transformers matches them as special tokens. Corpus text must never inject control tokens.

Example:
    >>> tok = train_tokenizer(["corpus.txt"], "tok/", TokenizerConfig(vocab_size=3000))  # doctest: +SKIP
    >>> tok.encode("Hello world")  # doctest: +SKIP
    [1234, 567]
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm
from pydantic import BaseModel, ConfigDict, Field

from albertkit.data.corpus import EncodingErrors, InputFormat, read_documents
from albertkit.data.protobuf import fields, len_field
from albertkit.errors import TokenizerError
from albertkit.fileio import atomic_write_bytes, atomic_write_text

PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = {"pad": PAD, "unk": UNK, "cls": CLS, "sep": SEP, "mask": MASK}
ALBERT_USER_SYMBOLS = ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]
MODEL_FILE = "spiece.model"

# Google's _is_start_piece_sp: punctuation pieces and pieces with characters other than
# English letters/punctuation start a new "word" for whole-word masking.
_PUNCT = set('!"#$%&"()*+,-./:;?@[\\]^_`{|}~') | {"\u20ac", "\u00a3"}
_LETTERS = set("abcdefghijklmnopqrstuvwxyz")


class TokenizerConfig(BaseModel):
    """Settings of :func:`train_tokenizer` (defaults: the ALBERT recipe)."""

    model_config = ConfigDict(extra="forbid")

    vocab_size: int = Field(30000, gt=16)
    lowercase: bool = True
    keep_accents: bool = False
    character_coverage: float = Field(0.99995, gt=0.0, le=1.0)
    user_defined_symbols: list[str] = list(ALBERT_USER_SYMBOLS)
    input_sentence_size: int = Field(10_000_000, gt=0)
    max_sentence_length: int = Field(4192, gt=0)
    num_threads: int = Field(4, gt=0)  # part of the result: same threads -> same model
    seed: int = 0
    input_format: InputFormat = "document_per_line"
    encoding_errors: EncodingErrors = "fail"


def normalize_text(text: str, *, lowercase: bool = True, keep_accents: bool = False) -> str:
    """The normalisation of HF ``AlbertTokenizer`` / Google's ``preprocess_text``."""
    text = " ".join(text.split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents and not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    if lowercase:
        text = text.lower()
    return text


def _is_word_start_piece(piece: str) -> bool:
    if piece.startswith("\u2581") or piece.startswith("<") or piece in _PUNCT:
        return True
    return not all(c.lower() in _LETTERS or c in _PUNCT for c in piece)


# ------------------------------------------------------------------ SentencePiece ModelProto
def _without_model_prefix(model_proto: bytes) -> bytes:
    """Drop ``trainer_spec.model_prefix`` (a temporary path) so the model bytes depend only
    on the corpus and settings."""
    out = bytearray()
    for field in fields(model_proto):
        if field.number == 2:  # trainer_spec
            spec = field.value
            inner = b"".join(spec[f.start : f.end] for f in fields(spec) if f.number != 2)
            out += len_field(2, inner)
        else:
            out += model_proto[field.start : field.end]
    return bytes(out)


def _precompiled_charsmap(model_proto: bytes) -> bytes:
    """``ModelProto.normalizer_spec.precompiled_charsmap`` (field 3 -> field 2).

    Read by hand: the generated ``sentencepiece_model_pb2`` modules shipped with
    sentencepiece and transformers need protobuf>=7, which TensorFlow 2.21 excludes.
    """
    for field in fields(model_proto):
        if field.number == 3:
            for inner in fields(field.value):  # type: ignore[arg-type]
                if inner.number == 2:
                    return bytes(inner.value)  # type: ignore[arg-type]
    return b""


# ------------------------------------------------------------------ the tokenizer
class Tokenizer:
    """An ALBERT SentencePiece tokenizer (albertkit side of the HF tokenizer directory).

    Args:
        model_file: path to ``spiece.model``.
        lowercase: lower-case text before SentencePiece (HF ``do_lower_case``).
        keep_accents: keep accents (HF ``keep_accents``).

    Example:
        >>> tok = Tokenizer.load("tok/")  # doctest: +SKIP
        >>> ids, types = tok.encode_pair("A first part.", "A second part.")  # doctest: +SKIP
    """

    def __init__(
        self, model_file: str | os.PathLike, *, lowercase: bool = True, keep_accents: bool = False
    ) -> None:
        self.model_file = Path(model_file)
        try:
            self._proto = self.model_file.read_bytes()
        except OSError as e:
            raise TokenizerError(
                f"{self.model_file}: cannot read SentencePiece model ({e})"
            ) from None
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(self._proto)
        except Exception as e:  # noqa: BLE001
            raise TokenizerError(f"{self.model_file}: not a SentencePiece model ({e})") from None
        self.lowercase = lowercase
        self.keep_accents = keep_accents
        self.special_ids: dict[str, int] = {}
        for name, piece in SPECIAL_TOKENS.items():
            i = self.sp.piece_to_id(piece)
            if self.sp.id_to_piece(i) != piece:
                raise TokenizerError(
                    f"{self.model_file}: has no {piece!r} piece; ALBERT tokenizers need "
                    f"{', '.join(SPECIAL_TOKENS.values())} (train with train_tokenizer)"
                )
            self.special_ids[name] = i

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        lowercase: bool | None = None,
        keep_accents: bool | None = None,
    ) -> Tokenizer:
        """Load a tokenizer directory (HF layout) or a bare ``spiece.model`` file.

        Flags come from ``tokenizer_config.json`` when present; explicit arguments win.
        """
        path = Path(path)
        cfg: dict = {}
        if path.is_dir():
            model = path / MODEL_FILE
            if not model.is_file():
                raise TokenizerError(f"{path}: no {MODEL_FILE} in this tokenizer directory")
            cfg_file = path / "tokenizer_config.json"
            if cfg_file.is_file():
                try:
                    cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError) as e:
                    raise TokenizerError(f"{cfg_file}: malformed JSON ({e})") from None
        elif path.is_file():
            model = path
        else:
            raise TokenizerError(f"tokenizer {str(path)!r}: no such file or directory")
        return cls(
            model,
            lowercase=cfg.get("do_lower_case", True) if lowercase is None else lowercase,
            keep_accents=cfg.get("keep_accents", False) if keep_accents is None else keep_accents,
        )

    # ---------------------------------------------------------------- properties
    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def pad_id(self) -> int:
        return self.special_ids["pad"]

    @property
    def cls_id(self) -> int:
        return self.special_ids["cls"]

    @property
    def sep_id(self) -> int:
        return self.special_ids["sep"]

    @property
    def mask_id(self) -> int:
        return self.special_ids["mask"]

    @property
    def sha256(self) -> str:
        """Identity of the tokenization: model bytes plus normalisation flags."""
        h = hashlib.sha256(self._proto)
        h.update(f"lowercase={self.lowercase};keep_accents={self.keep_accents}".encode())
        return h.hexdigest()

    def word_start_table(self) -> np.ndarray:
        """``table[id]`` is True when piece ``id`` starts a word (Google's SP rule)."""
        return np.array(
            [_is_word_start_piece(self.sp.id_to_piece(i)) for i in range(self.vocab_size)], bool
        )

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(int(i))

    # ---------------------------------------------------------------- encoding
    def normalize(self, text: str) -> str:
        return normalize_text(text, lowercase=self.lowercase, keep_accents=self.keep_accents)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens."""
        return self.sp.encode(self.normalize(text))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.sp.encode([self.normalize(t) for t in texts])

    def tokenize(self, text: str) -> list[str]:
        return self.sp.encode(self.normalize(text), out_type=str)

    def encode_pair(self, a: str, b: str | None = None) -> tuple[list[int], list[int]]:
        """``[CLS] A [SEP] (B [SEP])`` ids and token type ids (0 for A part, 1 for B part)."""
        ids = [self.cls_id, *self.encode(a), self.sep_id]
        types = [0] * len(ids)
        if b is not None:
            tail = [*self.encode(b), self.sep_id]
            ids += tail
            types += [1] * len(tail)
        return ids, types

    # ---------------------------------------------------------------- saving
    def save(self, directory: str | os.PathLike) -> Path:
        """Write the HF tokenizer directory (``spiece.model``, ``tokenizer.json``,
        ``tokenizer_config.json``) atomically file by file; returns the directory."""
        from transformers import AlbertTokenizer  # heavy import, only when saving

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocab = [
            (self.sp.id_to_piece(i), float(self.sp.get_score(i))) for i in range(self.vocab_size)
        ]
        hf = AlbertTokenizer(
            vocab=vocab,
            do_lower_case=self.lowercase,
            keep_accents=self.keep_accents,
            _spm_precompiled_charsmap=_precompiled_charsmap(self._proto) or None,
        )
        with tempfile.TemporaryDirectory(dir=directory, prefix=".hf-") as tmp:
            hf.save_pretrained(tmp)
            for name in sorted(os.listdir(tmp)):
                if name == MODEL_FILE:
                    continue
                atomic_write_bytes(directory / name, (Path(tmp) / name).read_bytes())
        if (directory / MODEL_FILE).resolve() != self.model_file.resolve():
            atomic_write_bytes(directory / MODEL_FILE, self._proto)
        return directory


# ------------------------------------------------------------------ training
def _training_sentences(
    inputs: Iterable[str | os.PathLike] | None,
    sentences: Iterable[str] | None,
    config: TokenizerConfig,
    counter: list[int],
    errors: list[Exception] | None = None,
) -> Iterator[str]:
    if sentences is not None:
        source: Iterable[str] = sentences
    else:
        source = (
            s
            for doc in read_documents(
                inputs or [],
                input_format=config.input_format,
                encoding_errors=config.encoding_errors,
            )
            for s in doc.sentences
        )
    try:
        for s in source:
            s = normalize_text(s, lowercase=config.lowercase, keep_accents=config.keep_accents)
            if s:
                counter[0] += 1
                yield s
    except Exception as e:  # SentencePiece re-wraps it as RuntimeError: keep the original
        if errors is not None:
            errors.append(e)
        raise


def train_tokenizer(
    inputs: Iterable[str | os.PathLike] | None,
    out_dir: str | os.PathLike,
    config: TokenizerConfig | None = None,
    *,
    sentences: Iterable[str] | None = None,
) -> Tokenizer:
    """Train a SentencePiece unigram model with the ALBERT recipe and save an HF directory.

    Args:
        inputs: text files / globs (read with ``config.input_format``); or None when
            ``sentences`` is given.
        out_dir: the tokenizer directory to write.
        config: training settings (vocabulary size, lowercasing, ...).
        sentences: raw sentences to train on instead of files.

    Raises:
        TokenizerError: naming ``vocab_size`` when the corpus cannot support it, or the
            input problem (empty input, unreadable file).
    """
    config = config or TokenizerConfig()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counter = [0]
    errors: list[Exception] = []
    specials = [CLS, SEP, MASK]
    spm.set_random_generator_seed(config.seed)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".spm-") as tmp:
        prefix = str(Path(tmp) / "spiece")
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_training_sentences(inputs, sentences, config, counter, errors),
                model_prefix=prefix,
                model_type="unigram",
                vocab_size=config.vocab_size,
                pad_id=0,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                pad_piece=PAD,
                unk_piece=UNK,
                control_symbols=specials,
                user_defined_symbols=list(config.user_defined_symbols),
                character_coverage=config.character_coverage,
                input_sentence_size=config.input_sentence_size,
                shuffle_input_sentence=True,
                max_sentence_length=config.max_sentence_length,
                num_threads=config.num_threads,
                minloglevel=2,
            )
        except RuntimeError as e:
            msg = str(e)
            if errors:  # an input problem (e.g. CorpusError naming file and line)
                raise errors[0] from None
            if counter[0] == 0:
                raise TokenizerError(
                    "tokenizer training got no sentences (inputs empty?)"
                ) from None
            if "Vocabulary size too high" in msg or "smaller than required_chars" in msg:
                detail = msg[msg.find("Vocabulary size") :]
                raise TokenizerError(
                    f"vocab_size={config.vocab_size} does not fit this corpus of {counter[0]} "
                    f"sentences: {detail}"
                ) from None
            raise TokenizerError(f"SentencePiece training failed: {msg}") from None
        model_bytes = _without_model_prefix(Path(prefix + ".model").read_bytes())
    atomic_write_bytes(out_dir / MODEL_FILE, model_bytes)
    tok = Tokenizer(
        out_dir / MODEL_FILE, lowercase=config.lowercase, keep_accents=config.keep_accents
    )
    tok.save(out_dir)
    atomic_write_text(
        out_dir / "albertkit_tokenizer.json",
        json.dumps(
            {
                "config": config.model_dump(mode="json"),
                "sentences": counter[0],
                "sha256": tok.sha256,
            },
            indent=2,
        ),
    )
    return tok


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Load a tokenizer directory or ``spiece.model`` (see :meth:`Tokenizer.load`)."""
    return Tokenizer.load(path)


def export_hf_directory(
    model_file: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    lowercase: bool = True,
    keep_accents: bool = False,
) -> Path:
    """Turn an existing ``spiece.model`` into an HF tokenizer directory."""
    tok = Tokenizer(model_file, lowercase=lowercase, keep_accents=keep_accents)
    out = tok.save(out_dir)
    if not (out / MODEL_FILE).is_file():
        shutil.copyfile(model_file, out / MODEL_FILE)
    return out
