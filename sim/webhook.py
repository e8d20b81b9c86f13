"""Calls into the real Flask app in process, through WSGI, with real JSON bytes.

No HTTP socket, but nothing else is skipped: the request body is the bytes Metacontroller
would POST, and the answer is parsed from the bytes the app returns. The wall time of each
call is recorded (``latencies_s``, and on each answer as ``elapsed_s``): it is the webhook's
own latency, with no network in it.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from flask import Flask


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

    def post(self, path: str, body: bytes, *, measure: bool = True) -> HookResponse:
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

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> None:
            captured["status"] = int(status.split(" ", 1)[0])
            captured["headers"] = dict(headers)

        started = time.perf_counter()
        chunks = self.app(environ, start_response)
        try:
            raw = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close:
                close()
        elapsed = time.perf_counter() - started
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
        return HookResponse(captured["status"], payload, captured["headers"], elapsed)
