"""PNG of simulation runs side by side, sized to fit a screen: per policy, each job's
allocation stacked over time (its own colour, a scale action is a step) above the jobs'
timeline (queue time shaded); on the right, the JCT distribution of every policy.

Uses the object-oriented ``Figure`` + Agg canvas so that plotting never touches pyplot's
global state or needs a display.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
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
POLICY_COLORS = {
    "dragonet": "#1b7837",
    "dragon": "#2166ac",
    "gang-fifo": "#e08214",
    "kube-default": "#7f7f7f",
}
WAITING_SHADE = "#f0f0f0"
MAX_LABELED_JOBS = 40
MAX_TIMELINE_ROWS = 300  # more jobs are sampled evenly, the slowest always kept
SLOWEST_KEPT = 20
BAR_HEIGHT = 0.8
MAX_WIDTH_IN = 17.0  # 1,700 px at dpi 100: a laptop screen
MAX_HEIGHT_IN = 9.0


def main_resource(result: SimResult) -> str:
    """The resource whose allocation tells the story: GPUs if the cluster has any, else CPU."""
    return GPU if result.capacity.get(GPU, 0) > 0 else "cpu"


def end_of(result: SimResult) -> float:
    """Where open segments end: the horizon of a run cut there, else the last sample, else
    the latest time the run mentions."""
    horizon = result.summary.get("horizon_s")
    if result.summary.get("stopped_at_horizon") and isinstance(horizon, int | float):
        return float(horizon)
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
    if horizon_s > 3 * 86400:
        return 86400.0, "days"
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


def job_colors(results: Sequence[SimResult]) -> dict[str, str]:
    """One colour per job, the same in every panel and policy, neighbours (by arrival)
    far apart: tab20 for a few jobs, golden-ratio hues for many."""
    arrival: dict[str, float] = {}
    for r in results:
        for j in r.jobs:
            arrival.setdefault(j.key, j.arrival_s)
    keys = sorted(arrival, key=lambda k: (arrival[k], k))
    if len(keys) <= 20:
        tab = colormaps["tab20"]
        return {k: _hex(tab(2 * i % 20 + (2 * i // 20))) for i, k in enumerate(keys)}
    out = {}
    for i, k in enumerate(keys):
        # Golden-ratio steps over the hues, leaving out the reds of "holding" (0.95-0.08).
        hue = 0.08 + 0.87 * ((i * 0.618033988749895) % 1.0)
        light, sat = (0.55, 0.65) if i % 2 else (0.42, 0.75)
        out[k] = _hex(colorsys.hls_to_rgb(hue, light, sat))
    return out


def _hex(rgb: Sequence[float]) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb[:3])


def _waiting_spans(result: SimResult, end_s: float) -> list[tuple[float, float]]:
    """When at least one job was queued, as merged intervals."""
    spans = sorted(
        (start, end)
        for j in result.jobs
        for state, start, end in job_spans(j, end_s)
        if state == "queued" and end > start
    )
    merged: list[tuple[float, float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _plot_allocation(
    ax: Axes, result: SimResult, end_s: float, scale: float, colors: Mapping[str, str]
) -> None:
    """Each job's share of the main resource, stacked by arrival; the cluster's training
    total as a line (above it, resources are held by jobs that cannot train)."""
    resource = main_resource(result)
    capacity = result.capacity.get(resource, 0.0)
    for start, end in _waiting_spans(result, end_s):
        ax.axvspan(start / scale, end / scale, color=WAITING_SHADE, lw=0, zorder=0)
    jobs = [j for j in sorted(result.jobs, key=lambda j: (j.arrival_s, j.key)) if j.allocation]
    top = 0.0
    if jobs:
        times = np.array(sorted({t for j in jobs for t, _ in j.allocation} | {end_s}))
        base = np.zeros(len(times))
        for j in jobs:
            at = np.array([t for t, _ in j.allocation])
            values = np.array([a.get(resource, 0.0) for _, a in j.allocation])
            idx = np.searchsorted(at, times, side="right") - 1
            y = np.where(idx >= 0, values[np.clip(idx, 0, None)], 0.0)
            if not y.any():
                continue
            ax.fill_between(
                times / scale, base, base + y, step="post", color=colors[j.key], lw=0, zorder=2
            )
            base = base + y
        top = float(base.max())
    samples = sorted(result.samples, key=lambda s: s.t_s)
    if samples:
        t = [s.t_s / scale for s in samples] + [max(end_s, samples[-1].t_s) / scale]
        training = [s.training.get(resource, 0.0) for s in samples]
        training.append(training[-1])
        ax.step(t, training, where="post", color="black", lw=0.6, alpha=0.6, zorder=3)
        top = max(top, max(s.allocated.get(resource, 0.0) for s in samples))
    elif not jobs:
        ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center", va="center")
    if capacity > 0:
        ax.axhline(capacity, color="black", ls="--", lw=1, zorder=4)
    ax.set_ylim(0, max(capacity, top, 1.0) * 1.08)
    ax.set_ylabel("GPUs" if resource == GPU else "CPU cores")
    title = result.policy
    if result.summary.get("stopped_at_horizon"):
        left = (result.summary.get("jobs") or 0) - (result.summary.get("jobs_finished") or 0)
        title += f"\nCUT at the horizon: {left} job(s) unfinished"
        ax.axvline(end_s / scale, color="#c00000", lw=1.5, zorder=5)
    ax.set_title(title, fontsize="medium", color="#c00000" if "CUT" in title else "black")


def timeline_jobs(jobs: Sequence[JobRecord], end_s: float) -> tuple[list[JobRecord], str]:
    """The jobs to draw, by arrival, and a note if sampled: every k-th job plus the
    slowest, so the long tail stays visible."""
    ordered = sorted(jobs, key=lambda j: (j.arrival_s, j.key))
    if len(ordered) <= MAX_TIMELINE_ROWS:
        return ordered, ""

    def in_system(j: JobRecord) -> float:
        return (j.finish_s if j.finish_s is not None else end_s) - j.arrival_s

    slowest = {j.key for j in sorted(ordered, key=in_system, reverse=True)[:SLOWEST_KEPT]}
    step = math.ceil(len(ordered) / (MAX_TIMELINE_ROWS - SLOWEST_KEPT))
    kept = [j for i, j in enumerate(ordered) if i % step == 0 or j.key in slowest]
    note = f"{len(kept)} of {len(ordered)} jobs: every {step}th and the {SLOWEST_KEPT} slowest"
    return kept, note


def _plot_timeline(
    ax: Axes, result: SimResult, end_s: float, scale: float, colors: Mapping[str, str]
) -> None:
    jobs, note = timeline_jobs(result.jobs, end_s)
    boxes: dict[State, list[list[tuple[float, float]]]] = {s: [] for s in COLORS}
    faces: list[str] = []
    half = BAR_HEIGHT / 2 if len(jobs) <= MAX_LABELED_JOBS else 0.5
    for y, job in enumerate(jobs):
        for state, start, end in job_spans(job, end_s):
            x0, x1 = start / scale, end / scale
            boxes[state].append([(x0, y - half), (x1, y - half), (x1, y + half), (x0, y + half)])
            if state == "training":
                faces.append(colors.get(job.key, COLORS["training"]))
    for state, verts in boxes.items():  # one collection per state keeps 1,000 jobs fast
        ax.add_collection(
            PolyCollection(
                verts,
                facecolors=faces if state == "training" else COLORS[state],
                edgecolors="none",
                label=state,
            )
        )
    # A short job on a long axis is a sliver, or nothing: mark where each one finished.
    done = [(j.finish_s / scale, y, colors.get(j.key, "black")) for y, j in enumerate(jobs)
            if j.finish_s is not None]  # fmt: skip
    if done:
        xs, ys, cs = zip(*done, strict=True)
        size = 4 if len(jobs) > MAX_LABELED_JOBS else 12
        ax.scatter(xs, ys, s=size, c=list(cs), marker="o", lw=0, label="finished", zorder=3)
    ax.set_ylim(len(jobs) - 0.5, -0.5)  # first arrival on top
    if len(jobs) <= MAX_LABELED_JOBS:
        ax.set_yticks(range(len(jobs)), [j.key for j in jobs], fontsize="small")
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"{len(result.jobs)} jobs, by arrival" + (f"\n({note})" if note else ""))


def _plot_cdf(ax: Axes, results: Sequence[SimResult], scale: float, unit: str) -> None:
    """JCT CDF per policy over all its jobs: an unfinished job keeps the curve below 1."""
    for r in results:
        jcts = sorted(j.jct_s for j in r.jobs if j.jct_s is not None)
        color = POLICY_COLORS.get(r.policy)
        if not jcts:
            ax.plot([], [], label=f"{r.policy} (none finished)", color=color)
            continue
        x = [v / scale for v in jcts]
        y = [(i + 1) / len(r.jobs) for i in range(len(jcts))]
        ax.step([x[0], *x], [0.0, *y], where="post", label=r.policy, color=color, lw=1.6)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"JCT ({unit}, log scale)")
    ax.set_ylabel("fraction of jobs finished")
    ax.set_title("JCT distribution", fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")


def _legend_handles() -> list[Artist]:
    return [
        Patch(color="#9e9ae0", label="each job its own colour (training)"),
        Patch(color=COLORS["holding"], label="holding resources, not training"),
        Patch(color=COLORS["queued"], label="queued"),
        Patch(color=WAITING_SHADE, ec="#c0c0c0", label="some job waits"),
        Line2D([], [], color="black", lw=0.8, label="GPUs of jobs able to train"),
        Line2D([], [], color="#555555", marker="o", ms=3, lw=0, label="a job finished"),
        Line2D([], [], color="black", ls="--", lw=1, label="capacity"),
    ]


def figure(results: Sequence[SimResult]) -> Figure:
    """Per result a column: stacked per-job allocation above the timeline; then the CDF."""
    if not results:
        raise ValueError("nothing to plot: no simulation results")
    horizon = max(_horizon(r) for r in results)
    scale, unit = _time_unit(horizon)
    colors = job_colors(results)
    n_jobs = max(len(r.jobs) for r in results)
    gantt_h = min(max(2.5, 0.2 * min(n_jobs, MAX_LABELED_JOBS)), 5.0)
    width = min(4.5 + 4.2 * len(results), MAX_WIDTH_IN)
    height = min(2.8 + gantt_h + 1.2, MAX_HEIGHT_IN)
    fig = Figure(figsize=(width, height), layout="constrained")
    grid = fig.add_gridspec(
        2, len(results) + 1, height_ratios=[2.8, gantt_h], width_ratios=[1] * len(results) + [1.1]
    )
    first: Axes | None = None
    for col, result in enumerate(results):
        end_s = end_of(result)
        top = fig.add_subplot(grid[0, col], sharex=first)
        first = first or top
        bottom = fig.add_subplot(grid[1, col], sharex=first)
        _plot_allocation(top, result, end_s, scale, colors)
        _plot_timeline(bottom, result, end_s, scale, colors)
        top.tick_params(labelbottom=False)
        bottom.set_xlabel(f"time ({unit})")
    assert first is not None
    cut = any(r.summary.get("stopped_at_horizon") for r in results)
    first.set_xlim(0, max(horizon / scale * (1.03 if cut else 1.0), 1e-9))  # the cut in view
    _plot_cdf(fig.add_subplot(grid[:, -1]), results, scale, unit)
    scenarios = sorted({r.scenario for r in results})
    fig.suptitle(", ".join(scenarios), fontsize="large")
    fig.legend(  # below the panels, so it never hides a bar or the capacity line
        handles=_legend_handles(), loc="outside lower center", ncols=3, frameon=False,
        fontsize="small",
    )  # fmt: skip
    return fig


def plot(results: Sequence[SimResult], path: str | Path) -> None:
    """Write the comparison figure of ``results`` as a PNG at ``path``."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"cannot plot to {path.name!r}: only .png is supported")
    fig = figure(results)
    FigureCanvasAgg(fig)  # attach an Agg canvas: no pyplot, no display
    fig.savefig(path, format="png", dpi=100)
