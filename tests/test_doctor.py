"""``albertkit doctor``: the environment report, its exit status, and the cluster check.

The cluster check's logic runs here with N threads standing in for N ranks (a sum over the
threads plays the all-reduce), so its failures can be provoked one by one; one test runs the
real thing as two processes through albertkit's local launcher.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from albertkit.cli import main
from albertkit.doctor import DoctorReport, cluster_checks
from albertkit.doctor.cluster_check import ENVIRONMENT_CHECKS


# ------------------------------------------------------------------------ one process
def test_single_process_report_as_json(tmp_path, capsys):
    code = main(["doctor", "--run-dir", str(tmp_path / "run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"] is True
    assert (out["rank"], out["world_size"]) == (0, 1)
    checks = {c["name"]: c for c in out["checks"]}
    assert list(checks) == list(ENVIRONMENT_CHECKS)  # the names the cluster check gathers
    assert checks["python"]["details"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert checks["tensorflow"]["status"] == "ok"
    assert {"cuda_version", "cudnn_version", "cuda_build"} <= set(checks["tensorflow"]["details"])
    assert {"count", "names"} <= set(checks["gpus"]["details"])
    assert "mpi" in checks["horovod"]["details"] or checks["horovod"]["value"] == "not installed"
    assert checks["run_dir"]["details"]["writable"] is True
    assert checks["run_dir"]["details"]["free_bytes"] > 0
    assert (tmp_path / "run").is_dir() and not list((tmp_path / "run").iterdir())
    assert checks["launch"]["details"]["source"] == "local"


def test_table_for_people(tmp_path, capsys):
    assert main(["doctor", "--run-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["check", "status", "found"]
    assert [ln.split()[0] for ln in lines[1:]] == list(ENVIRONMENT_CHECKS)


def test_unwritable_run_dir_fails_naming_the_check(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    code = main(["doctor", "--run-dir", str(blocker / "run"), "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 1 and out["ok"] is False
    failed = [c for c in out["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["run_dir"]
    assert "not writable" in failed[0]["value"]
    assert "FAILED run_dir" in captured.err


# ------------------------------------------------------------------------ cluster logic
class ThreadSum:
    """An all-reduce between threads: each calls ``reduce(rank)(vector)`` in the same order."""

    def __init__(self, size: int) -> None:
        self.barrier = threading.Barrier(size, timeout=30)
        self.parts: list[np.ndarray | None] = [None] * size

    def reduce(self, rank: int):
        def run(values: np.ndarray) -> np.ndarray:
            self.parts[rank] = np.array(values, np.float64)
            self.barrier.wait()
            total = np.sum(self.parts, axis=0)
            self.barrier.wait()  # nobody starts the next sum before all have this one
            return total

        return run


def _run_ranks(tmp_path: Path, size: int = 3, run_dirs=None, clocks=None, env_failures=None,
               tolerance: float = 2.0) -> list[list]:
    fake = ThreadSum(size)
    results: list = [None] * size
    errors: list = []

    def rank_main(r: int) -> None:
        try:
            results[r] = cluster_checks(
                fake.reduce(r), r, size, f"node{r + 1}",
                run_dirs[r] if run_dirs else tmp_path, tolerance,
                local_failures=(env_failures or {}).get(r, ()),
                clock=(lambda r=r: clocks[r]) if clocks else __import__("time").time)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
            errors.append(e)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


def _by_name(checks) -> dict:
    return {c.name: c for c in checks}


def test_cluster_check_passes_and_every_rank_agrees(tmp_path):
    results = _run_ranks(tmp_path)
    for checks in results:
        found = _by_name(checks)
        assert [c.status for c in checks] == ["ok"] * 4, checks
        assert found["all_reduce"].details["hosts"] == ["node1", "node2", "node3"]
        assert found["clocks"].details["max_skew_seconds"] < 2.0
    names = sorted(p.name for p in (tmp_path / ".doctor").iterdir())
    assert names == ["node1-0", "node2-1", "node3-2"]
    token = json.loads((tmp_path / ".doctor" / "node1-0").read_text())["token"]
    assert all(json.loads((tmp_path / ".doctor" / n).read_text())["token"] == token
               for n in names)


def test_run_dir_not_shared_names_the_node_and_rank(tmp_path):
    shared, other = tmp_path / "shared", tmp_path / "node3-local"
    results = _run_ranks(tmp_path, run_dirs=[shared, shared, other])
    for checks in results:  # the same verdict on every rank
        check = _by_name(checks)["shared_run_dir"]
        assert check.status == "fail"
        assert check.where == "node1 (rank 0)"  # rank 0 cannot see rank 2's file
        problems = {p["rank"]: p["problem"] for p in check.details["problems"]}
        assert set(problems) == {0, 1, 2}
        assert "ranks [0, 1]" in problems[2] and "ranks [2]" in problems[0]
    report = DoctorReport("node1", 0, 3, results[0])
    assert report.failure_lines() == [
        f"FAILED shared_run_dir on node1 (rank 0): {results[0][2].value}"]


def test_stale_files_of_an_earlier_run_do_not_count(tmp_path):
    doctor = tmp_path / ".doctor"
    doctor.mkdir()
    (doctor / "node3-2").write_text(json.dumps({"rank": 2, "token": -1}))
    # rank 2 writes into a directory of its own; its stale file in the shared one is old
    results = _run_ranks(tmp_path, run_dirs=[tmp_path, tmp_path, tmp_path / "elsewhere"])
    assert _by_name(results[0])["shared_run_dir"].status == "fail"


def test_clock_skew_fails_above_the_tolerance(tmp_path):
    results = _run_ranks(tmp_path, clocks=[1000.0, 1000.5, 1003.0])
    check = _by_name(results[1])["clocks"]
    assert check.status == "fail" and check.where == "node3 (rank 2)"
    assert check.details["max_skew_seconds"] == pytest.approx(3.0)
    assert "3.000 s ahead of node1 (rank 0)" in check.value
    # within the tolerance it passes
    ok = _run_ranks(tmp_path, clocks=[1000.0, 1000.5, 1001.9])
    assert _by_name(ok[0])["clocks"].status == "ok"


def test_a_rank_whose_own_checks_failed_is_named(tmp_path):
    results = _run_ranks(tmp_path, env_failures={1: ["run_dir", "nvidia_driver"]})
    check = _by_name(results[0])["environment"]
    assert check.status == "fail" and check.where == "node2 (rank 1)"
    assert check.details["failed"] == [
        {"rank": 1, "host": "node2", "checks": ["nvidia_driver", "run_dir"]}]


# ------------------------------------------------------------------------ two processes
@pytest.mark.distributed
def test_two_process_cluster_check_through_the_local_launcher(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "albertkit.cli", "doctor", "--nproc", "2",
                           "--run-dir", str(run_dir), "--timeout", "240"],
                          capture_output=True, text=True, timeout=400)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    rows = {ln.split()[1]: ln.split()[2] for ln in done.stdout.splitlines()
            if ln.startswith("[0] ") and len(ln.split()) > 2}
    for name in ("all_reduce", "clocks", "shared_run_dir", "environment"):
        assert rows.get(name) == "ok", out[-3000:]
    assert "2 ranks summed, as expected" in done.stdout
    assert sorted(p.name.rsplit("-", 1)[1] for p in (run_dir / ".doctor").iterdir()) == ["0", "1"]


# ------------------------------------------------------------------------ training's start check
def _shared_dir_ranks(run_dirs, hosts) -> list:
    """check_shared_run_dir on len(hosts) thread-ranks; each result is its return value or
    the exception it raised."""
    from albertkit.distributed.shared_dir import check_shared_run_dir

    size = len(hosts)
    fake = ThreadSum(size)
    results: list = [None] * size

    def rank_main(r: int) -> None:
        try:
            results[r] = check_shared_run_dir(fake.reduce(r), r, size, hosts[r], run_dirs[r])
        except Exception as e:  # noqa: BLE001 - looked at by the test
            results[r] = e

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_start_check_passes_on_a_shared_run_dir_and_leaves_nothing(tmp_path):
    assert _shared_dir_ranks([tmp_path] * 3, ["node1", "node1", "node2"]) == [True] * 3
    assert list(tmp_path.iterdir()) == []


def test_start_check_does_nothing_on_one_node(tmp_path):
    # the ranks of --nproc (one machine) need no check, and write nothing
    missing = tmp_path / "not-there"
    assert _shared_dir_ranks([missing, tmp_path], ["localhost", "localhost"]) == [False, False]
    assert not missing.exists() and list(tmp_path.iterdir()) == []


def test_start_check_names_the_rank_that_sees_another_run_dir(tmp_path):
    from albertkit.config import ConfigError

    dirs = [tmp_path / "node1-local", tmp_path / "node2-local"]
    results = _shared_dir_ranks(dirs, ["node1", "node2"])
    assert all(isinstance(e, ConfigError) for e in results), results
    # every rank raises the same one-line error (with its own run_dir), about the first rank
    # with a problem
    assert {str(e).replace(str(d), "RUN") for e, d in zip(results, dirs, strict=True)} == {
        "run_dir=RUN is not shared between the nodes: rank 0 on node1 cannot see the "
        "files ranks [1] wrote there; put run_dir on storage every node mounts (checkpoints "
        "are written by rank 0 and read by all)"}
    assert [list(d.iterdir()) for d in dirs] == [[], []]  # each rank removed its file


def test_start_check_names_a_rank_that_cannot_write(tmp_path):
    from albertkit.config import ConfigError

    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    results = _shared_dir_ranks([tmp_path, blocked], ["node1", "node2"])
    assert all(isinstance(e, ConfigError) for e in results), results
    assert str(results[0]) == f"run_dir={tmp_path}: rank 1 on node2 cannot write in it"
    assert str(results[1]).startswith(f"run_dir={blocked}: rank 1 on node2 cannot write in it (")
