"""Where training time goes: each logging window split into input wait, compute,
reduce/apply, checkpoint, eval and the rest, plus utilisation per rank.

The loop asks a :class:`StepClock` for every batch and every step, and times each hook. Most
steps run fused (one compiled call); one step per window (``split_every``) runs as its two
halves (:meth:`TrainStep.split`), each timed to its end, which gives the compute share of a
step. A window's fused step time is divided between ``compute`` and ``apply`` by the latest
such measurement; everything else is measured directly. So the window's parts add up to its
wall time, with ``other`` (logging, the progress bar, Python) the remainder.

Example:
    >>> clock = StepClock(split_every=0)
    >>> with clock.input():
    ...     batch = [1]
    >>> 0.0 <= clock.window()["input_share"] <= 1.0
    True
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from albertkit.distributed import Distributor

log = logging.getLogger("albertkit")

PARTS = ("input", "compute", "apply", "checkpoint", "eval")

# The input-bound verdict is given on at least this much wall time: shorter windows (a tiny
# model logging every few steps) are pooled with the next ones, because in a window of tens
# of milliseconds one scheduler pause decides the input share.
JUDGED_SECONDS = 1.0


class StepClock:
    """Times a training run's windows.

    Args:
        split_every: run one step in each ``split_every`` as its two timed halves (0 = never:
            the step time is then reported whole, as ``step_s``).
        input_bound_share: warn when input wait exceeds this share of a window (windows
            shorter than ``JUDGED_SECONDS`` are judged pooled with the next ones).
        distributor: with several ranks, each window's per-rank figures are gathered to
            every rank (a collective: every rank must call :meth:`window` at the same step).
        gpu: sample this process's GPU through NVML (``nvidia-ml-py``); absent -> nothing.
        clock: the seconds counter every time is read from (tests drive a fake one).
    """

    def __init__(self, split_every: int = 0, input_bound_share: float = 0.2,
                 distributor: Distributor | None = None, gpu: bool = False, *,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.split_every = split_every
        self.input_bound_share = input_bound_share
        self.distributor = distributor
        self.compute_share: float | None = None  # of a step, from the latest timed split
        self._splits = 0
        self.last_split: dict[str, float] | None = None  # seconds of the latest timed halves
        self.input_bound = False
        self.ever_input_bound = False
        self._pooled = {"input": 0.0, "wall": 0.0, "steps": 0}  # windows not yet judged
        self.nvml = NvmlSampler.start(distributor) if gpu else None
        self._reset()

    def _reset(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.step_seconds = 0.0  # all steps, not yet divided
        self.fused_seconds, self.fused_steps = 0.0, 0
        self._split_in_window: dict[str, float] | None = None
        self.steps = 0
        self.started = self.clock()
        self.cpu_started = time.process_time()

    # ------------------------------------------------------------------ measuring
    @contextmanager
    def input(self) -> Iterator[None]:
        t = self.clock()
        yield
        self.seconds["input"] += self.clock() - t

    def step(self, step: int, step_fn: Any, batch: Any) -> dict[str, float]:
        """Run optimizer step number ``step`` (fused, or split on its sampled steps: the
        middle step of each window after the first) and return its outputs as floats."""
        every = self.split_every
        t = self.clock()
        if every and step > every and step % every == every // 2:
            raw, halves = step_fn.split(batch)
            out = {k: float(v) for k, v in raw.items()}
            self._splits += 1
            if self._splits > 1:  # the first one also traces the halves: not a measurement
                self.compute_share = halves["compute"] / (halves["compute"] + halves["apply"])
                self.last_split = halves
                self._split_in_window = halves
        else:
            out = {k: float(v) for k, v in step_fn(batch).items()}
            self.fused_seconds += self.clock() - t
            self.fused_steps += 1
        self.step_seconds += self.clock() - t
        self.steps += 1
        return out

    @contextmanager
    def hook(self, hook: Any) -> Iterator[None]:
        part = getattr(hook, "time_part", None)
        t = self.clock()
        yield
        if part is not None:
            self.seconds[part] += self.clock() - t

    # ------------------------------------------------------------------ reporting
    def window(self) -> dict[str, float]:
        """The window since the last call, in seconds per step and shares of its wall time,
        with this process's CPU (and GPU) utilisation; then a new window starts."""
        wall = max(self.clock() - self.started, 1e-9)
        n = max(self.steps, 1)
        parts = dict(self.seconds)
        if self.compute_share is not None:
            parts["compute"] += self.step_seconds * self.compute_share
            parts["apply"] += self.step_seconds * (1.0 - self.compute_share)
            undivided = 0.0
        else:
            undivided = self.step_seconds
        other = max(wall - sum(parts.values()) - undivided, 0.0)
        out = {f"{k}_s": v / n for k, v in parts.items()}
        out["other_s"] = other / n
        if undivided:
            out["step_s"] = undivided / n
        out["wall_s"] = wall / n
        if self._split_in_window is not None and self.fused_steps:
            # the check on the division: the two timed halves against a fused step
            out["split_compute_s"] = self._split_in_window["compute"]
            out["split_apply_s"] = self._split_in_window["apply"]
            out["fused_step_s"] = self.fused_seconds / self.fused_steps
        for k, v in parts.items():
            out[f"{k}_share"] = v / wall
        out["other_share"] = other / wall
        if undivided:  # before the first timed split: the step as a whole
            out["step_share"] = undivided / wall
        cpu = (time.process_time() - self.cpu_started) / wall / (os.cpu_count() or 1)
        mine = {"input_share": out["input_share"], "cpu_util": cpu}
        if self.nvml is not None:
            mine.update(self.nvml.window())
        out.update(self._per_rank(mine))
        self._judge_input(parts["input"], wall, self.steps)
        self._reset()
        return out

    def _per_rank(self, mine: dict[str, float]) -> dict[str, float]:
        dist = self.distributor
        if dist is None or dist.size == 1:
            return {f"rank0_{k}": v for k, v in mine.items() if k != "input_share"}
        import tensorflow as tf

        # a sum of one-hot rows is a gather: rank r fills row r (NaN-free: -1 = not sampled)
        keys = ("input_share", "cpu_util", "gpu_util", "gpu_memory_gib")
        row = [float(mine.get(k, -1.0)) for k in keys]
        table = [[0.0] * len(keys) for _ in range(dist.size)]
        table[dist.rank] = row
        flat = tf.constant(table, tf.float32)
        total = dist.local_value(dist.run(lambda t: dist.reduce_sum({"t": t}), flat))["t"]
        out = {}
        for r, values in enumerate(total.numpy().tolist()):
            for k, v in zip(keys, values, strict=True):
                if v >= 0:
                    out[f"rank{r}_{k}"] = v
        return out

    def _judge_input(self, input_seconds: float, wall: float, steps: int) -> None:
        pool = self._pooled
        pool["input"] += input_seconds
        pool["wall"] += wall
        pool["steps"] += steps
        if pool["wall"] < JUDGED_SECONDS:
            return
        share, steps = pool["input"] / pool["wall"], pool["steps"]
        self._pooled = {"input": 0.0, "wall": 0.0, "steps": 0}
        bound = share > self.input_bound_share
        if bound and not self.input_bound:
            log.warning(
                "input-bound: %.0f%% of the last %d steps' time went to waiting for data "
                "(threshold logging.input_bound_share=%.0f%%): more parallel reads or "
                "preprocessing (data.num_parallel_calls), faster storage, or "
                "prepare-data ahead of training", 100 * share, steps,
                100 * self.input_bound_share)
        elif self.input_bound and not bound:
            log.info("no longer input-bound (%.0f%% waiting for data)", 100 * share)
        self.input_bound = bound
        self.ever_input_bound |= bound

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.stop()


