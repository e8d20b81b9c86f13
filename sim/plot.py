"""PNG of simulation runs side by side, sized to fit a screen.

Per policy a column: each job's allocation stacked over the cluster's time (its own colour, a
scale action is a step), in GPUs and, when some job uses no GPU, in CPU cores too, titled
with what the policy used; under it every job's own timeline from its arrival (queued,
holding, training). On the right, the JCT distribution of every policy, each in its own
colour and line style (Okabe and Ito's colour-blind-safe palette), and the legends, in a
cell of their own where they cover nothing.

Short jobs stay visible beside long ones: the cluster's time is a broken axis whose tail
past the time most jobs were done is compressed, and a job's timeline is its own clock on a
log scale (``sim/timeaxis.py``). Titles are shrunk until no two overlap.

Uses the object-oriented ``Figure`` + Agg canvas so that plotting never touches pyplot's
global state or needs a display.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from policy.model.pool import PoolSpec
from sim.results import JobRecord, SimResult, State
from sim.timeaxis import BrokenTime, broken_time, duration_ticks, since_arrival, time_unit

GPU = "nvidia.com/gpu"
COLORS: dict[State, str] = {"queued": "#d0d0d0", "holding": "#e4572e", "training": "#2e9d4f"}
# Okabe & Ito's palette (colour-blind safe), and a dash pattern of its own for each policy,
# so two lines differ even in grey print. The default policy (a pool with an empty spec) is
# drawn solid and thickest, beneath the others.
POLICY_STYLES: dict[str, tuple[str, Any]] = {
    "dragonet-las": ("#009E73", "solid"),
    "dragon": ("#0072B2", (0, (6, 2))),
    "gang-fifo": ("#E69F00", (0, (1, 1.2))),
    "kube-default": ("#000000", (0, (7, 2, 1.5, 2))),
    "dragonet": ("#CC79A7", (0, (3, 1.2, 1, 1.2, 1, 1.2))),
    "tiresias": ("#D55E00", (0, (10, 2.5))),
}
SPARE_STYLES: tuple[tuple[str, Any], ...] = (
    ("#56B4E9", (0, (4, 1.5, 4, 1.5, 1, 1.5))),
    ("#999999", (0, (2, 3))),
    ("#56B4E9", (0, (9, 1.5, 1, 1.5))),
)
OURS: str = PoolSpec.model_fields["policy"].default  # the policy a user gets
CUT_COLOR = "#c00000"
WAITING_SHADE = "#f0f0f0"
MAX_LABELED_JOBS = 40
MAX_TIMELINE_ROWS = 300  # more jobs are sampled evenly, the slowest always kept
SLOWEST_KEPT = 20
BAR_HEIGHT = 0.8
MAX_WIDTH_IN = 17.0  # 1,700 px at dpi 100: a laptop screen
MAX_HEIGHT_IN = 9.0
TITLE_PT, WRAP_TITLE_PT, MIN_TITLE_PT = 10.0, 8.0, 6.5
TITLE_GAP_PX = 6.0  # between two titles, at least
CDF_WIDTH = 1.25  # the JCT distribution's column, in policy columns
TICK_IN = 0.5  # inches a duration's tick label needs (small font)


def main_resource(result: SimResult) -> str:
    """The resource whose allocation tells the story: GPUs if the cluster has any, else CPU."""
    return GPU if result.capacity.get(GPU, 0) > 0 else "cpu"


def policy_style(policy: str, index: int = 0) -> tuple[str, Any]:
    """A policy's colour and dash pattern; one not known here takes a spare by its index."""
    return POLICY_STYLES.get(policy) or SPARE_STYLES[index % len(SPARE_STYLES)]


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


def cpu_only(job: JobRecord) -> bool:
    """A job that held CPU and never a GPU: invisible in a GPU panel."""
    return any(a.get("cpu", 0) > 0 for _, a in job.allocation) and not any(
        a.get(GPU, 0) > 0 for _, a in job.allocation
    )


def panel_resources(results: Sequence[SimResult]) -> list[str]:
    """The allocation panels of a column: the main resource, and CPU too when the cluster
    has GPUs and some job uses none."""
    main = main_resource(results[0])
    if main == GPU and any(cpu_only(j) for r in results for j in r.jobs):
        return [GPU, "cpu"]
    return [main]


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


def _resource_name(resource: str) -> str:
    return {GPU: "GPU", "cpu": "CPU"}.get(resource, resource.rsplit("/", 1)[-1])


