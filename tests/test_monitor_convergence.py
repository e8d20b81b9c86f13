"""The convergence test (monitor/convergence.py) on known curves: an accuracy rising to its
plateau, a loss decaying, flat and noisy plateaus, a step change, a steady climb."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from monitor.convergence import Category, ConvergenceRules, ConvergenceTracker, fit_line

P, W, C = Category.PROGRESSING, Category.WATCHING, Category.CONVERGED


def run(curve: Callable[[float], float], n: int = 80, every: float = 10.0, unit: float = 1.0):
    """Categories after each report of ``curve(t)`` made every ``every`` seconds, times
    given to the tracker in ``unit`` (1000: milliseconds)."""
    tracker = ConvergenceTracker()
    return [tracker.feed(i * every * unit, curve(i * every)) for i in range(n)]


def first(categories: list[Category], category: Category) -> int | None:
    return next((i for i, c in enumerate(categories) if c == category), None)


def rising(t: float) -> float:
    """Accuracy approaching 0.9 with a 100 s time constant."""
    return 0.9 * (1 - math.exp(-t / 100))


def test_a_rising_accuracy_converges_only_once_nearly_all_its_gain_is_made() -> None:
    seen = run(rising)
    at = first(seen, C)
    assert at is not None
    # Not before 97 % of the way (the reference's rule fired after its first few reports).
    assert rising(at * 10) >= 0.97 * 0.9
    assert all(c == P for c in seen[:30])  # the first 300 s: still learning
    assert seen[at:] == [C] * (len(seen) - at)  # and it stays converged on the plateau


def test_a_decaying_loss_converges_like_a_rising_accuracy() -> None:
    def loss(t: float) -> float:
        return 2.3 * math.exp(-t / 200) + 0.3

    seen = run(loss, n=120)
    at = first(seen, C)
    assert at is not None and 500 <= at * 10 <= 900
    assert seen[-1] == C


def test_a_flat_metric_converges_instead_of_taking_log_of_zero() -> None:
    seen = run(lambda t: 0.9, n=10)
    assert seen[:5] == [P] * 5  # too few scores to fit a trend
    assert seen[5:] == [W, C, C, C, C]


def test_the_unit_of_time_does_not_change_the_verdict() -> None:
    """Seconds or milliseconds: the same curve gets the same categories."""
    assert run(rising, unit=1000.0) == run(rising)
    assert run(rising, every=60.0) == run(rising, every=60.0, unit=0.001)


@pytest.mark.parametrize("seed", range(5))
def test_a_noisy_plateau_converges_within_a_few_minutes(seed: int) -> None:
    noise = random.Random(seed)
    seen = run(lambda t: 0.9 + noise.gauss(0, 0.01), n=60)
    at = first(seen, C)
    assert at is not None and at <= 30


@pytest.mark.parametrize("seed", range(5))
def test_a_noisy_rise_does_not_converge_while_it_still_rises(seed: int) -> None:
    noise = random.Random(seed)

    def curve(t: float) -> float:
        return 0.9 * (1 - math.exp(-t / 150)) + noise.gauss(0, 0.01)

    seen = run(curve, n=80)
    at = first(seen, C)
    assert at is None or at * 10 >= 300  # two time constants: 86 % of the gain made


def test_a_step_change_sends_a_converged_task_back_to_progressing() -> None:
    seen = run(lambda t: 0.8 if t < 300 else 0.9, n=60)
    assert seen[29] == C  # converged on the first plateau
    assert seen[30] == P  # the jump at 300 s
    back = first(seen[30:], C)
    assert back is not None and back >= 5  # not before the jump has left the fits
    assert seen[-1] == C


def test_a_steady_climb_never_converges() -> None:
    seen = run(lambda t: 0.001 * t, n=200)
    assert set(seen) == {P}


def test_a_running_mean_of_a_flat_accuracy_looks_converged_which_is_why_we_report_batches() -> None:
    """tf.metrics.accuracy is a running mean: on a model that is *not* learning (accuracy
    0.5 +/- noise each batch) its speed decays like 1/t and the test fires anyway. The
    example reports each batch's accuracy instead (examples/preemptible/)."""
    noise = random.Random(7)
    total, count = 0.0, 0

    def running_mean(t: float) -> float:
        nonlocal total, count
        total, count = total + 0.5 + noise.gauss(0, 0.05), count + 1
        return total / count

    assert C in run(running_mean, n=80)


def test_reports_out_of_order_or_twice_are_ignored() -> None:
    tracker = ConvergenceTracker()
    for i in range(8):
        tracker.feed(i * 10.0, 0.9)
    assert tracker.category == C
    reports = tracker.reports
    assert tracker.feed(70.0, 0.1) == C  # the same time again
    assert tracker.feed(10.0, 0.1) == C  # earlier
    assert tracker.reports == reports


def test_non_finite_reports_are_refused() -> None:
    tracker = ConvergenceTracker()
    with pytest.raises(ValueError, match="finite"):
        tracker.feed(1.0, math.nan)
    with pytest.raises(ValueError, match="finite"):
        tracker.feed(math.inf, 0.5)


def test_memory_is_bounded_by_the_window() -> None:
    tracker = ConvergenceTracker(ConvergenceRules(window=5, min_scores=3))
    for i in range(10_000):
        tracker.feed(float(i), math.sin(i))
    assert len(tracker._values) == 5 and len(tracker._log_scores) == 5


def test_rules_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        ConvergenceRules(window=2)
    with pytest.raises(ValueError, match="min_scores"):
        ConvergenceRules(window=5, min_scores=6)
    with pytest.raises(ValueError, match="floor"):
        ConvergenceRules(floor=0)


def test_the_line_fit_is_ordinary_least_squares() -> None:
    fit = fit_line([(0, 1), (1, 3), (2, 5), (3, 7)])
    assert fit.slope == pytest.approx(2) and fit.intercept == pytest.approx(1)
    assert fit.r2 == pytest.approx(1) and fit.stderr == pytest.approx(0)
    noisy = fit_line([(0, 0), (1, 1), (2, 0), (3, 1)])
    assert noisy.slope == pytest.approx(0.2) and noisy.r2 == pytest.approx(0.2)
    with pytest.raises(ValueError):
        fit_line([(1, 0), (1, 1)])
