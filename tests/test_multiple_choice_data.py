"""Multiple-choice data: the RACE / SWAG / JSON Lines readers, the per-choice features
(context cut at its end only, padded choices masked), one-line errors naming file and line
for every bad row, and the memory planner's count of one sequence per choice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from albertkit.data.multiple_choice import (
    MultipleChoiceExample,
    encode_multiple_choice,
    read_multiple_choice,
    synthetic_examples,
    write_jsonl,
)
from albertkit.errors import DatasetError

ARTICLE = "the cat sat on the mat . it was warm and the sun was out ."


def race_object(**over) -> dict:
    obj = {"id": "high1.txt", "article": ARTICLE,
           "questions": ["where did the cat sit ?", "the cat sat on the _ ."],
           "options": [["on the mat", "in a box", "on a tree", "under a car"],
                       ["mat", "box", "tree", "car"]],
           "answers": ["A", "A"]}
    return {**obj, **over}


# --------------------------------------------------------------------------- readers
def test_race_directory_one_file_per_article(tmp_path):
    for level, name in (("middle", "1.txt"), ("high", "2.txt")):
        (tmp_path / "RACE" / level).mkdir(parents=True)
        (tmp_path / "RACE" / level / name).write_text(json.dumps(race_object()))
    examples = read_multiple_choice(tmp_path / "RACE")  # auto: a directory is RACE
    assert len(examples) == 4
    first, cloze = examples[0], examples[1]
    assert first.context == ARTICLE and first.question == "where did the cat sit ?"
    assert first.choices == ("on the mat", "in a box", "on a tree", "under a car")
    assert first.label == 0 and first.where == f"{tmp_path / 'RACE' / 'high' / '2.txt'}:1 question 1"
    # a blank: each option is written into it (run_race.py), the question is then empty
    assert cloze.question == "" and cloze.choices[1] == "the cat sat on the box ."


def test_race_jsonl_and_answer_letters(tmp_path):
    path = tmp_path / "race.jsonl"
    path.write_text("\n".join(json.dumps(race_object(answers=a)) for a in (["B", "D"],
                                                                         ["C", "A"])) + "\n")
    examples = read_multiple_choice(path)  # auto: objects with an article are RACE
    assert [ex.label for ex in examples] == [1, 3, 2, 0]
    assert [ex.where.rsplit(":", 1)[1] for ex in examples] == [
        "1 question 1", "1 question 2", "2 question 1", "2 question 2"]


def test_swag_csv(tmp_path):
    path = tmp_path / "swag.csv"
    path.write_text(
        "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
        "ending3,label\n"
        'v1,0,x,"Someone opens the door.",He,gold,walks in.,flies away.,eats it.,sings.,0\n'
        "v2,1,x,A man sits.,The man,gold,stands.,sleeps.,runs.,jumps.,3\n")
    examples = read_multiple_choice(path)
    assert examples[0] == MultipleChoiceExample(
        "Someone opens the door.", "He", ("walks in.", "flies away.", "eats it.", "sings."),
        0, f"{path}:2")
    assert examples[1].label == 3


def test_generic_jsonl_and_jcommonsenseqa_keys(tmp_path):
    path = tmp_path / "mc.jsonl"
    rows = [{"context": "c", "question": "q1", "choices": ["a", "b", "c"], "label": 2},
            {"q_id": 7, "question": "q2", "choice0": "x", "choice1": "y", "choice2": "z",
             "choice3": "w", "choice4": "v", "label": 4}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    a, b = read_multiple_choice(path, "jsonl")
    assert (a.context, a.choices, a.label) == ("c", ("a", "b", "c"), 2)
    assert (b.context, b.choices, b.label) == ("", ("x", "y", "z", "w", "v"), 4)


BAD_ROWS = {
    "label out of range": ({"question": "q", "choices": ["a", "b", "c"], "label": 3},
                           "label 3 is out of range for 3 choices"),
    "negative label": ({"question": "q", "choices": ["a", "b"], "label": -1},
                       "label -1 is out of range"),
    "fewer than two choices": ({"question": "q", "choices": ["a"], "label": 0},
                               "1 choice(s); an example needs at least 2"),
    "empty choice": ({"question": "q", "choices": ["a", "  "], "label": 0},
                     "choice 1 is empty"),
    "label not a number": ({"question": "q", "choices": ["a", "b"], "label": "b"},
                           "label 'b' is not an integer"),
}


@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_bad_jsonl_row_is_one_line_naming_file_and_line(tmp_path, case):
    row, message = BAD_ROWS[case]
    good = {"question": "q", "choices": ["a", "b"], "label": 1}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DatasetError) as err:
        read_multiple_choice(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}:4: ") and message in text


@pytest.mark.parametrize("answers,options,message", [
    (["E", "A"], None, "question 1: answer 'E' is not one of A, B, C, D"),
    (["A", "B"], [["on the mat", "in a box"], ["mat"]], "question 2: 1 choice(s)"),
    (["A", "B"], [["on the mat", ""], ["mat", "box"]], "question 1: choice 1 is empty"),
])
def test_bad_race_row_names_file_line_and_question(tmp_path, answers, options, message):
    path = tmp_path / "race.jsonl"
    bad = race_object(answers=answers, **({"options": options} if options else {}))
    path.write_text(json.dumps(race_object()) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError) as err:
        read_multiple_choice(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{path}:2 {message}")


@pytest.mark.parametrize("row,message", [
    ("v,0,x,ctx,He,gold,a,b,c,d,4", "label 4 is out of range for 4 choices"),
    ("v,0,x,ctx,He,gold,a,,c,d,1", "choice 1 is empty"),
])
def test_bad_swag_row_names_file_and_line(tmp_path, row, message):
    path = tmp_path / "swag.csv"
    path.write_text("video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,"
                    "ending2,ending3,label\nv,0,x,ctx,He,gold,a,b,c,d,0\n" + row + "\n")
    with pytest.raises(DatasetError) as err:
        read_multiple_choice(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{path}:3: {message}")


def test_more_choices_than_num_choices_is_refused(tmp_path):
    path = write_jsonl(synthetic_examples(3, seed=0, num_choices=5), tmp_path / "five.jsonl")
    with pytest.raises(DatasetError, match=rf"^{path}:1: 5 choices, more than data.num_choices=4$"):
        read_multiple_choice(path, num_choices=4)


def test_cli_reports_a_bad_row_in_one_line(tmp_path, tiny_tokenizer_dir):
    good = {"question": "q", "choices": ["a", "b"], "label": 0}
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(good) + "\n" + json.dumps({**good, "label": 2}) + "\n")
    config = tmp_path / "mc.yaml"
    config.write_text(json.dumps({
        "run_dir": str(tmp_path / "run"),
        "model": {"size": "tiny", "vocab_size": 1000, "hidden_size": 32, "embedding_size": 16,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 64},
        "data": {"kind": "multiple_choice", "train_file": str(train),
                 "tokenizer": str(tiny_tokenizer_dir()), "max_seq_length": 32},
        "runtime": {"micro_batch_size": 2, "global_batch_size": 2, "max_steps": 2, "xla": False},
        "logging": {"progress_bar": False}}))
    proc = subprocess.run([sys.executable, "-m", "albertkit.cli", "finetune", "--config",
                           str(config)], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if f"{train}:2:" in line]
    assert len(lines) == 1 and "label 2 is out of range for 2 choices" in lines[0], proc.stderr


# --------------------------------------------------------------------------- features
class WordTokenizer:
    """A stand-in with the Hugging Face call signature: one id per whitespace word."""

    cls_token_id, sep_token_id, pad_token_id = 2, 3, 0

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def __call__(self, texts, add_special_tokens=False):
        assert not add_special_tokens
        return {"input_ids": [[self.vocab.setdefault(w, 10 + len(self.vocab))
                               for w in t.split()] for t in texts]}

    def ids(self, text: str) -> list[int]:
        return [self.vocab[w] for w in text.split()]


def test_features_layout_truncation_and_padding():
    tok = WordTokenizer()
    long_context = " ".join(f"w{i}" for i in range(20))
    examples = [
        MultipleChoiceExample(long_context, "which one", ("red apple", "blue"), 1, "f:1"),
        MultipleChoiceExample("short context", "q", ("x", "y", "z"), 2, "f:2"),
        MultipleChoiceExample("", "no context question", ("p", "q r"), 0, "f:3"),
    ]
    arrays, truncated = encode_multiple_choice(examples, tok, max_seq_length=12)
    assert truncated == 1  # only the first example's context was cut
    assert arrays["input_ids"].shape == (3, 3, 12) and arrays["choice_mask"].tolist() == [
        [1, 1, 0], [1, 1, 1], [1, 1, 0]]
    assert arrays["labels"].tolist() == [1, 2, 0]
    # [CLS] context (cut at its END) [SEP] question choice [SEP]; the question and the
    # choice intact, the context keeps its first 12 - 3 - len(question choice) tokens
    qa = tok.ids("which one red apple")
    want = [2, *tok.ids(long_context)[: 12 - 3 - len(qa)], 3, *qa, 3]
    assert arrays["input_ids"][0, 0].tolist() == want
    assert arrays["segment_ids"][0, 0].tolist() == [0] * (12 - len(qa) - 1) + [1] * (len(qa) + 1)
    qa = tok.ids("which one blue")  # a shorter choice keeps more of the context
    assert arrays["input_ids"][0, 1].tolist() == [
        2, *tok.ids(long_context)[: 12 - 3 - len(qa)], 3, *qa, 3]
    # a padded choice is all padding and masked out
    assert not arrays["input_ids"][0, 2].any() and not arrays["input_mask"][0, 2].any()
    # short: nothing cut, padded to the length
    row = [2, *tok.ids("short context"), 3, *tok.ids("q z"), 3]
    assert arrays["input_ids"][1, 2].tolist() == row + [0] * (12 - len(row))
    assert arrays["input_mask"][1, 2].tolist() == [1] * len(row) + [0] * (12 - len(row))
    # no context: [CLS] question [SEP] choice [SEP]
    row = [2, *tok.ids("no context question"), 3, *tok.ids("q r"), 3]
    assert arrays["input_ids"][2, 1, : len(row)].tolist() == row
    assert arrays["segment_ids"][2, 1, : len(row)].tolist() == [0] * 5 + [1] * 3


def test_features_pad_to_num_choices_and_refuse_what_does_not_fit():
    tok = WordTokenizer()
    ex = MultipleChoiceExample("c", "q", ("a", "b"), 0, "data.jsonl:7")
    arrays, _ = encode_multiple_choice([ex], tok, max_seq_length=8, num_choices=5)
    assert arrays["choice_mask"].tolist() == [[1, 1, 0, 0, 0]]
    long = MultipleChoiceExample("c", "a b c d e", ("f g",), 0, "data.jsonl:9")
    with pytest.raises(DatasetError, match=r"^data.jsonl:9: choice 0: the question and choice "
                                           r"take 7 tokens; data.max_seq_length=8 leaves 5"):
        encode_multiple_choice([ex, long], tok, max_seq_length=8)


def test_truncation_count_is_logged(tmp_path, caplog, tiny_tokenizer_dir):
    import logging

    from albertkit.config import TrainerConfig
    from albertkit.tasks.multiple_choice import MultipleChoiceTask

    rows = [{"context": "word " * n, "question": "which", "choices": ["a", "b"], "label": 0}
            for n in (2, 40, 60)]
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = TrainerConfig.from_dict({
        "model": {"size": "tiny", "vocab_size": 1000, "max_position_embeddings": 64},
        "data": {"kind": "multiple_choice", "train_file": str(path), "eval_file": str(path),
                 "tokenizer": str(tiny_tokenizer_dir()), "max_seq_length": 24}})
    task = MultipleChoiceTask(cfg.model.spec, cfg.data, micro_batch_size=2)
    with caplog.at_level(logging.INFO, logger="albertkit.tasks.multiple_choice"):
        task.eval_arrays()
    assert "3 evaluation examples" in caplog.text and "2 had their context cut" in caplog.text


# --------------------------------------------------------------------------- planner
def race_config(micro: int, kind: str = "multiple_choice", global_batch: int = 32):
    from albertkit.config import TrainerConfig

    data = ({"kind": "multiple_choice", "train_file": "RACE/train", "num_choices": 4, "tokenizer": "t",
             "max_seq_length": 512} if kind == "multiple_choice" else
            {"kind": "classification", "train_file": "x.tsv", "tokenizer": "t",
             "max_seq_length": 512})
    return TrainerConfig.from_dict({
        "model": {"size": "base"}, "data": data,
        "optimizer": {"kind": "adamw", "learning_rate": 1e-5},
        "runtime": {"micro_batch_size": micro, "global_batch_size": global_batch,
                    "max_steps": 100, "precision": "mixed_float16"}})


def test_planner_counts_one_sequence_per_choice():
    """The fit of RACE (4 choices) at seq 512 on a 16 GB V100 equals the fit of 4x the
    micro-batch of single sequences, in `albertkit plan`'s fleet rows and in plan_batch."""
    from albertkit.perf.memory import plan_batch
    from albertkit.plan.fleet import parse_fleets, plan_fleet

    fleet = parse_fleets("ml.p3.2xlarge:1")[0]  # one V100 16 GB
    race = plan_fleet(race_config(micro=8), fleet)
    single = plan_fleet(race_config(micro=32, kind="classification", global_batch=128), fleet)
    assert race.gpu == "V100" and race.usable_gib == single.usable_gib
    assert race.config_micro_batch_fits == single.config_micro_batch_fits
    assert race.largest_micro_batch >= 1
    assert race.largest_micro_batch * 4 == single.largest_micro_batch
    assert race.predicted_peak_gib == single.predicted_peak_gib or not race.config_micro_batch_fits
    # the plan's step time counts the 4 sequences per example as well
    assert race.compute_s == pytest.approx(single.compute_s)

    spec = race_config(8).model.spec
    for per_example in (1, 2, 4, 5):
        a = plan_batch(spec, 512, "mixed_float16", "V100", 40, sequences_per_example=per_example)
        b = plan_batch(spec, 512, "mixed_float16", "V100", 40 * per_example)
        # the same largest fitting number of sequences when the divisors line up
        if b.micro_batch % per_example == 0 and 40 % (b.micro_batch // per_example) == 0:
            assert a.micro_batch * per_example == b.micro_batch
        assert a.micro_batch * per_example <= b.micro_batch


def test_planner_needs_num_choices():
    from albertkit.config import ConfigError
    from albertkit.plan.fleet import parse_fleets, plan_fleet

    cfg = race_config(micro=8)
    cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"num_choices": None})})
    with pytest.raises(ConfigError, match="set data.num_choices"):
        plan_fleet(cfg, parse_fleets("ml.p3.2xlarge:1")[0])


