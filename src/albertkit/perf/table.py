"""The Markdown table ``albertkit benchmark`` prints (one row per framework)."""

from __future__ import annotations

from albertkit.models.options import RematMode, remat_mode
from albertkit.perf.result import BenchmarkResult, FrameworkResult


def _mib(x: float) -> str:
    return f"{x / 2**20:,.0f}"


def _xla(result: BenchmarkResult) -> str:
    """``XLA on``/``off``, or what ``auto`` resolved to per part."""
    s, plan = result.settings, result.results["albertkit"].xla_plan
    if plan is None:
        return f"XLA {'on' if s.xla is True else 'off' if s.xla is False else s.xla}"
    parts = "on" if plan.compute else "off"
    if plan.eval != plan.compute:
        parts = f"compute {parts}, eval {'on' if plan.eval else 'off'}"
    return f"XLA {parts}{' (auto)' if s.xla == 'auto' else ''}"


def _row(name: str, r: FrameworkResult) -> str:
    tensor = _mib(r.tensor_peak_bytes) if r.tensor_peak_bytes is not None else "-"
    return (f"| {name} | {r.sequences_per_s:.2f} | {r.step_s_median:.3f} "
            f"[{r.step_s_min:.3f}-{r.step_s_max:.3f}] | {r.spread_iqr_pct:.1f} | "
            f"{r.cpu_s_per_step:.2f} | {_mib(r.peak_bytes)} | {_mib(r.training_bytes)} | "
            f"{tensor} | {r.matmul_flops_per_s / 1e9:.1f} | {100 * r.mfu:.1f} | "
            f"{r.first_step_s:.1f} |")


def format_table(result: BenchmarkResult) -> str:
    """A Markdown table of a benchmark result, with the comparisons below it."""
    s = result.settings
    timed_steps = len(next(iter(result.results.values())).step_times_s)
    head = (f"ALBERT-{s.size} seq {s.seq_length} micro-batch {s.micro_batch} x "
            f"accumulation {s.accumulation}, {s.precision}, {_xla(result)}, {s.optimizer}"
            f"{_remat(s.remat)}"
            f"{f', sifting beta {s.sifting_beta}' if s.sifting_beta is not None else ''}"
            f"{', malloc arenas ' + str(s.malloc_arenas) if s.malloc_arenas else ''}; "
            f"{timed_steps} timed steps per framework ({s.rounds} interleaved rounds); load avg "
            f"{_load(result)}")
    mark = " (NOISY)" if result.noisy else ""
    lines = [head, ""]
    if result.noisy:
        lines += [f"**NOISY RESULT**: {'; '.join(result.noisy_reasons)}", ""]
    lines += [
        "| framework | seq/s (median) | step s median [min-max] | IQR % | CPU s/step | "
        "peak RSS MiB | train MiB | tensor MiB | matmul GFLOP/s | MFU % | first step s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [_row(f + mark, r) for f, r in result.results.items()]
    lines += [_row(f"albertkit x{n} processes", r) for n, r in result.data_parallel.items()]
    lines.append("")
    lines.append("peak RSS: the process's resident peak during the timed steps; train: minus "
                 "its RSS before the model was built; tensor: TensorFlow allocator peak; "
                 "MFU: median over rounds of model FLOP/s over the matmul peak measured just "
                 "before that round (albertkit's compiled as its step's compute: XLA or not)")
    for n, r in result.data_parallel.items():
        lines.append(f"{n} processes (tf_multiworker, global batch x{n}): scaling efficiency "
                     f"{100 * r.scaling_efficiency:.0f}% of {n} x the 1-process seq/s")
    if result.ratios_vs_hf is not None:
        q = result.ratios_vs_hf
        lines.append(f"albertkit / hf-pytorch: sequences/s x{q.sequences_per_s:.2f} "
                     f"(range x{q.sequences_per_s_worst_case:.2f}-"
                     f"x{q.sequences_per_s_best_case:.2f}), CPU s/step "
                     f"x{q.cpu_s_per_step:.2f}, peak memory x{q.peak_memory:.2f}, "
                     f"training memory x{q.training_memory:.2f}")
    ak = result.results["albertkit"]
    if ak.pipeline_sequences_per_s is not None and result.pipeline_over_step is not None:
        lines.append(f"input pipeline ({ak.pipeline_source}): "
                     f"{ak.pipeline_sequences_per_s:,.0f} seq/s = "
                     f"x{result.pipeline_over_step:.1f} the step's consumption; with "
                     f"dynamic masking (synthetic source): "
                     f"{ak.pipeline_synthetic_sequences_per_s or 0:,.0f} seq/s")
    elif ak.pipeline_source is not None:
        lines.append(f"input pipeline: {ak.pipeline_source}")
    if ak.breakdown_s is not None:
        lines += ["", "| piece (albertkit, median of 3) | seconds |", "|---|---:|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in ak.breakdown_s.items()]
    p = result.planner
    if p.measured_tensor_peak_bytes is not None and p.predicted_over_measured is not None:
        lines.append(f"memory planner: predicted {_mib(p.predicted_bytes)} MiB vs measured "
                     f"{_mib(p.measured_tensor_peak_bytes)} MiB peak of TensorFlow's allocator "
                     f"(x{p.predicted_over_measured:.2f})")
    else:
        lines.append(f"memory planner: predicted {_mib(p.predicted_bytes)} MiB of tensors (the "
                     f"default CPU allocator does not count them: --tensor-stats measures on BFC)")
    if result.round_spread_pct:
        spreads = ", ".join(f"{f} {v:.1f}%" for f, v in result.round_spread_pct.items())
        probes = ", ".join(f"{f} {v:.1f}%" for f, v in result.probe_spread_pct.items())
        probed = f" (of the matmul probe before each round: {probes})" if probes else ""
        lines.append(
            f"rounds: spread of per-round seq/s (max - min over median) {spreads}{probed}; "
            f"{'NOISY' if result.noisy else 'quiet'} by the thresholds "
            f"({s.noisy_load_per_cpu:g} runnable threads per CPU, {s.noisy_spread_pct:g}%)"
        )
    return "\n".join(lines)


def _load(result: BenchmarkResult) -> str:
    """The load readings: 1-minute average before/after, other processes during."""
    if result.load_before is None:
        return f"{result.machine.load_avg[0]:.1f}"
    during = (f", other processes' runnable threads during {result.load_during:.2f}"
              if result.load_during is not None else "")
    after = f", after {result.load_after:.2f}" if result.load_after is not None else ""
    return f"before {result.load_before:.2f}{during}{after}"


def _remat(remat: RematMode | bool) -> str:
    """The heading's remat part: nothing for the configuration's default (selective)."""
    mode = remat_mode(remat)
    return "" if mode == "selective" else f", remat {mode}"
