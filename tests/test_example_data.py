"""albertkit.data.ExampleData: every form of examples gives the one position-addressable
stream (``index_stream`` + the rows it names), resumes at any step, splits the ranks, and
refuses bad examples in one line that names the example and the feature."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest

from albertkit.config import DistributedConfig
from albertkit.data import ExampleData
from albertkit.distributed import build_distributor
from albertkit.errors import DatasetError

N, SEQ, MICRO, ACCUM = 11, 5, 2, 3


def columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    return {"input_ids": rng.integers(0, 50, (N, SEQ)),  # int64: becomes int32
            "weight": rng.random((N, SEQ)),  # float64: becomes float32
            "labels": np.arange(N) % 3}


def example(i: int) -> dict[str, np.ndarray]:
    return {k: v[i] for k, v in columns().items()}


class Ranks:
    """The distributor of rank ``rank`` of ``size`` (what ExampleData reads of one)."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def shard(self, ds):
        return ds.shard(self.size, self.rank)

    def distribute_dataset(self, ds):
        return ds


def single():
    return build_distributor(DistributedConfig())


def batches(data: ExampleData, start: int, count: int) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in b.items()}
            for b in islice(data.train(skip_micro_batches=start, accum=ACCUM), count)]


def assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            assert x[k].dtype == y[k].dtype, k
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


@pytest.mark.parametrize("form", ["columns", "rows", "function", "builder"])
def test_every_form_is_the_index_stream_s_rows(form):
    from albertkit.data.stream import index_stream

    given = {"columns": (columns(), None), "rows": ([example(i) for i in range(N)], None),
             "function": (example, N), "builder": (columns, None)}[form]
    data = ExampleData(given[0], micro_batch_size=MICRO, seed=9, distributor=single(),
                       num_train=given[1])
    got = batches(data, 0, 5)
    # the reference: the rows index_stream names, taken from the arrays by hand
    index = np.stack([i.numpy() for i in islice(
        index_stream(N, seed=9, rank=0, size=1, batch_size=MICRO), 5 * ACCUM)])
    arrays = columns()
    want = [{"input_ids": arrays["input_ids"][index[s * ACCUM:(s + 1) * ACCUM]].astype(np.int32),
             "weight": arrays["weight"][index[s * ACCUM:(s + 1) * ACCUM]].astype(np.float32),
             "labels": arrays["labels"][index[s * ACCUM:(s + 1) * ACCUM]].astype(np.int32)}
            for s in range(5)]
    assert_same(got, want)
    assert got[0]["input_ids"].shape == (ACCUM, MICRO, SEQ)


@pytest.mark.parametrize("form", ["columns", "function"])
def test_a_resumed_stream_is_the_uninterrupted_one_on_every_rank(form):
    epochs = []
    for rank in range(2):
        def make(rank=rank):
            return ExampleData(columns() if form == "columns" else example,
                               micro_batch_size=MICRO, seed=1, distributor=Ranks(rank, 2),
                               num_train=None if form == "columns" else N)
        straight = batches(make(), 0, 6)
        for step in (1, 2, 5):  # the trainer resumes at step * accum micro-batches
            assert_same(batches(make(), step * ACCUM, 6 - step), straight[step:])
        epochs.append(np.concatenate([b["labels"].ravel() for b in straight]))
    # global element g is rank g % 2's: the first N elements are one epoch, a permutation
    merged = np.empty(2 * len(epochs[0]), np.int32)
    merged[0::2], merged[1::2] = epochs
    assert sorted(merged[:N]) == sorted(columns()["labels"].tolist())


def test_evaluation_is_ordered_sharded_and_capped():
    whole = ExampleData(None, columns(), micro_batch_size=4, seed=0, distributor=single())
    assert whole.has_eval
    got = np.concatenate([b["labels"].numpy() for b in whole.eval()])
    np.testing.assert_array_equal(got, columns()["labels"])  # all 11, in order
    halves = [np.concatenate([b["labels"].numpy() for b in ExampleData(
        None, example, num_eval=N, micro_batch_size=4, seed=0,
        distributor=Ranks(r, 2)).eval()]) for r in range(2)]
    np.testing.assert_array_equal(halves[0], columns()["labels"][0::2])
    np.testing.assert_array_equal(halves[1], columns()["labels"][1::2])
    capped = ExampleData(None, columns(), micro_batch_size=4, seed=0, distributor=single(),
                         eval_steps=2)
    assert len(list(capped.eval())) == 2
    np.testing.assert_array_equal(whole.eval_arrays["labels"], columns()["labels"])


def test_training_examples_are_built_on_first_use_only():
    calls = []

    def build():
        calls.append(1)
        return columns()

    data = ExampleData(build, columns(), micro_batch_size=2, seed=0, distributor=single())
    list(data.eval())
    assert calls == []
    assert data.num_train == N and calls == [1]
    batches(data, 0, 1)
    assert calls == [1]


@pytest.mark.parametrize(("train", "kwargs", "error", "message"), [
    ([{"x": [1, 2]}, {"x": [1, 2, 3]}], {}, DatasetError,
     r"train examples example 1\['x'\] has shape \(3,\), example 0 \(2,\)"),
    ([{"x": [1, 2]}, {"y": [1, 2]}], {}, DatasetError,
     r"train examples example 1 has features \['y'\], example 0 has \['x'\]"),
    ([{"x": [1, 2]}, {"x": [1.5, 2.0]}], {}, DatasetError,
     r"example 1\['x'\] holds float32, example 0 int32"),
    ({"x": np.zeros((3, 2)), "y": np.zeros(4)}, {}, DatasetError, r"differ in length"),
    ({"text": np.array(["a", "b"])}, {}, DatasetError, r"\['text'\] is <U1.*encode text"),
    ([], {}, DatasetError, r"train examples: no examples"),
    (lambda i: {"x": [i]}, {}, TypeError, r"function of the example index: give the number"),
    (np.zeros((3, 2)), {}, TypeError, r"expected feature columns.*got ndarray"),
    ([1, 2], {}, DatasetError, r"example 0: an example is a dict of features"),
])
def test_bad_examples_are_named_in_one_line(train, kwargs, error, message):
    data = ExampleData(train, micro_batch_size=2, seed=0, distributor=single(), **kwargs)
    with pytest.raises(error, match=message):
        data.num_train  # noqa: B018 - reading it builds the examples


def test_a_function_s_bad_example_is_named_when_it_is_made():
    def uneven(i):
        return {"x": np.zeros(3 if i == 4 else 2, np.int32)}

    data = ExampleData(uneven, micro_batch_size=5, seed=0, distributor=single(), num_train=5)
    with pytest.raises(Exception, match=r"train examples\(4\)\['x'\] has shape \(3,\)"):
        batches(data, 0, 1)


def test_the_guide_s_example_runs_and_prints_what_it_says(capsys):
    import contextlib
    import re
    from pathlib import Path

    guide = Path(__file__).resolve().parents[1] / "docs" / "howto" / "extend.md"
    blocks = [b for b in re.findall(r"```python\n(.*?)```", guide.read_text(), re.S)
              if "ExampleData(example" in b]
    assert len(blocks) == 1
    code = blocks[0]
    with contextlib.chdir(Path(__file__).parent):
        exec(compile(code, "extend.md", "exec"), {})  # noqa: S102 - our own guide
    printed = capsys.readouterr().out.splitlines()
    said = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    assert printed == said and len(said) == 2
