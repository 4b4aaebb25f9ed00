"""The benchmark guards its own honesty: load readings, round agreement, the noisy mark.

No timing assertions: the loaded case runs a real busy process per CPU and checks that the
benchmark *saw* it (other processes' runnable threads), not how fast anything ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from albertkit.hardware import resolve_xla
from albertkit.perf import BenchmarkResult, BenchmarkSettings, format_table, measure
from albertkit.perf.noise import LoadMonitor, assess_noise, round_spread_pct, runnable_others

# Load readings count other processes' runnable threads, and the loaded case spins every CPU:
# run alone, never beside other tests (scripts/test.sh's serial pass).
pytestmark = pytest.mark.serial

TINY = dict(size="tiny", model={"vocab_size": 300}, seq_length=32, micro_batch=2, steps=3,
            warmup=1, rounds=2, pipeline=False)


# --------------------------------------------------------------------------- the rules
@pytest.mark.parametrize(("rates", "spread"), [
    ([3.0, 3.6], 100 * 0.6 / 3.3),
    ([3.0, 3.2, 3.1], 100 * 0.2 / 3.1),
    ([2.0, 2.0, 2.0, 2.0], 0.0),
    ([5.0], 0.0),  # one round: nothing to compare
    ([1.0, 1.1, 4.0], 100 * 3.0 / 1.1),  # the median, not the mean, is the scale
])
def test_round_spread_known_figures(rates, spread):
    assert round_spread_pct(rates) == pytest.approx(spread)


def test_spread_rule_known_figures():
    quiet = {"albertkit": [3.00, 3.10, 3.05], "hf-pytorch": [2.20, 2.25]}
    assert assess_noise(0.0, 0.0, 2, quiet) == (False, [])
    noisy, reasons = assess_noise(0.0, 0.0, 2, {"albertkit": [3.0, 3.1],
                                                "hf-pytorch": [2.0, 2.5]})
    assert noisy and len(reasons) == 1
    assert reasons[0].startswith("hf-pytorch: rounds disagree by 22.2%")
    # the threshold is a setting: 25 % lets the same figures pass, 1 % flags both
    assert assess_noise(0.0, 0.0, 2, {"hf-pytorch": [2.0, 2.5]}, spread_pct=25.0)[0] is False
    assert len(assess_noise(0.0, 0.0, 2, {"a": [3.0, 3.1], "b": [2.0, 2.5]},
                            spread_pct=1.0)[1]) == 2
    # exactly at the threshold is not beyond it
    assert assess_noise(None, None, 2, {"a": [3.0, 4.0, 5.0]}, spread_pct=50.0)[0] is False
    assert assess_noise(None, None, 2, {"a": [3.0, 4.0, 5.0]}, spread_pct=49.9)[0] is True


def test_matmul_probe_is_quoted_in_the_spread_reason_and_decides_nothing():
    rates = {"albertkit": [2.86, 3.47], "hf-pytorch": [3.00, 3.10]}
    probes = {"albertkit": [228e9, 309e9], "hf-pytorch": [316e9, 500e9]}
    noisy, reasons = assess_noise(0.0, 0.0, 2, rates, probe_rates=probes)
    assert noisy and len(reasons) == 1  # hf's probe moved by 45 %, its rounds did not
    # (309 - 228) / 268.5 = 30.2 %
    assert reasons[0] == (
        "albertkit: rounds disagree by 19.3% (per-round seq/s 2.86-3.47) > 10%; its matmul "
        "probe moved by 30.2% over the same rounds (228-309 GFLOP/s)"
    )
    # without probes (or with a probe per round missing) the reason is the bare one
    assert assess_noise(0.0, 0.0, 2, rates)[1][0].endswith("> 10%")
    assert assess_noise(0.0, 0.0, 2, rates, probe_rates={"albertkit": [1e9]})[1][0].endswith(
        "> 10%")
    # a quiet run stays quiet whatever its probe did
    assert assess_noise(0.0, 0.0, 2, {"a": [3.0, 3.1]}, probe_rates={"a": [1e9, 3e9]}) == (
        False, [])


def test_load_rules_scale_with_the_cpu_count():
    rates = {"albertkit": [1.0, 1.0]}
    # 0.25 runnable threads per CPU: 0.5 on 2 CPUs, 4 on 16
    assert assess_noise(0.6, 0.0, 2, rates)[0] is True
    assert assess_noise(0.6, 0.0, 16, rates)[0] is False
    noisy, reasons = assess_noise(0.1, 0.9, 2, rates)
    assert noisy and reasons == ["other processes kept 0.90 threads runnable on average during "
                                 "the timed rounds > 0.25 x 2 CPUs"]
    noisy, reasons = assess_noise(1.5, None, 2, rates, load_per_cpu=0.5)
    assert noisy and reasons[0].startswith("1-minute load average 1.50 before the run > 0.5 x 2")
    assert assess_noise(None, None, 2, rates) == (False, [])  # no readings, no load verdict


def test_monitor_records_injected_readings():
    readings = iter([0.3, 1.7])  # load average before, then after
    seen_pids = []
    sampled_twice = threading.Event()  # the start's sample and one of the sampler thread

    def runnable(pids):
        seen_pids.append(set(pids))
        if len(seen_pids) >= 2:
            sampled_twice.set()
        return 2.0

    monitor = LoadMonitor(interval=0.01, load_average=lambda: next(readings),
                          runnable=runnable)
    monitor.add_pid(12345)
    monitor.start()
    assert sampled_twice.wait(timeout=60), "the sampler thread never took a sample"
    monitor.stop()
    assert monitor.before == 0.3 and monitor.after == 1.7
    assert len(monitor.samples) >= 2 and monitor.during == 2.0
    assert all(p == {os.getpid(), 12345} for p in seen_pids)


def _spinners(n: int) -> list[subprocess.Popen]:
    """``n`` busy processes, returned once each one is spinning (it says so first)."""
    code = "print('spinning', flush=True)\nwhile True: pass"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "spinning\n"
    return procs


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


def test_runnable_others_counts_a_busy_process_and_not_our_own():
    assert sys.platform.startswith("linux"), "/proc/loadavg is Linux's"
    (spinner,) = _spinners(1)
    try:
        seen = [runnable_others({os.getpid()}) for _ in range(20)]
        assert all(v is not None for v in seen)
        assert max(seen) >= 1.0  # the spinner is always runnable
    finally:
        _stop([spinner])


# --------------------------------------------------------------------------- whole runs
def test_loaded_run_is_marked_noisy(tmp_path):
    """A real busy process on every CPU while a tiny benchmark runs: the parent's sampler
    sees other processes' runnable threads and the result says so."""
    cpus = os.cpu_count() or 1
    busy = _spinners(cpus)
    try:
        settings = BenchmarkSettings(**TINY, xla="auto", precision="mixed_bfloat16")
        result = measure(settings, progress=False)
    finally:
        _stop(busy)
    assert result.load_during is not None and result.load_during > 0.25 * cpus
    assert result.noisy
    assert any("threads runnable on average during the timed rounds" in r
               for r in result.noisy_reasons)
    text = format_table(result)
    assert "**NOISY RESULT**" in text and "| albertkit (NOISY) |" in text
    data = json.loads(result.to_json())
    assert data["noisy"] is True and data["noisy_reasons"] == result.noisy_reasons
    assert data["load_before"] == result.load_before and "load_after" in data
    # the resolved XLA plan is recorded and shown: auto on CPU + bf16 compiles nothing
    plan = result.results["albertkit"].xla_plan
    assert plan is not None
    assert (plan.compute, plan.eval) == resolve_xla("auto", "cpu", "mixed_bfloat16")[:2]
    assert "XLA off (auto)" in text.splitlines()[0]
    # the planner checked the path that ran (no XLA)
    assert result.planner.estimate["state_bytes"]["weight_casts"] > 0
    path = tmp_path / "loaded.json"
    path.write_text(result.to_json())
    assert BenchmarkResult.read(path).noisy


