"""Damaged checkpoints never cost a run, never restore bad weights, never get a valid one deleted;
one trainer per run directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albertkit.config import TrainerConfig
from albertkit.errors import TrainingError
from albertkit.training.checkpoint import (
    EXPECTED_FILES,
    CheckpointError,
    CheckpointManager,
    RunDirLock,
    _sha256,
)
from albertkit.training.trainer import AlbertTrainer
from conftest import make_tiny_config

STEPS = (3, 6, 9)


def config(run_dir, **checkpoint) -> TrainerConfig:
    return make_tiny_config(
        run_dir,
        model={"hidden_dropout_prob": 0.1},
        data={"num_examples": 64, "eval_examples": 0},
        optimizer={"kind": "lamb", "learning_rate": 1e-3, "schedule": {"warmup_steps": 2}},
        runtime={"global_batch_size": 4, "max_steps": 9, "eval_every_steps": 0},
        checkpoint={"every_steps": 3, "keep_last": 5, "keep_best": False, **checkpoint},
        logging={"log_every_steps": 3, "tensorboard": False},
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """One trained run with checkpoints at steps 3, 6 and 9, copied by every test."""
    run = tmp_path_factory.mktemp("pristine") / "run"
    AlbertTrainer(config(run)).fit()
    names = [p.name for p in CheckpointManager(run / "checkpoints").list()]
    assert names == [f"ckpt-{s:08d}" for s in STEPS]
    return run


def copy_run(pristine, dst):
    shutil.copytree(pristine, dst)
    return dst


def ckpt_dir(run, step):
    return run / "checkpoints" / f"ckpt-{step:08d}"


def rewrite_manifest(path, edit):
    mpath = path / "MANIFEST.json"
    manifest = json.loads(mpath.read_text())
    edit(manifest)
    mpath.write_text(json.dumps(manifest))


def reseal(path):
    """Recompute the manifest over the current files, as a forger (or a bug) would."""
    def edit(m):
        for name in EXPECTED_FILES:
            f = path / name
            m["files"][name] = {"sha256": _sha256(f), "bytes": f.stat().st_size}
    rewrite_manifest(path, edit)


# --------------------------------------------------------------------------- verify
def test_manifest_must_list_exactly_the_checkpoint_files(pristine, tmp_path):
    run = copy_run(pristine, tmp_path / "run")
    newest = ckpt_dir(run, 9)
    rewrite_manifest(newest, lambda m: m.update(files={}))  # used to verify as "nothing to check"
    with pytest.raises(CheckpointError, match="must list exactly"):
        CheckpointManager.verify(newest)
    assert CheckpointManager(run / "checkpoints").latest().step == 6

    middle = ckpt_dir(run, 6)
    outside = tmp_path / "outside.txt"
    outside.write_text("not a checkpoint file")
    rewrite_manifest(middle, lambda m: m["files"].update({
        "../../../outside.txt": {"sha256": _sha256(outside), "bytes": outside.stat().st_size}}))
    with pytest.raises(CheckpointError, match=r"unexpected \['../../../outside.txt'\]"):
        CheckpointManager.verify(middle)
    assert CheckpointManager(run / "checkpoints").latest().step == 3


@pytest.mark.parametrize("target,content", [
    ("MANIFEST.json", "{not json"),
    ("MANIFEST.json", "[]"),
    ("MANIFEST.json", '{"files": ["model.safetensors"]}'),
    ("MANIFEST.json", b"\xff\xfe\x00binary"),
    ("state.json", "{garbled"),
    ("state.json", "[1, 2]"),
    ("state.json", '{"step": "9"}'),
    ("state.json", '{"step": 6}'),
    ("state.json", '{"no_step": 1}'),
])
def test_every_parse_error_is_a_checkpoint_error_and_falls_back(pristine, tmp_path, target,
                                                                 content):
    run = copy_run(pristine, tmp_path / "run")
    newest = ckpt_dir(run, 9)
    f = newest / target
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    if target == "state.json":
        reseal(newest)  # hashes match: only parsing the state can catch it
    with pytest.raises(CheckpointError, match=target):
        CheckpointManager.verify(newest)
    assert CheckpointManager(run / "checkpoints").latest().step == 6


def test_manifest_entries_with_wrong_types_are_checkpoint_errors(pristine, tmp_path):
    run = copy_run(pristine, tmp_path / "run")
    newest = ckpt_dir(run, 9)
    rewrite_manifest(newest, lambda m: m["files"].update({"model.safetensors": {"bytes": "12"}}))
    with pytest.raises(CheckpointError, match="integer 'bytes'"):
        CheckpointManager.verify(newest)


# --------------------------------------------------------------------------- resume
def newest_model_weights(path):
    return load_file(str(path / "model.safetensors"))


def test_damaged_newest_is_moved_aside_and_resume_uses_the_previous(pristine, tmp_path):
    run = copy_run(pristine, tmp_path / "run")
    newest = ckpt_dir(run, 9)
    data = (newest / "model.safetensors").read_bytes()
    (newest / "model.safetensors").write_bytes(data[: len(data) // 3])
    trainer = AlbertTrainer(config(run)).fit()
    assert trainer.summary["resumed_from_step"] == 6
    damaged = list((run / "checkpoints" / "damaged").iterdir())
    assert len(damaged) == 1 and damaged[0].name.startswith("ckpt-00000009-")
    assert (damaged[0] / "model.safetensors").stat().st_size == len(data) // 3  # kept as found
    # the resumed run's final checkpoint replaces the damaged one's step: deterministic resume
    mgr = CheckpointManager(run / "checkpoints")
    assert [p.name for p in mgr.list()] == [f"ckpt-{s:08d}" for s in STEPS]
    want, got = newest_model_weights(ckpt_dir(pristine, 9)), newest_model_weights(newest)
    for k in want:
        np.testing.assert_array_equal(want[k], got[k], err_msg=k)


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_all_checkpoints_damaged_refuses_to_start_over(pristine, tmp_path):
    run = copy_run(pristine, tmp_path / "run")
    for step in STEPS:
        (ckpt_dir(run, step) / "optimizer.safetensors").write_bytes(b"garbage")
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    with pytest.raises(CheckpointError, match="none verifies") as err:
        AlbertTrainer(config(run)).fit()
    assert str(run / "checkpoints") in str(err.value)
    assert "allow_fresh_start_if_damaged" in str(err.value)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before  # nothing moved

    # told to: the damaged ones go aside and no longer take the keep_last slots, so the new
    # run's checkpoints (lower step numbers) survive, including the final one
    trainer = AlbertTrainer(config(run, allow_fresh_start_if_damaged=True, keep_last=2)).fit()
    assert trainer.summary["resumed_from_step"] == 0 and trainer.summary["step"] == 9
    mgr = CheckpointManager(run / "checkpoints")
    assert [p.name for p in mgr.list()] == ["ckpt-00000006", "ckpt-00000009"]
    assert mgr.latest().step == 9
    assert len(list((run / "checkpoints" / "damaged").iterdir())) == 3


@pytest.mark.slow  # over 40 s on two cores: CI's second pass
def test_resume_false_next_to_an_earlier_runs_checkpoints_is_refused(pristine, tmp_path):
    """Without the refusal the fresh run's checkpoints (steps 3, 6, 9 again, keep_last=2 with
    the old 9 newer than the new 6) would be pruned, and the old run's replaced."""
    run = copy_run(pristine, tmp_path / "run")
    before = {p.name: _sha256(p / "model.safetensors")
              for p in CheckpointManager(run / "checkpoints").list()}
    with pytest.raises(CheckpointError, match="resume=false") as err:
        AlbertTrainer(config(run, resume=False, keep_last=2)).fit()
    assert "ckpt-00000003 .. ckpt-00000009" in str(err.value)
    after = {p.name: _sha256(p / "model.safetensors")
             for p in CheckpointManager(run / "checkpoints").list()}
    assert after == before  # nothing written, nothing pruned
    # an empty run directory: resume=false trains as usual
    trainer = AlbertTrainer(config(tmp_path / "fresh", resume=False)).fit()
    assert trainer.summary["step"] == 9


