"""Resident memory: the heap trim after each compiled entry point's first call, and the
benchmark measuring the allocator a training run uses (TensorFlow's default on CPU)."""

from __future__ import annotations

import ctypes

from albertkit.perf.runner import worker_env
from albertkit.training import native
from test_step import config as step_config
from test_xla_plan import _batch, _build


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_release_free_memory_returns_freed_heap_to_the_system():
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallopt(-1, 512 * 1024 * 1024)  # M_TRIM_THRESHOLD: free() itself never trims
    blocks = [libc.malloc(64 * 1024) for _ in range(3000)]  # ~190 MiB below mmap threshold
    for b in blocks:  # touch every page so it is resident
        ctypes.memset(b, 1, 64 * 1024)
    held = _rss_mib()
    for b in blocks:
        libc.free(b)
    before = _rss_mib()
    assert before > held - 50, "glibc kept the freed heap (nothing to trim otherwise)"
    assert native.release_free_memory() is True
    after = _rss_mib()
    assert before - after > 100, (held, before, after)


def test_step_trims_once_per_entry_point_after_its_first_call(monkeypatch):
    import albertkit.training.step as step_module

    calls: list[int] = []
    monkeypatch.setattr(step_module, "release_free_memory", lambda: calls.append(1) or True)
    _, step = _build(step_config(xla=False))
    batch = _batch()
    step(batch)
    assert len(calls) == 1  # after the compiling call
    step(batch)
    step(batch)
    assert len(calls) == 1  # not on later steps
    micro = {k: v[0] for k, v in batch.items()}
    step.evaluate_batch(micro)
    step.evaluate_batch(micro)
    assert len(calls) == 2  # the evaluation function's own first call
    step.predict(micro)
    assert len(calls) == 3


def test_benchmark_workers_use_the_trainers_allocator_unless_asked(monkeypatch):
    monkeypatch.delenv("TF_CPU_ALLOCATOR_USE_BFC", raising=False)
    assert "TF_CPU_ALLOCATOR_USE_BFC" not in worker_env()
    assert worker_env(tensor_stats=True)["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