def test_quiet_run_is_not_marked_noisy(tmp_path):
    """Quiet readings (injected: the test machine itself may be busy) and a spread
    threshold no two rounds can exceed: nothing to flag."""
    monitor = LoadMonitor(load_average=lambda: 0.05, runnable=lambda pids: 0.0)
    settings = BenchmarkSettings(**TINY, xla=False, noisy_spread_pct=1e6)
    result = measure(settings, progress=False, monitor=monitor)
    assert (result.noisy, result.noisy_reasons) == (False, [])
    assert result.load_before == 0.05 and result.load_during == 0.0
    assert result.load_after == 0.05
    assert set(result.round_spread_pct) == {"albertkit"}
    probe = result.results["albertkit"].matmul_flops_per_s_rounds
    assert result.probe_spread_pct == {"albertkit": pytest.approx(round_spread_pct(probe))}
    assert len(result.results["albertkit"].sequences_per_s_rounds) == 2
    text = format_table(result)
    assert "NOISY" not in text and "quiet by the thresholds" in text
    assert "XLA off" in text.splitlines()[0]

    # the same result with a noisy mark: the report shows it
    from albertkit.report.benchmark import write_benchmark_report

    quiet_path, noisy_path = tmp_path / "quiet.json", tmp_path / "noisy.json"
    quiet_path.write_text(result.to_json())
    marked = result.model_copy(update={"noisy": True, "noisy_reasons": ["rounds disagree"]})
    noisy_path.write_text(marked.to_json())
    md = write_benchmark_report([noisy_path], tmp_path / "r1").markdown.read_text()
    assert "(NOISY)" in md and "noisy.json is marked NOISY by the benchmark: rounds disagree" in md
    md = write_benchmark_report([quiet_path], tmp_path / "r2").markdown.read_text()
    assert "NOISY" not in md
