"""Time axes for the run's picture (``sim/plot.py``) that keep short things visible next to
long ones: a trace's many 10-minute jobs beside one that runs for 20 hours.

* :class:`BrokenTime`: the cluster's time, linear, with the tail past the time by which
  most jobs were done compressed into the last part of the axis (a broken axis, marked).
* :func:`since_arrival`: each job's own clock, zero at its arrival, linear below a minute
  and logarithmic above, so a 2-minute wait and a 20-hour run both have a width.

Both work in a display unit (minutes, hours or days) so tick values read as numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
BULK_SHARE = 0.7  # of a broken axis's width, for the time before the break
BREAK_QUANTILE = 0.9  # the break comes after this share of the jobs are done
MIN_COMPRESSION = 2.5  # a tail squeezed less than this is left linear
NICE = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
# Ticks of a job's clock, in seconds: round human durations, about three a decade.
CLOCK_TICKS = (
    *(1, 2, 5, 10, 20, 30),
    *(m * MINUTE for m in (1, 2, 5, 10, 20, 30)),
    *(h * HOUR for h in (1, 2, 5, 10)),
    *(d * DAY for d in (1, 2, 5, 10, 20, 50, 100, 200, 500)),
)


def time_unit(span_s: float) -> tuple[float, str]:
    """Seconds per display unit for a span, and the unit's name."""
    if span_s > 3 * DAY:
        return DAY, "days"
    return (HOUR, "hours") if span_s > 2 * HOUR else (MINUTE, "minutes")


def nice_ceil(x: float) -> float:
    """The least round number (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten) >= x."""
    if x <= 0:
        return 0.0
    exp = math.floor(math.log10(x))
    for m in NICE:
        if m * 10**exp >= x * (1 - 1e-9):
            return m * 10**exp
    return 10.0 ** (exp + 1)


def human_duration(seconds: float) -> str:
    """A round duration as a person writes it: 30 s, 10 min, 2 h, 4 d."""
    for size, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min")):
        if seconds >= size:
            return f"{seconds / size:g} {name}"
    return f"{seconds:g} s"


