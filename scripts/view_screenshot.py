"""Writes docs/pictures/view.png: the web view of examples/elastic.yaml under dragonet-las
(the default) and gang-fifo, in Debian's headless Chromium, with one job's story pinned in
the side panel.

Run from the repository root: ``.venv/bin/python scripts/view_screenshot.py``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from cli.main import main as dragonet
from sim.view.chromium import ARGS, CHROMIUM

OUT = Path("docs/pictures/view.png")
PINNED = "team-a/resnet-elastic"  # the story shown: grown, shrunk for bert, grown again


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        page_file = Path(tmp) / "run.html"
        argv = ["simulate", "examples/elastic.yaml", "--policy", "dragonet-las,gang-fifo"]
        if dragonet([*argv, "--html", str(page_file)]) != 0:
            return 1
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=list(ARGS))
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(page_file.as_uri())
            page.wait_for_selector("#timeline .ytick text")
            bars = page.locator("#timeline g.trace.bars g.point path")
            for i in range(bars.count()):
                box = bars.nth(i).bounding_box()
                if not box or box["width"] < 40:
                    continue
                bars.nth(i).click(force=True)
                if page.inner_text("#story").startswith(PINNED):
                    break
            # The whole page in one viewport (a full-page capture re-lays plotly's figures
            # out under the side panel).
            height = page.evaluate("document.documentElement.scrollHeight")
            page.set_viewport_size({"width": 1400, "height": height})
            page.wait_for_timeout(800)
            page.screenshot(path=str(OUT))
            browser.close()
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
