"""One self-contained HTML page from plotly figures: plotly.js inlined once, no server and
no network, and a story panel that shows a job's story when a bar is hovered or clicked.

Each plotted point that belongs to a job carries the key of its story (``customdata``);
the stories are embedded once as JSON, so a 1,000-job page does not repeat them per bar.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from sim.view import sticky

SCROLL_ROWS = 40  # a timeline taller than this many rows scrolls in its own box


@dataclass(frozen=True)
class Section:
    """A heading and either a figure or ready HTML (a table), with a line of help."""

    title: str
    figure: go.Figure | None = None
    id: str = ""  # the figure's element id (default: figure-<its index>)
    html: str = ""
    note: str = ""
    scroll: bool = False  # a tall figure in a box that scrolls (rows never shrink)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { padding: 12px 20px; background: #f4f4f4; border-bottom: 1px solid #ddd; }
header h1 { margin: 0; font-size: 20px; }
header p { margin: 4px 0 0; color: #555; }
/* The side panel comes first in the page (shown on the right), so each figure, drawn as
   the page loads, already has its final width. */
.layout { display: flex; align-items: flex-start; }
main { flex: 1; min-width: 0; padding: 0 20px 40px; }
aside { order: 2; flex: none; width: 340px; position: sticky; top: 0; max-height: 100vh;
        overflow-y: auto; padding: 12px 16px; border-left: 1px solid #ddd; background: #fafafa;
        box-sizing: border-box; }
aside h2 { font-size: 15px; margin: 4px 0 8px; }
#story { white-space: pre-wrap; font: 12px/1.45 ui-monospace, monospace; margin: 0; }
section h2 { font-size: 16px; margin: 22px 0 4px; }
section p.note { margin: 0 0 6px; color: #555; font-size: 13px; }
.scroll { max-height: 80vh; overflow-y: auto; border: 1px solid #eee; }
.scroll > .axis { position: sticky; top: 0; background: #fff; z-index: 2;
        border-bottom: 1px solid #eee; }
table.summary { border-collapse: collapse; font-size: 13px; }
table.summary th, table.summary td { padding: 3px 10px; border-bottom: 1px solid #eee;
        text-align: right; }
table.summary th:first-child, table.summary td:first-child { text-align: left; }
"""

# A live page (``dragonet view --live --serve``) loads itself again every so many seconds,
# keeping where it was scrolled to and the story pinned (run before SCRIPT, which reads it).
RELOAD = """
(function () {
  var every = parseFloat(document.body.dataset.refresh), kept = 'dragonet-view';
  var panel = document.getElementById('story');
  var stories = JSON.parse(document.getElementById('stories').textContent);
  var was = JSON.parse(sessionStorage.getItem(kept) || 'null');
  sessionStorage.removeItem(kept);
  if (was && was.job && was.job in stories) {
    panel.textContent = stories[was.job];
    panel.dataset.job = was.job;
    panel.dataset.pinned = '1';
  }
  window.addEventListener('load', function () { if (was) window.scrollTo(0, was.y); });
  setTimeout(function () {
    var job = panel.dataset.pinned === '1' ? panel.dataset.job : null;
    sessionStorage.setItem(kept, JSON.stringify({y: window.scrollY, job: job}));
    location.reload();
  }, every * 1000);
})();
"""

