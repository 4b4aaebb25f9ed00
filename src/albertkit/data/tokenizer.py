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

The files of the directory (what it may hold, the datasets that use it, its language record,
the swap that writes it whole) are handled in :mod:`albertkit.data.tokenizer_files`; this
module re-exports those names.

Language: ``TokenizerConfig.language`` is ``"auto"`` (decided from the corpus's scripts,
:mod:`albertkit.data.language`) or a code. It chooses the defaults of ``lowercase`` and
``keep_accents`` (English: the ALBERT recipe, lower-cased and accents stripped; every other
language keeps its marks, so no kana loses its dakuten and no Thai vowel is dropped, and
lower-cases only where its script has case) and is recorded in
``albertkit_tokenizer.json``; a tokenizer without that record (made before albertkit asked)
is English. A setting given explicitly against the language's default that would change
letters of the corpus's own scripts is announced in one line before training.

One deliberate difference: literal ``[CLS]``/``[SEP]``/``[MASK]``/``<pad>``/``<unk>``
strings inside raw text are ordinary text for albertkit (as for Google's tokenizer), while
transformers matches them as special tokens. Corpus text must never inject control tokens.

Example (a corpus of 36 short lines; so small a vocabulary holds little more than letters):
    >>> lines = [f"The {a} cat sat on the {b} mat." for a in ("red", "big", "old", "shy", "tall",
    ...          "small") for b in ("blue", "flat", "new", "wet", "soft", "warm")]
    >>> _ = Path("corpus.txt").write_text("\\n".join(lines) + "\\n")
    >>> tok = train_tokenizer(["corpus.txt"], "tok", TokenizerConfig(vocab_size=36, num_threads=1))
    >>> tok.language, tok.lowercase, tok.keep_accents
    ('en', True, False)
    >>> sorted(path.name for path in Path("tok").iterdir())
    ['albertkit_tokenizer.json', 'spiece.model', 'tokenizer.json', 'tokenizer_config.json']
    >>> tok.vocab_size, tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id
    (36, 0, 2, 3, 4)
    >>> tok.tokenize("The OLD cat.")
    ['▁t', 'h', 'e', '▁', 'o', 'l', 'd', '▁', 'c', 'a', 't', '.']
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm
from pydantic import BaseModel, ConfigDict, Field, field_validator

from albertkit.data.corpus import (
    DEFAULT_MAX_LINE_BYTES,
    EncodingErrors,
    InputFormat,
    read_documents,
    sample_corpus,
)
from albertkit.data.language import AUTO, language_info, resolve_language
from albertkit.data.normalization import letters_changed, normalize_text
from albertkit.data.segmenters import (
    PRETOKENIZATION_DELIMITER,
    pretokenize,
    resolve_word_segmentation,
)
from albertkit.data.tokenizer_files import (  # noqa: F401 - re-exported names of this module
    META_FILE,
    MODEL_FILE,
    TOKENIZER_FILES,
    USERS_FILE,
    check_replaceable,
    datasets_using,
    precompiled_charsmap,
    recorded_language_of,
    swap_in,
    tokenizer_language,
    without_model_prefix,
)
from albertkit.errors import TokenizerError
from albertkit.fileio import atomic_write_text, read_json, write_synced

log = logging.getLogger(__name__)

PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = {"pad": PAD, "unk": UNK, "cls": CLS, "sep": SEP, "mask": MASK}
ALBERT_USER_SYMBOLS = ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]

# Google's _is_start_piece_sp: punctuation pieces and pieces with characters other than
# English letters/punctuation start a new "word" for whole-word masking.
_PUNCT = set('!"#$%&"()*+,-./:;?@[\\]^_`{|}~') | {"\u20ac", "\u00a3"}
_LETTERS = set("abcdefghijklmnopqrstuvwxyz")


