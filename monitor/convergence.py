"""Has a training task's evaluation metric converged? The SpeCon-like slope test of
container-migration's Container Monitor (``model/pod.go``), done right.

A task reports its metric now and then; each report after the first gives a *score*, the
metric's speed ``|Δvalue| / Δt`` (per second). SpeCon fits an exponential regression of the
scores over time: ``alpha`` is the speed the trend predicts for now and ``beta = 1 - R²``
says how noisy the trend is. A score above ``alpha`` means the task still learns faster than
its own decaying trend: it is *Progressing*. A first score at or below the trend makes it
*Watching*; a second one in a row makes it *Converged*.

What the reference got wrong or fragile, and what this does instead:

* **Regression over every score since the record began.** Early, fast scores dominate a
  long run's fit forever. Here the fit covers the last ``window`` scores only, and excludes
  the score under test (a point does not set its own bar).
* **Milliseconds.** Speeds are per second; time is passed in, never read from a clock.
* **Zero scores and log(0).** A metric that did not move gives score 0; its logarithm is
  taken of ``max(score, floor)``. A flat metric therefore fits a flat trend instead of NaN.
* **"score·(1+β) < previous score"** never holds on a perfectly flat metric (0 < 0), and
  a clean exponential rise passes it right after the first few reports, while most of the
  gain is still to come. Here noise widens the bar instead (``alpha·(1+beta)``), and
  Converged also needs the metric to have *settled*: over the window, its linear trend is
  either not distinguishable from noise (``|slope| <= z·stderr``) or would, at that pace
  for as long again, add less than ``tolerance`` of the metric's whole range so far.
* **Running-mean metric.** ``tf.metrics.accuracy`` is a running mean since the process
  started, so its speed decays like 1/t whatever the model does, and the test always
  fires. That is fixed where the metric is made: ``examples/preemptible/`` reports the
  accuracy of each evaluation batch. Nothing here can tell the two apart.

A step change (a learning-rate drop, a new phase) gives a score far above the trend, which
sends the task back to Progressing, and its jump keeps the window unsettled until it has
moved out of the window.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum


class Category(StrEnum):
    PROGRESSING = "Progressing"
    WATCHING = "Watching"
    CONVERGED = "Converged"


@dataclass(frozen=True)
class ConvergenceRules:
    """The test's knobs. The defaults fit reports every 10-60 s of an accuracy or a loss."""

    window: int = 10  # scores (and values) the fits look at
    min_scores: int = 4  # fewer than this before the one under test: still Progressing
    floor: float = 1e-9  # per second; scores below count as this (no log(0))
    tolerance: float = 0.02  # share of the metric's range still to gain that counts as settled
    z: float = 2.0  # a value trend within z standard errors of flat is noise
    margin: float = 0.1  # a speed within this share above the trend's is on the trend

    def __post_init__(self) -> None:
        if self.window < 3:
            raise ValueError("window must be at least 3")
        if not 2 <= self.min_scores <= self.window:
            raise ValueError("min_scores must be between 2 and window")
        if self.floor <= 0 or min(self.tolerance, self.z, self.margin) < 0:
            raise ValueError("floor must be positive; tolerance, z and margin not negative")


@dataclass(frozen=True)
class Fit:
    """A least-squares line ``y = intercept + slope·t``, with the slope's standard error and
    R² (1 for data without spread: a flat line fits it exactly)."""

    intercept: float
    slope: float
    stderr: float
    r2: float

    def at(self, t: float) -> float:
        return self.intercept + self.slope * t


def fit_line(points: list[tuple[float, float]]) -> Fit:
    """Ordinary least squares over ``(t, y)`` points (at least two distinct ``t``)."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    stt = sum((t - mt) ** 2 for t, _ in points)
    if stt == 0:
        raise ValueError("a line needs at least two distinct times")
    sty = sum((t - mt) * (y - my) for t, y in points)
    syy = sum((y - my) ** 2 for _, y in points)
    slope = sty / stt
    intercept = my - slope * mt
    residual = max(syy - slope * sty, 0.0)
    r2 = 1.0 if syy == 0 else max(0.0, min(1.0, 1 - residual / syy))
    stderr = math.sqrt(residual / (n - 2) / stt) if n > 2 else math.inf
    return Fit(intercept, slope, stderr, r2)


class ConvergenceTracker:
    """One task's record: feed it ``(t_seconds, value)`` reports in time order; read
    ``category``. Memory is bounded by ``rules.window``."""

    def __init__(self, rules: ConvergenceRules | None = None) -> None:
        self.rules = rules or ConvergenceRules()
        self.category = Category.PROGRESSING
        self.reports = 0
        self._last: tuple[float, float] | None = None
        self._log_scores: deque[tuple[float, float]] = deque(maxlen=self.rules.window)
        self._values: deque[tuple[float, float]] = deque(maxlen=self.rules.window)
        self._low = math.inf
        self._high = -math.inf
        self.alpha: float | None = None  # the last trend speed, per second (for logs)
        self.beta: float | None = None

    def feed(self, t: float, value: float) -> Category:
        """Take one report. A report not later than the previous one (a duplicate, a clock
        step back) is ignored. Non-finite values are the caller's to refuse."""
        if not (math.isfinite(t) and math.isfinite(value)):
            raise ValueError("time and value must be finite numbers")
        if self._last is not None and t <= self._last[0]:
            return self.category
        self.reports += 1
        self._low, self._high = min(self._low, value), max(self._high, value)
        self._values.append((t, value))
        last, self._last = self._last, (t, value)
        if last is None:
            return self.category
        score = abs(value - last[1]) / (t - last[0])
        history = list(self._log_scores)
        self._log_scores.append((t, math.log(max(score, self.rules.floor))))
        if len(history) < self.rules.min_scores:
            self.category = Category.PROGRESSING
            return self.category
        self.category = self._judge(score, t, history)
        return self.category

    def _judge(self, score: float, t: float, history: list[tuple[float, float]]) -> Category:
        trend = fit_line(history)
        self.alpha = math.exp(min(trend.at(t), 700.0))
        self.beta = 1.0 - trend.r2
        faster_than_trend = score > self.alpha * (1.0 + self.beta) * (1.0 + self.rules.margin)
        if faster_than_trend or not self._settled():
            return Category.PROGRESSING
        if self.category == Category.PROGRESSING:
            return Category.WATCHING
        return Category.CONVERGED

    def _settled(self) -> bool:
        """Over the window, the metric's trend is noise, or small against its range."""
        values = list(self._values)
        line = fit_line(values)
        if abs(line.slope) <= self.rules.z * line.stderr:
            return True
        span = self._high - self._low
        duration = values[-1][0] - values[0][0]
        return abs(line.slope) * duration <= self.rules.tolerance * span