def test_non_finite_weights_are_never_restored(pristine, tmp_path):
    """Damage that matches its manifest (rewritten with it) is caught by the values."""
    run = copy_run(pristine, tmp_path / "run")
    newest = ckpt_dir(run, 9)
    tensors = newest_model_weights(newest)
    key = next(k for k, v in tensors.items() if v.dtype == np.float32 and v.size > 1)
    tensors[key] = np.full_like(tensors[key], np.nan)
    save_file(tensors, str(newest / "model.safetensors"), metadata={"albertkit": "1"})
    reseal(newest)
    ckpt = CheckpointManager.verify(newest)
    variables = fake_variables(ckpt_dir(pristine, 9))
    with pytest.raises(CheckpointError, match="NaN or Inf"):
        CheckpointManager.restore(ckpt, variables)
    assert all(v.value is None for group in variables.values() for v in group)  # untouched
    with pytest.raises(CheckpointError, match="NaN or Inf"):
        AlbertTrainer(config(run)).fit()


def test_interrupted_same_step_swap_is_recovered_not_pruned(pristine, tmp_path):
    run = copy_run(pristine, tmp_path / "run")
    # a crash between "rename the old ckpt-9 aside" and "rename the new one in"
    os.replace(ckpt_dir(run, 9), run / "checkpoints" / ".old-ckpt-00000009-4242")
    ckpt, damaged = CheckpointManager(run / "checkpoints").scan()
    assert ckpt.step == 9 and damaged == []
    assert ckpt_dir(run, 9).is_dir()