def test_albertkit_plan_on_the_race_config():
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "albertkit.cli", "plan", "--config",
                           str(root / "examples/configs/finetune_race_base.yaml"),
                           "--fleet", "ml.p3.2xlarge:1", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["fleets"][0]
    assert row["gpu"] == "V100" and row["config_micro_batch_fits"] and row["micro_batch"] == 4


def test_synthetic_set_is_what_it_says():
    examples = synthetic_examples(200, seed=3)
    assert {len(ex.choices) for ex in examples} == {4}
    labels = np.array([ex.label for ex in examples])
    assert set(labels.tolist()) == {0, 1, 2, 3}
    for ex in examples:
        asked = set(ex.question.split()) - {"which", "one", "is", "like", "?"}
        assert len(asked) == 1
        overlap = [bool(asked & set(c.split())) for c in ex.choices]
        assert overlap.index(True) == ex.label and sum(overlap) == 1
        assert not (asked | set(ex.choices)) & set(ex.context.split())
    assert 0.15 < np.mean([bool(ex.context) for ex in examples]) < 0.35


def test_synthetic_tokenizer_keeps_every_word_whole(tmp_path):
    from albertkit.data import write_synthetic_multiple_choice
    from albertkit.data.finetune import load_hf_tokenizer
    from albertkit.data.multiple_choice import SYNTHETIC_WORDS

    out = write_synthetic_multiple_choice(tmp_path / "mc", train=400, eval=8)
    tok = load_hf_tokenizer(out / "tokenizer")
    assert all(len(tok.tokenize(w)) == 1 for w in SYNTHETIC_WORDS)
    assert tok.tokenize("like apple ?")[-2:] == tok.tokenize("apple ?")
    with pytest.raises(DatasetError, match="cuts .* into several pieces; raise vocab_size"):
        write_synthetic_multiple_choice(tmp_path / "small", train=400, eval=8, vocab_size=50)
