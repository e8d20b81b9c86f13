"""The per-job timeline, shared by a run's page and a live pool's: one row per job, each
bar a stretch of waiting, holding or training (coloured by its worker count), with marks
where it was preempted or a worker moved; one column per policy, rows aligned.

Rows keep a fixed height (``ROW_PX``), so 1,000 jobs make a tall figure that scrolls in its
box instead of 1,000 slivers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from view.palette import HOLDING, MOVED, PREEMPTED, WAITING, WORKER_SCALE

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
    for col, (_, rows) in enumerate(columns, start=1):
        for state, color in (("waiting", WAITING), ("holding", HOLDING)):
            fig.add_trace(_bars(rows, state, color, unit, col == 1), row=1, col=col)
        fig.add_trace(_training(rows, unit, max(top, 1), col == 1), row=1, col=col)
        for kind, symbol, color in (("preempted", "x", PREEMPTED), ("moved", "diamond", MOVED)):
            marks = _marks(rows, kind, symbol, color, unit, kind not in in_legend)
            if marks is not None:
                fig.add_trace(marks, row=1, col=col)
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
    fig.update_xaxes(
        title_text=unit_name, gridcolor="#eee", matches="x", range=[0, horizon_s / unit * 1.01]
    )
    return fig


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
        marker={
            "color": [s.workers for _, s in spans],
            "colorscale": WORKER_SCALE,
            "cmin": 0,
            "cmax": top,
            "showscale": legend,
            "colorbar": {
                "title": {"text": "workers"},
                "thickness": 10,
                "lenmode": "pixels",
                "len": 140,
                "y": 1.0,
                "yanchor": "top",
            }
            if legend
            else None,
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