@dataclass(frozen=True)
class BrokenTime:
    """A time axis in ``unit`` from 0 to ``end``; with a ``knee``, [0, knee] takes
    ``share`` of the width and (knee, end] the rest (times in the unit)."""

    scale: float  # seconds per unit
    unit: str
    end: float
    knee: float | None = None
    share: float = BULK_SHARE

    @property
    def compression(self) -> float:
        """How many times more time a unit of width holds past the knee than before it."""
        if self.knee is None:
            return 1.0
        return ((self.end - self.knee) / (1 - self.share)) / (self.knee / self.share)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self.knee is None:
            return x
        k, e, s = self.knee, self.end, self.share
        return np.where(x <= k, x / k * s, s + (x - k) / (e - k) * (1 - s))

    def inverse(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if self.knee is None:
            return y
        k, e, s = self.knee, self.end, self.share
        return np.where(y <= s, y / s * k, k + (y - s) / (1 - s) * (e - k))

    def ticks(self) -> list[float]:
        """Round ticks: about four before the knee, the knee, one or two after it."""
        from matplotlib.ticker import MaxNLocator

        if self.knee is None:
            return [v for v in MaxNLocator(5).tick_values(0, self.end) if 0 <= v <= self.end]
        bulk = MaxNLocator(4, steps=[1, 2, 2.5, 5, 10]).tick_values(0, self.knee)
        # None closer to the knee than a fifth of the bulk's width: "2" beside "2.5" blurs.
        out = [float(v) for v in bulk if 0 <= v < self.knee * 0.8]
        out.append(self.knee)
        tail = [
            float(v)
            for v in MaxNLocator(2, steps=[1, 2, 5, 10]).tick_values(self.knee, self.end)
            if self.knee < v <= self.end * 1.001
            and float(self.forward(np.array(v)) - self.forward(np.array(self.knee))) > 0.12
        ]
        return out + tail[-1:]  # one tick in the compressed tail: its labels would crowd

    def label(self) -> str:
        if self.knee is None:
            return f"time ({self.unit})"
        return f"{self.unit}; x{self.compression:.0f} compressed past {self.knee:g}"

    def apply(self, ax: Axes, right: float) -> None:
        """Give ``ax`` this scale, its ticks and, with a knee, the break's marks."""
        if self.knee is not None:
            ax.set_xscale("function", functions=(self.forward, self.inverse))
        ax.xaxis.set_major_locator(FixedLocator(self.ticks()))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(0, right)

    def mark_break(self, ax: Axes) -> None:
        """A thin dashed line at the knee and the usual // on both spines."""
        if self.knee is None:
            return
        ax.axvline(self.knee, color="#808080", ls=(0, (2, 2)), lw=0.8, zorder=5)
        x = self.knee
        for y in (0.0, 1.0):
            ax.plot(
                [x],
                [y],
                marker=[(-1, -1.5), (1, 1.5)],
                ms=7,
                mew=1.2,
                color="#404040",
                transform=ax.get_xaxis_transform(),
                clip_on=False,
                zorder=6,
            )


def broken_time(ends_s: Sequence[float], horizon_s: float) -> BrokenTime:
    """The cluster-time axis of a run: broken after ``BREAK_QUANTILE`` of the jobs are done
    (``ends_s``: each job's finish, or the run's end) when the rest is long enough that,
    drawn linearly, it would squash them."""
    scale, unit = time_unit(horizon_s)
    end = max(horizon_s / scale, 1e-9)
    finite = sorted(e for e in ends_s if math.isfinite(e))
    if not finite:
        return BrokenTime(scale, unit, end)
    knee = nice_ceil(float(np.quantile(finite, BREAK_QUANTILE)) / scale * 1.02)
    if not 0 < knee < end:
        return BrokenTime(scale, unit, end)
    axis = BrokenTime(scale, unit, end, knee)
    return axis if axis.compression >= MIN_COMPRESSION else BrokenTime(scale, unit, end)


def since_arrival(ax: Axes, longest_s: float, scale: float, most_ticks: int = 6) -> None:
    """A job's own clock on ``ax``'s x axis: linear up to a minute (or a hundredth of the
    longest span when that is shorter), logarithmic above, ticked in round durations."""
    longest_s = max(longest_s, 1.0)
    linthresh_s = min(MINUTE, longest_s / 100)
    ax.set_xscale("symlog", linthresh=linthresh_s / scale, linscale=0.3)
    # Up to a round duration just past the longest, so the axis ends on a tick.
    after = [t for t in CLOCK_TICKS if t >= longest_s]
    right = after[0] * 1.05 if after and after[0] <= 1.6 * longest_s else longest_s * 1.25
    ax.set_xlim(0, right / scale)
    duration_ticks(ax, linthresh_s, right, scale, most_ticks)
    ax.tick_params(axis="x", labelsize="small")
    ax.set_xlabel("time since the job arrived (log scale)")


def duration_ticks(ax: Axes, low_s: float, high_s: float, scale: float, most: int = 6) -> None:
    """Round durations between ``low_s`` and ``high_s`` as ``ax``'s x ticks (at most
    ``most``, evenly apart on a log scale, the largest kept), labelled as a person writes
    them, on an axis in units of ``scale`` seconds."""
    low_s, high_s = max(low_s, 1e-3), max(high_s, 2e-3)
    gap = max(math.log10(high_s / low_s) / max(most, 1), 0.3)  # in decades
    ticks: list[float] = []
    for t in sorted((t for t in CLOCK_TICKS if low_s <= t <= high_s), reverse=True):
        if not ticks or math.log10(ticks[-1] / t) >= gap * 0.999:
            ticks.append(t)
    ax.xaxis.set_major_locator(FixedLocator([t / scale for t in reversed(ticks)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_duration(v * scale)))
    ax.xaxis.set_minor_locator(NullLocator())