# --------------------------------------------------------------------------- run_dir lock
HOLD = """
import sys, time
from albertkit.training.checkpoint import RunDirLock
lock = RunDirLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(120)
"""


def test_second_trainer_on_a_run_dir_is_refused_and_kill9_frees_it(pristine, tmp_path):
    run = copy_run(pristine, tmp_path / "run")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ})
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.perf_counter()
        with pytest.raises(TrainingError, match="in use by another trainer") as err:
            AlbertTrainer(config(run, keep_last=1)).fit()
        assert f"pid {holder.pid}" in str(err.value)
        assert time.perf_counter() - started < 60  # refused before any training
        # the refused trainer touched no checkpoint (keep_last=1 would have pruned two)
        assert [p.name for p in CheckpointManager(run / "checkpoints").list()] == [
            f"ckpt-{s:08d}" for s in STEPS]
    finally:
        holder.kill()  # SIGKILL: the kernel releases the flock, the lock file stays
        holder.wait()
    assert (run / ".albertkit.lock").is_file()
    with RunDirLock(run):  # free again
        pass
    trainer = AlbertTrainer(config(run)).fit()  # resumes (nothing to do: already complete)
    assert trainer.summary["step"] == 9
    with RunDirLock(run):  # fit() released its lock
        pass


# --------------------------------------------------------------------------- fuzz
class FakeVariable:
    """Just what CheckpointManager.restore uses: ``path``, ``shape``, ``assign``."""

    def __init__(self, path, shape):
        self.path, self.shape, self.value = path, shape, None

    def assign(self, value):
        self.value = np.array(value)


def fake_variables(path):
    groups = {}
    for group in ("model", "optimizer", "step"):
        arrays = load_file(str(path / f"{group}.safetensors"))
        groups[group] = [FakeVariable(k.split(":", 1)[1], arrays[k].shape)
                         for k in sorted(arrays)]
    return groups


def intact(path, original) -> bool:
    """Independent oracle: every file byte-identical and the manifest meaning the same."""
    try:
        if json.loads((path / "MANIFEST.json").read_bytes()) != \
                json.loads((original / "MANIFEST.json").read_bytes()):
            return False
    except (OSError, ValueError):
        return False
    for name in EXPECTED_FILES:
        f = path / name
        if not f.is_file() or f.read_bytes() != (original / name).read_bytes():
            return False
    return True


def damage(path, rng) -> str:
    """Damage one checkpoint in one random way; returns a description."""
    names = sorted(EXPECTED_FILES) + ["MANIFEST.json"]
    kind = rng.choice(["truncate", "delete", "bytes", "manifest", "state", "nan"])
    name = str(rng.choice(names))
    f = path / name
    if kind == "truncate":
        data = f.read_bytes()
        f.write_bytes(data[: int(rng.integers(0, len(data)))])
    elif kind == "delete":
        f.unlink()
    elif kind == "bytes":
        data = bytearray(f.read_bytes())
        for _ in range(int(rng.integers(1, 8))):
            i = int(rng.integers(0, len(data)))
            data[i] = (data[i] + int(rng.integers(1, 256))) % 256
        f.write_bytes(bytes(data))
    elif kind == "manifest":
        name = str(rng.choice(sorted(EXPECTED_FILES)))
        how = rng.choice(["drop", "extra", "escape", "bytes", "sha", "type", "empty"])

        def edit(m):
            files = m["files"]
            if how == "drop":
                del files[name]
            elif how == "extra":
                files["extra.bin"] = dict(files[name])
            elif how == "escape":
                files[f"../{path.name}/{name}"] = files.pop(name)
            elif how == "bytes":
                files[name]["bytes"] += int(rng.integers(1, 100))
            elif how == "sha":
                files[name]["sha256"] = "0" * 64
            elif how == "type":
                files[name] = [None, "x", [1], {"bytes": 1.5, "sha256": 3}][int(rng.integers(0, 4))]
            else:
                m["files"] = {}
        rewrite_manifest(path, edit)
        kind = f"manifest:{how}"
    elif kind == "state":
        (path / "state.json").write_text(str(rng.choice(
            ["{", "[]", "null", '{"step": "x"}', '{"step": 1}', "\x00\x01"])))
        if rng.random() < 0.5:
            reseal(path)
    else:  # non-finite weights with a manifest rewritten to match
        tensors = load_file(str(path / "model.safetensors"))
        key = sorted(k for k, v in tensors.items() if v.dtype == np.float32)[
            int(rng.integers(0, 3))]
        tensors[key] = tensors[key] * np.inf
        save_file(tensors, str(path / "model.safetensors"), metadata={"albertkit": "1"})
        reseal(path)
    return f"{kind} {name}"


