"""The headless browser the web view is tested and pictured in (tests/test_view_browser.py,
scripts/view_screenshot.py): Debian's Chromium (``make chromium``), started so it makes no
network request of its own, since the view's pages must load with none at all."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