def _plot_allocation(
    ax: Axes,
    result: SimResult,
    resource: str,
    end_s: float,
    scale: float,
    colors: Mapping[str, str],
) -> float:
    """Each job's share of ``resource``, stacked by arrival; the cluster's training total
    as a line (above it, resources are held by jobs that cannot train). Returns the top."""
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
    return max(capacity, top, 1.0)


def _title(result: SimResult, resources: Sequence[str]) -> str:
    """The policy, what it used of each drawn resource, and a cut run's unfinished jobs."""
    used = result.summary.get("utilization") or {}
    shares = [
        f"{_resource_name(r)} {100 * used[r]:.0f} %"
        for r in resources
        if isinstance(used.get(r), int | float)
    ]
    title = result.policy + (f"\nused: {', '.join(shares)}" if shares else "")
    if result.summary.get("stopped_at_horizon"):
        left = (result.summary.get("jobs") or 0) - (result.summary.get("jobs_finished") or 0)
        title += f"\nCUT at the horizon: {left} job(s) unfinished"
    return title


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


def _longest_stay(result: SimResult) -> float:
    """The longest time a job spent in the system, from its arrival."""
    end_s = end_of(result)
    return max(
        (end - j.arrival_s for j in result.jobs for _, _, end in job_spans(j, end_s)),
        default=0.0,
    )


def _short_names(keys: Sequence[str]) -> list[str]:
    """Job keys without their namespace when every job shares one."""
    spaces = {k.split("/", 1)[0] for k in keys if "/" in k}
    if len(spaces) == 1 and all("/" in k for k in keys):
        return [k.split("/", 1)[1] for k in keys]
    return list(keys)


def _plot_timeline(
    ax: Axes, result: SimResult, scale: float, colors: Mapping[str, str], labels: bool
) -> None:
    """Each job on its own clock (0 = its arrival): queued grey, holding red, training in
    its colour, a dot where it finished."""
    end_s = end_of(result)
    jobs, note = timeline_jobs(result.jobs, end_s)
    boxes: dict[State, list[list[tuple[float, float]]]] = {s: [] for s in COLORS}
    faces: list[str] = []
    half = BAR_HEIGHT / 2 if len(jobs) <= MAX_LABELED_JOBS else 0.5
    for y, job in enumerate(jobs):
        for state, start, end in job_spans(job, end_s):
            x0, x1 = (start - job.arrival_s) / scale, (end - job.arrival_s) / scale
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
    done = [((j.finish_s - j.arrival_s) / scale, y, colors.get(j.key, "black"))
            for y, j in enumerate(jobs) if j.finish_s is not None]  # fmt: skip
    if done:
        xs, ys, cs = zip(*done, strict=True)
        size = 4 if len(jobs) > MAX_LABELED_JOBS else 12
        ax.scatter(xs, ys, s=size, c=list(cs), marker="o", lw=0, label="finished", zorder=3)
    ax.set_ylim(len(jobs) - 0.5, -0.5)  # first arrival on top
    ax.grid(True, axis="x", color="#b0b0b0", lw=0.5, alpha=0.6)
    ax.set_axisbelow(True)
    if not labels:  # the first column's rows, shared: its labels stand for all
        ax.tick_params(labelleft=False)
    elif len(jobs) <= MAX_LABELED_JOBS:
        names = _short_names([j.key for j in jobs])
        ax.set_yticks(range(len(jobs)), names, fontsize="small" if len(jobs) <= 20 else "x-small")
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"{len(result.jobs)} jobs, by arrival" + (f"\n({note})" if note else ""))


def _plot_cdf(ax: Axes, results: Sequence[SimResult], scale: float, most_ticks: int) -> None:
    """JCT CDF per policy over all its jobs: an unfinished job keeps the curve below 1."""
    for i, r in enumerate(results):
        color, dashes = policy_style(r.policy, i)
        ours = r.policy == OURS
        # The default thick and beneath: a policy whose curve is the same shows on top of
        # it, and the default's colour still shows around and between its dashes.
        style = {"color": color, "ls": dashes, "lw": 3.2 if ours else 1.5}
        style["zorder"] = 2 if ours else 3
        jcts = sorted(j.jct_s for j in r.jobs if j.jct_s is not None)
        if not jcts:
            ax.plot([], [], label=f"{r.policy} (none finished)", **style)
            continue
        x = [v / scale for v in jcts]
        y = [(i + 1) / len(r.jobs) for i in range(len(jcts))]
        ax.step([x[0], *x], [0.0, *y], where="post", label=r.policy, **style)
    ax.set_xscale("log")
    jcts = [j.jct_s for r in results for j in r.jobs if j.jct_s is not None and j.jct_s > 0]
    if jcts:  # the view is the data's range with a margin, ticked in round durations
        low, high = min(jcts) / 1.25, max(jcts) * 1.25
        ax.set_xlim(low / scale, high / scale)
        duration_ticks(ax, low, high, scale, most_ticks)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("JCT (log scale)")
    ax.set_ylabel("fraction of jobs finished")
    ax.set_title("JCT distribution", fontsize=TITLE_PT)
    ax.grid(True, which="both", alpha=0.3)