class NvmlSampler:
    """This process's GPU utilisation and memory, sampled by NVML in a thread.

    Started only if ``pynvml`` (from ``nvidia-ml-py``) imports and NVML finds a GPU;
    otherwise :meth:`start` returns None and nothing is sampled.
    """

    def __init__(self, nvml: Any, handle: Any, every: float = 0.5) -> None:
        self._nvml, self._handle, self._every = nvml, handle, every
        self._lock = threading.Lock()
        self._sums = [0.0, 0.0, 0]
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="albertkit-nvml", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, distributor: Distributor | None = None) -> NvmlSampler | None:
        try:
            import pynvml

            pynvml.nvmlInit()
            if pynvml.nvmlDeviceGetCount() == 0:
                return None
            index = _physical_gpu_index(getattr(distributor, "local_rank", 0) or 0)
            return cls(pynvml, pynvml.nvmlDeviceGetHandleByIndex(index))
        except Exception as e:  # no library, no driver, no GPU: nothing to sample
            log.debug("no NVML sampling: %s", e)
            return None

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
                mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
            except Exception as e:
                log.debug("NVML sample failed: %s", e)
                continue
            with self._lock:
                self._sums[0] += float(util.gpu) / 100.0
                self._sums[1] += float(mem.used) / 2**30
                self._sums[2] += 1

    def window(self) -> dict[str, float]:
        with self._lock:
            util, mem, n = self._sums
            self._sums = [0.0, 0.0, 0]
        if not n:
            return {}
        return {"gpu_util": util / n, "gpu_memory_gib": mem / n}

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=2)


def _physical_gpu_index(local: int) -> int:
    """NVML counts physical GPUs; CUDA_VISIBLE_DEVICES renumbers them for the process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if ids and all(v.isdigit() for v in ids):
        return int(ids[min(local, len(ids) - 1)])
    return local


def breakdown_sentence(shares: dict[str, float]) -> str:
    """One sentence naming where most of the time went, from a window's ``*_share`` values."""
    named = {"input": "waiting for input data", "compute": "compute (forward and backward)",
             "apply": "gradient reduction and the optimizer update (communication)",
             "checkpoint": "writing checkpoints", "eval": "evaluation", "other": "other work",
             "step": "the training step (compute and update, not yet told apart)"}
    top = max(named, key=lambda k: shares.get(f"{k}_share", 0.0))
    return (f"Most of the step time went to {named[top]} "
            f"({100 * shares.get(f'{top}_share', 0.0):.0f}%).")

