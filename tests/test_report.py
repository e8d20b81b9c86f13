"""What `dragonet simulate` shows a person: the live view, the comparison table and the PNG."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from PIL import Image
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sim.plot import figure, job_colors, plot, timeline_jobs
from sim.report import (
    LiveView,
    format_amount,
    format_clock,
    format_duration,
    format_resource_hours,
    summary_table,
)
from sim.results import JobRecord, Progress, Sample, Segment, SimResult

GIB = 2**30
GPU = "nvidia.com/gpu"
CAPACITY = {GPU: 4.0, "cpu": 16.0, "memory": 64.0 * GIB, "example.com/fpga": 0.0}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _summary(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "policy": "?",
        "scenario": "two-gangs",
        "jobs": 2,
        "jobs_finished": 2,
        "avg_jct_s": None,
        "p50_jct_s": None,
        "p95_jct_s": None,
        "makespan_s": None,
        "avg_queue_s": None,
        "utilization": {GPU: 0.0, "cpu": 0.0, "memory": 0.0},
        "deadlocked_resource_seconds": {GPU: 0.0, "cpu": 0.0, "memory": 0.0},
        "scale_actions": 0,
        "pod_restarts": 0,
        "sync_calls": 1234,
        "sync_latency_ms": {"p50": 1.25, "p99": 8.0},
        "lower_bounds": {"makespan_s": 3600.0, "avg_jct_s": 2700.0},
        "wall_time_s": 0.4,
    }
    return base | over


def _sample(t: float, allocated: float, training: float) -> Sample:
    return Sample(t, {GPU: allocated, "cpu": 4 * allocated}, {GPU: training, "cpu": 4 * training})


def deadlock() -> SimResult:
    """Two 4-GPU gangs on 4 GPUs, each holding 2 GPUs forever (open segments)."""
    jobs = tuple(
        JobRecord(
            key=key,
            arrival_s=0.0,
            start_s=None,
            finish_s=None,
            workers_requested=4,
            segments=(Segment(0.0, 10.0, "queued"), Segment(10.0, math.inf, "holding")),
        )
        for key in ("a", "b")
    )
    summary = _summary(
        policy="default",
        jobs_finished=0,
        utilization={GPU: 0.0, "cpu": 0.0, "memory": 0.0},
        deadlocked_resource_seconds={GPU: 4 * 3590.0, "cpu": 16 * 3590.0, "memory": GIB * 3600.0},
        pod_restarts=3,
    )
    samples = (_sample(0, 0, 0), _sample(10, 4, 0), _sample(3600, 4, 0))
    return SimResult("default", "two-gangs", CAPACITY, jobs, samples, summary)


def gang(policy: str = "dragon", second_start: float = 1810.0) -> SimResult:
    """The same two gangs run one after the other."""
    end = second_start + 1800.0
    jobs = (
        JobRecord(
            "a", 0.0, 10.0, 1810.0, 4, (Segment(0, 10, "queued"), Segment(10, 1810, "training", 4))
        ),
        JobRecord(
            "b",
            0.0,
            second_start,
            end,
            4,
            (Segment(0, second_start, "queued"), Segment(second_start, end, "training", 4)),
        ),
    )
    summary = _summary(
        policy=policy,
        avg_jct_s=(1810.0 + end) / 2,
        p50_jct_s=(1810.0 + end) / 2,
        p95_jct_s=end,
        makespan_s=end,
        avg_queue_s=(10.0 + second_start) / 2,
        utilization={GPU: 0.9, "cpu": 0.25, "memory": 0.5},
    )
    samples = (_sample(0, 0, 0), _sample(10, 4, 4), _sample(end, 0, 0))
    return SimResult(policy, "two-gangs", CAPACITY, jobs, samples, summary)


def rows(table: Table) -> dict[str, list[Text]]:
    """Row label -> the policy cells of that row."""
    columns = [list(c.cells) for c in table.columns]
    return {str(label): [col[i] for col in columns[1:]] for i, label in enumerate(columns[0])}


def is_best(cell: Text) -> bool:
    return str(cell.style) == "bold green"


# --- summary table ---------------------------------------------------------------------------


def test_table_has_a_column_per_policy_and_marks_the_lower_avg_jct() -> None:
    table = summary_table([deadlock(), gang("dragon"), gang("fifo", second_start=2500.0)])
    assert [str(c.header) for c in table.columns] == ["Metric", "default", "dragon", "fifo"]

    avg = rows(table)["Avg JCT"]
    assert [c.plain for c in avg] == ["—", "45m 10s", "50m 55s"]
    assert [is_best(c) for c in avg] == [False, True, False]
    deadlocked = rows(table)["Deadlocked GPU"]
    assert [is_best(c) for c in deadlocked] == [False, True, True]
    assert [is_best(c) for c in rows(table)["GPU utilization"]] == [False, True, True]


def test_faster_jct_from_finishing_fewer_jobs_is_not_the_best() -> None:
    quick_but_partial = gang("partial")
    quick_but_partial = SimResult(
        "partial",
        "two-gangs",
        CAPACITY,
        quick_but_partial.jobs,
        quick_but_partial.samples,
        _summary(policy="partial", jobs_finished=1, avg_jct_s=1810.0),
    )
    table = summary_table([quick_but_partial, gang("dragon")])
    assert [is_best(c) for c in rows(table)["Avg JCT"]] == [False, True]
    assert [is_best(c) for c in rows(table)["Jobs finished"]] == [False, True]


def test_a_tie_between_all_policies_highlights_nothing() -> None:
    table = summary_table([gang("dragon"), gang("fifo")])
    assert not any(is_best(cell) for cells in rows(table).values() for cell in cells)


def test_none_values_print_as_a_dash() -> None:
    out = io.StringIO()
    Console(file=out, width=200).print(summary_table([deadlock()]))
    text = out.getvalue()
    for label in ("Avg JCT", "p95 JCT", "Makespan", "Avg queue"):
        line = next(line for line in text.splitlines() if label in line)
        assert "—" in line
    assert "None" not in text


def test_table_speaks_human_units() -> None:
    r = rows(summary_table([deadlock(), gang()]))
    assert list(r) == [
        "Capacity",
        "Jobs finished",
        "Avg JCT",
        "p50 JCT",
        "p95 JCT",
        "Makespan",
        "Avg queue",
        "Lower bound: makespan / avg JCT",
        "GPU utilization",
        "CPU utilization",
        "Memory utilization",
        "Deadlocked GPU",
        "Deadlocked CPU",
        "Deadlocked Memory",
        "Scale actions",
        "Pod restarts",
        "Sync calls",
        "Sync latency p50",
        "Sync latency p99",
        "Wall time",
    ]  # no fpga row: the cluster has none
    assert r["Capacity"][0].plain == "4 GPU · 16 CPU · 64 GiB"
    assert [c.plain for c in r["Jobs finished"]] == ["0 / 2", "2 / 2"]
    assert r["Deadlocked GPU"][0].plain == "4.0 GPU-h"
    assert r["Deadlocked CPU"][0].plain == "16.0 cpu-h"
    assert r["Deadlocked Memory"][0].plain == "1.0 GiB-h"
    assert r["Memory utilization"][1].plain == "50.0%"
    assert r["Lower bound: makespan / avg JCT"][0].plain == "1h 00m / 45m 00s"
    assert r["Sync calls"][0].plain == "1,234"
    assert [c.plain for c in r["Sync latency p50"]] == ["1.2 ms", "1.2 ms"]
    assert r["Sync latency p99"][0].plain == "8.0 ms"
    assert r["Wall time"][0].plain == "0.4 s"


def test_resources_are_ordered_gpu_cpu_memory_then_by_name() -> None:
    capacity = {"memory": 1.0, "zz.io/x": 1.0, "cpu": 1.0, "aa.io/y": 1.0, GPU: 1.0}
    base = gang()
    result = SimResult("p", "s", capacity, base.jobs, base.samples, base.summary)
    labels = [k for k in rows(summary_table([result])) if k.endswith("utilization")]
    assert labels == [
        "GPU utilization",
        "CPU utilization",
        "Memory utilization",
        "aa.io/y utilization",
        "zz.io/x utilization",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (0.4, "0.4 s"),
        (48.2, "48 s"),
        (59.7, "1m 00s"),
        (725, "12m 05s"),
        (3720, "1h 02m"),
        (3599.9, "1h 00m"),
        (27 * 3600, "1d 03h"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


def test_format_units() -> None:
    assert format_resource_hours(GPU, 12.5 * 3600) == "12.5 GPU-h"
    assert format_resource_hours("cpu", 3 * 3600) == "3.0 cpu-h"
    assert format_resource_hours("example.com/fpga", 7200) == "2.0 fpga-h"
    assert format_amount("memory", 1.5 * GIB) == "1.5 GiB"
    assert format_clock(3723.9) == "1:02:03"


# --- plot ---------------------------------------------------------------------------------


def test_plot_writes_a_png_wider_per_policy_that_fits_a_screen(tmp_path: Path) -> None:
    one, two, four = tmp_path / "one.png", tmp_path / "two.PNG", tmp_path / "four.png"
    plot([gang()], one)
    plot([deadlock(), gang()], two)
    plot([deadlock(), gang(), deadlock(), gang()], four)
    for path in (one, two, four):
        assert path.read_bytes()[:8] == PNG_SIGNATURE
    with Image.open(one) as a, Image.open(two) as b, Image.open(four) as d:
        assert b.width > 1.4 * a.width  # a column per policy, next to the JCT distribution
        assert a.height > 200
        assert d.width <= 1700 and d.height <= 900  # a laptop screen at dpi 100


@pytest.mark.parametrize("name", ["out.svg", "out.pdf", "out"])
def test_plot_refuses_other_formats(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match=r"\.png"):
        plot([gang()], tmp_path / name)
    assert not (tmp_path / name).exists()


def _timeline(result: SimResult) -> Any:
    return figure([result]).axes[1]


def _max_x(collections: Mapping[str, Any], state: str) -> float:
    return max(v[:, 0].max() for v in collections[state].get_paths() for v in [v.vertices])


SECONDS = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _axis_unit_s(ax: Any) -> float:
    """The seconds one x unit of ``ax`` holds, read off its duration ticks ("30 min" at
    0.5 means hours); every tick must agree."""
    formatter = ax.xaxis.get_major_formatter()
    units = set()
    for i, v in enumerate(ax.get_xticks()):
        number, name = formatter(v, i).split()
        units.add(round(float(number) * SECONDS[name] / v, 6))
    assert len(units) == 1, units
    return units.pop()


def test_open_segments_end_at_the_last_sample() -> None:
    ax = _timeline(deadlock())
    states = {c.get_label(): c for c in ax.collections}
    assert _max_x(states, "holding") == pytest.approx(60.0)  # 3600 s, in minutes
    assert _axis_unit_s(ax) == 60.0  # the axis reads in minutes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]


def test_plot_without_samples_or_segments(tmp_path: Path) -> None:
    waiting = JobRecord("w", 0.0, None, None, 2, ())
    done = JobRecord("d", 0.0, 0.0, 9000.0, 1, (Segment(0, 9000, "training", 1),))
    result = SimResult("p", "s", {"cpu": 8.0}, (waiting, done), (), _summary())
    ax = _timeline(result)
    states = {c.get_label(): c for c in ax.collections}
    assert _max_x(states, "queued") == pytest.approx(2.5)  # waits until the run's end, in hours
    assert _axis_unit_s(ax) == 3600.0  # the axis reads in hours
    plot([result], tmp_path / "empty.png")
    assert (tmp_path / "empty.png").read_bytes()[:8] == PNG_SIGNATURE


def test_thousand_jobs_are_one_collection_per_state_without_labels() -> None:
    jobs = tuple(
        JobRecord(
            f"job-{i}",
            float(i),
            i + 5.0,
            i + 65.0,
            1,
            (
                Segment(i, i + 2, "queued"),
                Segment(i + 2, i + 5, "holding"),
                Segment(i + 5, i + 65, "training", 1),
            ),
        )
        for i in range(1000)
    )
    result = SimResult(
        "p", "s", CAPACITY, jobs, (_sample(0, 1, 1), _sample(1065, 0, 0)), _summary()
    )
    ax = _timeline(result)
    polys = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(polys) == 3  # one per state
    assert len(ax.collections) == 4  # and one for the finish markers
    assert ax.get_yticklabels() == []
    assert "1000 jobs" in ax.get_ylabel()


# --- live view ----------------------------------------------------------------------------


def _progress(done: int, policy: str = "dragon") -> Progress:
    return Progress(policy, 3723.0 + done, 1000, done, 4, 7, 10 * done)


def test_live_view_prints_plain_lines_off_a_terminal() -> None:
    """Off a terminal (a log, CI): no bars, a plain line every few seconds with an estimate,
    and one at the end of each policy with its exact counts."""
    out = io.StringIO()
    console = Console(file=out, width=80)
    assert not console.is_terminal
    now = [0.0]
    with LiveView(console, plain_interval_s=5.0, policies=2, clock=lambda: now[0]) as view:
        for done in range(1000):
            now[0] = done * 0.01  # 10 s for the whole policy: a line at 5 s, then done
            view.update(_progress(done))
        now[0] = 9.999
        view.update(_progress(1000))
        now[0] = 10.0
        view.update(_progress(0, policy="dragonet"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines  # wrapped at 80 columns would make more
    assert lines[0].startswith("simulate: dragon (1/2): 500/1000 jobs done, 4 training")
    # Half the jobs in 5 s: 5 s more for this policy, then about 10 s for the other.
    assert lines[0].endswith("5.0 s elapsed, about 15 s left")
    assert lines[1].startswith("simulate: dragon (1/2) done: 1000/1000 jobs done")
    assert lines[1].endswith("10 s elapsed, about 10 s left")
    assert lines[2].startswith("simulate: dragonet (2/2) done: 0/1000 jobs done")
    assert "\x1b" not in out.getvalue()  # no colour codes in a log


def test_live_view_is_silent_when_disabled() -> None:
    out = io.StringIO()
    with LiveView(Console(file=out, force_terminal=True), enabled=False) as view:
        view.update(_progress(1000))
    assert out.getvalue() == ""


def test_live_view_throttles_but_always_shows_the_final_state() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    with LiveView(console, clock=lambda: 0.0) as view:  # the clock never moves: no redraws
        for done in range(1001):
            view.update(_progress(done))
        view.update(_progress(400, policy="fifo"))
    text = out.getvalue()
    assert "500/1000" not in text
    assert "1000/1000" in text  # dragon's last snapshot, drawn when fifo began
    assert "400/1000" in text  # fifo's, drawn on exit
    assert "1:02:03" in text  # simulated time as h:mm:ss


# --- the picture: per-job allocation, the horizon, the JCT distribution ----------------------


@pytest.fixture(scope="module")
def elastic_runs() -> list[SimResult]:
    from sim.engine import SimConfig, Simulation
    from sim.scenario import load_scenario

    scenario = load_scenario(Path(__file__).resolve().parent.parent / "examples" / "elastic.yaml")
    return [Simulation(scenario, SimConfig(policy=p)).run() for p in ("dragonet", "gang-fifo")]


def test_each_job_has_its_own_colour_and_a_shrink_is_a_step(
    elastic_runs: list[SimResult],
) -> None:
    """elastic.yaml under dragonet: the elastic job grows into idle GPUs and shrinks for
    another; in the allocation panel its band changes height, in a colour of its own."""
    fig = figure(elastic_runs)
    allocation = fig.axes[0]
    colors = job_colors(elastic_runs)
    assert len(set(colors.values())) == len(colors) == 3
    bands = [c for c in allocation.collections if to_hex(c.get_facecolor()[0]) in colors.values()]
    assert {to_hex(c.get_facecolor()[0]) for c in bands} == set(colors.values())
    elastic = colors["team-a/resnet-elastic"]
    (band,) = [c for c in bands if to_hex(c.get_facecolor()[0]) == elastic]
    heights = {round(h, 6) for h in np.concatenate([p.vertices for p in band.get_paths()])[:, 1]}
    assert {4.0, 8.0} <= heights  # 4 GPUs, grown to 8 (or shrunk back): a scale step
    cdf = fig.axes[-1]
    assert [line.get_label() for line in cdf.get_lines()] == ["dragonet", "gang-fifo"]
    assert cdf.get_xscale() == "log"


def test_a_run_cut_by_the_horizon_is_marked_on_the_picture() -> None:
    result = gang()
    cut = SimResult(
        result.policy,
        result.scenario,
        result.capacity,
        result.jobs,
        result.samples,
        {**result.summary, "stopped_at_horizon": True, "jobs": 3, "jobs_finished": 2},
    )
    cut = SimResult(
        cut.policy, cut.scenario, cut.capacity, cut.jobs, cut.samples,
        {**cut.summary, "horizon_s": 7200.0},
    )  # fmt: skip
    fig = figure([cut])
    title = fig.axes[0].get_title()
    assert "CUT at the horizon: 1 job(s) unfinished" in title
    # The red line and the open segments end at the horizon, not at the last sample.
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_color() == "#c00000"]
    assert line.get_xdata()[0] == pytest.approx(120.0)  # minutes
    assert "CUT" not in figure([result]).axes[0].get_title()


def test_hundreds_of_jobs_are_sampled_with_the_slowest_kept() -> None:
    jobs = [
        JobRecord(f"j{i:04d}", float(i), i + 1.0, i + (5000.0 if i == 7 else 60.0), 1, ())
        for i in range(1000)
    ]
    kept, note = timeline_jobs(jobs, 10_000.0)
    assert len(kept) <= 300
    assert "j0007" in {j.key for j in kept}  # the long tail stays visible
    assert [j.arrival_s for j in kept] == sorted(j.arrival_s for j in kept)
    assert note.startswith(f"{len(kept)} of 1000 jobs")


def test_a_short_job_on_a_long_axis_still_shows_where_it_finished() -> None:
    """A 2-minute job in a 60-day run is narrower than a pixel: its finish is marked."""
    short = JobRecord("short", 0.0, 0.0, 120.0, 1, (Segment(0, 120, "training", 1),))
    long = JobRecord("long", 0.0, 0.0, 60 * 86400.0, 1, (Segment(0, 60 * 86400, "training", 1),))
    result = SimResult("p", "s", {"cpu": 8.0}, (short, long), (), _summary())
    ax = _timeline(result)
    (marks,) = [c for c in ax.collections if c.get_label() == "finished"]
    offsets = marks.get_offsets()
    assert [tuple(o) for o in offsets] == [(60.0, 0.0), (120.0 / 86400, 1.0)]  # days, by name
