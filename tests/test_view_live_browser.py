"""``dragonet view --live --serve`` in headless Chromium (issue 39, "a live view that
refreshes"): the page served from the fake API server of ``tests/test_live.py``'s run loads
itself again, and shows what changed in the cluster meanwhile, keeping the story a user
pinned. Each state is pictured (``DRAGONET_SCREENSHOTS=DIR`` keeps the PNGs).
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.view import live_server
from sim.dump import StateDump
from sim.engine import SimConfig, Simulation
from tests.dumpserver import DumpServer, serve_dump
from tests.test_live import AT, NOW, story
from tests.test_view_browser import browser  # noqa: F401 (the fixture)

# A real browser reloads the served page: `make test-slow` and CI run it.
pytestmark = pytest.mark.slow

ELASTIC = "TFJob/default/elastic"


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    sim = Simulation(story(), SimConfig(policy="dragonet", max_time_s=AT + 600))
    dump = StateDump(sim.api, lambda: sim.now, AT)
    sim.run()
    return dump.result()[0]


@pytest.fixture
def cluster(state: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DumpServer:
    return serve_dump(copy.deepcopy(state), tmp_path, monkeypatch, NOW)


@pytest.fixture
def served(cluster: DumpServer) -> Iterator[str]:
    """``dragonet view --live --serve --port 0 --refresh 1s``, serving in a thread."""
    import argparse

    parser = argparse.ArgumentParser()
    from cli.view import add_parser

    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["view", "--live", "--serve", "--port", "0", "--refresh", "1s"])
    server, refresh = live_server(args)
    assert refresh == 1.0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _picture(page: Any, tmp_path: Path, name: str) -> Path:
    keep = os.environ.get("DRAGONET_SCREENSHOTS")
    path = Path(keep or tmp_path) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a drawn page, not a blank one
    return path


def _pin(page: Any, key: str) -> None:
    """Click the job's bar on the timeline, as a user pins its story."""
    bars = page.locator("#timeline g.trace.bars g.point path")
    for i in range(bars.count()):
        box = bars.nth(i).bounding_box()
        if not box or box["width"] < 3:
            continue
        bars.nth(i).click(force=True)
        if page.eval_on_selector("#story", "p => p.dataset.job") == key:
            return
    raise AssertionError(f"no bar of {key}")


def test_the_served_page_reloads_and_shows_the_clusters_change_keeping_the_pinned_story(
    browser: Any,  # noqa: F811 (the fixture)
    cluster: DumpServer,
    served: str,
    tmp_path: Path,
) -> None:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    errors: list[str] = []
    elsewhere: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def only_the_server(route: Any) -> None:
        if route.request.url.startswith(served):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_server)
    page.goto(served)
    page.wait_for_selector("#timeline .ytick text")
    header = page.inner_text("header p")
    assert "5 jobs" in header and "Live: read again every 1 s" in header
    ticks = page.eval_on_selector_all(
        "#timeline .yaxislayer-above .ytick text", "els => els.map(e => e.textContent)"
    )
    assert "default/big" in ticks
    _pin(page, ELASTIC)
    before = _picture(page, tmp_path, "live-before.png")

    # The cluster changes: big is deleted (its TFJob and its Admission).
    cluster.items = [
        o
        for o in cluster.items
        if (o["kind"], o["metadata"]["name"]) not in (("TFJob", "big"), ("Admission", "tfjob-big"))
    ]
    for _ in range(10):  # each reload is a navigation; a read is at most 0.5 s old
        with page.expect_navigation(timeout=15_000):
            pass
        page.wait_for_selector("#timeline .ytick text")
        if "4 jobs" in page.inner_text("header p"):
            break
    else:
        raise AssertionError("the page never showed the change")
    ticks = page.eval_on_selector_all(
        "#timeline .yaxislayer-above .ytick text", "els => els.map(e => e.textContent)"
    )
    assert "default/big" not in ticks and "default/elastic" in ticks
    pinned = page.eval_on_selector("#story", "p => [p.dataset.job, p.dataset.pinned]")
    assert pinned == [ELASTIC, "1"]
    assert page.inner_text("#story").startswith("default/elastic (TFJob)")
    after = _picture(page, tmp_path, "live-after.png")
    assert before.read_bytes() != after.read_bytes()
    assert errors == [] and elsewhere == []
    page.close()
