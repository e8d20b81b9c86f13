"""The page of a simulated run: the policies side by side, from ``SimResult``s.

Sections: the summary; jobs waiting and training over time (the aggregate that stays
readable at any number of jobs); each resource's allocation as a share of the cluster;
the JCT and wait distributions; the per-job timeline. Each job's story (arrival, wait,
admission, workers, scaling, preemptions, moves, the pool's last reason) is one hover away.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim.report import (
    GIB,
    format_amount,
    format_count,
    format_duration,
    format_percent,
    ordered_resources,
    resource_label,
)
from sim.results import JobRecord, SimResult
from sim.view import page, timeline
from sim.view.palette import policy_style
from sim.view.timeline import Mark, Row, Span


def story_key(policy: str, job: str) -> str:
    return f"{policy}|{job}"


def end_of(result: SimResult) -> float:
    """Where a run's open stretches end: its horizon if cut, else its last moment."""
    s = result.summary
    if s.get("stopped_at_horizon") and isinstance(s.get("horizon_s"), int | float):
        return float(s["horizon_s"])
    times = [j.arrival_s for j in result.jobs] + [x.t_s for x in result.samples]
    times += [g.end_s for j in result.jobs for g in j.segments if math.isfinite(g.end_s)]
    times += [j.finish_s for j in result.jobs if j.finish_s is not None]
    return max(times, default=0.0)


def spans(job: JobRecord, end_s: float) -> tuple[Span, ...]:
    """A job's stretches; training split wherever its worker count changed."""
    out: list[Span] = []
    for g in job.segments:
        stop = g.end_s if math.isfinite(g.end_s) else end_s
        if stop <= g.start_s:
            continue
        if g.state != "training":
            out.append(Span(g.start_s, stop, "waiting" if g.state == "queued" else "holding"))
            continue
        out.extend(_by_workers(job, g.start_s, stop, g.workers))
    if not job.segments and job.finish_s is None and job.state_at_end() != "not arrived":
        out.append(Span(job.arrival_s, end_s, "waiting"))
    return tuple(out)


def _by_workers(job: JobRecord, start: float, stop: float, first: int) -> list[Span]:
    count = first
    for t, n in job.workers:
        if t <= start:
            count = n
    cuts = [(t, n) for t, n in job.workers if start < t < stop]
    out, at = [], start
    for t, n in cuts:
        if t > at:
            out.append(Span(at, t, "training", count))
        at, count = t, n
    out.append(Span(at, stop, "training", count))
    return out


def story(policy: str, job: JobRecord, end_s: float) -> str:
    """A job's story under one policy, in lines a reader follows."""
    lines = [f"{job.key} ({job.kind}) under {policy}", f"arrived   {_at(job.arrival_s)}"]
    if job.admitted_s is not None:
        lines.append(f"admitted  {_at(job.admitted_s)}")
    if job.start_s is not None:
        lines.append(f"trained   {_at(job.start_s)} (waited {format_duration(job.wait_s)})")
    if job.workers:
        counts = [n for _, n in job.workers]
        lines.append(f"workers   up to {max(counts)} of {job.workers_requested} requested")
    for s in job.scales:
        lines.append(f"scaled    {_at(s.t_s)} {s.from_workers} -> {s.to_workers}: {s.reason}")
    for p in job.preemptions:
        lines.append(f"preempted {_at(p.t_s)} by {p.by}: {p.reason}")
    for m in job.moves:
        lines.append(
            f"moved     {_at(m.t_s)} {m.replica} {m.from_node} -> {m.to_node} ({m.reason})"
        )
    if job.state_losses:
        lines.append(f"lost its progress to a checkpoint {job.state_losses} time(s)")
    if job.finish_s is not None:
        lines.append(f"finished  {_at(job.finish_s)} (JCT {format_duration(job.jct_s)})")
    else:
        lines.append(f"unfinished at {_at(end_s)}: {job.why_unfinished()}")
    return "\n".join(lines)


