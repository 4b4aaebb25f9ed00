"""Small inputs must not ask for unbounded memory: every bound is checked before the
allocation it guards, and its error names the file or field and the limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albertkit.data.finetune import load_hf_tokenizer
from albertkit.data.squad import SquadFormatError, convert_squad_examples, read_squad

SMALL = dict(max_seq_length=48, doc_stride=12, max_query_length=16)


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir):
    return load_hf_tokenizer(tiny_tokenizer_dir())


# ====================================================================== SQuAD windows
def _long_squad(tmp_path: Path, words: int, questions: int) -> Path:
    """One long context asked about many times: a few KB that ask for many windows."""
    context = " ".join(["the fox jumps over the lazy dog"] * (words // 7))
    qas = [{"id": f"q{i}", "question": "What jumps?", "is_impossible": False,
            "answers": [{"text": "fox", "answer_start": 4}]} for i in range(questions)]
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [
        {"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    return path


def test_windows_per_question_are_bounded_before_features_exist(tmp_path, tokenizer,
                                                                 monkeypatch):
    path = _long_squad(tmp_path, words=2000, questions=2)
    examples = read_squad(path, "2.0")
    import albertkit.data.squad as squad

    built = []
    monkeypatch.setattr(squad, "_max_context", lambda *a: built.append(1) or None)
    with pytest.raises(SquadFormatError) as e:
        convert_squad_examples(examples, tokenizer, **SMALL, max_windows_per_example=50)
    msg = str(e.value)
    assert msg.startswith(f"{path}: data[0].paragraphs[0].qas[0] (id=q0): the ")
    assert "data.max_windows_per_example=50" in msg and "doc_stride=12" in msg
    assert not built  # refused before the first window was built


def test_total_windows_are_bounded(tmp_path, tokenizer):
    path = _long_squad(tmp_path, words=140, questions=40)
    examples = read_squad(path, "2.0")
    per_question = len(convert_squad_examples(examples[:1], tokenizer, **SMALL))
    assert per_question > 1
    limit = per_question * 10 + 1
    with pytest.raises(SquadFormatError, match=rf"^{path}: more than "
                       rf"data\.max_total_windows={limit} windows of 48 tokens \(reached at "
                       r"question 11 of 40"):
        convert_squad_examples(examples, tokenizer, **SMALL, max_total_windows=limit, source=str(path))
    # exactly at the limit is fine
    feats = convert_squad_examples(examples[:10], tokenizer, **SMALL, max_total_windows=limit - 1)
    assert len(feats) == limit - 1


def test_default_limits_are_generous_for_real_squad(tokenizer):
    """The defaults never refuse ordinary data (the fixtures' contexts need a few windows)."""
    from albertkit.config import SquadData

    fixture = Path(__file__).parent / "fixtures" / "squad_v2_small.json"
    d = SquadData(train_file=fixture, tokenizer=".")
    assert d.max_windows_per_example == 64 and d.max_total_windows == 1_000_000
    feats = convert_squad_examples(read_squad(fixture, "2.0"), tokenizer, **SMALL)
    assert len(feats) > 0


# ====================================================================== corpus lines
def _one_line_gz(path: Path, mbytes: int) -> Path:
    import gzip

    block = b"word " * (1 << 18)  # 1.25 MB of one line
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for _ in range(mbytes):
            fh.write(block)
        fh.write(b"\n")
    return path


def test_one_huge_gz_line_is_refused_after_a_bounded_read(tmp_path):
    """A few hundred KB of .gz holding one 50 MB line: the error comes after reading about
    ``max_line_bytes``, never after building the whole line as one string."""
    import tracemalloc

    from albertkit.data.corpus import CorpusError, read_documents

    path = _one_line_gz(tmp_path / "one.txt.gz", 40)
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(CorpusError) as e:
            list(read_documents([path], input_format="document_per_line",
                                max_line_bytes=1 << 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(e.value).startswith(f"{path}:1: line longer than max_line_bytes=1048576")
    assert peak < 8 << 20, peak


def test_lines_up_to_the_limit_are_read(tmp_path):
    from albertkit.data.corpus import read_documents

    path = tmp_path / "c.txt"
    line = "A short sentence here. " * 40
    path.write_text(f"{line}\n{line}\n")
    n = len(line.encode()) + 1  # with its newline
    docs = list(read_documents([path], input_format="document_per_line", max_line_bytes=n - 1))
    assert len(docs) == 2


def test_long_line_in_a_large_plain_file_is_cut_in_bounded_steps(tmp_path, monkeypatch):
    """plan_chunks finds line ends without reading a whole line at once either."""
    import io

    from albertkit.data import corpus

    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * (3 << 20) + b"\nshort line\n" + b"y" * (2 << 20) + b"\n")
    biggest = []
    real_open = open

    class Spy(io.BufferedReader):
        def readline(self, size=-1):
            biggest.append(size)
            return super().readline(size)

    def spy_open(p, mode="r", *a, **k):
        if str(p) == str(path) and mode == "rb":
            return Spy(real_open(p, "rb", buffering=0))
        return real_open(p, mode, *a, **k)

    monkeypatch.setattr("builtins.open", spy_open)
    chunks = corpus.plan_chunks([path], "document_per_line", target_bytes=1 << 20)
    monkeypatch.undo()
    assert [c.start for c in chunks] == [0, (3 << 20) + 1]
    assert biggest and all(0 < s <= corpus._SCAN_BYTES for s in biggest)


@pytest.mark.parametrize("damage", ["truncated", "bad_header", "bad_data"])
def test_damaged_gz_names_the_file(tmp_path, damage):
    import gzip

    from albertkit.data.corpus import CorpusError, read_documents

    good = gzip.compress(b"".join(b"Line %d of the corpus.\n" % i for i in range(5000)))
    data = {"truncated": good[: len(good) // 2],
            "bad_header": b"\x1f\x8bXXXX" + good[8:],
            "bad_data": good[:20] + bytes(b ^ 0x5A for b in good[20:60]) + good[60:]}[damage]
    path = tmp_path / "c.txt.gz"
    path.write_bytes(data)
    with pytest.raises(CorpusError, match=rf"^{path}: (truncated|damaged) gzip file"):
        list(read_documents([path], input_format="document_per_line"))


# ====================================================================== model size vs memory
def _tiny_raw(tmp_path: Path, **model) -> dict:
    return {
        "run_dir": str(tmp_path / "run"),
        "model": {"size": "tiny", "vocab_size": 200, "hidden_size": 32, "embedding_size": 16,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 64, **model},
        "data": {"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 4,
                 "num_examples": 16},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3},
        "runtime": {"micro_batch_size": 2, "global_batch_size": 2, "max_steps": 1,
                    "eval_every_steps": 0, "xla": False},
        "logging": {"progress_bar": False, "tensorboard": False},
    }


def _no_allocation(monkeypatch) -> list:
    import albertkit.tasks as tasks

    built = []
    real = tasks.build_task

    def spy(*a, **k):
        built.append(1)
        return real(*a, **k)

    monkeypatch.setattr(tasks, "build_task", spy)
    return built


def test_huge_vocab_is_refused_before_allocation(tmp_path, monkeypatch):
    """A vocabulary of a billion pieces needs about a terabyte: refused with the estimate
    and the limit (host RAM here), before any variable exists."""
    import psutil

    from albertkit.config import ConfigError, TrainerConfig
    from albertkit.training.trainer import AlbertTrainer

    built = _no_allocation(monkeypatch)
    cfg = TrainerConfig.model_validate(_tiny_raw(tmp_path, vocab_size=1_000_000_000))
    with pytest.raises(ConfigError) as e:
        AlbertTrainer(cfg).fit()
    msg = str(e.value)
    ram = psutil.virtual_memory().total / 1024**3
    assert msg.startswith("model (size=tiny with its overrides): vocab_size=1,000,000,000, ")
    assert "training needs about " in msg and f"more than the {ram:,.1f} GiB of host RAM" in msg
    assert "runtime.micro_batch_size=2" in msg
    assert not built
    assert not list((tmp_path / "run").glob("checkpoints/ckpt-*"))


def test_downloaded_config_json_is_checked_too(tmp_path, monkeypatch):
    from albertkit.config import ConfigError, TrainerConfig
    from albertkit.training import builders

    hf = tmp_path / "hub-model"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({
        "model_type": "albert", "architectures": ["AlbertForMaskedLM"],
        "vocab_size": 50_000_000, "embedding_size": 128, "hidden_size": 768,
        "num_hidden_layers": 12, "num_hidden_groups": 1, "num_attention_heads": 12,
        "intermediate_size": 3072, "inner_group_num": 1, "hidden_act": "gelu_new",
        "max_position_embeddings": 512, "type_vocab_size": 2}))
    raw = _tiny_raw(tmp_path)
    raw["model"] = {"load_from": str(hf)}
    cfg = TrainerConfig.model_validate(raw)
    monkeypatch.setattr(builders, "device_memory", lambda: ("GPU memory (one GPU)", 16 << 30))
    spec = builders.resolve_spec(cfg)
    with pytest.raises(ConfigError, match=rf"^model\.load_from={hf}: vocab_size=50,000,000, .* "
                       r"more than the 16\.0 GiB of GPU memory \(one GPU\)"):
        builders.check_memory(cfg, spec)


def test_models_that_fit_pass_and_unknown_memory_skips(tmp_path, monkeypatch):
    from albertkit.config import ConfigError, TrainerConfig
    from albertkit.training import builders

    cfg = TrainerConfig.model_validate(_tiny_raw(tmp_path))
    spec = builders.resolve_spec(cfg)
    builders.check_memory(cfg, spec)  # the host has room for a tiny model
    monkeypatch.setattr(builders, "device_memory", lambda: ("GPU memory (one GPU)", 1 << 10))
    with pytest.raises(ConfigError, match=r"more than the 0\.0 GiB of GPU memory"):
        builders.check_memory(cfg, spec)
    monkeypatch.setattr(builders, "device_memory", lambda: ("GPU memory (one GPU)", None))
    builders.check_memory(cfg, spec)
