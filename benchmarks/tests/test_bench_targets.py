"""benchmarks/bench_targets.py: the targets' ratios and verdicts."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from albertkit.hardware import cpu_bfloat16_flags
from albertkit.perf.result import BenchmarkResult, FrameworkResult, Machine, RatiosVsHF

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench_targets.py"
_spec = importlib.util.spec_from_file_location("bench_targets", SCRIPT)
bench = sys.modules["bench_targets"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)  # a script, not a package: its dataclasses need the entry
ROWS, ROW_BY_KEY, TARGETS = bench.ROWS, bench.ROW_BY_KEY, bench.TARGETS
evaluate, format_checks, format_rows = bench.evaluate, bench.format_checks, bench.format_rows
format_current = bench.format_current


def _result(ak_seq_s: float, speed: float | None = 1.0, memory: float = 1.0,
            reasons: tuple[str, ...] = (), bf16_flags: list[str] | None = None,
            device: str = "CPU") -> BenchmarkResult:
    """A result with only the fields the checks read (``model_construct``: no validation).
    ``speed``/``memory``: albertkit over Hugging Face; None: measured without HF.
    ``bf16_flags``: the CPU's bfloat16 instructions ([]: none; None: not recorded)."""
    ratios = None
    if speed is not None:
        ratios = RatiosVsHF(sequences_per_s=speed, sequences_per_s_worst_case=speed,
                            sequences_per_s_best_case=speed, cpu_s_per_step=1.0,
                            peak_memory=memory, training_memory=memory)
    machine = Machine(platform="Linux", python="3.11", cpus=2, load_avg=[0.0, 0.0, 0.0],
                      cpu_bfloat16_flags=bf16_flags)
    return BenchmarkResult.model_construct(
        machine=machine,
        results={"albertkit": FrameworkResult.model_construct(sequences_per_s=ak_seq_s,
                                                              device=device)},
        ratios_vs_hf=ratios, noisy=bool(reasons), noisy_reasons=list(reasons),
    )


def _check(checks, name_start: str):
    (check,) = [c for c in checks if c.name.startswith(name_start)]
    return check


def test_every_target_names_known_rows():
    keys = {r.key for r in ROWS}
    assert all(set(t.rows) <= keys for t in TARGETS)
    assert len({t.name for t in TARGETS}) == len(TARGETS)


def test_verdicts_against_the_limits():
    results = {
        "base128-float32": _result(2.0, speed=1.15, memory=1.01),  # on the speed limit
        "base128-bf16": _result(3.2, speed=1.10, memory=0.90),
        "base512-float32": _result(0.30, speed=1.10, memory=0.80),  # on the memory limit
        "base512-bf16": _result(0.44, speed=1.30, memory=0.70),
        "tiny128-float32": _result(200.0, speed=1.84, memory=1.2),
    }
    checks = evaluate(results)
    assert len(checks) == len(TARGETS)
    got = {c.name: (c.value, c.verdict) for c in checks}
    assert got["base 128 x 8 float32: sequences/s vs HF"] == (1.15, "met")
    assert got["base 128 x 8 mixed_bfloat16: sequences/s vs HF"] == (1.10, "not met")
    assert got["tiny 128 x 32 float32: sequences/s vs HF"] == (1.84, "not met")
    assert got["base 128 x 8 float32: peak resident memory vs HF"] == (1.01, "not met")
    assert got["base 512 x 4 float32: peak resident memory vs HF"] == (0.80, "met")
    # bfloat16 over float32 is albertkit's own sequences/s, from the two runs
    ratio = _check(checks, "base 128 x 8 mixed_bfloat16: albertkit sequences/s vs its")
    assert ratio.value == pytest.approx(3.2 / 2.0) and ratio.verdict == "met"
    ratio = _check(checks, "base 512 x 4 mixed_bfloat16: albertkit sequences/s vs its")
    assert ratio.value == pytest.approx(0.44 / 0.30) and ratio.verdict == "not met"
    assert all(not c.reasons for c in checks)


def test_a_noisy_run_counts_neither_way_for_speed():
    results = {
        "base128-float32": _result(2.0, speed=1.5, reasons=("load 1.9 before",)),
        "base128-bf16": _result(4.0, speed=1.5),
    }
    checks = evaluate(results)
    fp32 = _check(checks, "base 128 x 8 float32: sequences/s")
    assert fp32.verdict == "noisy" and fp32.reasons == ["base128-float32: load 1.9 before"]
    # the ratio uses the noisy float32 run too
    assert _check(checks, "base 128 x 8 mixed_bfloat16: albertkit").verdict == "noisy"
    assert _check(checks, "base 128 x 8 mixed_bfloat16: sequences/s").verdict == "met"
    # resident memory keeps its verdict, with the run's noise listed
    memory = _check(checks, "base 128 x 8 float32: peak")
    assert memory.verdict == "met" and memory.reasons == ["base128-float32: load 1.9 before"]
    missing = _check(checks, "base 512 x 4 mixed_bfloat16: albertkit")
    assert missing.verdict == "missing" and missing.value is None
    assert missing.reasons == ["base512-bf16: not measured", "base512-float32: not measured"]


