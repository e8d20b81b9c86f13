"""The web view in a real browser (issue 29): Debian's Chromium, headless, driven by
Playwright. Each page loads from a file with every network request refused and no console
error, shows every job, and hovering or clicking a job's bar shows that job's story.

``make test`` installs Chromium when it is missing; elsewhere the tests say they need it
(and fail under CI=true, so CI never passes without running them).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from sim.results import JobRecord, Sample, Segment, SimResult
from sim.view import run as run_view
from sim.view.chromium import ARGS, CHROMIUM

ROOT = Path(__file__).resolve().parent.parent
DUMP = ROOT / "tests" / "fixtures" / "view" / "elastic-pool.json"

# A real browser draws each page (a minute on two cores): `make test-slow` and CI run them.
pytestmark = pytest.mark.slow

if not CHROMIUM.exists():
    why = f"{CHROMIUM} is missing (apt-get install chromium; `make test` does it)"
    if os.environ.get("CI"):
        raise RuntimeError(why)
    pytest.skip(why, allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=list(ARGS))
        yield b
        b.close()


class Page:
    """A page opened from a file, with what it said and asked for."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1500, "height": 1000})
        # Errors and warnings alike (plotly.js warns, by console.trace, of what it cannot
        # draw as given).
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning", "trace")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.route("**/*", self._only_the_file)
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("#timeline .ytick text")

    def _only_the_file(self, route: Any) -> None:
        url = route.request.url
        if url.startswith("file:"):
            route.continue_()
        else:
            self.requests.append(url)
            route.abort()

    def texts(self, selector: str) -> list[str]:
        """The text of SVG elements (which have no innerText)."""
        return self.page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")

    def ticks(self, figure: str = "timeline") -> list[str]:
        return self.texts(f"#{figure} .yaxislayer-above .ytick text")

    def story(self) -> str:
        return self.page.inner_text("#story")

    def bars(self) -> list[Any]:
        """Every job bar of the timeline wide enough to point at (not the marks)."""
        found = self.page.locator("#timeline g.trace.bars g.point path")
        out = []
        for i in range(found.count()):
            box = found.nth(i).bounding_box()
            if box and box["width"] >= 3:
                out.append(found.nth(i))
        return out

    def close(self) -> None:
        self.page.close()


def _hover_each(page: Page, limit: int = 60) -> list[tuple[str, str]]:
    """(hover label, story) for the first bars, one after another."""
    seen = []
    for bar in page.bars()[:limit]:
        bar.hover(force=True)
        page.page.wait_for_timeout(60)
        label = " ".join(page.texts("#timeline .hoverlayer text"))
        seen.append((label, page.story()))
    return seen


@pytest.fixture(scope="module")
def run_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view") / "run.html"
    argv = ["simulate", str(ROOT / "examples" / "elastic.yaml"), "--policy", "dragonet,gang-fifo"]
    assert main([*argv, "--html", str(out)]) == 0
    return out


def test_a_runs_page_loads_offline_without_errors_and_shows_every_job(
    browser: Any, run_page: Path
) -> None:
    page = Page(browser, run_page)
    try:
        assert page.errors == [] and page.requests == []
        assert set(page.ticks()) == {"team-a/resnet-elastic", "team-b/bert", "team-b/cifar-elastic"}
        titles = page.texts("#timeline .annotation-text")
        assert titles[:2] == ["dragonet", "gang-fifo"]  # the policies side by side
        for figure in ("jobs-over-time", "allocation", "distributions"):
            legend = page.texts(f"#{figure} .legendtext")
            assert {"dragonet", "gang-fifo"} <= set(legend)
        # Each job's own time since its arrival, on a log axis, and back to the run's clock.
        axis = "() => document.getElementById('timeline').layout.xaxis2.type"
        page.page.locator("#timeline .updatemenu-button", has_text="since arrival").click()
        assert page.page.evaluate(axis) == "log"
        page.page.wait_for_function(
            "() => [...document.querySelectorAll('#timeline .g-xtitle text')]"
            ".some(t => t.textContent === 'seconds since arrival (log)')",
            timeout=10_000,
        )
        assert "seconds since arrival (log)" in page.texts("#timeline .g-xtitle text")
        page.page.locator("#timeline .updatemenu-button", has_text="run clock").click()
        assert page.page.evaluate(axis) == "linear"
        assert page.errors == []
    finally:
        page.close()


def test_hovering_a_jobs_bar_shows_that_jobs_story_and_a_click_keeps_it(
    browser: Any, run_page: Path
) -> None:
    page = Page(browser, run_page)
    try:
        seen = _hover_each(page)
        assert len(seen) >= 4
        for label, story in seen:
            job = story.splitlines()[0].split()[0]
            assert job in label  # the story is the hovered job's
            assert "arrived" in story and ("finished" in story or "unfinished" in story)
        resnet = next(s for _, s in seen if s.startswith("team-a/resnet-elastic"))
        assert "scaled" in resnet and "8 -> 4" in resnet  # shrunk for bert, and why
        # A click pins a story: hovering another job leaves it.
        first, *others = page.bars()
        first.click(force=True)
        pinned = page.story()
        for bar in others:
            bar.hover(force=True)
        assert page.story() == pinned
        assert page.errors == []
    finally:
        page.close()


def test_a_pool_dump_renders_every_job_and_its_story(browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "pool.html"
    assert main(["view", str(DUMP), "--html", str(out)]) == 0
    page = Page(browser, out)
    try:
        assert page.errors == [] and page.requests == []
        assert set(page.ticks()) == {"team-a/resnet-elastic", "team-b/bert", "team-b/cifar-elastic"}
        assert set(page.ticks("nodes")) == {"gpu-1", "gpu-2"}
        stories = {s.splitlines()[0]: s for _, s in _hover_each(page)}
        waiting = stories["team-b/cifar-elastic (TFJob)"]
        assert "Queued" in waiting and "WaitingForShrink" in waiting  # resnet shrinks to 3
        running = stories["team-b/bert (TFJob)"]
        assert "Admitted" in running and "bert-worker-0 on gpu-2: Running" in running
        assert page.errors == []
    finally:
        page.close()


def _synthetic(n: int) -> SimResult:
    """n jobs, each waiting a little then training with 2 workers (a page-size check)."""
    jobs = []
    for i in range(n):
        arrive, start, end = 60.0 * i, 60.0 * i + 30, 60.0 * i + 600
        segments = (Segment(arrive, start, "queued"), Segment(start, end, "training", 2))
        jobs.append(
            JobRecord(
                f"ns/job-{i:04d}",
                arrive,
                start,
                end,
                2,
                segments,
                workers=((arrive, 0), (start, 2), (end, 0)),
            )
        )
    samples = (Sample(0.0, {"cpu": 4.0}, {"cpu": 4.0}),)
    summary = {"policy": "dragonet", "jobs": n, "jobs_finished": n, "utilization": {"cpu": 0.5}}
    return SimResult("dragonet", "synthetic", {"cpu": 64.0}, tuple(jobs), samples, summary)


@pytest.fixture(scope="module")
def big_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view") / "big.html"
    run_view.write_html([_synthetic(1000)], out)
    return out


def test_a_thousand_jobs_scroll_in_rows_that_stay_readable(browser: Any, big_page: Path) -> None:
    page = Page(browser, big_page)
    try:
        assert page.errors == []
        ticks = page.ticks()
        assert len(ticks) == 1000 and ticks[0] == "ns/job-0000"
        ys = page.page.eval_on_selector_all(
            "#timeline .yaxislayer-above .ytick text",
            "els => els.map(e => e.getBoundingClientRect().top)",
        )
        pitch = min(abs(a - b) for a, b in itertools.pairwise(ys))
        assert pitch >= 12  # a row a reader can point at, never a sliver
        box = page.page.eval_on_selector(
            "#timeline", "e => [e.closest('.scroll') !== null, e.closest('.scroll')?.clientHeight]"
        )
        assert box[0] and box[1] < 1000  # the timeline scrolls in its own box
    finally:
        page.close()


# The time axis's tick labels that can be seen in the timeline's scrolling box: inside the
# box's viewport, and the topmost element there (not covered by the rows).
SEEN_TICKS = """() => {
  const box = document.getElementById('timeline').closest('.scroll').getBoundingClientRect();
  return [...document.querySelectorAll('#timeline-axis .xtick text')].filter(t => {
    const r = t.getBoundingClientRect();
    if (r.height === 0 || r.top < box.top || r.bottom > box.bottom) return false;
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return hit !== null && hit.closest('#timeline-axis') !== null;
  }).map(t => t.textContent);
}"""


def _ranges(page: Page, figure: str) -> list[list[float]]:
    return page.page.evaluate(
        f"() => {{ const f = document.getElementById('{figure}')._fullLayout;"
        " return Object.keys(f).filter(k => /^xaxis[0-9]*$/.test(k)).sort()"
        ".map(k => f[k].range); }"
    )


def test_a_long_timelines_time_axis_stays_in_sight_and_follows_a_zoom(
    browser: Any, big_page: Path
) -> None:
    page = Page(browser, big_page)
    try:
        page.page.wait_for_selector("#timeline-axis .xtick text")
        page.page.evaluate(
            "() => { const box = document.getElementById('timeline').closest('.scroll');"
            " box.scrollIntoView(); box.scrollTop = (box.scrollHeight - box.clientHeight) / 2; }"
        )
        page.page.wait_for_timeout(300)
        middle = page.page.evaluate(
            "() => document.getElementById('timeline').closest('.scroll').scrollTop"
        )
        assert middle > 5000  # halfway through 1,000 rows of 16 px
        seen = page.page.evaluate(SEEN_TICKS)
        assert len(seen) >= 3 and "0" in seen  # the run's clock, in hours, from 0
        assert _ranges(page, "timeline-axis") == _ranges(page, "timeline")
        # The same hour sits over the same pixel: the axis lines up with the rows.
        zeros = page.page.evaluate(
            "() => ['timeline', 'timeline-axis'].map(id => { const r = [...document"
            ".querySelectorAll(`#${id} .xtick text`)].find(t => t.textContent === '0')"
            ".getBoundingClientRect(); return r.left + r.width / 2; })"
        )
        assert abs(zeros[0] - zeros[1]) < 1

        # A zoom of the timeline (a drag, or relayout) moves the axis in sight with it.
        page.page.evaluate("() => Plotly.relayout('timeline', {'xaxis.range': [8, 9]})")
        page.page.wait_for_function(
            "() => document.getElementById('timeline-axis')._fullLayout.xaxis.range[0] === 8",
            timeout=10_000,
        )
        assert _ranges(page, "timeline-axis") == [[8, 9]]
        zoomed = page.page.evaluate(SEEN_TICKS)
        assert zoomed[0] == "8" and "8.4" in zoomed and "2" not in zoomed

        # Its buttons switch the timeline to each job's own time, and back.
        types = "() => ['timeline', 'timeline-axis'].map(id => document.getElementById(id)"
        types += "._fullLayout.xaxis.type).join()"
        page.page.locator("#timeline-axis .updatemenu-button", has_text="since arrival").click()
        page.page.wait_for_function(f"({types})() === 'log,log'", timeout=10_000)
        assert "seconds since arrival (log)" in page.texts("#timeline-axis .g-xtitle text")
        page.page.locator("#timeline-axis .updatemenu-button", has_text="run clock").click()
        page.page.wait_for_function(f"({types})() === 'linear,linear'", timeout=10_000)

        # Its legend hides and shows the timeline's traces.
        training = page.page.locator("#timeline-axis g.traces", has_text="training")
        training.locator(".legendtoggle").click()
        hidden = "() => document.getElementById('timeline').data.filter(t => "
        hidden += "t.visible === 'legendonly').map(t => t.legendgroup).join()"
        page.page.wait_for_function(f"({hidden})() === 'training'", timeout=10_000)
        assert page.errors == []
    finally:
        page.close()


@pytest.mark.slow
def test_six_policies_titles_fit_and_do_not_overlap(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """At 1,400 px with all six policies: each allocation title stays inside its figure, and
    in the since-arrival (log) mode the columns' axis titles do not overlap (issue 38)."""
    from cli.main import main

    path = tmp_path_factory.mktemp("six") / "run.html"
    assert main(["simulate", str(ROOT / "examples" / "elastic.yaml"), "--html", str(path)]) == 0
    page = Page(browser, path)
    try:
        page.page.set_viewport_size({"width": 1400, "height": 1000})
        page.page.wait_for_timeout(300)
        edges = page.page.evaluate(
            "() => { const fig = document.getElementById('allocation').getBoundingClientRect();"
            " return [...document.querySelectorAll('#allocation .annotation-text')].map(t => {"
            " const r = t.getBoundingClientRect(); return [r.left - fig.left, fig.right - r.right];"
            " }); }"
        )
        assert edges and all(left >= 0 and right >= 0 for left, right in edges), edges
        page.page.locator("#timeline .updatemenu-button", has_text="since arrival").click()
        page.page.wait_for_timeout(500)
        boxes = page.page.evaluate(
            "() => [...document.querySelectorAll('#timeline g[class$=\"title\"] text')]"
            ".filter(t => t.textContent).map(t => { const r = t.getBoundingClientRect();"
            " return [r.left, r.right, r.top, r.bottom]; })"
        )
        assert boxes
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                overlap = a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]
                assert not overlap, (a, b)
        assert page.errors == []
    finally:
        page.close()
