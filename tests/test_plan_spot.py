"""The spot model of :mod:`albertkit.plan.spot`: the closed-form best checkpoint interval
against a brute-force minimisation of the expected-time formula it is derived from, against
Young's first-order optimum, and against Daly's exact model for exponential interruptions;
and the interval ``albertkit plan`` reports."""

from __future__ import annotations

import math

import numpy as np
import pytest

from albertkit import TrainerConfig
from albertkit.plan import optimal_checkpoint_interval, plan_fleets
from albertkit.plan.spot import best_every_steps, expected_hours

# (checkpoint write C, restart R, hours between interruptions M), in hours: from ALBERT-base's
# seconds-long write to a minutes-long one, and from one interruption a day to a few an hour
CASES = [(1.4 / 3600, 0.25, 3.0), (2 / 3600, 0.25, 24.0), (60 / 3600, 0.1, 1.0),
         (0.1, 0.5, 10.0), (5 / 3600, 0.0, 0.5)]


def brute_force_minimum(f, low: float, high: float) -> float:
    """The argmin of ``f`` over ``[low, high]``: a dense log grid, then a finer grid around
    the best point (no calculus: the reference the closed form is checked against)."""
    grid = np.geomspace(low, high, 20_001)
    values = np.array([f(x) if f(x) is not None else np.inf for x in grid])
    i = int(np.argmin(values))
    fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 20_001)
    values = np.array([f(x) if f(x) is not None else np.inf for x in fine])
    return float(fine[int(np.argmin(values))])


@pytest.mark.parametrize(("c", "r", "m"), CASES)
def test_the_closed_form_is_the_minimum_of_the_expected_time(c, r, m):
    tau = optimal_checkpoint_interval(c, r, m)
    numeric = brute_force_minimum(lambda x: expected_hours(100.0, x, c, r, m), 1e-6, 2 * m)
    assert tau == pytest.approx(numeric, rel=1e-4)
    best = expected_hours(100.0, tau, c, r, m)
    for other in (0.5 * tau, 0.9 * tau, 1.1 * tau, 2 * tau):  # and it is a minimum
        value = expected_hours(100.0, other, c, r, m)
        assert value is None or value > best


def test_young_is_the_limit_of_short_writes_and_restarts():
    # Young 1974: sqrt(2 C M) when C and R are small against M
    m = 24.0
    for c in (1e-3, 1e-4, 1e-5):
        assert optimal_checkpoint_interval(c, 0.0, m) / math.sqrt(2 * c * m) == pytest.approx(
            1.0, abs=5 * math.sqrt(c / m))


def daly_hours(work: float, tau: float, c: float, r: float, m: float) -> float:
    """Daly 2006, eq. 13: the exact expected wall time for exponentially distributed
    interruptions of mean ``m`` (interruptions during writes and restarts included)."""
    return m * math.exp(r / m) * (math.exp((tau + c) / m) - 1) * work / tau


@pytest.mark.parametrize(("c", "r", "m"), CASES[:3])
def test_the_first_order_interval_is_near_dalys_exact_optimum(c, r, m):
    tau = optimal_checkpoint_interval(c, r, m)
    exact = brute_force_minimum(lambda x: daly_hours(100.0, x, c, r, m), 1e-6, 2 * m)
    # using the first-order interval costs under 0.1% of expected time in the exact model
    assert daly_hours(100.0, tau, c, r, m) <= 1.001 * daly_hours(100.0, exact, c, r, m)
    assert tau == pytest.approx(exact, rel=0.15)


def test_free_checkpoints_give_the_former_rule_and_no_progress_gives_none():
    # C = 0: hours / (1 - (R + tau / 2) / M), the plan's rule before checkpoint writes counted
    assert expected_hours(10.0, 0.5, 0.0, 0.25, 5.0) == pytest.approx(10.0 / (1 - 0.5 / 5.0))
    assert optimal_checkpoint_interval(0.0, 0.25, 5.0) == 0.0
    assert optimal_checkpoint_interval(0.01, 3.0, 3.0) is None  # restarts outlast M
    assert expected_hours(10.0, 4.0, 0.01, 0.25, 2.0) is None  # half an interval > M


def test_best_every_steps_is_the_best_whole_number_of_steps():
    step, c, r, m = 0.5 / 3600, 2 / 3600, 0.25, 3.0
    n = best_every_steps(step, 125_000, c, r, m)
    cost = [expected_hours(1.0, k * step, c, r, m) for k in range(1, 5000)]
    assert n == 1 + int(np.argmin(cost))
    assert best_every_steps(step, 100, c, r, m) == 100  # never past the run's last step


def test_the_plan_reports_the_interval_that_minimises_the_spot_cost():
    cfg = TrainerConfig.model_validate({
        "data": {"kind": "synthetic", "seq_length": 512, "max_predictions_per_seq": 20},
        "runtime": {"global_batch_size": 4096, "micro_batch_size": 32, "max_steps": 125_000,
                    "precision": "mixed_float16"},
        "checkpoint": {"every_steps": 20_000}})
    plan = plan_fleets(cfg, "ml.p3dn.24xlarge:8", ["ml.p3dn.24xlarge:8=1.72it/s"],
                       checkpoint_s=30.0)
    row, = plan.estimates
    prices = plan.prices
    step_h, between = row.step_s / 3600, prices.spot_hours_between_interruptions / 8
    restart = prices.spot_restart_minutes / 60
    assert row.spot_best_every_steps == best_every_steps(step_h, 125_000, 30 / 3600, restart,
                                                         between)
    assert row.spot_hours_best == pytest.approx(expected_hours(
        row.hours, row.spot_best_every_steps * step_h, 30 / 3600, restart, between))
    assert row.spot_hours == pytest.approx(expected_hours(row.hours, 20_000 * step_h,
                                                          30 / 3600, restart, between))
    assert row.cost_spot_best < row.cost_spot  # 20,000 steps is far too rare here
    assert row.cost_spot_best == pytest.approx(prices.spot("ml.p3dn.24xlarge") * 8
                                               * row.spot_hours_best)
    assert plan.assumptions["checkpoint_write_s"] == 30.0
    assert f"every {row.spot_best_every_steps:,} steps" in plan.format_table()