def test_fuzz_randomly_damaged_checkpoints(pristine, tmp_path):
    """For many seeds: damage random checkpoints in random ways, then resume.

    The outcome is either the newest intact checkpoint, restored with exactly its weights, or
    a CheckpointError; never corrupt weights; intact checkpoints are never moved or deleted.
    """
    original = pristine / "checkpoints"
    outcomes = {"resumed": 0, "refused": 0, "older": 0}
    for seed in range(120):
        rng = np.random.default_rng(seed)
        work = tmp_path / f"case{seed}"
        shutil.copytree(original, work)
        hit = [s for s in STEPS if rng.random() < 0.5] or [int(rng.choice(STEPS))]
        what = {s: damage(work / f"ckpt-{s:08d}", rng) for s in hit}
        label = f"seed {seed}: {what}"
        good = [s for s in STEPS if intact(work / f"ckpt-{s:08d}",
                                           original / f"ckpt-{s:08d}")]
        mgr = CheckpointManager(work)
        variables = fake_variables(original / "ckpt-00000009")
        try:
            ckpt = mgr.resume_point(quarantine=True)
            assert ckpt is not None, label
            mgr.restore(ckpt, variables)
        except CheckpointError:
            ckpt = None
        for s in good:  # intact ones are never moved or deleted
            assert intact(work / f"ckpt-{s:08d}", original / f"ckpt-{s:08d}"), label
        # damage that matches its manifest passes verification; only its values reveal it
        values_only = [s for s in hit if what[s].startswith("nan")]
        if ckpt is None:
            # refusing is right only when nothing restorable is left: every checkpoint
            # damaged, or the newest verifying one damaged in a way only its values reveal
            assert not good or max(good) < max(values_only, default=-1), label
            assert all(v.value is None for g in variables.values() for v in g), label
            outcomes["refused"] += 1
            continue
        assert good and ckpt.step == max(good) > max(values_only, default=-1), label
        outcomes["older" if ckpt.step < 9 else "resumed"] += 1
        for group, vs in variables.items():
            saved = load_file(str(original / f"ckpt-{ckpt.step:08d}" / f"{group}.safetensors"))
            for key, v in zip(sorted(saved), vs, strict=True):
                np.testing.assert_array_equal(v.value, saved[key], err_msg=label)
                if group == "model" and np.issubdtype(v.value.dtype, np.floating):
                    assert np.isfinite(v.value).all(), label
        moved = mgr.directory / "damaged"
        n_moved = len(list(moved.iterdir())) if moved.is_dir() else 0
        assert n_moved == 3 - len(good) - len(values_only), label
        shutil.rmtree(work)
    # the cases cover every outcome
    assert min(outcomes.values()) > 0, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fuzz_resume_end_to_end(pristine, tmp_path, seed):
    """The trainer itself on a randomly damaged run: it resumes from the newest intact
    checkpoint (the final weights equal the undamaged run's, so the restored ones were exact)
    or stops with a CheckpointError."""
    rng = np.random.default_rng(1000 + seed)
    run = copy_run(pristine, tmp_path / "run")
    hit = [s for s in STEPS if rng.random() < 0.6] or [9]
    what = {s: damage(ckpt_dir(run, s), rng) for s in hit}
    good = [s for s in STEPS if intact(ckpt_dir(run, s), ckpt_dir(pristine, s))]
    values_only = [s for s in hit if what[s].startswith("nan")]
    try:
        trainer = AlbertTrainer(config(run)).fit()
    except CheckpointError:
        assert not good or max(good) < max(values_only, default=-1), what
        return
    assert good and max(good) > max(values_only, default=-1), what
    if max(good) < 9:  # (from ckpt-9 the run is already complete: nothing to train)
        assert trainer.summary["resumed_from_step"] == max(good), what
    want, got = newest_model_weights(ckpt_dir(pristine, 9)), newest_model_weights(ckpt_dir(run, 9))
    for k in want:
        np.testing.assert_array_equal(want[k], got[k], err_msg=f"{what} {k}")
