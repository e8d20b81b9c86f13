"""A tall figure's axis that stays in sight: what sits above a figure's plots (its legend,
its buttons, its column titles, its colour bar) and a copy of its x axes move into a short
figure of their own, which the page pins to the top of the figure's scrolling box
(``position: sticky``). Scrolled halfway through 1,000 jobs, the reader still sees when a
bar happened.

The short figure holds no data: only one empty trace per legend entry (so its legend shows
them), x axes with the tall figure's domains, ranges and titles, and the buttons. The page's
script (``page.SCRIPT``) keeps the two in step: after every redraw, zoom or button of the
tall figure the short one takes its x ranges, types, titles and left and right margins (the
tall figure's y labels set its left margin); a button of the short one updates the tall
one; a click on its legend shows or hides the tall figure's traces of that entry.
"""

from __future__ import annotations

import copy
from typing import Any

import plotly.graph_objects as go

HEAD_PX = 126  # legend and buttons, column titles, the axis's title and its tick labels
CONTROLS_PX = 32  # of which the legend and buttons' row
STRIP_PX = 4  # the short figure's plot area, under its x axis
TOP_PX = 8  # what is left of the tall figure's top margin
COLORBAR_PX = 80  # right margin for a colour bar moved into the short figure
TITLES_PX = 62  # the column titles, this far above the axis (its labels and title between)


def split(fig: go.Figure) -> tuple[go.Figure, go.Figure]:
    """(tall, head): ``fig`` without what sits above its plots, and the short figure of it
    and of its x axes. ``fig`` itself is left as it was."""
    tall = go.Figure(fig)
    layout = tall.layout
    old_top = layout.margin.t if layout.margin.t is not None else 100
    margin = {
        "l": layout.margin.l if layout.margin.l is not None else 80,
        "r": layout.margin.r if layout.margin.r is not None else 80,
    }
    if layout.height is not None:
        layout.height = layout.height - old_top + TOP_PX
    layout.margin.t = TOP_PX

    legend_traces = []
    colorbar = False
    for trace in tall.data:
        marker = getattr(trace, "marker", None)
        scale = marker is not None and bool(marker.showscale)
        if trace.showlegend is True or scale:  # a legend entry, or a colour bar to keep
            legend_traces.append(_entry(trace, legend=trace.showlegend is True))
        if scale:
            colorbar = True
            marker.showscale = False
        trace.showlegend = False
    if colorbar:
        margin["r"] = max(margin["r"], COLORBAR_PX)
        layout.margin.r = margin["r"]
    layout.showlegend = False

    titles = [a for a in layout.annotations if _above(a)]
    layout.annotations = [a for a in layout.annotations if not _above(a)]
    menus = list(layout.updatemenus)
    layout.updatemenus = []

    head = go.Figure(data=legend_traces)
    height = HEAD_PX if legend_traces or menus else HEAD_PX - CONTROLS_PX
    strip = STRIP_PX / (height - 2)
    for name in _axes(layout, "xaxis"):
        head.layout[name] = _x_head(layout[name])
    for name in _axes(layout, "yaxis"):
        x = layout[name].anchor or "x"
        head.layout[name] = {"domain": [0, strip], "anchor": x, "visible": False}
        head.layout[name].fixedrange = True
        # plotly draws only the subplots that hold a trace: an empty one in each.
        y = "y" + name.removeprefix("yaxis")
        head.add_scatter(x=[None], y=[None], xaxis=x, yaxis=y, showlegend=False)
    for a in titles:
        a = copy.deepcopy(a)
        a.y = strip
        a.yanchor = "bottom"
        a.yshift = TITLES_PX
        head.add_annotation(a)
    head.update_layout(
        height=height,
        margin={**margin, "t": 2, "b": 0, "autoexpand": False},
        plot_bgcolor="white",
        hovermode=False,
        showlegend=bool(legend_traces),
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1, "yanchor": "top"},
        updatemenus=[_skip(m) for m in menus],
    )
    return tall, head


def _axes(layout: go.Layout, kind: str) -> list[str]:
    names = [k for k in layout.to_plotly_json() if k.startswith(kind)]
    return names or [kind]


def _above(a: Any) -> bool:
    """A title above the plots (make_subplots' subplot titles)."""
    return a.yref == "paper" and a.y is not None and a.y >= 1 and a.yanchor == "bottom"


def _x_head(axis: Any) -> dict[str, Any]:
    """The short figure's copy of an x axis: its labels and title above a thin strip."""
    own = axis.to_plotly_json()
    keep = ("domain", "anchor", "type", "range", "title", "tickfont", "tickformat")
    out = {k: own[k] for k in keep if k in own}
    out.update(
        side="top",
        fixedrange=True,
        showgrid=False,
        zeroline=False,
        showline=True,
        linecolor="#999",
        ticks="outside",
        ticklen=4,
        tickcolor="#999",
    )
    return out


def _entry(trace: Any, legend: bool = True) -> Any:
    """A trace with no points that keeps ``trace``'s legend entry (and colour bar)."""
    own = trace.to_plotly_json()
    keep = ("type", "name", "legendgroup", "marker", "mode", "orientation", "xaxis", "yaxis")
    out = {k: own[k] for k in keep if k in own}
    marker = out.get("marker")
    if isinstance(marker, dict):
        marker = dict(marker)
        color = marker.get("color")
        if isinstance(color, (list, tuple)) and color and isinstance(color[0], str):
            marker["color"] = color[len(color) // 2]  # colours: the legend shows a middle one
        elif isinstance(color, (list, tuple)):  # a colour scale: the legend shows its middle
            marker["color"] = [(marker.get("cmin", 0) + marker.get("cmax", 1)) / 2]
        if marker.get("showscale") and isinstance(marker.get("colorbar"), dict):
            marker["colorbar"] = {
                **marker["colorbar"],
                "lenmode": "fraction",
                "len": 1.0,
                "y": 0,
                "yanchor": "bottom",
                "thickness": 8,
                "title": {**(marker["colorbar"].get("title") or {}), "side": "top"},
            }
        out["marker"] = marker
    out.update(x=[None], y=[None], showlegend=legend, hoverinfo="skip")
    return go.Figure(data=[out]).data[0]


def _skip(menu: Any) -> dict[str, Any]:
    """A menu whose buttons the page's script applies to the tall figure (``method: skip``
    keeps plotly from applying them to the short one, which has no such traces)."""
    own = menu.to_plotly_json()
    own["buttons"] = [{**b, "method": "skip"} for b in own.get("buttons", ())]
    own.update(x=1.0, xanchor="right", y=1, yanchor="top", pad={"r": 0, "t": 0})
    return own