def _state_handles(resource: str) -> list[Artist]:
    return [
        Patch(color="#9e9ae0", label="each job its own colour (training)"),
        Patch(color=COLORS["holding"], label="holding resources, not training"),
        Patch(color=COLORS["queued"], label="queued"),
        Patch(color=WAITING_SHADE, ec="#c0c0c0", label="some job waits"),
        Line2D([], [], color="black", lw=0.8, label=f"{resource} of jobs able to train"),
        Line2D([], [], color="#555555", marker="o", ms=3, lw=0, label="a job finished"),
        Line2D([], [], color="black", ls="--", lw=1, label="capacity"),
    ]


def _legends(ax: Axes, cdf: Axes, resource: str) -> None:
    """Both legends in their own cell, under the JCT distribution."""
    ax.set_axis_off()
    policies = ax.legend(
        *cdf.get_legend_handles_labels(),
        loc="upper center",
        ncols=2,
        fontsize="x-small",
        title="policy (JCT lines)",
        title_fontsize="small",
        handlelength=4.0,
        columnspacing=1.0,
        frameon=False,
    )
    ax.add_artist(policies)
    ax.legend(
        handles=_state_handles(resource),
        loc="lower center",
        fontsize="x-small",
        frameon=False,
    )


def _overlaps(a: Bbox, b: Bbox) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def title_boxes(fig: Figure) -> list[tuple[Text, Bbox]]:
    """Every title drawn on ``fig`` and where it is, in display pixels."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    texts = [ax.title for ax in fig.axes if ax.title.get_text()]
    if fig._suptitle is not None:  # matplotlib keeps it there, and has no getter
        texts.append(fig._suptitle)
    return [(t, t.get_window_extent(renderer)) for t in texts]


def _clashes(fig: Figure) -> bool:
    """Two titles closer than ``TITLE_GAP_PX``, or one leaving the picture."""
    boxes = [b.expanded(1.0, 1.0).padded(TITLE_GAP_PX / 2) for _, b in title_boxes(fig)]
    width = fig.bbox.width
    outside = any(b.x0 + TITLE_GAP_PX / 2 < 0 or b.x1 - TITLE_GAP_PX / 2 > width for b in boxes)
    return outside or any(_overlaps(a, b) for a, b in combinations(boxes, 2))


def _fit_titles(fig: Figure, titles: Sequence[Text]) -> None:
    """Shrink the columns' titles until none overlaps another or leaves the figure: first
    to ``WRAP_TITLE_PT``, then a cut run's line is broken in two, then to ``MIN_TITLE_PT``."""
    size = TITLE_PT
    wrapped = False
    while _clashes(fig):
        if size <= WRAP_TITLE_PT and not wrapped:
            wrapped = True
            for t in titles:
                t.set_text(t.get_text().replace("horizon: ", "horizon:\n"))
            continue
        if size <= MIN_TITLE_PT:
            return
        size = max(MIN_TITLE_PT, size - 0.5)
        for t in titles:
            t.set_fontsize(size)


def ticks_for(width_in: float) -> int:
    """How many duration ticks an axis this wide holds without their labels touching."""
    return max(2, min(6, int(width_in / TICK_IN)))


@dataclass(frozen=True)
class Layout:
    """The figure's size and grid: per policy a column of allocation panels (one per
    resource) above a timeline, and the JCT distribution's wider column."""

    width_in: float
    heights: tuple[float, ...]  # of the grid's rows, in inches

    @staticmethod
    def of(results: Sequence[SimResult], resources: Sequence[str]) -> Layout:
        n_jobs = max(len(r.jobs) for r in results)
        gantt = min(max(2.5, 0.16 * min(n_jobs, MAX_LABELED_JOBS)), 5.0)
        heights = (2.6, *[1.5] * (len(resources) - 1), gantt)
        return Layout(min(4.5 + 4.2 * len(results), MAX_WIDTH_IN), heights)

    @property
    def height_in(self) -> float:
        return min(sum(self.heights) + 1.6, MAX_HEIGHT_IN)