class TokenizerConfig(BaseModel):
    """Settings of :func:`train_tokenizer` (defaults: the ALBERT recipe)."""

    model_config = ConfigDict(extra="forbid")

    vocab_size: int = Field(30000, gt=16)
    # "auto" (from the corpus's scripts) or a code of albertkit.data.language
    language: str = "auto"
    # None: the language's default (English: True / False, the ALBERT recipe)
    lowercase: bool | None = None
    keep_accents: bool | None = None
    character_coverage: float = Field(0.99995, gt=0.0, le=1.0)
    user_defined_symbols: list[str] = list(ALBERT_USER_SYMBOLS)
    input_sentence_size: int = Field(10_000_000, gt=0)
    max_sentence_length: int = Field(4192, gt=0)
    num_threads: int = Field(4, gt=0)  # part of the result: same threads -> same model
    seed: int = 0
    input_format: InputFormat = "document_per_line"
    encoding_errors: EncodingErrors = "fail"
    max_line_bytes: int = Field(DEFAULT_MAX_LINE_BYTES, gt=0)
    # with a word segmenter (auto: the one registered for the language), pieces are learnt
    # inside its words (SentencePiece's pretokenization_delimiter); the model still
    # encodes raw text. none/whitespace: trained on the text as it is
    word_segmenter: str = "auto"

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        if value != AUTO:
            language_info(value)  # an unknown code lists the known ones
        return value

    def for_language(self, code: str) -> TokenizerConfig:
        """These settings with ``language`` resolved to ``code`` and its defaults filled in."""
        lang = language_info(code)
        return self.model_copy(update={
            "language": lang.code,
            "lowercase": lang.lowercase if self.lowercase is None else self.lowercase,
            "keep_accents": lang.keep_accents if self.keep_accents is None
            else self.keep_accents,
        })


def _is_word_start_piece(piece: str) -> bool:
    if piece.startswith("\u2581") or piece.startswith("<") or piece in _PUNCT:
        return True
    return not all(c.lower() in _LETTERS or c in _PUNCT for c in piece)


