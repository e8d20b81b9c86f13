"""The HTTP side of Dragonet's loop processes (the recorder, the reaper), beside their loop:

* ``GET /healthz``: alive while the loop makes progress, i.e. one of its Kubernetes API
  calls returned (answered or failed) within ``stall_seconds``. A loop stuck in a call
  that never returns, or in a bug that never calls again, fails it: the kubelet restarts
  the container. An API server that refuses every call does not (a restart would not
  help): that is readiness.
* ``GET /readyz``: ready while one of its API calls *succeeded* within ``stall_seconds``.
* ``GET /metrics``: its registry, in Prometheus' text format (one process: no
  multiprocess files).

One small threaded WSGI server from the standard library (``wsgiref``, as
prometheus-client's ``start_http_server``); the kubelet and Prometheus are its only callers.
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import orjson
from flask import Flask, Response
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from pydantic import Field
from pydantic_settings import BaseSettings

from webhooks import process

log = logging.getLogger("dragonet.health")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Clock = Callable[[], float]


class Pulse:
    """When the loop last made progress (an API call returned) and last succeeded (one
    returned an answer), on a monotonic clock. Written by the loop, read by the probes."""

    def __init__(self, stall_seconds: float, clock: Clock = time.monotonic) -> None:
        self.stall_seconds = stall_seconds
        self._clock = clock
        self.last_beat = clock()  # starting counts as progress
        self.last_ok: float | None = None

    def beat(self, ok: bool) -> None:
        now = self._clock()
        self.last_beat = now
        if ok:
            self.last_ok = now

    @contextmanager
    def call(self) -> Iterator[None]:
        """Around one API call: a beat when it returns, ``ok`` if it did not raise."""
        try:
            yield
        except BaseException:
            self.beat(False)
            raise
        self.beat(True)

    def stalled(self) -> str | None:
        """Why the loop is not alive, or None."""
        idle = self._clock() - self.last_beat
        if idle <= self.stall_seconds:
            return None
        return f"no API call returned for {idle:.0f} s (the limit is {self.stall_seconds:g} s)"

    def unready(self) -> str | None:
        """Why the loop is not ready, or None."""
        if self.last_ok is None:
            return "no API call has succeeded yet"
        idle = self._clock() - self.last_ok
        if idle <= self.stall_seconds:
            return None
        return f"no API call succeeded for {idle:.0f} s (the limit is {self.stall_seconds:g} s)"


def api_result(err: BaseException | None) -> str:
    """An API call's result, as a bounded label: ok, the HTTP status of its error, or
    error (no answer)."""
    if err is None:
        return "ok"
    status = getattr(err, "status", None)
    return str(status) if isinstance(status, int) else "error"


def build_info(registry: CollectorRegistry, what: str) -> None:
    """``dragonet_build_info``: 1, with the versions this process runs."""
    from webhooks.metrics import build_version

    Gauge(
        "dragonet_build_info",
        f"Always 1: the version of Dragonet and of Python this {what} runs.",
        ["version", "python_version"],
        registry=registry,
    ).labels(build_version(), platform.python_version()).set(1)


def _state(problem: str | None) -> Response:
    body = {"status": "ok"} if problem is None else {"status": "failing", "reason": problem}
    return Response(
        orjson.dumps(body), status=200 if problem is None else 503, mimetype="application/json"
    )


def create_app(name: str, pulse: Pulse, registry: CollectorRegistry) -> Flask:
    app = Flask(name)

    @app.get("/healthz")
    def healthz() -> Response:
        return _state(pulse.stalled())

    @app.get("/readyz")
    def readyz() -> Response:
        return _state(pulse.unready())

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), content_type=CONTENT_TYPE)

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow scrape never holds up the process's exit


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        log.debug(format, *args)  # one line per probe is noise, not news


def serve(name: str, app: Flask, host: str, port: int) -> WSGIServer:
    """Serve ``app`` on a daemon thread. A port it cannot bind ends the process before its
    loop starts: one line on stderr, exit status 2 (``process.Exit``)."""
    try:
        server = make_server(host, port, app, server_class=_Server, handler_class=_Quiet)
    except OSError as err:
        print(
            f"{name}: cannot serve /healthz and /metrics on {host}:{port}: {err}", file=sys.stderr
        )
        raise process.Exit(2) from None
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


class ProbedSettings(BaseSettings):
    """What a probed loop (the recorder, the reaper) is configured with besides its own
    work: where it serves ``/healthz``, ``/readyz`` and ``/metrics``, and when it counts as
    stalled."""

    # /healthz, /readyz and /metrics; 0: none.
    host: str = "0.0.0.0"
    port: int = Field(default=8080, ge=0, le=65535)
    # Not alive once no API call has returned for this long (None: the loop's own default).
    stall_seconds: float | None = Field(default=None, gt=0)

    def default_stall_seconds(self) -> float:
        raise NotImplementedError

    @property
    def liveness_seconds(self) -> float:
        if self.stall_seconds is not None:
            return self.stall_seconds
        return self.default_stall_seconds()
