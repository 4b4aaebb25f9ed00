"""Shared test settings. With ALBERTKIT_FORBID_SKIPS=1 (CI) any skipped test fails the run."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_skipped: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("ALBERTKIT_FORBID_SKIPS") == "1" and _skipped:
        print(f"\nERROR: {len(_skipped)} test(s) were skipped; CI forbids skips:")
        for nodeid in _skipped:
            print(f"  {nodeid}")
        session.exitstatus = 1
