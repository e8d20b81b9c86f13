"""The per-job timeline, shared by a run's page and a live pool's: one row per job, each
bar a stretch of waiting, holding or training (coloured by its worker count), with marks
where it was preempted or a worker moved; one column per policy, rows aligned.

Rows keep a fixed height (``ROW_PX``), so 1,000 jobs make a tall figure that scrolls in its
box instead of 1,000 slivers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from sim.view.palette import HOLDING, MOVED, PREEMPTED, WAITING, WORKER_SCALE

ROW_PX = 16
SpanState = Literal["waiting", "holding", "training"]


@dataclass(frozen=True)
class Span:
    start_s: float
    end_s: float
    state: SpanState
    workers: int = 0


@dataclass(frozen=True)
class Mark:
    t_s: float
    kind: Literal["preempted", "moved"]
    text: str


@dataclass(frozen=True)
class Row:
    job: str  # the row's label
    story: str  # key of its story (page.render's ``stories``)
    spans: tuple[Span, ...]
    marks: tuple[Mark, ...] = ()
    arrival_s: float | None = None  # default: its first stretch's start

    @property
    def origin_s(self) -> float:
        if self.arrival_s is not None:
            return self.arrival_s
        return min((s.start_s for s in self.spans), default=0.0)


def _since(row: Row, t: float) -> float:
    """Seconds since the row's arrival, at least 1 (the log axis starts there)."""
    return max(t - row.origin_s, 1.0)


def time_unit(horizon_s: float) -> tuple[float, str]:
    """The unit the time axis counts in, from how long the runs were."""
    if horizon_s > 3 * 86400:
        return 86400.0, "days"
    if horizon_s > 2 * 3600:
        return 3600.0, "hours"
    return (60.0, "minutes") if horizon_s > 120 else (1.0, "seconds")