def _allocation_panels(
    fig: Figure,
    cells: Sequence[Any],
    result: SimResult,
    resources: Sequence[str],
    axis: BrokenTime,
    colors: Mapping[str, str],
    shared: dict[str, Axes],
    small: bool,
) -> Axes:
    """A column's allocation panels, one per resource, on the cluster's time axis (shared
    with the first column's); returns the top one, which carries the column's title."""
    end_s = end_of(result)
    panels = []
    for row, (cell, resource) in enumerate(zip(cells, resources, strict=True)):
        first = shared.get(resource)
        ax = fig.add_subplot(cell, sharex=shared.get(resources[0]), sharey=first)
        top = _plot_allocation(ax, result, resource, end_s, axis.scale, colors)
        ax.set_ylim(0, max(top * 1.08, ax.get_ylim()[1] if first else 0))
        if first is None:
            shared[resource] = ax
            ax.set_ylabel("GPUs" if resource == GPU else f"{_resource_name(resource)} cores")
        if result.summary.get("stopped_at_horizon"):
            ax.axvline(end_s / axis.scale, color=CUT_COLOR, lw=1.5, zorder=5)
        axis.mark_break(ax)
        if row < len(resources) - 1:
            ax.tick_params(labelbottom=False)
        else:
            ax.set_xlabel(axis.label(), fontsize="x-small" if small else "small")
        panels.append(ax)
    top = panels[0]
    top.set_title(_title(result, resources), fontsize=TITLE_PT)
    if result.summary.get("stopped_at_horizon"):
        top.title.set_color(CUT_COLOR)
    return top


def figure(results: Sequence[SimResult]) -> Figure:
    """Per result a column: its allocation panels above its timeline; then the CDF."""
    if not results:
        raise ValueError("nothing to plot: no simulation results")
    horizon = max(_horizon(r) for r in results)
    ends = [j.finish_s if j.finish_s is not None else end_of(r) for r in results for j in r.jobs]
    axis = broken_time(ends, horizon)
    stay = max(_longest_stay(r) for r in results)
    stay_scale, _ = time_unit(stay)
    colors = job_colors(results)
    resources = panel_resources(results)
    same_jobs = len({frozenset(j.key for j in r.jobs) for r in results}) == 1
    layout = Layout.of(results, resources)
    column_in = layout.width_in / (len(results) + CDF_WIDTH)
    fig = Figure(figsize=(layout.width_in, layout.height_in), layout="constrained")
    grid = fig.add_gridspec(
        len(layout.heights),
        len(results) + 1,
        height_ratios=layout.heights,
        width_ratios=[1] * len(results) + [CDF_WIDTH],
    )
    tops: list[Axes] = []
    timelines: list[Axes] = []
    shared: dict[str, Axes] = {}
    for col, result in enumerate(results):
        cells = [grid[row, col] for row in range(len(resources))]
        small = column_in <= 3
        tops.append(_allocation_panels(fig, cells, result, resources, axis, colors, shared, small))
        first = timelines[0] if timelines else None
        ax = fig.add_subplot(grid[-1, col], sharex=first, sharey=first if same_jobs else None)
        _plot_timeline(ax, result, stay_scale, colors, labels=first is None or not same_jobs)
        timelines.append(ax)
    cut = any(r.summary.get("stopped_at_horizon") for r in results)
    axis.apply(tops[0], axis.end * (1.03 if cut else 1.0))  # the cut in view
    since_arrival(timelines[0], stay, stay_scale, ticks_for(column_in))
    for ax in timelines[1:]:  # tick parameters are each axes' own, even when shared
        ax.tick_params(axis="x", labelsize="small")
    legend_cell = fig.add_subplot(grid[-1, -1])
    cdf = fig.add_subplot(grid[:-1, -1])
    _plot_cdf(cdf, results, stay_scale, ticks_for(CDF_WIDTH * column_in))
    _legends(legend_cell, cdf, "GPUs" if resources[0] == GPU else "CPU")
    fig.suptitle(", ".join(sorted({r.scenario for r in results})), fontsize="large")
    _fit_titles(fig, [ax.title for ax in tops])
    return fig


def plot(results: Sequence[SimResult], path: str | Path) -> None:
    """Write the comparison figure of ``results`` as a PNG at ``path``."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"cannot plot to {path.name!r}: only .png is supported")
    fig = figure(results)
    FigureCanvasAgg(fig)  # attach an Agg canvas: no pyplot, no display
    fig.savefig(path, format="png", dpi=100)
