"""Measuring one process: its peak resident memory and the wall time of repeated calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path


class PeakMemory:
    """Peak resident memory of this process since the last :meth:`reset` (bytes).

    Linux keeps the exact high-water mark (``VmHWM``) and resets it when "5" is written to
    ``/proc/self/clear_refs``; that catches peaks a sampler would miss. Where that fails, a
    psutil thread samples RSS every 2 ms. On a GPU, TensorFlow's allocator peak is used.
    """

    def __init__(self) -> None:
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()
        self._peak = 0
        self.method = "VmHWM"
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self._hwm()
        except OSError:
            self.method = "psutil-sampling"

    @staticmethod
    def _hwm() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise OSError("no VmHWM in /proc/self/status")

    @staticmethod
    def rss() -> int:
        import psutil

        return int(psutil.Process().memory_info().rss)

    def reset(self) -> None:
        if self.method == "VmHWM":
            Path("/proc/self/clear_refs").write_text("5")
            return
        self.stop()
        self._peak = self.rss()
        self._stop.clear()

        def sample() -> None:
            while not self._stop.wait(0.002):
                self._peak = max(self._peak, self.rss())

        self._sampler = threading.Thread(target=sample, daemon=True)
        self._sampler.start()

    def stop(self) -> None:
        if self._sampler is not None:
            self._stop.set()
            self._sampler.join()
            self._sampler = None

    def peak(self) -> int:
        if self.method == "VmHWM":
            return self._hwm()
        return max(self._peak, self.rss())


def timed(fn: Callable[[], object], n: int) -> list[float]:
    """Wall seconds of ``n`` calls of ``fn`` (each call must wait for its own work)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times
