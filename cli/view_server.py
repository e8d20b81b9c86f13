"""``dragonet view --live --serve``: the pool's page on a small local web server that reads
the cluster again every ``--refresh`` seconds, and a page that loads itself again as often
(keeping its scroll and the story pinned), like ``kubectl proxy`` on 127.0.0.1 by default.

However many tabs are open, the cluster is read at most once per half interval; plotly.js
is served once (cached by the browser), so a reload carries only the pool's figures. A read
that fails (the API server down, a permission taken away) is a page that says so in one
line and keeps trying; the command goes on until Ctrl-C, which ends it with status 0.
"""

from __future__ import annotations

import html
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.view.pool import Dump

PLOTLY = "/plotly.js"


class LivePage:
    """The page, read and drawn again when it is older than half the refresh interval."""

    def __init__(
        self,
        read: Callable[[], tuple[Dump, str]],
        refresh: float,
        first: tuple[Dump, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``first``: a read just made (the command's check that the cluster answers)."""
        self.read, self.refresh, self.clock = read, refresh, clock
        self._lock = threading.Lock()
        self._first = first
        self._at = clock() if first else float("-inf")
        self._answer: tuple[int, bytes] = (503, b"")
        self.reads = 0

    def current(self) -> tuple[int, bytes]:
        """(HTTP status, page): 200 and the pool, or 503 and why it could not be read."""
        from live.kube import LiveError
        from sim.view.pool import DumpError

        with self._lock:
            if self._first is not None and self.clock() - self._at >= self.refresh / 2:
                self._first = None  # served too late to be news: read again
            if self._first is not None:
                self._answer = (200, self._draw(*self._first))
                self._first = None
            elif self.clock() - self._at >= self.refresh / 2:
                self._at = self.clock()
                self.reads += 1
                try:
                    self._answer = (200, self._draw(*self.read()))
                except (LiveError, DumpError) as err:
                    print(f"dragonet view: {err}", file=sys.stderr, flush=True)
                    self._answer = (503, self._failed(str(err)).encode())
            return self._answer

    def _draw(self, dump: Dump, source: str) -> bytes:
        from sim.view.pool import render_page

        note = f"Live: read again every {self.refresh:g} s (dragonet view --serve)"
        return render_page(dump, source, note, self.refresh, PLOTLY.lstrip("/")).encode()

    def _failed(self, why: str) -> str:
        at = time.strftime("%H:%M:%S")
        return (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="{self.refresh:g}">'
            "<title>Dragonet pool: not read</title></head><body>"
            f'<h1>Dragonet pool</h1><p id="failed">The cluster could not be read at {at}: '
            f"{html.escape(why)}</p><p>Trying again every {self.refresh:g} s.</p></body></html>"
        )


def handler(page: LivePage) -> type[BaseHTTPRequestHandler]:
    from plotly.offline import get_plotlyjs

    script = get_plotlyjs().encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                status, body = page.current()
                self._send(status, "text/html; charset=utf-8", body, "no-store")
            elif path == PLOTLY:
                self._send(200, "text/javascript", script, "max-age=86400")
            else:
                self._send(404, "text/plain", b"not found: the pool's page is at /\n", "no-store")

        def _send(self, status: int, kind: str, body: bytes, cache: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", cache)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:  # a request per reload: not worth a line
            return

    return Handler


def make_server(page: LivePage, address: str, port: int) -> ThreadingHTTPServer:
    """The server, bound (``OSError`` when the port is taken), not yet serving."""
    server = ThreadingHTTPServer((address, port), handler(page))
    server.daemon_threads = True
    return server


def serve(server: ThreadingHTTPServer, refresh: float) -> int:
    """Serve until Ctrl-C (status 0)."""
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else host
    print(
        f"dragonet view: serving the pool at http://{shown}:{port}/ (read again every "
        f"{refresh:g} s; Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
