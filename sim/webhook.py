"""Calls into the real Flask app in process, through WSGI, with real JSON bytes.

No HTTP socket, but nothing else is skipped: the request body is the bytes Metacontroller
would POST, and the answer is parsed from the bytes the app returns. The wall time of each
call is recorded (``latencies_s``, and on each answer as ``elapsed_s``): it is the webhook's
own latency, with no network in it.
"""

from __future__ import annotations

import contextlib
import gc
import io
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection
from typing import Any

import orjson
from flask import Flask

AppFactory = Callable[[Callable[[], datetime]], Flask]  # (clock) -> a webhook app


@dataclass
class HookResponse:
    status: int
    body: Any
    headers: dict[str, str]
    elapsed_s: float = 0.0  # wall time inside the app


@dataclass
class WebhookClient:
    app: Flask
    latencies_s: list[float] = field(default_factory=list)
    # path -> its last answer's bytes and parsed body. An answer the same as the last one
    # (a pool's, most of the time) is not parsed again but shares that body, which no
    # reader mutates (objects are never mutated); Metacontroller memoizes by its identity.
    _parsed: dict[str, tuple[bytes, Any]] = field(default_factory=dict)

    # A second webhook process (``serve_in_process``) and the paths it answers.
    _worker: _Worker | None = None
    _offloaded: tuple[str, ...] = ()
    _clock: Callable[[], datetime] = datetime.now

    def post(self, path: str, body: bytes, *, measure: bool = True) -> HookResponse:
        status, headers, raw, elapsed = call_app(self.app, path, body)
        return self._answer(path, status, headers, raw, elapsed, measure)

    def submit(self, path: str, body: bytes) -> Pending:
        """Start a sync call; its answer is ``result()`` (the same as ``post``'s). A path the
        second process answers runs there while the simulation goes on, at the simulated
        time of the call; any other is answered here, now."""
        if self._worker is None or path not in self._offloaded:
            return Pending(answer=self.post(path, body))
        self._worker.send(path, body, self._clock())
        return Pending(resolve=lambda: self._answer(path, *self._worker_result(), True))

    def serve_in_process(
        self, factory: AppFactory, paths: tuple[str, ...], clock: Callable[[], datetime]
    ) -> None:
        """Answer ``paths`` in a second process with its own app from ``factory``, as a
        second webhook replica would (the answers are the same: the webhook keeps nothing
        that matters in memory). The simulation then runs on two cores: while that process
        answers a pool's sync, this one goes on with the job syncs and the cluster."""
        self._worker = _Worker(factory)
        self._offloaded = paths
        self._clock = clock

    def restart(self, app: Flask) -> None:
        """A fresh webhook process: this app, and a fresh app in the second process."""
        self.app = app
        self._parsed.clear()
        if self._worker is not None:
            self._worker.restart()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _worker_result(self) -> tuple[int, dict[str, str], bytes, float]:
        assert self._worker is not None
        return self._worker.receive()

    def _answer(
        self,
        path: str,
        status: int,
        headers: dict[str, str],
        raw: bytes,
        elapsed: float,
        measure: bool,
    ) -> HookResponse:
        if measure:
            self.latencies_s.append(elapsed)
        last = self._parsed.get(path)
        if last is not None and last[0] == raw:
            payload = last[1]
        else:
            try:
                payload = orjson.loads(raw) if raw else None
                self._parsed[path] = (raw, payload)
            except orjson.JSONDecodeError:
                payload = raw.decode(errors="replace")
        return HookResponse(status, payload, headers, elapsed)


@dataclass
class Pending:
    """A sync call in flight: its answer, or how to wait for it."""

    answer: HookResponse | None = None
    resolve: Callable[[], HookResponse] | None = None

    def result(self) -> HookResponse:
        if self.answer is None:
            assert self.resolve is not None
            self.answer, self.resolve = self.resolve(), None
        return self.answer


def call_app(app: Flask, path: str, body: bytes) -> tuple[int, dict[str, str], bytes, float]:
    """One POST through the app's WSGI interface: status, headers, body, wall time."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "dragonet-webhook.dragonet",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = dict(headers)

    started = time.perf_counter()
    chunks = app(environ, start_response)
    try:
        raw = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close:
            close()
    return captured["status"], captured["headers"], raw, time.perf_counter() - started


class _Worker:
    """The second webhook process: calls in order over a pipe, answers in the same order.
    Forked, so that it runs the app ``factory`` builds (a closure, which spawning could not
    send), before the simulation starts any thread."""

    def __init__(self, factory: AppFactory) -> None:
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(child, self._conn, factory),
            name="dragonet-webhook-2",
            daemon=True,
        )
        self._process.start()
        child.close()

    def send(self, path: str, body: bytes, now: datetime) -> None:
        self._conn.send(("call", path, body, now))

    def receive(self) -> tuple[int, dict[str, str], bytes, float]:
        try:
            reply = self._conn.recv()
        except EOFError as err:
            raise RuntimeError(
                f"the second webhook process ended (exit code {self._process.exitcode})"
            ) from err
        if reply[0] == "error":
            raise RuntimeError(f"the second webhook process failed: {reply[1]}")
        return reply[1]

    def restart(self) -> None:
        self._conn.send(("restart",))

    def close(self) -> None:
        with contextlib.suppress(OSError):  # it has ended already
            self._conn.send(("stop",))
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
        self._conn.close()


def _serve(conn: Connection, parents: Connection, factory: AppFactory) -> None:
    parents.close()  # (forked with both ends: the parent's closing must end this loop)
    gc.freeze()  # as the simulation does (Simulation.run): it holds every object alive
    gc.set_threshold(200_000, 50, 1000)
    now: list[datetime] = []
    app = factory(lambda: now[0])
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "stop":
            return
        if message[0] == "restart":
            app = factory(lambda: now[0])
            continue
        _, path, body, at = message
        now[:] = [at]
        try:
            conn.send(("ok", call_app(app, path, body)))
        except Exception as err:  # reported to the simulation, which stops
            conn.send(("error", f"{type(err).__name__}: {err}"))
