"""Running a benchmark: one worker process per framework (``python -m albertkit.perf
worker``), driven over JSON lines on stdin/stdout, so that each framework's peak memory is
its own process's (:class:`~albertkit.perf.meter.PeakMemory`), the rounds interleave (the
order alternating, so drifting load hits both) and only one framework computes at a time.

With ``processes`` above 1, albertkit's step also runs as that many local tf_multiworker
processes (``python -m albertkit.perf rank``, started by the local launcher); rank 0
prints its figures on one marked line.

Example (``measure`` starts a TensorFlow worker process and times training steps, which
takes longer than a test should; the settings are checked here):
    >>> settings = BenchmarkSettings(size="tiny", seq_length=32, micro_batch=2,
    ...                              steps=2, warmup=1, rounds=1)
    >>> settings.sequences_per_step, settings.compare  # albertkit alone
    (2, [])
    >>> result = measure(settings)  # doctest: +SKIP
    >>> from albertkit.perf import format_table
    >>> print(format_table(result))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from typing import Any

from albertkit.errors import BenchmarkError
from albertkit.hardware import cpu_bfloat16_flags
from albertkit.models.footprint import estimate_memory
from albertkit.perf.memory import training_flops
from albertkit.perf.noise import LoadMonitor, assess_noise, round_spread_pct
from albertkit.perf.result import (
    BenchmarkResult,
    DataParallelResult,
    FrameworkResult,
    Machine,
    PlannerCheck,
    RatiosVsHF,
    Round,
)
from albertkit.perf.settings import BenchmarkSettings
from albertkit.tfstart import start_tensorflow
from albertkit.training.native import limit_malloc_arenas

# Replies are found by this prefix: libraries may print to stdout too.
MARKER = "@@albertkit-benchmark "


def worker_env(tensor_stats: bool = False) -> dict[str, str]:
    """The environment of every benchmark process.

    TensorFlow's CPU allocator keeps the statistics the memory planner is checked against
    (``tf.config.experimental.get_memory_info("CPU:0")``) only when it is the BFC
    allocator. TensorFlow 2.21's CPU default depends on the CPU: it was not BFC on an
    AVX2-only CPU and was BFC on an Intel Xeon with AMX (where TensorFlow turns its oneDNN
    optimizations on by default). A training run uses the default, and BFC holds freed
    memory in its own pool (3,371 against 2,383 MiB peak resident memory for ALBERT-base at
    seq 128, batch 8, on the AVX2 CPU). So the workers run on the default allocator, as a
    training run does, unless ``tensor_stats`` asks for BFC (the planner check; a GPU
    always counts).
    """
    env = dict(os.environ)
    if tensor_stats:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


# =========================================================================== worker side
def worker_main(framework: str, settings_json: str, workers: dict[str, type] | None = None
                ) -> int:
    """Serve commands from the parent: one JSON object per line in, one per line out.

    ``workers`` maps each framework to its worker class (default: :class:`AlbertkitWorker`
    and :class:`HFWorker`); a measurement script serves subclasses with commands of its own.
    """
    from albertkit.perf.workers import AlbertkitWorker, HFWorker

    workers = workers or {"albertkit": AlbertkitWorker, "hf-pytorch": HFWorker}
    settings = BenchmarkSettings.model_validate_json(settings_json)
    if settings.malloc_arenas:
        limit_malloc_arenas(settings.malloc_arenas)
    if framework == "albertkit":
        start_tensorflow(quiet=False)  # as the trainer's process starts it (stderr is kept)
    worker = workers[framework](settings)
    out = sys.stdout
    for line in sys.stdin:
        args = json.loads(line)
        cmd = args.pop("cmd")
        try:
            if cmd == "exit":
                break
            reply = getattr(worker, cmd)(**args)  # setup(), steps(n=...), ...
            reply = {"ok": True, **reply}
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(MARKER + json.dumps(reply) + "\n")
        out.flush()
    return 0


def rank_main(settings_json: str) -> int:
    """One process of a launched data-parallel benchmark (TF_CONFIG set by the launcher)."""
    from albertkit.config import DistributedConfig
    from albertkit.distributed import build_distributor
    from albertkit.perf.workers import AlbertkitWorker

    settings = BenchmarkSettings.model_validate_json(settings_json)
    if settings.malloc_arenas:
        limit_malloc_arenas(settings.malloc_arenas)
    start_tensorflow(quiet=False)
    distributor = build_distributor(DistributedConfig(backend="tf_multiworker"))
    worker = AlbertkitWorker(settings, distributor)
    info = worker.setup()
    rounds = [worker.steps(settings.steps) for _ in range(settings.rounds)]
    if distributor.is_chief:
        print(MARKER + json.dumps({"info": info, "rounds": rounds}), flush=True)
    return 0


# =========================================================================== parent side
class WorkerProcess:
    """The parent's handle on one worker process.

    ``command`` starts the worker, which gets ``FRAMEWORK SETTINGS_JSON`` as its last two
    arguments and serves :func:`worker_main` (default: ``python -m albertkit.perf worker``).
    """

    def __init__(self, framework: str, settings: BenchmarkSettings,
                 command: list[str] | None = None) -> None:
        self.framework = framework
        env = worker_env(settings.tensor_stats and framework == "albertkit")
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in close()
        command = command or [sys.executable, "-m", "albertkit.perf", "worker"]
        self.proc = subprocess.Popen([*command, framework, settings.model_dump_json()],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, env=env)

    def call(self, cmd: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(MARKER):
                reply = json.loads(line[len(MARKER) :])
                if not reply.pop("ok"):
                    raise BenchmarkError(f"{self.framework} worker, {cmd}: {reply['error']}")
                return reply
        self.stderr.seek(0)
        tail = "".join(self.stderr.readlines()[-15:])
        raise BenchmarkError(
            f"{self.framework} worker died during {cmd!r} (exit code {self.proc.wait()}):\n{tail}"
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.poll() is None:
                assert self.proc.stdin
                self.proc.stdin.write(json.dumps({"cmd": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def _interleaved(settings: BenchmarkSettings, frameworks: list[str], progress: bool,
                 monitor: LoadMonitor) -> tuple[dict[str, dict[str, Any]], dict[str, list[Round]]]:
    """Set up one worker per framework, then alternate timed rounds between them; ``monitor``
    samples the load of other processes during the rounds."""
    from tqdm.auto import tqdm

    workers = {f: WorkerProcess(f, settings) for f in frameworks}
    for w in workers.values():
        monitor.add_pid(w.proc.pid)
    info: dict[str, dict[str, Any]] = {}
    rounds: dict[str, list[Round]] = {f: [] for f in frameworks}
    pipeline = settings.pipeline
    try:
        bar = tqdm(total=len(frameworks) * (settings.rounds + 1) + int(pipeline),
                   desc="benchmark", disable=not progress, unit="phase")
        with bar:
            for f, w in workers.items():  # one at a time: compilation is CPU-heavy
                bar.set_postfix_str(f"{f}: build + warm-up")
                info[f] = w.call("setup")
                bar.update()
            monitor.start()
            try:
                for r in range(settings.rounds):
                    for f in frameworks if r % 2 == 0 else frameworks[::-1]:
                        bar.set_postfix_str(f"round {r + 1}/{settings.rounds}: {f}")
                        reply = workers[f].call("steps", n=settings.steps)
                        rounds[f].append(Round.model_validate(reply))
                        bar.update()
            finally:
                monitor.stop()
            if pipeline:
                bar.set_postfix_str("input pipeline")
                info["albertkit"].update(workers["albertkit"].call("pipeline"))
                bar.update()
            if settings.breakdown:
                bar.set_postfix_str("step breakdown")
                info["albertkit"].update(workers["albertkit"].call("breakdown"))
    finally:
        for w in workers.values():
            w.close()
    return info, rounds


def measure(settings: BenchmarkSettings, progress: bool = True,
            monitor: LoadMonitor | None = None) -> BenchmarkResult:
    """Run the benchmark described by ``settings``.

    ``monitor`` takes the load readings (:mod:`albertkit.perf.noise`); by default a
    :class:`LoadMonitor` made now, before any worker starts.
    """
    monitor = monitor or LoadMonitor()
    frameworks: list[str] = ["albertkit", *[c for c in settings.compare if c != "albertkit"]]
    spec = settings.spec
    flops = training_flops(spec, settings.seq_length, settings.predictions)
    per_step = settings.sequences_per_step
    info, rounds = _interleaved(settings, frameworks, progress, monitor)
    results = {f: FrameworkResult.from_rounds(info[f], rounds[f], per_step, flops.training)
               for f in frameworks}
    ak = results["albertkit"]
    planned = estimate_memory(
        spec, settings.seq_length, settings.micro_batch, settings.precision,
        settings.predictions, settings.accumulation, remat=settings.remat,
        xla=ak.xla_plan.compute if ak.xla_plan is not None else settings.xla is True,
        device="gpu" if ak.device == "GPU" else "cpu")
    measured = ak.tensor_peak_bytes
    ratios = None
    if "hf-pytorch" in results:
        hf = results["hf-pytorch"]
        ratios = RatiosVsHF(
            sequences_per_s=ak.sequences_per_s / hf.sequences_per_s,
            sequences_per_s_worst_case=ak.sequences_per_s_min / hf.sequences_per_s_max,
            sequences_per_s_best_case=ak.sequences_per_s_max / hf.sequences_per_s_min,
            cpu_s_per_step=ak.cpu_s_per_step / hf.cpu_s_per_step,
            peak_memory=ak.peak_bytes / hf.peak_bytes,
            training_memory=ak.training_bytes / max(hf.training_bytes, 1),
        )
    multi = [n for n in settings.processes if n > 1]
    cpus = os.cpu_count() or 1
    rates = {f: r.sequences_per_s_rounds for f, r in results.items()}
    probes = {f: r.matmul_flops_per_s_rounds for f, r in results.items()}
    noisy, reasons = assess_noise(monitor.before, monitor.during, cpus, rates,
                                  settings.noisy_load_per_cpu, settings.noisy_spread_pct,
                                  probe_rates=probes)
    bf16_flags = cpu_bfloat16_flags()
    return BenchmarkResult(
        settings=settings,
        spec=spec,
        machine=Machine(platform=platform.platform(), python=platform.python_version(),
                        cpus=cpus, load_avg=list(os.getloadavg()),
                        cpu_bfloat16_flags=None if bf16_flags is None else list(bf16_flags)),
        model_flops_per_sequence=flops.training,
        model_flops_parts_forward=flops.parts,
        results=results,
        planner=PlannerCheck(
            predicted_bytes=planned.peak_bytes, measured_tensor_peak_bytes=measured,
            predicted_over_measured=planned.peak_bytes / measured if measured else None,
            estimate=planned.as_dict()),
        pipeline_over_step=(ak.pipeline_sequences_per_s / ak.sequences_per_s
                            if ak.pipeline_sequences_per_s is not None else None),
        ratios_vs_hf=ratios,
        data_parallel={str(n): measure_data_parallel(settings, n, ak.sequences_per_s)
                       for n in multi},
        load_before=monitor.before,
        load_during=monitor.during,
        load_after=monitor.after,
        round_spread_pct={f: round_spread_pct(v) for f, v in rates.items() if len(v) > 1},
        probe_spread_pct={f: round_spread_pct(v) for f, v in probes.items() if len(v) > 1},
        noisy=noisy,
        noisy_reasons=reasons,
    )


def measure_data_parallel(settings: BenchmarkSettings, processes: int,
                          one_process_sequences_per_s: float, timeout: float = 3600.0
                          ) -> DataParallelResult:
    """albertkit's step as ``processes`` local tf_multiworker processes (the CLI's --nproc).

    Every process runs ``warmup`` + ``rounds x steps`` steps of micro-batch x accumulation
    sequences each (so the global batch grows with the process count); rank 0 reports.
    The scaling efficiency compares with ``one_process_sequences_per_s``.
    """
    import io

    from albertkit.distributed.launch import launch_local

    out = io.StringIO()
    code = launch_local([sys.executable, "-m", "albertkit.perf", "rank",
                         settings.model_dump_json()], processes, "tf_multiworker",
                        env=worker_env(settings.tensor_stats), timeout=timeout, output=out)
    lines = [line.split(MARKER, 1)[1] for line in out.getvalue().splitlines() if MARKER in line]
    if code != 0 or not lines:
        tail = "\n".join(out.getvalue().splitlines()[-15:])
        raise BenchmarkError(
            f"--processes {processes}: the launched job failed (exit code {code}):\n{tail}"
        )
    reply = json.loads(lines[-1])
    per_step = processes * settings.sequences_per_step
    flops = training_flops(settings.spec, settings.seq_length, settings.predictions).training
    rounds = [Round.model_validate(r) for r in reply["rounds"]]
    fields = FrameworkResult.statistics_fields(reply["info"], rounds, per_step, flops)
    return DataParallelResult(
        **fields, processes=processes,
        scaling_efficiency=fields["sequences_per_s"] / (processes * one_process_sequences_per_s))
