"""Is a benchmark result to be trusted? Machine load around it and agreement between rounds.

:func:`assess_noise` marks a result **noisy** by three readings (docs/performance.md, "The
noise rule", says why each): the 1-minute load average *before* any worker starts; the
runnable threads of *other* processes sampled *during* the timed rounds
(:class:`LoadMonitor`; ``/proc``, Linux only: the load average itself counts the workers'
own threads); and the **round spread**, ``(max - min) / median`` of a framework's per-round
sequences/s. The load average *after* is kept for the record only. Each worker's matmul
probe (timed before every round) is quoted beside a round-spread reason: when it moved with
the step rate, the device changed speed. It is a diagnosis and changes no verdict.
Thresholds: :class:`~albertkit.perf.settings.BenchmarkSettings` ``noisy_load_per_cpu``
(0.25 runnable threads per CPU) and ``noisy_spread_pct`` (10 %).
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

LoadAverage = Callable[[], float]
RunnableOthers = Callable[[Iterable[int]], "float | None"]


def load_average_1min() -> float:
    """The 1-minute load average (``os.getloadavg()[0]``)."""
    return os.getloadavg()[0]


def _runnable_threads(pid: int) -> int:
    count = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0  # the process has ended
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) S ...": the state follows the last ')' (comm may hold spaces or ')').
        if stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "R":
            count += 1
    return count


def runnable_others(own_pids: Iterable[int]) -> float | None:
    """Runnable threads of the processes on this machine other than ``own_pids``, now.

    Counted from each other process's ``/proc/<pid>/task/*/stat`` (state ``R``), the threads
    the kernel's load average counts as running or waiting for a CPU. Counting only the
    others (rather than the kernel's total minus our own) avoids a race: our workers'
    threads change state between two reads. ``None`` where ``/proc`` does not exist.
    """
    own = set(own_pids)
    proc = Path("/proc")
    if not (proc / "self" / "task").is_dir():
        return None
    count = 0
    for entry in proc.iterdir():
        if entry.name.isdigit() and int(entry.name) not in own:
            count += _runnable_threads(int(entry.name))
    return float(count)


class LoadMonitor:
    """Load readings around a benchmark: before, during (sampled by a thread), after.

    ``load_average`` and ``runnable`` are the two readings (injectable, e.g. for tests);
    ``own_pids`` grows with :meth:`add_pid` as worker processes start.

    Example (with fixed readings; by default they come from ``/proc``):
        >>> monitor = LoadMonitor(interval=0.01, load_average=lambda: 0.5,
        ...                       runnable=lambda own_pids: 1.0)  # reads "before" now
        >>> monitor.add_pid(4242)  # a worker process: its threads are not load
        >>> monitor.start()  # ... the benchmark runs ...
        >>> monitor.stop()
        >>> monitor.before, monitor.during, monitor.after
        (0.5, 1.0, 0.5)
    """

    def __init__(self, interval: float = 0.5, load_average: LoadAverage = load_average_1min,
                 runnable: RunnableOthers = runnable_others) -> None:
        self.interval = interval
        self._load_average = load_average
        self._runnable = runnable
        self.own_pids = {os.getpid()}
        self.before = load_average()
        self.after: float | None = None
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def add_pid(self, pid: int) -> None:
        with self._lock:
            self.own_pids.add(pid)

    def _sample(self) -> None:
        with self._lock:
            pids = set(self.own_pids)
        value = self._runnable(pids)
        if value is not None:
            self.samples.append(float(value))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> None:
        """Start sampling (one sample now, then every ``interval`` seconds)."""
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="load-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (one last sample) and read the load average after."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample()
        self.after = self._load_average()

    @property
    def during(self) -> float | None:
        """Mean runnable threads of other processes over the samples (``None``: none)."""
        return statistics.fmean(self.samples) if self.samples else None


def round_spread_pct(rates: list[float]) -> float:
    """``100 (max - min) / median`` of per-round rates; 0 for fewer than two rounds."""
    if len(rates) < 2:
        return 0.0
    return 100.0 * (max(rates) - min(rates)) / statistics.median(rates)


def assess_noise(load_before: float | None, load_during: float | None, cpus: int,
                 round_rates: Mapping[str, list[float]], load_per_cpu: float = 0.25,
                 spread_pct: float = 10.0, probe_rates: Mapping[str, list[float]] | None = None,
                 ) -> tuple[bool, list[str]]:
    """Whether a result is noisy, and why (module docstring: the three rules).

    ``round_rates`` maps each framework to its per-round sequences/s; ``probe_rates``
    (optional) to its matmul probe's FLOP/s before each round, quoted in a round-spread
    reason so the reader sees whether the device's speed moved too.

    Example:
        >>> assess_noise(0.1, 0.0, 2, {"albertkit": [3.0, 3.6]})
        (True, ['albertkit: rounds disagree by 18.2% (per-round seq/s 3.00-3.60) > 10%'])
    """
    cpus = max(int(cpus), 1)
    limit = load_per_cpu * cpus
    reasons = []
    if load_before is not None and load_before > limit:
        reasons.append(f"1-minute load average {load_before:.2f} before the run > "
                       f"{load_per_cpu:g} x {cpus} CPUs")
    if load_during is not None and load_during > limit:
        reasons.append(f"other processes kept {load_during:.2f} threads runnable on average "
                       f"during the timed rounds > {load_per_cpu:g} x {cpus} CPUs")
    for framework, rates in round_rates.items():
        spread = round_spread_pct(rates)
        if spread > spread_pct:
            reason = (f"{framework}: rounds disagree by {spread:.1f}% (per-round seq/s "
                      f"{min(rates):.2f}-{max(rates):.2f}) > {spread_pct:g}%")
            probes = (probe_rates or {}).get(framework, [])
            if len(probes) == len(rates) and len(probes) > 1:
                reason += (f"; its matmul probe moved by {round_spread_pct(probes):.1f}% over "
                           f"the same rounds ({min(probes) / 1e9:.0f}-{max(probes) / 1e9:.0f} "
                           "GFLOP/s)")
            reasons.append(reason)
    return bool(reasons), reasons
