"""PNG of simulation runs side by side: allocation over time above a per-job timeline.

Uses the object-oriented ``Figure`` + Agg canvas so that plotting never touches pyplot's
global state or needs a display.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from sim.results import JobRecord, SimResult, State

GPU = "nvidia.com/gpu"
COLORS: dict[State, str] = {"queued": "#d0d0d0", "holding": "#e4572e", "training": "#2e9d4f"}
MAX_LABELED_JOBS = 40
BAR_HEIGHT = 0.8


def main_resource(result: SimResult) -> str:
    """The resource whose allocation tells the story: GPUs if the cluster has any, else CPU."""
    return GPU if result.capacity.get(GPU, 0) > 0 else "cpu"


def end_of(result: SimResult) -> float:
    """Where open segments end: the last sample, else the latest time the run mentions."""
    if result.samples:
        return max(s.t_s for s in result.samples)
    times = [j.arrival_s for j in result.jobs]
    times += [t for j in result.jobs for g in j.segments for t in (g.start_s, g.end_s)]
    times += [j.finish_s for j in result.jobs if j.finish_s is not None]
    return max((t for t in times if math.isfinite(t)), default=0.0)


def _horizon(result: SimResult) -> float:
    ends = [g.end_s for j in result.jobs for g in j.segments if math.isfinite(g.end_s)]
    return max([end_of(result), *ends])


def _time_unit(horizon_s: float) -> tuple[float, str]:
    return (3600.0, "hours") if horizon_s > 2 * 3600 else (60.0, "minutes")


def job_spans(job: JobRecord, end_s: float) -> list[tuple[State, float, float]]:
    """(state, start, end) of a job; open segments (non-finite end) stop at ``end_s``.

    An unfinished job with no segment at all has waited since its arrival.
    """
    if not job.segments:
        return [] if job.finish_s is not None else [("queued", job.arrival_s, end_s)]
    return [
        (g.state, g.start_s, g.end_s if math.isfinite(g.end_s) else end_s) for g in job.segments
    ]


def _plot_allocation(ax: Axes, result: SimResult, end_s: float, scale: float) -> None:
    resource = main_resource(result)
    capacity = result.capacity.get(resource, 0.0)
    samples = sorted(result.samples, key=lambda s: s.t_s)
    if not samples:
        ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center", va="center")
    else:
        t = [s.t_s / scale for s in samples] + [max(end_s, samples[-1].t_s) / scale]
        training = [s.training.get(resource, 0.0) for s in samples]
        allocated = [
            max(s.allocated.get(resource, 0.0), tr) for s, tr in zip(samples, training, strict=True)
        ]
        training.append(training[-1])
        allocated.append(allocated[-1])
        ax.fill_between(
            t, 0, training, step="post", color=COLORS["training"], lw=0, label="training"
        )
        ax.fill_between(
            t,
            training,
            allocated,
            step="post",
            color=COLORS["holding"],
            lw=0,
            label="held, not training",
        )
        top = max(allocated)
    if capacity > 0:
        ax.axhline(capacity, color="black", ls="--", lw=1, zorder=3, label="capacity")
    ax.set_ylim(0, max(capacity, top if samples else 0.0, 1.0) * 1.08)
    ax.set_ylabel("GPUs" if resource == GPU else "CPU cores")
    ax.set_title(f"{result.policy} — {result.scenario}")


def _plot_timeline(ax: Axes, result: SimResult, end_s: float, scale: float) -> None:
    jobs = sorted(result.jobs, key=lambda j: (j.arrival_s, j.key))
    boxes: dict[State, list[list[tuple[float, float]]]] = {s: [] for s in COLORS}
    half = BAR_HEIGHT / 2
    for y, job in enumerate(jobs):
        for state, start, end in job_spans(job, end_s):
            x0, x1 = start / scale, end / scale
            boxes[state].append([(x0, y - half), (x1, y - half), (x1, y + half), (x0, y + half)])
    for state, verts in boxes.items():  # one collection per state keeps 1,000 jobs fast
        ax.add_collection(
            PolyCollection(verts, facecolors=COLORS[state], edgecolors="none", label=state)
        )
    ax.set_ylim(len(jobs) - 0.5, -0.5)  # first arrival on top
    if len(jobs) <= MAX_LABELED_JOBS:
        ax.set_yticks(range(len(jobs)), [j.key for j in jobs], fontsize="small")
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"{len(jobs)} jobs, by arrival")


def _legend_handles() -> list[Artist]:
    """One legend for both panels: they share the colours of the three job states."""
    return [
        Patch(color=COLORS["training"], label="training"),
        Patch(color=COLORS["holding"], label="holding resources, not training"),
        Patch(color=COLORS["queued"], label="queued"),
        Line2D([], [], color="black", ls="--", lw=1, label="capacity"),
    ]


def figure(results: Sequence[SimResult]) -> Figure:
    """One column per result: allocation of the main resource above the jobs' timeline."""
    if not results:
        raise ValueError("nothing to plot: no simulation results")
    horizon = max(_horizon(r) for r in results)
    scale, unit = _time_unit(horizon)
    n_jobs = max(len(r.jobs) for r in results)
    gantt_h = min(max(2.5, 0.2 * min(n_jobs, MAX_LABELED_JOBS)), 8.0)
    fig = Figure(figsize=(6.0 * len(results), 2.5 + gantt_h), layout="constrained")
    axes = fig.subplots(
        2, len(results), sharex=True, squeeze=False, gridspec_kw={"height_ratios": [2.5, gantt_h]}
    )
    for col, result in enumerate(results):
        end_s = end_of(result)
        _plot_allocation(axes[0][col], result, end_s, scale)
        _plot_timeline(axes[1][col], result, end_s, scale)
        axes[1][col].set_xlabel(f"time ({unit})")
    axes[0][0].set_xlim(0, max(horizon / scale, 1e-9))
    fig.legend(  # below the panels, so it never hides a bar or the capacity line
        handles=_legend_handles(),
        loc="outside lower center",
        ncols=4 if len(results) > 1 else 2,
        frameon=False,
        fontsize="small",
    )
    return fig


def plot(results: Sequence[SimResult], path: str | Path) -> None:
    """Write the comparison figure of ``results`` as a PNG at ``path``."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"cannot plot to {path.name!r}: only .png is supported")
    fig = figure(results)
    FigureCanvasAgg(fig)  # attach an Agg canvas: no pyplot, no display
    fig.savefig(path, format="png", dpi=100)
