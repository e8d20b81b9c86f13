"""The PNG a person opens (``dragonet simulate --plot``), checked on matplotlib's own figure
objects: every policy's line can be told apart, legends and titles cover nothing, short jobs
keep a width beside a long one, CPU-only jobs and utilisation are on the picture."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.transforms import Bbox

from policy.model.pool import POLICIES, PoolSpec
from sim.plot import figure, job_colors
from sim.results import JobRecord, Sample, Segment, SimResult

GPU = "nvidia.com/gpu"
HOUR = 3600.0


def _summary(**over: Any) -> dict[str, Any]:
    return {"jobs": 2, "jobs_finished": 2, "utilization": {GPU: 0.9, "cpu": 0.25}} | over


def _done(key: str, arrival: float, wait: float, run: float, alloc: dict[str, float]) -> JobRecord:
    """A job that waited ``wait`` s, then trained ``run`` s holding ``alloc``."""
    start, end = arrival + wait, arrival + wait + run
    segments = (Segment(arrival, start, "queued"), Segment(start, end, "training", 1))
    allocation = ((start, alloc), (end, {k: 0.0 for k in alloc}))
    return JobRecord(key, arrival, start, end, 1, segments, allocation)


def _result(policy: str, records: tuple[JobRecord, ...], **summary: Any) -> SimResult:
    end = max(j.finish_s or 0.0 for j in records)
    samples = (Sample(0.0, {GPU: 1.0}, {GPU: 1.0}), Sample(end, {GPU: 0.0}, {GPU: 0.0}))
    capacity = {GPU: 8.0, "cpu": 32.0, "memory": 2.0**36}
    counts = {"jobs": len(records), "jobs_finished": len(records)}
    return SimResult(policy, "s", capacity, records, samples, _summary(**counts) | summary)


def _gpu_jobs() -> tuple[JobRecord, ...]:
    return (
        _done("a", 0.0, 0.0, 1800.0, {GPU: 4.0, "cpu": 8.0}),
        _done("b", 60.0, 600.0, 1200.0, {GPU: 4.0, "cpu": 8.0}),
    )


def _drawn(fig: Figure) -> Any:
    canvas = FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    return canvas.get_renderer()


def _overlap(a: Bbox, b: Bbox) -> bool:
    return a.x0 < b.x1 - 0.5 and b.x0 < a.x1 - 0.5 and a.y0 < b.y1 - 0.5 and b.y0 < a.y1 - 0.5


def _cdf(fig: Figure) -> Axes:
    return fig.axes[-1]


def _policy_lines(fig: Figure) -> dict[str, Any]:
    return {line.get_label(): line for line in _cdf(fig).get_lines()}


# --- the policies ---------------------------------------------------------------------------


def test_every_policy_has_its_own_colour_and_line_style_and_ours_is_never_hidden() -> None:
    """Six policies, six colours and six dash patterns: no two lines alike even for a
    colour-blind reader or in grey print. The default policy's line (what a pool with an
    empty spec runs) is the thickest and drawn beneath the others, so where another
    policy's curve is the same, both still show."""
    fig = figure([_result(p, _gpu_jobs()) for p in POLICIES])
    lines = _policy_lines(fig)
    assert list(lines) == list(POLICIES)
    colours = {to_hex(line.get_color()) for line in lines.values()}
    dashes = {
        (line.get_linestyle(), tuple(np.round(line._unscaled_dash_pattern[1] or (), 2)))
        for line in lines.values()
    }
    assert len(colours) == len(dashes) == len(POLICIES)
    ours = lines.pop(PoolSpec().policy)
    assert all(ours.get_zorder() < line.get_zorder() for line in lines.values())
    assert all(ours.get_linewidth() > 1.5 * line.get_linewidth() for line in lines.values())


def test_a_policy_the_plot_does_not_know_still_gets_a_style_of_its_own() -> None:
    fig = figure([_result("dragonet", _gpu_jobs()), _result("my-policy", _gpu_jobs())])
    lines = _policy_lines(fig)
    assert to_hex(lines["my-policy"].get_color()) != to_hex(lines["dragonet"].get_color())


def test_legends_are_outside_every_panels_data_and_inside_the_picture() -> None:
    fig = figure([_result(p, _gpu_jobs()) for p in POLICIES])
    renderer = _drawn(fig)
    legends = [a for ax in fig.axes for a in ax.get_children() if isinstance(a, Legend)]
    legends += fig.legends
    assert len(legends) >= 2  # the policies' and the states'
    panels = [ax for ax in fig.axes if ax.axison]
    assert _cdf(fig) in panels
    picture = fig.bbox
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in panels:
            assert not _overlap(box, ax.get_window_extent(renderer)), ax
        assert picture.x0 <= box.x0 and box.x1 <= picture.x1 + 0.5
        assert picture.y0 <= box.y0 and box.y1 <= picture.y1 + 0.5
    texts = {t.get_text() for legend in legends for t in legend.get_texts()}
    assert set(POLICIES) <= texts


# --- titles ---------------------------------------------------------------------------------


def _words(fig: Figure) -> list[Any]:
    """Every title, axis label and the suptitle: what a reader reads beside the panels."""
    texts = [fig._suptitle] if fig._suptitle is not None else []
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
    return [t for t in texts if t.get_text() and t.get_visible()]