# ------------------------------------------------------------------ the tokenizer
class Tokenizer:
    """An ALBERT SentencePiece tokenizer (albertkit side of the HF tokenizer directory).

    Args:
        model_file: path to ``spiece.model``.
        lowercase: lower-case text before SentencePiece (HF ``do_lower_case``).
        keep_accents: keep accents (HF ``keep_accents``).
        language: the language code it was trained for (recorded in
            ``albertkit_tokenizer.json``; English when nothing says).

    Example (train a tiny tokenizer on sentences, then load its directory):
        >>> lines = [f"a {a} cat sat on a {b} mat." for a in ("red", "big", "old", "shy", "tall",
        ...          "small") for b in ("blue", "flat", "new", "wet", "soft", "warm")]
        >>> _ = train_tokenizer(None, "tok", TokenizerConfig(vocab_size=36, num_threads=1),
        ...                     sentences=lines)
        >>> tok = Tokenizer.load("tok")
        >>> ids, types = tok.encode_pair("A cat.", "A mat.")
        >>> [tok.id_to_piece(i) for i in ids]
        ['[CLS]', '▁', 'a', '▁', 'c', 'a', 't', '.', '[SEP]', '▁', 'a', '▁', 'ma', 't', '.', '[SEP]']
        >>> types
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]
    """

    def __init__(
        self,
        model_file: str | os.PathLike,
        *,
        lowercase: bool = True,
        keep_accents: bool = False,
        language: str = "en",
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
        self.language = language_info(language).code
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

        Flags come from ``tokenizer_config.json`` when present; explicit arguments win. The
        language comes from ``albertkit_tokenizer.json`` (English when absent).
        """
        path = Path(path)
        cfg: dict = {}
        language = "en"
        if path.is_dir():
            model = path / MODEL_FILE
            if not model.is_file():
                raise TokenizerError(f"{path}: no {MODEL_FILE} in this tokenizer directory")
            cfg_file = path / "tokenizer_config.json"
            if cfg_file.is_file():
                cfg = read_json(cfg_file, "tokenizer config", TokenizerError)
            language = recorded_language_of(path)
        elif path.is_file():
            model = path
        else:
            raise TokenizerError(f"tokenizer {str(path)!r}: no such file or directory")
        return cls(
            model,
            lowercase=cfg.get("do_lower_case", True) if lowercase is None else lowercase,
            keep_accents=cfg.get("keep_accents", False) if keep_accents is None else keep_accents,
            language=language,
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
    def save(self, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the HF tokenizer directory (``spiece.model``, ``tokenizer.json``,
        ``tokenizer_config.json``) and return it.

        The files are written into a temporary sibling that then replaces ``directory`` in
        one swap, so a reader (or a kill) never sees files of two vocabularies side by side.
        A directory that prepared data uses is refused unless ``overwrite`` (see
        :func:`check_replaceable`).
        """
        directory = Path(directory)
        check_replaceable(directory, overwrite)
        return swap_in(directory, lambda tmp: self._write_files(tmp, with_model=True))

    def _write_files(self, directory: Path, *, with_model: bool) -> None:
        """The HF files (and ``spiece.model``) into a fresh ``directory``."""
        from transformers import AlbertTokenizer  # heavy import, only when saving

        vocab = [
            (self.sp.id_to_piece(i), float(self.sp.get_score(i))) for i in range(self.vocab_size)
        ]
        hf = AlbertTokenizer(
            vocab=vocab,
            do_lower_case=self.lowercase,
            keep_accents=self.keep_accents,
            _spm_precompiled_charsmap=precompiled_charsmap(self._proto) or None,
        )
        with tempfile.TemporaryDirectory(dir=directory, prefix=".hf-") as tmp:
            hf.save_pretrained(tmp)
            for name in sorted(os.listdir(tmp)):
                if name != MODEL_FILE:
                    write_synced(directory / name, (Path(tmp) / name).read_bytes())
        if with_model:
            write_synced(directory / MODEL_FILE, self._proto)
            if self.language != "en":  # English is what a directory without a record means
                meta = {"language": {"code": self.language}, "sha256": self.sha256}
                write_synced(directory / META_FILE, json.dumps(meta, indent=2).encode())


# ------------------------------------------------------------------ the directory: users, copies
def record_dataset_user(tokenizer: Tokenizer, dataset_dir: str | os.PathLike) -> None:
    """Note in the tokenizer's directory that ``dataset_dir`` was prepared with it, so that
    re-training into that directory is refused. Best effort: a read-only or bare
    ``spiece.model`` tokenizer cannot be marked."""
    directory = tokenizer.model_file.resolve().parent
    if tokenizer.model_file.name != MODEL_FILE:
        return
    users = directory / USERS_FILE
    try:
        listed = json.loads(users.read_text(encoding="utf-8"))["datasets"]
        listed = [str(x) for x in listed]
    except (OSError, ValueError, KeyError, TypeError):
        listed = []
    entry = str(Path(dataset_dir).resolve())
    if entry in listed:
        return
    try:
        atomic_write_text(users, json.dumps({"datasets": [*listed, entry]}, indent=2))
    except OSError as e:
        log.warning("%s: cannot note that %s uses this tokenizer (%s); nothing will stop it "
                    "from being replaced", directory, entry, e)


def copy_tokenizer(tokenizer: Tokenizer, directory: str | os.PathLike) -> Path:
    """A copy of ``tokenizer``'s directory at ``directory`` (prepared data keeps one beside its
    shards), built whole in a temporary sibling and swapped in; returns ``directory``.

    The files are copied from the tokenizer's own directory when it holds the Hugging Face
    files for the same tokenization; otherwise (a bare ``spiece.model``, flags given by hand)
    they are written from the model. Either way the copy loads with the same
    :attr:`Tokenizer.sha256`. A copy that already holds this tokenizer is kept; a directory
    that is not a tokenizer's, or that prepared data uses, is refused
    (:func:`check_replaceable`).
    """
    directory = Path(directory)
    if not check_copy_target(tokenizer, directory):
        return directory  # it already holds this tokenizer
    source = tokenizer.model_file.resolve().parent
    files = []
    if tokenizer.model_file.name == MODEL_FILE and _holds(source, tokenizer):
        files = [source / name for name in sorted(TOKENIZER_FILES) if (source / name).is_file()]

    def fill(tmp: Path) -> None:
        if files:
            for f in files:
                write_synced(tmp / f.name, f.read_bytes())
        else:
            tokenizer._write_files(tmp, with_model=True)
        if not _holds(tmp, tokenizer):
            raise TokenizerError(f"{directory}: the copy of {tokenizer.model_file} does not "
                                 "load as the same tokenizer")

    return swap_in(directory, fill)


def check_copy_target(tokenizer: Tokenizer, directory: str | os.PathLike) -> bool:
    """Whether :func:`copy_tokenizer` has to write ``directory`` (False: it already holds
    ``tokenizer``, or is its own directory); raises ``TokenizerError`` if it may not
    (:func:`check_replaceable`)."""
    directory = Path(directory)
    if directory.resolve() == tokenizer.model_file.resolve().parent:
        return False
    if _holds(directory, tokenizer):
        return False
    check_replaceable(directory)
    return True


def _holds(directory: Path, tokenizer: Tokenizer) -> bool:
    """Whether ``directory`` is a complete tokenizer directory (``spiece.model`` and
    ``tokenizer.json``) that loads as ``tokenizer``."""
    if not (directory / MODEL_FILE).is_file() or not (directory / "tokenizer.json").is_file():
        return False
    try:
        return Tokenizer.load(directory).sha256 == tokenizer.sha256
    except TokenizerError:
        return False


# ------------------------------------------------------------------ training
def _training_sentences(
    inputs: Iterable[str | os.PathLike] | None,
    sentences: Iterable[str] | None,
    config: TokenizerConfig,
    counter: list[int],
    errors: list[Exception] | None = None,
    segmenter=None,
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
                max_line_bytes=config.max_line_bytes,
                language=str(config.language),
            )
            for s in doc.sentences
        )
    try:
        for s in source:
            s = normalize_text(s, lowercase=config.lowercase, keep_accents=config.keep_accents)
            if s:
                counter[0] += 1
                yield s if segmenter is None else pretokenize(s, segmenter.words(s))
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
    overwrite: bool = False,
    say: Callable[[str], None] | None = None,
) -> Tokenizer:
    """Train a SentencePiece unigram model with the ALBERT recipe and save an HF directory.

    The directory is built beside ``out_dir`` and swapped in when complete: an existing
    tokenizer there stays whole until then (a kill never mixes two vocabularies).

    Args:
        inputs: text files / globs (read with ``config.input_format``); or None when
            ``sentences`` is given.
        out_dir: the tokenizer directory to write (new, empty or a tokenizer directory).
        config: training settings (vocabulary size, lowercasing, ...).
        sentences: raw sentences to train on instead of files.
        overwrite: replace a tokenizer that prepared data still uses (that data's token
            ids then mean other pieces: prepare it again).
        say: where the language line (``"language: ja (Han 41%, ...)"``) and a warning
            about changed letters go before training (default: the module's logger).

    Raises:
        TokenizerError: naming ``vocab_size`` when the corpus cannot support it, the input
            problem (empty input, unreadable file), or why ``out_dir`` is not replaced.
        LanguageError: an unknown language code, or a corpus not in the language given.
    """
    config = config or TokenizerConfig()
    out_dir = Path(out_dir)
    check_replaceable(out_dir, overwrite)  # before hours of training, not after
    given = config.model_dump(mode="json")
    sample, rest = sample_corpus(inputs, sentences, config.max_line_bytes)
    if rest is not None:
        sentences = rest
    guess = resolve_language(config.language, sample)
    config = config.for_language(guess.code)
    (say or log.info)(f"language: {guess.describe()}" + ("" if guess.detected else " (given)"))
    warning = letters_changed(config.language, sample, lowercase=bool(config.lowercase),
                              keep_accents=bool(config.keep_accents))
    if warning:
        (say or log.warning)(f"warning: {warning}")
    try:
        segmentation = resolve_word_segmentation(config.word_segmenter, guess.code)
        segmenter = segmentation.build() if segmentation.uses_segmenter else None
    except ValueError as e:  # an unknown segmenter, a missing extra: named, before training
        raise TokenizerError(str(e)) from None
    delimiter = {"pretokenization_delimiter": PRETOKENIZATION_DELIMITER} if segmenter else {}
    counter = [0]
    errors: list[Exception] = []
    specials = [CLS, SEP, MASK]
    spm.set_random_generator_seed(config.seed)

    def build(tmp: Path) -> None:
        with tempfile.TemporaryDirectory(dir=tmp, prefix=".spm-") as scratch:
            prefix = str(Path(scratch) / "spiece")
            try:
                spm.SentencePieceTrainer.train(
                    sentence_iterator=_training_sentences(
                        inputs, sentences, config, counter, errors, segmenter
                    ),
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
                    **delimiter,
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
                        f"vocab_size={config.vocab_size} does not fit this corpus of "
                        f"{counter[0]} sentences: {detail}"
                    ) from None
                raise TokenizerError(f"SentencePiece training failed: {msg}") from None
            model_bytes = without_model_prefix(Path(prefix + ".model").read_bytes())
        write_synced(tmp / MODEL_FILE, model_bytes)
        tok = _trained(tmp / MODEL_FILE, config)
        tok._write_files(tmp, with_model=False)
        meta = {"config": given, "sentences": counter[0], "sha256": tok.sha256,
                "language": guess.to_record(),
                "word_segmentation": segmentation.describe()}
        write_synced(tmp / "albertkit_tokenizer.json", json.dumps(meta, indent=2).encode())

    swap_in(out_dir, build)
    return _trained(out_dir / MODEL_FILE, config)


def _trained(model_file: Path, config: TokenizerConfig) -> Tokenizer:
    return Tokenizer(model_file, lowercase=bool(config.lowercase),
                     keep_accents=bool(config.keep_accents), language=config.language)


def export_hf_directory(
    model_file: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    lowercase: bool = True,
    keep_accents: bool = False,
    overwrite: bool = False,
) -> Path:
    """Turn an existing ``spiece.model`` into an HF tokenizer directory (written whole, see
    :meth:`Tokenizer.save`)."""
    tok = Tokenizer(model_file, lowercase=lowercase, keep_accents=keep_accents)
    return tok.save(out_dir, overwrite=overwrite)