# Hover shows the story; a click pins it until another click.
SCRIPT = """
(function () {
  var stories = JSON.parse(document.getElementById('stories').textContent);
  var panel = document.getElementById('story');
  var pinned = panel.dataset.pinned === '1';  // kept across a live page's reload
  function show(ev, pin) {
    if (!ev || !ev.points || !ev.points.length) return;
    var key = ev.points[0].customdata;
    if (Array.isArray(key)) key = key[0];
    if (typeof key !== 'string' || !(key in stories)) return;
    if (pinned && !pin) return;
    pinned = pin || pinned;
    panel.textContent = stories[key];
    panel.dataset.job = key;
    panel.dataset.pinned = pinned ? '1' : '';
  }
  document.querySelectorAll('.plotly-graph-div').forEach(function (gd) {
    gd.on('plotly_hover', function (ev) { show(ev, false); });
    gd.on('plotly_click', function (ev) { pinned = false; show(ev, true); });
  });
  document.querySelectorAll('.scroll > .axis .plotly-graph-div').forEach(function (head) {
    follow(head, document.getElementById(head.id.replace(/-axis$/, '')));
  });
  // The sticky short figure over a tall one (sim/view/sticky.py): it takes the tall one's x
  // ranges, types, titles and margins after each of its redraws; its buttons update the tall
  // one; its legend shows or hides the tall one's traces.
  function follow(head, main) {
    if (!main) return;
    function sync() {
      var full = main._fullLayout, own = head._fullLayout;
      if (!full || !full._size || !own) return;
      var upd = {};
      if (own.margin.l !== full._size.l) upd['margin.l'] = full._size.l;
      if (own.margin.r !== full._size.r) upd['margin.r'] = full._size.r;
      Object.keys(full).forEach(function (k) {
        if (!/^xaxis[0-9]*$/.test(k) || !own[k]) return;
        var a = full[k], b = own[k];
        if (a.type !== b.type) upd[k + '.type'] = a.type;
        if (a.range[0] !== b.range[0] || a.range[1] !== b.range[1]) {
          upd[k + '.range'] = a.range.slice();
        }
        var title = a.title && a.title.text;
        if (title !== (b.title && b.title.text)) upd[k + '.title.text'] = title;
      });
      if (Object.keys(upd).length) Plotly.relayout(head, upd);
    }
    ['plotly_afterplot', 'plotly_relayout', 'plotly_update'].forEach(function (ev) {
      main.on(ev, sync);
    });
    head.on('plotly_buttonclicked', function (ev) {
      var args = (ev && ev.button && ev.button.args) || [];
      Plotly.update(main, args[0] || {}, args[1] || {});
    });
    head.on('plotly_restyle', function () {
      var shown = {};
      head.data.forEach(function (t) {
        if (t.legendgroup) shown[t.legendgroup] = t.visible === undefined ? true : t.visible;
      });
      var which = [], visible = [];
      main.data.forEach(function (t, i) {
        if (t.legendgroup in shown) { which.push(i); visible.push(shown[t.legendgroup]); }
      });
      if (which.length) Plotly.restyle(main, {visible: visible}, which);
    });
    sync();
  }
})();
"""


def render(
    title: str,
    subtitle: str,
    sections: Sequence[Section],
    stories: Mapping[str, str],
    refresh: float | None = None,
    plotly_src: str = "",
) -> str:
    """The whole page as one string. ``refresh``: seconds after which the page loads itself
    again (a served live page); ``plotly_src``: plotly.js from that URL (which the browser
    caches across reloads) instead of inlined."""
    parts = []
    for i, s in enumerate(sections):
        body = s.html
        if s.figure is not None:
            div = s.id or f"figure-{i}"
            if s.scroll:
                # Its axis, legend and buttons in a short figure that stays on top.
                tall, head = sticky.split(s.figure)
                top = _html(head, f"{div}-axis", {"displayModeBar": False})
                body = f'<div class="scroll"><div class="axis">{top}</div>{_html(tall, div)}</div>'
            else:
                body = _html(s.figure, div)
        note = f'<p class="note">{html.escape(s.note)}</p>' if s.note else ""
        parts.append(f"<section><h2>{html.escape(s.title)}</h2>{note}{body}</section>")
    data = json.dumps(dict(stories), ensure_ascii=False).replace("</", "<\\/")
    if plotly_src:
        plotly = f'<script src="{html.escape(plotly_src)}"></script>'
    else:
        plotly = f"<script>{get_plotlyjs()}</script>"
    live = f' data-refresh="{refresh:g}"' if refresh else ""
    reload = f"<script>{RELOAD}</script>\n" if refresh else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>{STYLE}</style>
{plotly}
</head><body{live}>
<header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header>
<div class="layout">
<aside><h2>Job story</h2><pre id="story">Hover over a job's bar to read its story;
click to keep it here.</pre></aside>
<main>{"".join(parts)}</main></div>
<script type="application/json" id="stories">{data}</script>
{reload}<script>{SCRIPT}</script>
</body></html>
"""


def _html(fig: go.Figure, div: str, config: Mapping[str, object] | None = None) -> str:
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div,
        config={"displaylogo": False, "responsive": True, **(config or {})},
    )


def write(path: str | Path, page: str) -> int:
    """Write the page; its size in bytes."""
    data = page.encode()
    Path(path).write_bytes(data)
    return len(data)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain HTML table (cells escaped)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
