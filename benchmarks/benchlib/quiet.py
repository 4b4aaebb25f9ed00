"""Waiting for a quiet machine before a measurement starts."""

from __future__ import annotations

import time
from collections.abc import Callable

from albertkit.perf.noise import LoadAverage, load_average_1min


def wait_until_quiet(limit: float, timeout: float,
                     load_average: LoadAverage = load_average_1min,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], object] = time.sleep) -> float:
    """Wait until the 1-minute load average is at most ``limit``, or ``timeout`` seconds
    have passed (saying so once on stdout); return the last reading. A benchmark started
    right after another would otherwise see the previous one's load. ``clock`` and
    ``sleep`` tell and pass the time (injectable, e.g. for tests)."""
    start = clock()
    load = load_average()
    announced = False
    while load > limit and clock() - start < timeout:
        if not announced:
            print(f"  waiting for load average <= {limit:.2f} (now {load:.2f}; "
                  f"at most {timeout:.0f} s)", flush=True)
            announced = True
        sleep(5)
        load = load_average()
    return load