@pytest.mark.parametrize("policies", [2, 6])
def test_titles_and_axis_labels_never_overlap_even_when_every_run_is_cut(policies: int) -> None:
    """On a long trace every policy can be cut at the horizon: each column then says so in
    its title, and no two of those (or an axis label) may overlap or leave the picture."""
    cut = {"stopped_at_horizon": True, "horizon_s": 2 * HOUR, "jobs": 3, "jobs_finished": 2}
    results = [_result(p, _gpu_jobs(), **cut) for p in list(POLICIES)[:policies]]
    fig = figure(results)
    renderer = _drawn(fig)
    words = _words(fig)
    titles = [ax.title.get_text() for ax in fig.axes[:-1] if ax.title.get_text()]
    assert len(titles) == policies
    assert all("CUT at the horizon" in t for t in titles)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in words]
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        assert not _overlap(box_a, box_b), (a, b)
    for text, box in boxes:
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 + 0.5, text


def test_what_each_policy_used_is_printed_above_its_column() -> None:
    fig = figure([_result("dragonet", _gpu_jobs(), utilization={GPU: 0.951, "cpu": 0.3})])
    assert "used: GPU 95 %" in fig.axes[0].get_title()


# --- the CPU-only job -----------------------------------------------------------------------


def test_a_cpu_only_job_on_a_gpu_cluster_has_its_own_band_in_a_cpu_panel() -> None:
    """job1 (DRAGON's, CPU only) beside a GPU job: its band cannot be in the GPU panel, so a
    CPU panel shows every job's cores, and the title says what CPU was used."""
    jobs = (
        _done("gpu-job", 0.0, 0.0, 1800.0, {GPU: 4.0, "cpu": 8.0}),
        _done("job1", 10.0, 0.0, 900.0, {"cpu": 8.0}),
    )
    fig = figure([_result("dragonet", jobs), _result("dragon", jobs)])
    colours = job_colors([_result("dragonet", jobs)])
    panels = [ax for ax in fig.axes if ax.get_ylabel() in ("GPUs", "CPU cores")]
    assert [ax.get_ylabel() for ax in panels] == ["GPUs", "CPU cores"]  # first column's

    def bands(ax: Axes) -> set[str]:
        return {to_hex(c.get_facecolor()[0]) for c in ax.collections}

    gpus, cpus = panels
    assert colours["job1"] not in bands(gpus)
    assert {colours["job1"], colours["gpu-job"]} <= bands(cpus)
    assert "CPU 25 %" in gpus.get_title()


def test_without_a_cpu_only_job_there_is_no_cpu_panel() -> None:
    fig = figure([_result("dragonet", _gpu_jobs())])
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel().endswith("cores")] == []


# --- short jobs beside a long one ----------------------------------------------------------


def _pollux_like() -> SimResult:
    """38 jobs of 10-20 minutes arriving over 3 hours and one of 20 hours: the trace shape
    where a linear axis squashes everyone but the long job into a sliver."""
    jobs = [
        _done(f"short-{i:02d}", i * 280.0, 60.0 * (i % 4), 600.0 + 30 * (i % 20), {GPU: 1.0})
        for i in range(38)
    ]
    jobs.append(_done("long", 100.0, 0.0, 20 * HOUR, {GPU: 4.0}))
    return _result("dragonet", tuple(jobs))


def _width_px(ax: Axes, x0: float, x1: float) -> float:
    (a, _), (b, _) = ax.transData.transform([(x0, 0), (x1, 0)])
    return b - a


def test_the_cluster_time_axis_gives_the_bulk_of_the_jobs_most_of_the_width() -> None:
    """The 3.2 hours in which 38 of the 39 jobs ran take most of the allocation panel; the
    20-hour tail is compressed after a marked break."""
    result = _pollux_like()
    fig = figure([result])
    allocation = fig.axes[0]
    _drawn(fig)
    unit = 3600.0 if "hours" in allocation.get_xlabel() else 60.0
    left, right = allocation.get_xlim()
    full = _width_px(allocation, left, right)
    last_short = max(j.finish_s or 0.0 for j in result.jobs if j.key != "long")
    bulk = _width_px(allocation, 0.0, last_short / unit)
    assert bulk > 0.5 * full  # linear, 3.2 hours of 20 would be 16 %
    assert "compressed" in allocation.get_xlabel()


def test_every_short_job_and_its_wait_keep_a_width_on_its_own_clock() -> None:
    """In the timeline each job runs from its own arrival on a log scale: a 10-minute job
    is wide, a 1-minute wait is visible, and the 20-hour job still fits."""
    fig = figure([_pollux_like()])
    timeline = fig.axes[1]
    _drawn(fig)
    states = {c.get_label(): c for c in timeline.collections}
    pixels = timeline.get_window_extent().width
    widths = [
        _width_px(timeline, p.vertices[:, 0].min(), p.vertices[:, 0].max())
        for p in states["training"].get_paths()
    ]
    assert len(widths) == 39
    assert min(widths) > 0.08 * pixels  # a 10-minute run, linear on 20 h: under 1 %
    waits = [
        _width_px(timeline, p.vertices[:, 0].min(), p.vertices[:, 0].max())
        for p in states["queued"].get_paths()
        if p.vertices[:, 0].max() > 0
    ]
    assert waits and min(waits) > 8  # pixels for a one-minute wait
    right = max(p.vertices[:, 0].max() for p in states["training"].get_paths())
    assert right <= timeline.get_xlim()[1]