def _clock(seconds: float) -> str:
    h, rest = divmod(max(int(seconds), 0), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


def figure(
    columns: Sequence[tuple[str, Sequence[Row]]], order: Sequence[str], horizon_s: float
) -> go.Figure:
    """The timeline of each column (a policy and its rows) side by side; ``order``: the
    rows' labels, top first."""
    unit, unit_name = time_unit(horizon_s)
    fig = make_subplots(
        rows=1,
        cols=max(len(columns), 1),
        shared_yaxes=True,
        shared_xaxes=True,
        horizontal_spacing=0.02,
        subplot_titles=[name for name, _ in columns],
    )
    top = max((s.workers for _, rows in columns for r in rows for s in r.spans), default=1)
    in_legend: set[str] = set()
    # Each trace's positions on the other time axis (seconds since each job's arrival).
    since: list[tuple[list[float] | None, list[float]]] = []
    for col, (_, rows) in enumerate(columns, start=1):
        for state, color in (("waiting", WAITING), ("holding", HOLDING)):
            fig.add_trace(_bars(rows, state, color, unit, col == 1), row=1, col=col)
            since.append(_bars_since(rows, (state,)))
        fig.add_trace(_training(rows, unit, max(top, 1), col == 1), row=1, col=col)
        since.append(_bars_since(rows, ("training",)))
        if col == 1:
            fig.add_trace(_worker_scale(max(top, 1)), row=1, col=col)
            since.append((None, [None]))
        for kind, symbol, color in (("preempted", "x", PREEMPTED), ("moved", "diamond", MOVED)):
            marks = _marks(rows, kind, symbol, color, unit, kind not in in_legend)
            if marks is not None:
                fig.add_trace(marks, row=1, col=col)
                since.append(
                    (None, [_since(r, m.t_s) for r in rows for m in r.marks if m.kind == kind])
                )
                in_legend.add(kind)
    top, bottom = 80, 45
    height = max(260, ROW_PX * len(order) + top + bottom)
    fig.update_layout(
        barmode="overlay",
        height=height,
        margin={"l": 10, "r": 10, "t": top, "b": bottom},
        legend=legend_above(height, top, bottom),
        plot_bgcolor="white",
        hoverlabel={"namelength": -1},
    )
    fig.update_yaxes(
        type="category",
        categoryorder="array",
        categoryarray=list(reversed(order)),
        tickmode="array",
        tickvals=list(order),
        tickfont={"size": 10},
        automargin=True,
        range=[-0.5, len(order) - 0.5],
    )
    absolute = {"range": [0, horizon_s / unit * 1.01], "type": "linear", "title": unit_name}
    fig.update_xaxes(title_text=unit_name, gridcolor="#eee", matches="x", range=absolute["range"])
    fig.layout.xaxis.matches = None  # the first axis is "x": not matched to itself
    fig.update_layout(updatemenus=[_time_axes(fig, since, absolute, height, top, bottom)])
    return fig


def _bars_since(rows: Sequence[Row], states: Sequence[str]) -> tuple[list[float], list[float]]:
    """(base, length) of the rows' bars in ``states``, in seconds since each arrival."""
    spans = [(r, s) for r in rows for s in r.spans if s.state in states]
    bases = [_since(r, s.start_s) for r, s in spans]
    return bases, [_since(r, s.end_s) - b for (r, s), b in zip(spans, bases, strict=True)]


def _time_axes(
    fig: go.Figure,
    since: Sequence[tuple[list[float] | None, list[float]]],
    absolute: dict[str, Any],
    height: int,
    top: int,
    bottom: int,
) -> dict[str, Any]:
    """Two buttons: the run's clock (every job on one time line), or each job's own time
    since its arrival on a log axis, where a 2-minute job is as readable as a 20-hour one."""
    axes = sorted((a for a in fig.layout if a.startswith("xaxis")), key=lambda a: int(a[5:] or 1))
    longest = max(
        (b + x for bases, xs in since if bases for b, x in zip(bases, xs, strict=True)),
        default=10.0,
    )
    clock_data = {
        "base": [list(t.base) if t.type == "bar" else None for t in fig.data],
        "x": [list(t.x) for t in fig.data],
    }
    since_data = {
        "base": [bases for bases, _ in since],
        "x": [xs for _, xs in since],
    }

    def axes_as(kind: str, rng: list[float], title: str) -> dict[str, Any]:
        """Every column's axis as ``kind``; a long title only under the first column (six
        columns' "seconds since arrival" overlap), ticks of a log axis at powers of ten."""
        out: dict[str, Any] = {}
        short = len(title) <= 12
        for i, a in enumerate(axes):
            out[f"{a}.type"] = kind
            out[f"{a}.range"] = rng
            out[f"{a}.title.text"] = title if short or i == 0 else ""
            out[f"{a}.dtick"] = 1 if kind == "log" else None
        return out

    plot = max(height - top - bottom, 1)
    return {
        "type": "buttons",
        "direction": "right",
        "showactive": True,
        "x": 1.0,
        "xanchor": "right",
        "y": 1 + 30 / plot,
        "yanchor": "bottom",
        "pad": {"r": 0, "t": 0},
        "buttons": [
            {
                "label": "run clock",
                "method": "update",
                "args": [clock_data, axes_as("linear", absolute["range"], absolute["title"])],
            },
            {
                "label": "since arrival (log)",
                "method": "update",
                "args": [
                    since_data,
                    axes_as("log", [0, math.log10(longest * 1.1)], "seconds since arrival (log)"),
                ],
            },
        ],
    }


def legend_above(height: int, top: int, bottom: int) -> dict[str, object]:
    """A horizontal legend in the top margin, 30 px above the plots (and their titles)."""
    plot = max(height - top - bottom, 1)
    return {
        "orientation": "h",
        "x": 0,
        "xanchor": "left",
        "y": 1 + 30 / plot,
        "yanchor": "bottom",
    }


def _bars(rows: Sequence[Row], state: str, color: str, unit: float, legend: bool) -> go.Bar:
    spans = [(r, s) for r in rows for s in r.spans if s.state == state]
    return go.Bar(
        orientation="h",
        name=state,
        legendgroup=state,
        showlegend=legend,
        y=[r.job for r, _ in spans],
        base=[s.start_s / unit for _, s in spans],
        x=[(s.end_s - s.start_s) / unit for _, s in spans],
        marker={"color": color, "line": {"width": 0}},
        width=0.75,
        customdata=[r.story for r, _ in spans],
        text=[f"{state} {_clock(s.start_s)}-{_clock(s.end_s)}" for _, s in spans],
        textposition="none",
        hovertemplate="%{y}<br>%{text}<extra></extra>",
    )


def _worker_scale(top: int) -> go.Scatter:
    """The training bars' colour bar (workers), drawn by a trace with no points."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        showlegend=False,
        hoverinfo="skip",
        marker={
            "color": [0],
            "colorscale": WORKER_SCALE,
            "cmin": 0,
            "cmax": top,
            "showscale": True,
            "colorbar": {
                "title": {"text": "workers"},
                "thickness": 10,
                "dtick": max(1, math.ceil(top / 4)),  # whole workers
                "lenmode": "pixels",
                "len": 140,
                "y": 1.0,
                "yanchor": "top",
            },
        },
    )


def _training(rows: Sequence[Row], unit: float, top: int, legend: bool) -> go.Bar:
    spans = [(r, s) for r in rows for s in r.spans if s.state == "training"]
    return go.Bar(
        orientation="h",
        name="training (shade: workers)",
        legendgroup="training",
        showlegend=legend,
        y=[r.job for r, _ in spans],
        base=[s.start_s / unit for _, s in spans],
        x=[(s.end_s - s.start_s) / unit for _, s in spans],
        # Colours, not numbers on a colour scale: plotly.js styles a bar's legend and
        # selection from its colour, and a number there is ~200 console warnings a page.
        marker={
            "color": sample_colorscale(WORKER_SCALE, [s.workers / top for _, s in spans]),
            "line": {"width": 0},
        },
        width=0.75,
        customdata=[r.story for r, _ in spans],
        text=[
            f"training, {s.workers} worker{'s' if s.workers != 1 else ''} "
            f"{_clock(s.start_s)}-{_clock(s.end_s)}"
            for _, s in spans
        ],
        textposition="none",
        hovertemplate="%{y}<br>%{text}<extra></extra>",
    )


def _marks(
    rows: Sequence[Row], kind: str, symbol: str, color: str, unit: float, legend: bool
) -> go.Scatter | None:
    marks = [(r, m) for r in rows for m in r.marks if m.kind == kind]
    if not marks:
        return None
    return go.Scatter(
        mode="markers",
        name=kind,
        legendgroup=kind,
        showlegend=legend,
        y=[r.job for r, _ in marks],
        x=[m.t_s / unit for _, m in marks],
        marker={"symbol": symbol, "color": color, "size": 9, "line": {"width": 1}},
        customdata=[r.story for r, _ in marks],
        text=[m.text for _, m in marks],
        hovertemplate="%{y}<br>%{text}<extra></extra>",
    )
