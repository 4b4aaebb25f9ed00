"""Whole-word masking for languages written without spaces: the segmenters, the rule that
maps their words to pieces, tokenizer training inside words, and prepared data in Japanese
and Chinese (masked fraction, masked runs on word boundaries, the manifest).

The text is our own (``tests/fixtures/words/{ja,zh,th}.txt``, one sentence per line, a
blank line between documents). Masked runs are checked independently of the writer: each
segment of a written example is spelled out from its pieces, segmented again by the
segmenter, and every maximal run of masked positions must start and end on one of its word
boundaries. Acceptance: masked fraction 0.15 +- 0.005 at seq 128 and 512, >= 95% of runs on
boundaries; Google's piece rule on the same text stays near half (so the check can fail).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

from albertkit.config import registry
from albertkit.config.registry import register_word_segmenter
from albertkit.data.protobuf import decode_varint, fields
from albertkit.data.segmenters import (
    FugashiSegmenter,
    JiebaSegmenter,
    PyThaiNLPSegmenter,
    boundary_crossing_share,
    encode_with_word_starts,
    piece_spans,
    pretokenize,
    resolve_word_segmentation,
    word_starts,
)
from albertkit.data.tfrecord import read_records
from albertkit.data.tokenizer import Tokenizer, TokenizerConfig, train_tokenizer
from albertkit.data.writer import PretrainingDataConfig, prepare_pretraining_data
from albertkit.errors import DataPreparationError, PluginError, TokenizerError

FIXTURES = Path(__file__).parent / "fixtures" / "words"
SEGMENTER = {"ja": "fugashi", "zh": "jieba", "th": "pythainlp"}
# the largest vocabularies SentencePiece can fill from these small texts when it learns
# pieces inside words (so that every tokenizer here has the same size)
VOCAB = {"ja": 590, "zh": 620}


def _sentences(language: str) -> list[str]:
    return [ln for ln in (FIXTURES / f"{language}.txt").read_text("utf-8").splitlines()
            if ln.strip()]


def _tok_config(segmenter: str, vocab: int, language: str = "auto") -> TokenizerConfig:
    return TokenizerConfig(vocab_size=vocab, num_threads=1, keep_accents=True,
                           input_format="sentence_per_line", word_segmenter=segmenter,
                           language=language)


# --------------------------------------------------------------------------- the rule
def test_word_starts_hand_cases():
    # "▁東京" "で" "ガ" "ス" over 東京|で|ガス: ス continues ガス
    assert word_starts([3, 1, 1, 1], " 東京でガス", [(1, 3), (3, 4), (4, 6)]).tolist() == [
        True, True, True, False]
    # a piece crossing a boundary ("京で" over 東京|で|ガス) begins inside 東京: it continues
    # the unit 東 began, so one mask covers 東京で; ガ starts the next word
    assert word_starts([1, 2, 1, 1], "東京でガス", [(0, 2), (2, 3), (3, 5)]).tolist() == [
        True, False, True, False]
    # a whitespace-only piece goes with the piece after it; a bare "▁" at the start too
    assert word_starts([1, 2, 1, 2], " ab cd", [(1, 3), (4, 6)]).tolist() == [
        True, False, True, False]
    # a piece that begins inside a word (its first character continues the word)
    assert word_starts([1, 1, 1], "abc", [(0, 3)]).tolist() == [True, False, False]
    # characters of no word (the segmenter left them out) start a unit of their own
    assert word_starts([1, 1, 1], "a-b", [(0, 1), (2, 3)]).tolist() == [True, True, True]


def test_pretokenize_marks_boundaries_not_next_to_spaces():
    assert pretokenize("東京で ガス", [(0, 2), (2, 3), (4, 6)], "|") == "東京|で ガス"
    assert pretokenize("ab", [(0, 2)], "|") == "ab"


# --------------------------------------------------------------------------- the segmenters
@pytest.mark.parametrize("config, text, words", [
    (FugashiSegmenter(), "ジャガイモを食べます。", ["ジャガイモ", "を", "食べ", "ます", "。"]),
    (FugashiSegmenter(), "東京で ガスが漏れた", ["東京", "で", "ガス", "が", "漏れ", "た"]),
    (JiebaSegmenter(), "我们在北京大学学习。 今天", ["我们", "在", "北京大学", "学习", "。",
                                                  "今天"]),
    (PyThaiNLPSegmenter(), "ฉันรักภาษาไทย เพราะ", ["ฉัน", "รัก", "ภาษาไทย", "เพราะ"]),
])
def test_segmenters_give_the_spans_of_their_words(config, text, words):
    spans = config.build().words(text)
    assert [text[s:e] for s, e in spans] == words
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_auto_picks_the_segmenter_of_the_language():
    assert resolve_word_segmentation("auto", "ja").name == "fugashi"
    assert resolve_word_segmentation("auto", "zh-Hant").name == "jieba"
    assert resolve_word_segmentation("auto", "th").name == "pythainlp"
    for spaced in ("en", "de", "ko", None):
        assert resolve_word_segmentation("auto", spaced).name == "whitespace"
    assert resolve_word_segmentation("none", "ja").name == "none"
    assert resolve_word_segmentation("jieba", "ja").name == "jieba"
    with pytest.raises(ValueError, match=r"unknown word segmenter 'mecab'; known: \['auto', "
                                         r"'none', 'whitespace', 'fugashi', 'jieba', "):
        resolve_word_segmentation("mecab", "ja")
    with pytest.raises(ValueError, match="unknown word segmenter 'mecab'"):
        PretrainingDataConfig(inputs=["x"], word_segmenter="mecab")


def test_a_missing_extra_is_one_line_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "fugashi", None)  # import fugashi -> ImportError
    with pytest.raises(DataPreparationError) as e:
        resolve_word_segmentation("auto", "ja").build()
    msg = str(e.value)
    assert "\n" not in msg
    assert "pip install 'albertkit[ja]'" in msg and "--word-segmenter none" in msg
    monkeypatch.setitem(sys.modules, "rjieba", None)
    with pytest.raises(DataPreparationError, match=r"albertkit\[zh\]"):
        JiebaSegmenter().build()


def test_a_registered_segmenter_is_found_by_name_and_language(builtins_only_registry):
    from typing import Literal

    class EveryCharacter(BaseModel):
        kind: Literal["chars"] = "chars"

        def build(self):
            class Chars:
                def words(self, text):
                    return [(i, i + 1) for i, c in enumerate(text) if not c.isspace()]
            return Chars()

    register_word_segmenter("chars", EveryCharacter, languages=["xx"])
    entry = registry.entries("word segmenter")["chars"]
    assert entry.source is registry.DIRECT and entry.value[1] == ("xx",)
    got = resolve_word_segmentation("auto", "xx")
    assert got.name == "chars" and got.build().words("ab c") == [(0, 1), (1, 2), (3, 4)]
    assert got.describe()["config"] == {"kind": "chars"}
    with pytest.raises(PluginError, match="registered twice"):
        register_word_segmenter("chars", EveryCharacter)
    with pytest.raises(PluginError, match="has kind 'chars'"):
        register_word_segmenter("other", EveryCharacter)
    with pytest.raises(PluginError, match="not a 'module:Class' path"):
        register_word_segmenter("other", "no_colon")


# --------------------------------------------------------------------------- tokenizers
@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    """Per language: the tokenizer trained inside the segmenter's words, and one trained on
    the raw text (same vocabulary size)."""
    root = tmp_path_factory.mktemp("tok")
    out = {}
    for lang, vocab in VOCAB.items():
        fx = [FIXTURES / f"{lang}.txt"]
        out[lang] = (
            train_tokenizer(fx, root / f"{lang}-words", _tok_config("auto", vocab, lang)),
            train_tokenizer(fx, root / f"{lang}-raw", _tok_config("none", vocab, lang)),
        )
    return out


def test_training_inside_words_keeps_pieces_inside_words(tokenizers):
    seg = FugashiSegmenter().build()
    words, raw = tokenizers["ja"]
    sentences = _sentences("ja")
    inside, crossing = (boundary_crossing_share(t, seg, sentences) for t in (words, raw))
    # measured: 0.0% against 6.1% for the same vocabulary size trained on raw text
    assert inside < 0.005 < 0.03 < crossing
    meta = json.loads((words.model_file.parent / "albertkit_tokenizer.json").read_text())
    assert meta["word_segmentation"]["segmenter"] == "fugashi"
    assert meta["word_segmentation"]["versions"]["unidic-lite"]
    # still a plain SentencePiece model on raw text: the delimiter is in no piece, and the
    # pieces of a sentence spell it
    pieces = [words.id_to_piece(i) for i in range(words.vocab_size)]
    assert not any("\ue000" in p for p in pieces)
    ids, spans = piece_spans(words, sentences[0])
    assert ids == words.encode(sentences[0])
    assert "".join(sentences[0][s:e] for s, e in spans) == sentences[0]


def test_a_tokenizer_without_the_extra_is_refused_before_training(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "fugashi", None)
    with pytest.raises(TokenizerError, match=r"albertkit\[ja\]"):
        train_tokenizer([FIXTURES / "ja.txt"], tmp_path / "t", _tok_config("fugashi", 590))
    assert not (tmp_path / "t").exists()


def test_word_starts_of_encoded_sentences(tokenizers):
    tok = tokenizers["ja"][1]
    seg = FugashiSegmenter().build()
    sentences = _sentences("ja")[:20]
    for sentence, (ids, starts) in zip(sentences, encode_with_word_starts(tok, seg, sentences),
                                       strict=True):
        assert ids.tolist() == tok.encode(sentence)
        assert starts[0] and len(starts) == len(ids)
        # independently, from SentencePiece's offsets: a piece starts a unit unless it
        # begins inside a word; a whitespace-only piece takes the flag of the piece after it
        text = tok.normalize(sentence)
        _, spans = piece_spans(tok, text)
        inner = {p for s, e in seg.words(text) for p in range(s + 1, e)}
        pending = None
        for i, (s, e) in enumerate(spans):
            if s == e:
                pending = i if pending is None else pending
                continue
            want = s not in inner
            if pending is not None:
                assert (starts[pending], starts[i]) == (want, False), (sentence, i)
                pending = None
            else:
                assert starts[i] == want, (sentence, i)


# --------------------------------------------------------------------------- prepared data
def _parse_example(record: bytes) -> dict[str, np.ndarray]:
    """A ``tf.train.Example`` of int64/float lists, read with the wire format alone (no
    TensorFlow): Example.features (1) -> Features.feature (1, map entries: key 1, Feature 2)
    -> int64_list (3) / float_list (2) -> packed values (1)."""
    [features] = [f.value for f in fields(record) if f.number == 1]
    out = {}
    for entry in fields(features):
        parts = {f.number: f.value for f in fields(entry.value)}
        key = parts[1].decode()
        [kind] = list(fields(parts[2]))
        [packed] = [f.value for f in fields(kind.value) if f.number == 1] or [b""]
        if kind.number == 2:
            out[key] = np.frombuffer(packed, "<f4")
        else:
            values, i = [], 0
            while i < len(packed):
                v, i = decode_varint(packed, i)
                values.append(v)
            out[key] = np.array(values, np.int64)
    return out


def _examples(out: Path):
    manifest = json.loads((out / "manifest.json").read_text())
    for shard in manifest["shards"]:
        for rec in read_records(out / shard["file"]):
            yield _parse_example(rec)


def _masked_runs(tok: Tokenizer, seg, ids: np.ndarray, masked: np.ndarray) -> tuple[int, int]:
    """(runs on a word boundary, runs) over both segments of one example."""
    ok = total = 0
    seps = np.flatnonzero(ids == tok.sep_id)
    for a, b in ((1, seps[0]), (seps[0] + 1, seps[1])):
        pieces = [tok.id_to_piece(int(i)) for i in ids[a:b]]
        if "<unk>" in pieces:
            continue
        text = "".join(p.replace("\u2581", " ") for p in pieces)
        at = np.cumsum([0, *(len(p) for p in pieces)])
        words = seg.words(text)
        starts = {s for s, _ in words} | {0}
        ends = {e for _, e in words} | {len(text)}
        i = a
        while i < b:
            if not masked[i]:
                i += 1
                continue
            j = i
            while j + 1 < b and masked[j + 1]:
                j += 1
            s, e = int(at[i - a]), int(at[j + 1 - a])
            while s < e and text[s] == " ":
                s += 1
            ok += s in starts and e in ends
            total += 1
            i = j + 1
    return ok, total


def _static_check(out: Path, tok: Tokenizer, seg) -> tuple[float, float]:
    ok = total = 0
    masked_tokens = real = 0
    for ex in _examples(out):
        ids = ex["input_ids"]
        weights = ex["masked_lm_weights"] > 0
        pos = ex["masked_lm_positions"][weights]
        orig = ids.copy()
        orig[pos] = ex["masked_lm_ids"][weights]
        masked = np.zeros(len(ids), bool)
        masked[pos] = True
        a, b = _masked_runs(tok, seg, orig, masked)
        ok, total = ok + a, total + b
        masked_tokens += len(pos)
        real += int(np.sum(ex["input_mask"]))
    return masked_tokens / real, ok / total


@pytest.fixture(scope="module")
def prepared(tokenizers, tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    out = {}
    for lang in VOCAB:
        for setting in ("auto", "whitespace"):
            for seq in (128, 512):
                cfg = PretrainingDataConfig(
                    inputs=[str(FIXTURES / f"{lang}.txt")], input_format="sentence_per_line",
                    seq_length=seq, dupe_factor=20, word_segmenter=setting, language=lang)
                d = root / f"{lang}-{setting}-{seq}"
                prepare_pretraining_data(cfg, tokenizers[lang][0], d, num_workers=1,
                                         progress=False)
                out[lang, setting, seq] = d
    return out


@pytest.mark.parametrize("lang", ["ja", "zh"])
@pytest.mark.parametrize("seq", [128, 512])
def test_prepared_data_masks_whole_words_of_the_segmenter(prepared, tokenizers, lang, seq):
    tok = tokenizers[lang][0]
    seg = resolve_word_segmentation("auto", lang).build()
    d = prepared[lang, "auto", seq]
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["word_segmentation"]["segmenter"] == SEGMENTER[lang]
    assert manifest["word_segmentation"]["versions"]
    fraction, on_boundary = _static_check(d, tok, seg)
    assert abs(fraction - 0.15) <= 0.005, fraction
    assert abs(manifest["masked_share"]["train"] - 0.15) <= 0.005
    # measured: ja 99.8% (128) / 100% (512), zh 99.8% / 100%
    assert on_boundary >= 0.95, on_boundary
    # Google's piece rule on the same text and tokenizer: about half (ja 43%, zh 37%)
    google = prepared[lang, "whitespace", seq]
    assert json.loads((google / "manifest.json").read_text())["word_segmentation"][
        "segmenter"] == "whitespace"
    assert _static_check(google, tok, seg)[1] < 0.6


def test_dynamic_masking_reads_the_segmenter_s_word_starts(tokenizers, tmp_path):
    from albertkit.config import MaskingConfig
    from albertkit.data.masking import VocabInfo, mask_sequence

    tok = tokenizers["ja"][1]  # trained on raw text: some pieces cross word boundaries
    seg = FugashiSegmenter().build()
    cfg = PretrainingDataConfig(inputs=[str(FIXTURES / "ja.txt")],
                                input_format="sentence_per_line", seq_length=128,
                                dupe_factor=3, masking="dynamic", word_segmenter="fugashi")
    prepare_pretraining_data(cfg, tok, tmp_path / "d", num_workers=1, progress=False)
    info = VocabInfo(tok.vocab_size, dict(tok.special_ids))
    rng = np.random.default_rng(0)
    ok = total = 0
    for ex in _examples(tmp_path / "d"):
        n = int(np.sum(ex["input_mask"]))
        ids = ex["input_ids"][:n]
        boundary = ex["token_boundary"][:n] > 0
        m = mask_sequence(ids, word_starts=boundary, info=info, rules=MaskingConfig(),
                          max_predictions=20, rng=rng)
        masked = np.zeros(n, bool)
        masked[m.positions] = True
        a, b = _masked_runs(tok, seg, ids, masked)
        ok, total = ok + a, total + b
    assert ok / total >= 0.95, ok / total


def test_none_masks_single_pieces_and_english_is_unchanged(tokenizers, tmp_path):
    from albertkit.data.writer import plan_sha256 as _sha

    def plan_sha(manifest, keys=("format", "settings", "inputs", "tokenizer_sha256")):
        return _sha({k: manifest[k] for k in keys})

    tok = tokenizers["ja"][0]
    base = dict(inputs=[str(FIXTURES / "ja.txt")], input_format="sentence_per_line",
                seq_length=64, dupe_factor=1, masking="dynamic", language="ja")
    m = prepare_pretraining_data(PretrainingDataConfig(**base, word_segmenter="none"), tok,
                                 tmp_path / "none", num_workers=1, progress=False)
    assert m["word_segmentation"]["segmenter"] == "none"
    # the segmentation is part of the plan's identity
    plan = {k: m[k] for k in ("format", "settings", "inputs", "tokenizer_sha256")}
    plan |= {"language": m["language"]["code"], "word_segmentation": m["word_segmentation"]}
    assert _sha(plan) == m["plan_sha256"] != plan_sha(m)
    for ex in _examples(tmp_path / "none"):
        n = int(np.sum(ex["input_mask"]))
        assert all(ex["token_boundary"][:n])
    # a spaced language: auto is Google's piece rule, and the plan is what it was before
    # word segmenters existed (data prepared then is reused, not refused)
    en = tmp_path / "en.txt"
    en.write_text("\n".join(f"Document {d} has a sentence. And another one, number {d}."
                            for d in range(30)) + "\n")
    en_tok = train_tokenizer([en], tmp_path / "en-tok",
                             TokenizerConfig(vocab_size=40, num_threads=1, language="en"))
    shards = {}
    for setting in ("auto", "whitespace"):
        cfg = PretrainingDataConfig(inputs=[str(en)], seq_length=32, dupe_factor=2,
                                    word_segmenter=setting, language="en")
        m = prepare_pretraining_data(cfg, en_tok, tmp_path / setting, num_workers=1,
                                     progress=False)
        assert m["word_segmentation"]["segmenter"] == "whitespace"
        assert "word_segmenter" not in m["settings"] and plan_sha(m) == m["plan_sha256"]
        shards[setting] = [s["sha256"] for s in m["shards"]]
    assert shards["auto"] == shards["whitespace"]


def test_prepare_data_without_the_extra_stops_in_one_line(monkeypatch, tmp_path, capsys):
    from albertkit.cli import main

    monkeypatch.setitem(sys.modules, "fugashi", None)
    tok = tmp_path / "tok"
    train_tokenizer([FIXTURES / "ja.txt"], tok, _tok_config("none", 590))
    args = ["prepare-data", str(FIXTURES / "ja.txt"), "--tokenizer", str(tok),
            "--input-format", "sentence_per_line", "--seq-length", "64", "--dupe-factor", "1",
            "--num-workers", "1", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "d"), "--word-segmenter", "fugashi"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install 'albertkit[ja]'" in err
    assert not (tmp_path / "d").exists()
    assert main([*args, "--out", str(tmp_path / "d1"), "--word-segmenter", "none"]) == 0
    manifest = json.loads((tmp_path / "d1" / "manifest.json").read_text())
    assert manifest["word_segmentation"]["segmenter"] == "none"


def test_thai_data_with_pythainlp(tmp_path):
    fx = FIXTURES / "th.txt"
    tok = train_tokenizer([fx], tmp_path / "tok", _tok_config("auto", 90, "th"))
    cfg = PretrainingDataConfig(inputs=[str(fx)], input_format="sentence_per_line",
                                seq_length=64, dupe_factor=5, language="th")
    m = prepare_pretraining_data(cfg, tok, tmp_path / "d", num_workers=1, progress=False)
    assert m["word_segmentation"]["segmenter"] == "pythainlp"
    fraction, on_boundary = _static_check(tmp_path / "d", tok, PyThaiNLPSegmenter().build())
    assert on_boundary >= 0.95 and 0.1 < fraction < 0.2
