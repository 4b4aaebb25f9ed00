"""The typed result of ``albertkit benchmark``: what ``--json`` writes and the report reads.

One :class:`BenchmarkResult` per invocation (one shape): the settings and architecture,
the machine, one :class:`FrameworkResult` per framework (1 process each), the memory
planner's prediction against the measured peak, and, with ``--processes``, one
:class:`DataParallelResult` per process count. Workers report :class:`Round` measurements;
:meth:`FrameworkResult.from_rounds` turns them into the statistics.

Optional figures (the input pipeline, the step breakdown, the allocator peak that only
TensorFlow reports, the comparison with Hugging Face) are ``None`` when not measured and
left out of the JSON file.

Example (the statistics of one round of three steps of 8 sequences, at 2 GFLOP per
sequence on a device whose matmul probe ran at 200 GFLOP/s):
    >>> rounds = [Round(times=[0.10, 0.12, 0.11], cpu_s=0.6, peak_bytes=900 << 20,
    ...                 matmul_flops_per_s=2e11, matmul_n=1024, matmul_dtype="float32")]
    >>> stats = FrameworkResult.statistics_fields({"baseline_rss": 500 << 20}, rounds,
    ...                                           per_step=8, flops_per_sequence=2e9)
    >>> round(stats["step_s_median"], 3), round(stats["sequences_per_s"], 1)
    (0.11, 72.7)
    >>> stats["training_bytes"] >> 20, round(stats["mfu"], 3)  # MiB above the baseline; MFU
    (400, 0.727)

    A file written by ``albertkit benchmark --json`` reads back typed (not run here: making
    one takes a benchmark run); anything else is refused with the file and the field:

    >>> result = BenchmarkResult.read("base128.json")  # doctest: +SKIP
    >>> result.results["albertkit"].sequences_per_s  # doctest: +SKIP
    41.3
    >>> _ = Path("notes.json").write_text('{"settings": {}}')
    >>> BenchmarkResult.read("notes.json")
    Traceback (most recent call last):
    albertkit.errors.BenchmarkError: notes.json: not an `albertkit benchmark --json` result: ...
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from albertkit.config.sizes import AlbertSpec
from albertkit.errors import BenchmarkError
from albertkit.perf.settings import BenchmarkSettings


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Round(_Model):
    """One timed round of one worker: ``steps`` step times and what was measured meanwhile."""

    times: list[float]
    cpu_s: float
    peak_bytes: int
    tensor_peak_bytes: int | None = None  # TensorFlow's allocator (albertkit only)
    tensor_current_bytes: int | None = None
    matmul_flops_per_s: float  # the device's matmul peak, measured just before the round
    matmul_n: int
    matmul_dtype: str


class XlaChoice(_Model):
    """What ``settings.xla`` resolved to in albertkit's worker (``albertkit.hardware.XlaPlan``)."""

    compute: bool
    eval: bool
    reason: str


class FrameworkResult(_Model):
    """One framework's figures: what its worker reported at setup, and step statistics."""

    # ---- reported by the worker's setup (and the albertkit worker's extra measurements)
    framework: str
    params: int
    baseline_rss: int  # RSS before the model was built
    build_s: float
    first_step_s: float
    threads: dict[str, int]
    device: str
    memory_method: str
    versions: dict[str, str]
    attention: str | None = None  # Hugging Face's attention implementation
    pipeline_source: str | None = None
    pipeline_tfrecord_sequences_per_s: float | None = None
    pipeline_synthetic_sequences_per_s: float | None = None
    pipeline_sequences_per_s: float | None = None
    breakdown_s: dict[str, float] | None = None
    xla_plan: XlaChoice | None = None  # albertkit: the parts XLA compiled
    # ---- step-time statistics over all rounds
    step_s_median: float
    step_s_min: float
    step_s_max: float
    step_s_q1: float
    step_s_q3: float
    spread_iqr_pct: float
    sequences_per_s: float
    sequences_per_s_min: float
    sequences_per_s_max: float
    sequences_per_s_rounds: list[float] = []  # per round: sequences / its median step time
    step_times_s: list[float]
    # ---- memory and compute
    peak_bytes: int
    training_bytes: int
    cpu_s_per_step: float
    tensor_peak_bytes: int | None = None
    matmul_flops_per_s: float
    matmul_flops_per_s_rounds: list[float]
    model_flops_per_s: float
    mfu: float
    mfu_rounds: list[float]

    @classmethod
    def statistics_fields(
        cls, info: dict[str, Any], rounds: list[Round], per_step: int, flops_per_sequence: float
    ) -> dict[str, Any]:
        """The fields of a result: ``info`` plus statistics over all rounds' step times."""
        times = [t for r in rounds for t in r.times]
        ordered = sorted(times)
        q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
        median = statistics.median(ordered)
        peak = max(r.peak_bytes for r in rounds)
        tensor_peaks = [r.tensor_peak_bytes for r in rounds if r.tensor_peak_bytes is not None]
        # The matmul peak is measured right before each round, so each round's MFU compares
        # the step with the device under the same load; the median over rounds is reported.
        mfus = [
            per_step * flops_per_sequence / statistics.median(r.times) / r.matmul_flops_per_s
            for r in rounds
        ]
        return {
            **info,
            "step_s_median": median,
            "step_s_min": ordered[0],
            "step_s_max": ordered[-1],
            "step_s_q1": q[0],
            "step_s_q3": q[2],
            "spread_iqr_pct": 100.0 * (q[2] - q[0]) / median,
            "sequences_per_s": per_step / median,
            "sequences_per_s_min": per_step / ordered[-1],
            "sequences_per_s_max": per_step / ordered[0],
            "sequences_per_s_rounds": [per_step / statistics.median(r.times) for r in rounds],
            "step_times_s": times,
            "peak_bytes": peak,
            "training_bytes": peak - info["baseline_rss"],
            "cpu_s_per_step": sum(r.cpu_s for r in rounds) / len(times),
            "tensor_peak_bytes": max(tensor_peaks) if tensor_peaks else None,
            "matmul_flops_per_s": max(r.matmul_flops_per_s for r in rounds),
            "matmul_flops_per_s_rounds": [r.matmul_flops_per_s for r in rounds],
            "model_flops_per_s": per_step / median * flops_per_sequence,
            "mfu": statistics.median(mfus),
            "mfu_rounds": mfus,
        }

    @classmethod
    def from_rounds(
        cls, info: dict[str, Any], rounds: list[Round], per_step: int, flops_per_sequence: float
    ) -> FrameworkResult:
        """One framework's result from its setup ``info`` and its timed ``rounds``."""
        return cls(**cls.statistics_fields(info, rounds, per_step, flops_per_sequence))