def _at(t: float) -> str:
    h, rest = divmod(max(int(t), 0), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


def job_order(results: Sequence[SimResult]) -> list[str]:
    """Every job once, by arrival (the same rows in every policy's column)."""
    arrival: dict[str, float] = {}
    for r in results:
        for j in r.jobs:
            arrival.setdefault(j.key, j.arrival_s)
    return sorted(arrival, key=lambda k: (arrival[k], k))


def build(results: Sequence[SimResult]) -> tuple[list[page.Section], dict[str, str]]:
    """The page's sections and the stories they point at."""
    ends = {r.policy: end_of(r) for r in results}
    horizon = max(ends.values(), default=0.0)
    stories = {
        story_key(r.policy, j.key): story(r.policy, j, ends[r.policy])
        for r in results
        for j in r.jobs
    }
    columns = [
        (
            r.policy,
            [
                Row(j.key, story_key(r.policy, j.key), spans(j, ends[r.policy]), _marks(j))
                for j in r.jobs
            ],
        )
        for r in results
    ]
    order = job_order(results)
    sections = [
        page.Section("Summary", html=summary_table(results)),
        page.Section(
            "Jobs waiting and training",
            jobs_over_time(results),
            id="jobs-over-time",
            note="How many jobs waited (queued or holding pods) and trained at each moment.",
        ),
        page.Section(
            "Allocation and utilisation",
            allocation(results),
            id="allocation",
            note="Each resource requested by pods bound to nodes, as a share of the cluster; "
            "hover for the amount and the part held by jobs that train.",
        ),
        page.Section(
            "JCT and wait distributions",
            distributions(results),
            id="distributions",
            note="Share of all jobs done (or started) by then: a curve that ends below 100% "
            "left jobs unfinished.",
        ),
        page.Section(
            f"Every job ({len(order)}), by arrival",
            timeline.figure(columns, order, horizon),
            id="timeline",
            note="Grey: waiting; red: holding pods its gang cannot use; green: training, "
            "darker with more workers; x: preempted; diamond: a worker moved. Hover or "
            "click a bar for the job's story.",
            scroll=len(order) > page.SCROLL_ROWS,
        ),
    ]
    return sections, stories


def _marks(job: JobRecord) -> tuple[Mark, ...]:
    marks = [Mark(p.t_s, "preempted", f"preempted by {p.by}: {p.reason}") for p in job.preemptions]
    marks += [
        Mark(m.t_s, "moved", f"moved {m.replica} {m.from_node} -> {m.to_node}") for m in job.moves
    ]
    return tuple(marks)


def summary_table(results: Sequence[SimResult]) -> str:
    resources = ordered_resources(results)
    rows = []
    for r in results:
        s = r.summary
        cut = " (cut at the horizon)" if s.get("stopped_at_horizon") else ""
        util = (s.get("utilization") or {}) if isinstance(s.get("utilization"), dict) else {}
        rows.append(
            [
                r.policy,
                f"{format_count(s.get('jobs_finished'))} / {format_count(s.get('jobs'))}{cut}",
                format_duration(s.get("avg_jct_s")),
                format_duration(s.get("p95_jct_s")),
                format_duration(s.get("avg_queue_s")),
                format_duration(s.get("makespan_s")),
                *(format_percent(util.get(x)) for x in resources),
                format_count(s.get("scale_actions")),
                format_count(sum(len(j.preemptions) for j in r.jobs)),
                format_count(sum(len(j.moves) for j in r.jobs)),
            ]
        )
    header = [
        "Policy",
        "Jobs finished",
        "Avg JCT",
        "p95 JCT",
        "Avg wait",
        "Makespan",
        *(f"{resource_label(x)} utilisation" for x in resources),
        "Scale actions",
        "Preemptions",
        "Moves",
    ]
    return page.table(header, rows)


def _unit(results: Sequence[SimResult]) -> tuple[float, str]:
    return timeline.time_unit(max((end_of(r) for r in results), default=0.0))


def _steps(events: Iterable[tuple[float, int]]) -> tuple[list[float], list[int]]:
    """A running count from (time, +1/-1) events, one point per time."""
    xs: list[float] = []
    ys: list[int] = []
    n = 0
    for t, d in sorted(events):
        n += d
        if xs and xs[-1] == t:
            ys[-1] = n
        else:
            xs.append(t)
            ys.append(n)
    return xs, ys


def jobs_over_time(results: Sequence[SimResult]) -> go.Figure:
    unit, name = _unit(results)
    fig = make_subplots(rows=1, cols=2, subplot_titles=["jobs waiting", "jobs training"])
    most = {1: 0, 2: 0}  # the largest count in each panel
    for i, r in enumerate(results):
        color, dash = policy_style(r.policy, i)
        end = end_of(r)
        for col, states in ((1, ("waiting", "holding")), (2, ("training",))):
            events = [
                (t, d)
                for j in r.jobs
                for s in _merged(spans(j, end), states)
                for t, d in ((s[0], 1), (s[1], -1))
            ]
            xs, ys = _steps(events)
            most[col] = max(most[col], *ys, 0)
            fig.add_trace(
                go.Scatter(
                    x=[x / unit for x in xs],
                    y=ys,
                    name=r.policy,
                    legendgroup=r.policy,
                    showlegend=col == 1,
                    mode="lines",
                    line={"color": color, "dash": dash, "shape": "hv", "width": 2},
                    hovertemplate=f"{r.policy}: %{{y}} jobs<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text=name, gridcolor="#eee", matches="x")  # one time axis
    fig.layout.xaxis.matches = None  # the first axis is "x": not matched to itself
    fig.update_yaxes(rangemode="tozero", gridcolor="#eee")
    for col, top in most.items():  # a few jobs: whole ticks, never "0.2 jobs"
        if top <= 10:
            fig.update_yaxes(tick0=0, dtick=1, row=1, col=col)
    fig.update_layout(**_layout(320))
    return fig


def _merged(stretches: Sequence[Span], states: Sequence[str]) -> list[tuple[float, float]]:
    """The times a job spent in any of ``states``, adjacent stretches joined."""
    out: list[tuple[float, float]] = []
    for s in stretches:
        if s.state not in states:
            continue
        if out and out[-1][1] == s.start_s:
            out[-1] = (out[-1][0], s.end_s)
        else:
            out.append((s.start_s, s.end_s))
    return out


def allocation(results: Sequence[SimResult]) -> go.Figure:
    resources = ordered_resources(results) or ["cpu"]
    unit, name = _unit(results)
    titles = []
    for x in resources:
        avg = " · ".join(
            f"{r.policy} {format_percent((r.summary.get('utilization') or {}).get(x))}"
            for r in results
        )
        # More than a few policies' averages go on a line of their own (one line is
        # clipped at a 1,400 px page with all six).
        gap = "<br>" if len(results) > 3 else " "
        titles.append(f"{resource_label(x)} allocated (time average:{gap}{avg})")
    fig = make_subplots(
        rows=len(resources), cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.08
    )
    for row, x in enumerate(resources, start=1):
        for i, r in enumerate(results):
            cap = r.capacity.get(x) or 0
            if cap <= 0 or not r.samples:
                continue
            color, dash = policy_style(r.policy, i)
            ts = [s.t_s / unit for s in r.samples] + [end_of(r) / unit]
            used = [s.allocated.get(x, 0.0) for s in r.samples]
            useful = [s.training.get(x, 0.0) for s in r.samples]
            used.append(used[-1])
            useful.append(useful[-1])
            fig.add_trace(
                go.Scatter(
                    x=ts,
                    y=[100.0 * u / cap for u in used],
                    name=r.policy,
                    legendgroup=r.policy,
                    showlegend=row == 1,
                    mode="lines",
                    line={"color": color, "dash": dash, "shape": "hv", "width": 2},
                    text=[
                        f"{_amount(x, u)} of {_amount(x, cap)}; training {_amount(x, t)}"
                        for u, t in zip(used, useful, strict=True)
                    ],
                    hovertemplate=f"{r.policy}: %{{y:.0f}}%<br>%{{text}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text="%", range=[0, 105], row=row, col=1, gridcolor="#eee")
    fig.update_xaxes(gridcolor="#eee")
    fig.update_xaxes(title_text=name, row=len(resources), col=1)
    fig.update_layout(**_layout(200 * len(resources) + 110))
    return fig


def _amount(resource: str, units: float) -> str:
    if resource == "memory":
        return f"{units / GIB:,.0f} GiB"
    return format_amount(resource, round(units, 1))


def distributions(results: Sequence[SimResult]) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=["JCT", "wait (arrival to training)"])
    for i, r in enumerate(results):
        color, dash = policy_style(r.policy, i)
        total = len(r.jobs) or 1
        for col, values in (
            (1, sorted(j.jct_s for j in r.jobs if j.jct_s is not None)),
            (2, sorted(max(j.wait_s, 0.5) for j in r.jobs if j.wait_s is not None)),
        ):
            fig.add_trace(
                go.Scatter(
                    x=values,
                    y=[100.0 * (k + 1) / total for k in range(len(values))],
                    name=r.policy,
                    legendgroup=r.policy,
                    showlegend=col == 1,
                    mode="lines",
                    line={"color": color, "dash": dash, "shape": "hv", "width": 2},
                    text=[format_duration(v) for v in values],
                    hovertemplate=f"{r.policy}: %{{y:.0f}}% within %{{text}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(type="log", title_text="seconds (log)", gridcolor="#eee")
    fig.update_yaxes(title_text="% of jobs", range=[0, 102], gridcolor="#eee")
    fig.update_layout(**_layout(340))
    return fig


def _layout(height: int) -> dict[str, object]:
    """A figure's height, with the policies' legend in a row above the subplot titles."""
    top, bottom = 70, 45
    return {
        "height": height,
        "margin": {"l": 50, "r": 10, "t": top, "b": bottom},
        "plot_bgcolor": "white",
        "legend": timeline.legend_above(height, top, bottom),
    }


def write_html(results: Sequence[SimResult], path: str | Path) -> int:
    """Write a run's page; its size in bytes."""
    sections, stories = build(results)
    scenarios = sorted({r.scenario for r in results})
    jobs = len(job_order(results))
    subtitle = (
        f"{jobs} jobs under {len(results)} "
        f"polic{'y' if len(results) == 1 else 'ies'}: {', '.join(r.policy for r in results)}"
    )
    title = f"Dragonet simulation: {', '.join(scenarios)}"
    return page.write(path, page.render(title, subtitle, sections, stories))