def test_bfloat16_speed_is_emulated_without_bf16_instructions_memory_still_counts():
    results = {k: _result(1.0, speed=2.0, memory=0.5, bf16_flags=[])
               for k in ("base128-bf16", "base128-float32")}
    checks = evaluate(results)
    assert _check(checks, "base 128 x 8 mixed_bfloat16: sequences/s").verdict == "emulated"
    assert _check(checks, "base 128 x 8 mixed_bfloat16: albertkit").verdict == "emulated"
    memory = _check(checks, "base 128 x 8 mixed_bfloat16: peak")
    assert memory.verdict == "met" and "scratch memory may differ" in memory.reasons[0]
    assert _check(checks, "base 128 x 8 float32: sequences/s").verdict == "met"
    assert _check(checks, "base 128 x 8 float32: peak").reasons == []
    # with bfloat16 instructions, on a GPU, or not recorded (older results): judged
    for kwargs in ({"bf16_flags": ["avx512_bf16", "amx_bf16"]},
                   {"bf16_flags": [], "device": "GPU"}, {"bf16_flags": None}):
        results["base128-bf16"] = _result(1.0, speed=2.0, memory=0.5, **kwargs)
        assert _check(evaluate(results), "base 128 x 8 mixed_bfloat16: sequences/s").verdict \
            == "met", kwargs


def test_a_run_without_hugging_face_is_missing_its_ratios():
    checks = evaluate({"tiny128-float32": _result(100.0, speed=None)})
    tiny = _check(checks, "tiny 128 x 32 float32: sequences/s")
    assert tiny.verdict == "missing"
    assert tiny.reasons == ["tiny128-float32: measured without --compare hf-pytorch"]


def test_format_checks_lists_every_target_and_the_reasons():
    checks = evaluate({"base128-float32": _result(2.0, speed=1.2, reasons=("spread 12%",))})
    text = format_checks(checks)
    for c in checks:
        assert f"| {c.name} |" in text
    assert "| 1.20x | >= 1.15x | noisy |" in text
    assert "- base 128 x 8 float32: sequences/s vs HF: base128-float32: spread 12%" in text


def test_a_row_names_what_a_result_of_another_run_differs_in():
    from albertkit.perf.settings import BenchmarkSettings
    tiny = BenchmarkSettings(size="tiny", seq_length=128, micro_batch=32)
    result = BenchmarkResult.model_construct(settings=tiny)
    assert ROW_BY_KEY["tiny128-float32"].mismatch(result) is None
    assert ROW_BY_KEY["base128-float32"].mismatch(result) == (
        "size tiny (the row's is base), micro_batch 32 (the row's is 8)")


def test_from_reports_an_unreadable_result_by_name(tmp_path):
    (tmp_path / "base512-bf16.json").write_text("{\"settings\": {}}")
    proc = _run("--from", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "base512-bf16.json: not an `albertkit benchmark --json` result" in proc.stderr


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=900, cwd=cwd)


def test_script_rejects_unknown_rows(tmp_path):
    proc = _run("--out", str(tmp_path / "out"), "--rows", "base128-float32,huge", cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown row(s) huge" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.torch
def test_script_measures_a_row_keeps_it_and_evaluates_saved_results(tmp_path):
    out = tmp_path / "targets"
    proc = _run("--out", str(out), "--rows", "tiny128-float32", "--steps", "1", "--rounds",
                "1", "--warmup", "1", "--quiet-wait", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = BenchmarkResult.read(out / "tiny128-float32.json")
    assert result.settings.compare == ["hf-pytorch"] and result.settings.micro_batch == 32
    assert result.machine.cpu_bfloat16_flags == list(cpu_bfloat16_flags())
    checks = {c["name"]: c for c in json.loads((out / "targets.json").read_text())["checks"]}
    tiny = checks["tiny 128 x 32 float32: sequences/s vs HF"]
    assert tiny["value"] == pytest.approx(result.ratios_vs_hf.sequences_per_s)
    assert tiny["verdict"] in {"met", "not met", "noisy"}
    assert checks["base 128 x 8 float32: sequences/s vs HF"]["verdict"] == "missing"
    assert format_rows({"tiny128-float32": result}) in (out / "targets.md").read_text()
    # a second run keeps the saved row instead of measuring it again
    again = _run("--out", str(out), "--rows", "tiny128-float32", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "kept" in again.stdout
    assert BenchmarkResult.read(out / "tiny128-float32.json") == result
    # --from evaluates the saved results without running anything
    saved = _run("--from", str(out), cwd=tmp_path)
    assert saved.returncode == 0 and "| tiny 128 x 32 float32 |" in saved.stdout
    # a result saved under another row's name is refused, naming the file and the fields
    other = tmp_path / "other"
    other.mkdir()
    (other / "base128-float32.json").write_text((out / "tiny128-float32.json").read_text())
    wrong = _run("--from", str(other), cwd=tmp_path)
    assert wrong.returncode == 1
    assert "base128-float32.json: not a run of base128-float32: size tiny" in wrong.stderr


def test_the_docs_table_from_results():
    # docs/performance.md's "Current results" table, computed by hand from these figures
    from albertkit.perf.result import XlaChoice

    def run(ak, hf, ak_mib, hf_mib, noisy=False):
        xla = XlaChoice(compute=False, eval=False, reason="cpu")
        fw = {name: FrameworkResult.model_construct(sequences_per_s=s, peak_bytes=m * 2**20,
                                                    xla_plan=xla)
              for name, s, m in (("albertkit", ak, ak_mib), ("hf-pytorch", hf, hf_mib))}
        return BenchmarkResult.model_construct(results=fw, noisy=noisy)

    table = format_current({"tiny128-float32": run(293.6, 159.7, 859, 779),
                            "base128-float32": run(3.61, 3.02, 1809, 2357, noisy=True)})
    assert table.splitlines()[2:] == [
        "| base 128 x 8 (NOISY) | float32 (off) | 3.61 | 3.02 | 1.20x | 1,809 / 2,357 | 0.77x |",
        "| tiny 128 x 32 | float32 (off) | 293.6 | 159.7 | 1.84x | 859 / 779 | 1.10x |",
    ]