class DataParallelResult(FrameworkResult):
    """albertkit's step as ``processes`` local tf_multiworker processes (rank 0's figures)."""

    processes: int
    scaling_efficiency: float  # sequences/s over processes x the 1-process sequences/s


class Machine(_Model):
    platform: str
    python: str
    cpus: int | None
    load_avg: list[float]
    # albertkit.hardware.cpu_bfloat16_flags(): the CPU's bfloat16 instructions ([]: none,
    # bfloat16 is emulated); None where /proc/cpuinfo cannot tell (and in older results)
    cpu_bfloat16_flags: list[str] | None = None


class PlannerCheck(_Model):
    """The memory planner's prediction against TensorFlow's measured allocator peak."""

    predicted_bytes: int
    measured_tensor_peak_bytes: int | None = None  # None: the allocator did not count (CPU, not BFC)
    predicted_over_measured: float | None = None
    estimate: dict[str, Any]  # albertkit.models.footprint.MemoryEstimate.as_dict()


class RatiosVsHF(_Model):
    """albertkit over Hugging Face PyTorch (above 1: albertkit has more of it)."""

    sequences_per_s: float
    sequences_per_s_worst_case: float
    sequences_per_s_best_case: float
    cpu_s_per_step: float
    peak_memory: float
    training_memory: float


class BenchmarkResult(_Model):
    """Everything one ``albertkit benchmark`` invocation measured."""

    settings: BenchmarkSettings
    spec: AlbertSpec
    machine: Machine
    model_flops_per_sequence: float
    model_flops_parts_forward: dict[str, float]
    results: dict[str, FrameworkResult]  # framework -> its 1-process result
    planner: PlannerCheck
    pipeline_over_step: float | None = None
    ratios_vs_hf: RatiosVsHF | None = None
    data_parallel: dict[str, DataParallelResult] = {}  # str(process count) -> result
    # ---- honesty (albertkit.perf.noise): load around the 1-process rounds, round agreement
    load_before: float | None = None  # 1-minute load average before the workers started
    load_during: float | None = None  # mean runnable threads of other processes, sampled
    load_after: float | None = None  # 1-minute load average after (includes our own work)
    round_spread_pct: dict[str, float] = {}  # framework -> (max - min) / median, per round
    # framework -> the same spread of the matmul probe taken before each round: did the
    # device's speed move with the rounds? (a diagnosis; no verdict rests on it)
    probe_spread_pct: dict[str, float] = {}
    noisy: bool = False
    noisy_reasons: list[str] = []

    def to_json(self) -> str:
        """The JSON file ``--json`` writes (unmeasured optional figures left out)."""
        data = self.model_dump(mode="json", exclude_none=True)
        # Settings and architecture are written whole, None included: a result file says
        # exactly what was asked for.
        data["settings"] = self.settings.model_dump(mode="json")
        data["spec"] = self.spec.model_dump(mode="json")
        if not self.data_parallel:
            del data["data_parallel"]  # measured only with --processes above 1
        return json.dumps(data, indent=2)

    @classmethod
    def read(cls, path: str | Path) -> BenchmarkResult:
        """A result written by ``albertkit benchmark --json``; errors name the file and field."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BenchmarkError(f"benchmark results not found: {path}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise BenchmarkError(f"{path}: unreadable benchmark results: {e}") from None
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            more = f" (and {e.error_count() - 1} more problems)" if e.error_count() > 1 else ""
            raise BenchmarkError(
                f"{path}: not an `albertkit benchmark --json` result: {where}: "
                f"{first['msg']}{more}"
            ) from None
