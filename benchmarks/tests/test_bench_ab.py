"""benchmarks/bench_ab.py: two variants of the training step, timed alternately in one process."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench_ab.py"


@pytest.fixture(scope="module")
def ab(load_script):
    return load_script("bench_ab")


def test_variants_parse_and_errors_name_the_option_and_field(ab):
    assert ab.parse_variant("remat=none, xla=off", "--b") == {"remat": "none", "xla": "off"}
    assert ab.parse_variant("", "--a") == {}
    with pytest.raises(ValueError, match=r"--b 'precision=float32': expected FIELD=VALUE"):
        ab.parse_variant("precision=float32", "--b")
    with pytest.raises(ValueError, match=r"--a remat='some': expected one of none, selective"):
        ab.parse_variant("remat=some", "--a")
    with pytest.raises(ValueError, match="expected FIELD=VALUE"):
        ab.parse_variant("remat", "--a")


def test_noisy_by_load_or_by_disagreeing_round_ratios(ab):
    quiet = SimpleNamespace(before=0.1, during=0.0)
    assert ab.noise(quiet, [1.02, 1.05, 1.03]) == (False, [])
    # the rates may drift, the ratio may not: 1.00 vs 1.20 is a 19 % spread
    noisy, reasons = ab.noise(quiet, [1.0, 1.2, 1.05])
    assert noisy and reasons == [
        "per-round A / B ratios disagree by 19.0% (x1.000-x1.200) > 10%"]
    busy = SimpleNamespace(before=0.1, during=1.5)  # other processes' runnable threads
    noisy, reasons = ab.noise(busy, [1.0, 1.0])
    assert noisy and "other processes kept 1.50 threads runnable" in reasons[0]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


def test_the_same_step_twice_is_refused(tmp_path):
    proc = _run("--a", "remat=none", "--b", "remat=none", cwd=tmp_path)
    assert proc.returncode == 2 and "describe the same step" in proc.stderr


def test_two_remat_modes_alternate_and_the_ratio_is_of_the_medians(tmp_path):
    out = tmp_path / "ab.json"
    proc = _run("--size", "tiny", "--seq-length", "32", "--micro-batch", "2", "--set",
                "vocab_size=300", "--b", "remat=none", "--rounds", "3", "--steps", "2",
                "--warmup", "1", "--json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    a, b = r["variants"]["A"], r["variants"]["B"]
    assert a["settings"] == {} and b["settings"] == {"remat": "none"}
    assert len(a["step_times_s"]) == len(b["step_times_s"]) == 6
    assert a["step_s_median"] == statistics.median(a["step_times_s"])
    assert r["a_over_b"] == pytest.approx(a["step_s_median"] / b["step_s_median"])
    assert len(r["round_ratios"]) == 3 and isinstance(r["noisy"], bool)
    # the round ratios are of each round's medians, A's rounds taken in order
    first = statistics.median(a["step_times_s"][:2]) / statistics.median(b["step_times_s"][:2])
    assert r["round_ratios"][0] == pytest.approx(first)
    assert ("NOISY: " in proc.stdout) is r["noisy"]
    assert r["settings"]["micro_batch"] == 2 and r["settings"]["model"] == {"vocab_size": 300}
    assert "| B | remat=none |" in proc.stdout and "A / B step time: x" in proc.stdout
