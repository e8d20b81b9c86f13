"""The webhook's wire: gunicorn's arbiter managing uvicorn workers (h11 framing, asyncio
connections and TLS), the Flask app in a thread pool behind ``a2wsgi``. Our own code is
what no server does for us: a request's deadline from its first byte, a body buffered up
to the cap before a thread takes it, the liveness probe without a thread, and answers that
say so in JSON.

Why (issue 36; figures in benchmarks/README.md). The worker before this one framed HTTP
itself on gunicorn's gthread internals, and four of the campaign's causes lived there: a
stopping worker dropped kept-alive connections and requests already sent, TLS close paths
killed the worker, a declared Content-Length reserved the whole body budget before a byte
came, and Content-Length with Transfer-Encoding framed a smuggled request. uvicorn's
connection handling and h11's parser have had years of these shapes. What uvicorn lacks
is added by subclassing, not by re-framing:

* **the deadline** (``DRAGONET_REQUEST_TIMEOUT_SECONDS``) counts from the request's first
  byte. uvicorn has no timer for a request whose head is still arriving: ``Wire`` arms one
  at the first byte and answers **408** if the head is not in by then; the body is read by
  ``Front`` under the same deadline (**408**). Under HTTPS, a handshake not done within the
  deadline is dropped (asyncio's ``ssl_handshake_timeout``). The rest of the deadline goes
  with the request (``FIRST_BYTE`` in its WSGI environ, read by ``webhooks.deadline``).
* **the cap** (``DRAGONET_MAX_REQUEST_BYTES``): a Content-Length over it is answered
  **413** before a byte of the body is read; a chunked body as it passes the cap.
* **memory**: a process holds at most twice the cap of bodies (``Bodies``). A Content-Length
  body reserves its length once its first bytes have come, not when it is declared (a length
  is a claim, not a cost); with no room, a body stalled for a second, or too slow to finish
  by its deadline, gives its room up (408); failing that, the body waits (its client in
  TCP; its deadline runs on).
* **framing**: a request with both Content-Length and Transfer-Encoding is answered
  **400** and its connection closed (RFC 9112 §6.1: a smuggling shape); h11 answers the
  rest of malformed framing (**400**), and a head over 16 KiB (**431**), here in JSON.
* **``GET /healthz``**, the liveness probe, is answered on the event loop, never by a
  thread: it says the process accepts, reads and gets the GIL while syncs run.
* **idle**: a connection that sends nothing for ``keepalive`` seconds, new or kept alive,
  is closed (uvicorn times out only kept-alive ones).
* **too many connections**: past ``worker_connections``, the oldest connection not being
  answered is closed, so a new one (a probe) always gets in.
* **stopping** (``max_requests``, SIGTERM, SIGHUP): a request whose head has arrived, or
  is arriving, is answered with ``Connection: close``; an idle kept-alive connection stays
  open ``STOP_GRACE_SECONDS`` so a request already on its way is answered too, then is
  closed cleanly. (uvicorn closes idle ones at once.)
* **closing** after a refusal: over plain TCP the connection is half-closed and drained
  for up to ``LINGER_SECONDS`` so the client reads our answer rather than a reset. Over
  TLS asyncio sends close_notify and closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, ClassVar

import h11
import orjson
from a2wsgi import WSGIMiddleware
from uvicorn.protocols.http.flow_control import CLOSE_HEADER
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn_worker import UvicornWorker

from webhooks.config import Settings
from webhooks.deadline import FIRST_BYTE
from webhooks.shell import AFTER_SEND

STALLED_SECONDS = 1.0  # a body this long without a byte yields its room to moving ones
LINGER_SECONDS = 2.0  # a closed connection drains this long, so our answer is read
STOP_GRACE_SECONDS = 1.0  # a stopping worker's idle connection waits this long for a request
HEADER_LIMIT = 16 * 1024  # a request's line and headers (431 past it)
MAX_FIELDS, MAX_FIELD = 100, 8190  # header fields, and bytes of one (gunicorn's limits)
LIVENESS = "/healthz"
ALIVE = orjson.dumps({"status": "ok"})
ABORT = "dragonet.abort"  # the scope's: drop the connection at once
BODY = "dragonet.body"  # the scope's: the request's body, read in full
JSON = (b"content-type", b"application/json")
ALIVE_HEADERS = [JSON, (b"content-length", str(len(ALIVE)).encode())]
access = logging.getLogger("dragonet.access")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    """What one request may cost: its bytes, and seconds from its first byte."""

    max_body: int
    deadline: float
    max_connections: int = 1000

    @property
    def held_bodies(self) -> int:
        """Bytes of bodies one process holds at most."""
        return 2 * self.max_body


# --- who answered what: the loop's own answers, counted and logged like the app's -------


class Record:
    """The app's metrics and hooks, for answers the app never sees (per process)."""

    metrics: Any = None
    hooks: frozenset[str] = frozenset()

    @classmethod
    def answer(
        cls, status: int, message: str, method: str, path: str, client: Any, started: float | None,
        size: int, sent: int,
    ) -> None:  # fmt: skip
        if cls.metrics is not None:
            hook = path if path in cls.hooks else "other"
            seconds = time.monotonic() - started if started is not None else 0.0
            cls.metrics.hook_answer(hook, status, seconds, size or None, sent)
        access.info(
            "%s %s %d",
            method or "-",
            path or "-",
            status,
            extra={
                "hook": path or None,
                "status": status,
                "remote": client[0] if client else None,
                "error": message,
            },
        )


def _refusal(status: int, message: str) -> tuple[bytes, bytes]:
    """A JSON error's status line and headers, and its body."""
    body = orjson.dumps({"error": message})
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode(), body


# --- the connection: uvicorn's h11 protocol, with a clock and a clean close ------------


class _Parser(h11.Connection):
    """h11, remembering why it refused a request (to answer 431 rather than 400)."""

    error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as err:
            self.error = err
            raise


class _Lingering:
    """The connection's transport, whose ``close`` lets the client read our last answer:
    over TCP it half-closes and drains for up to ``LINGER_SECONDS`` (a close with unread
    bytes would send a reset, and the client could lose the answer)."""

    def __init__(self, transport: asyncio.Transport, protocol: Wire) -> None:
        self._transport = transport
        self._protocol = protocol
        self._closing = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def close(self) -> None:
        transport = self._transport
        if self._closing or transport.is_closing() or not transport.can_write_eof():
            self._closing = True
            transport.close()  # TLS: close_notify, then closed
            return
        self._closing = True
        self._protocol.lingering = True
        transport.write_eof()
        with contextlib.suppress(RuntimeError, OSError):
            transport.resume_reading()
        # Then gone, whatever is left to write (a client that reads nothing holds nothing).
        self._protocol.loop.call_later(LINGER_SECONDS, transport.abort)


class Wire(H11Protocol):
    """One connection: uvicorn's, with the deadline from a request's first byte, the idle
    time for new connections, a connection cap, and a stop that loses no request."""

    limits: ClassVar[Limits] = Limits(max_body=64 << 20, deadline=8.0)
    open: ClassVar[dict[Wire, None]] = {}  # this process's connections, the oldest first
    stopped: ClassVar[bool] = False  # this process is stopping

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _Parser(h11.SERVER, max_incomplete_event_size=HEADER_LIMIT)
        self.first_byte: float | None = None  # of the request arriving, if one is
        self.clock: asyncio.TimerHandle | None = None
        self.lingering = False
        self.stopping = False
        self._idle_since = time.monotonic()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Lingering(transport, self))  # type: ignore[arg-type]
        self.open[self] = None
        if self.stopped:  # accepted as the worker was told to stop
            self.shutdown()
        # uvicorn times out kept-alive connections only: a new one that never sends is too.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        while len(self.open) > self.limits.max_connections:
            oldest = next((c for c in self.open if c is not self and c.idle()), None)
            if oldest is None:
                break
            self.open.pop(oldest)
            oldest.transport._transport.close()  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self.open.pop(self, None)
        self._stop_clock()
        super().connection_lost(exc)

    def idle(self) -> bool:
        """No request of this connection is being answered (it may be arriving)."""
        return self.cycle is None or self.cycle.response_complete

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return  # drained: the connection is closing
        if self.first_byte is None and self.idle():
            self._start_clock()
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        scope = self.scope
        if scope is not None and FIRST_BYTE not in scope and not self.idle():
            if self.first_byte is None:  # pipelined: it was here when the last one ended
                self._start_clock()
            scope[FIRST_BYTE] = self.first_byte
            scope[ABORT] = self.transport.abort
            if self.stopping:
                self._close_after(self.cycle)

    def _start_clock(self) -> None:
        self.first_byte = time.monotonic()
        self.clock = self.loop.call_later(self.limits.deadline, self._deadline)

    def _stop_clock(self) -> None:
        self.first_byte = None
        if self.clock is not None:
            self.clock.cancel()
            self.clock = None

    def _deadline(self) -> None:
        """The deadline of a request whose head has not arrived (its body's is Front's)."""
        self.clock = None
        if self.lingering or self.transport.is_closing() or not self.idle():
            return
        self._refuse(
            408,
            f"request not received in full within the webhook's limit of "
            f"{self.limits.deadline:g} s from its first byte (DRAGONET_REQUEST_TIMEOUT_SECONDS)",
        )

    def on_response_complete(self) -> None:
        self._stop_clock()
        self._idle_since = time.monotonic()
        if self.stopping and not self.transport.is_closing():
            self.loop.call_later(STOP_GRACE_SECONDS, self._close_if_idle)
        super().on_response_complete()
        if self.idle() and self.conn.trailing_data[0] and self.first_byte is None:
            self._start_clock()  # part of the next request came with this one

    def send_400_response(self, msg: str) -> None:
        """h11 refused the request: answer in JSON, 431 when the head was too large."""
        err = self.conn.error
        if err is not None and err.error_status_hint == 431:
            self._refuse(
                431, f"request headers over the server's limits: {HEADER_LIMIT} bytes at most"
            )
        else:
            self._refuse(400, f"malformed HTTP request: {err or msg}")

    def _refuse(self, status: int, message: str) -> None:
        head, body = _refusal(status, message)
        self.transport.write(head + body)
        Record.answer(status, message, "", "", self.client, self.first_byte, 0, len(body))
        self._stop_clock()
        self.transport.close()

    def shutdown(self) -> None:
        """The worker stops: a request whose answer has not begun is answered with
        ``Connection: close``; a connection idle now, or once its answer is sent, waits
        ``STOP_GRACE_SECONDS`` for a request already on its way (answered the same way),
        then is closed cleanly."""
        type(self).stopped = True
        self.stopping = True
        if self.idle():
            self._idle_since = time.monotonic()
            self.loop.call_later(STOP_GRACE_SECONDS, self._close_if_idle)
        elif not self.cycle.response_started:
            self._close_after(self.cycle)
        # else: its answer goes out as it began (keep-alive); the next request on the
        # connection, if one comes within the grace, is told to close

    def _close_after(self, cycle: Any) -> None:
        cycle.keep_alive = False
        if not cycle.response_started and CLOSE_HEADER not in cycle.scope["headers"]:
            cycle.scope["headers"].append(CLOSE_HEADER)  # uvicorn then says so in the answer

    def _close_if_idle(self) -> None:
        """Close a stopping connection that has had no request for the whole grace."""
        if self.transport.is_closing():
            return
        quiet = time.monotonic() - self._idle_since
        if self.idle() and self.first_byte is None and quiet >= STOP_GRACE_SECONDS - 0.01:
            self.transport.close()
        elif self.idle() and self.first_byte is None:
            self.loop.call_later(STOP_GRACE_SECONDS - quiet, self._close_if_idle)
        # else: a request is arriving or being answered; it ends with Connection: close

    def timeout_keep_alive_handler(self) -> None:
        if self.idle() and self.first_byte is None:
            super().timeout_keep_alive_handler()


def _ssl_loop(handshake_seconds: float) -> Callable[[], asyncio.AbstractEventLoop]:
    """asyncio's loop, with a TLS handshake bounded by the deadline (asyncio's default is
    60 s; uvicorn passes none)."""

    class Loop(asyncio.SelectorEventLoop):
        async def create_server(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            if kwargs.get("ssl") is not None:
                kwargs.setdefault("ssl_handshake_timeout", handshake_seconds)
            return await super().create_server(*args, **kwargs)

    return Loop


# --- the request: buffered in full, then to a thread ----------------------------------


@dataclass(eq=False)
class _Reading:
    """A body while it arrives."""

    send: Send
    scope: Scope
    deadline: float
    last_read: float = field(default_factory=time.monotonic)
    held: int = 0  # bytes of the budget that are this body's (reserved or arrived)
    length: int | None = None  # its Content-Length, if it has one
    received: int = 0
    reserved_at: float | None = None
    need: int = 0  # bytes it waits for, if it waits
    refused: bool = False
    complete: bool = False  # read in full: the app's now, never refused


class Bodies:
    """The bytes of bodies a process holds (arriving, or read and not yet answered). A
    Content-Length body reserves its whole length once its first bytes have come, so a body
    under way can always finish (half-read bodies never wait for each other); a chunked one
    takes room as it comes. With no room, a body that has sent nothing for a second, or at
    whose pace its rest cannot come before its deadline, gives its room up (408): a declared
    length is a claim, and a claim that is not being kept does not hold room."""

    def __init__(self, most: int, front: Front) -> None:
        self.most = most
        self.held = 0
        self.readers: dict[_Reading, None] = {}
        self.front = front
        self.freed = asyncio.Event()

    async def take(self, reader: _Reading, size: int) -> None:
        """Room for ``size`` more bytes of ``reader``'s body; waits for it (the caller's
        deadline bounds the wait), the smallest waiting body first."""
        reader.need = size
        try:
            while not self._fits(reader, size):
                self._evict(reader)
                self.freed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(STALLED_SECONDS / 4):
                        await self.freed.wait()
        finally:
            reader.need = 0
        self.held += size
        reader.held += size
        if reader.reserved_at is None:
            reader.reserved_at = time.monotonic()

    def _fits(self, reader: _Reading, size: int) -> bool:
        if self.held == 0:
            return True  # one body at the cap always fits
        if self.held + size > self.most:
            return False
        return not any(r.need and r.need < size and r is not reader for r in self.readers)

    def give(self, reader: _Reading) -> None:
        self.held -= reader.held
        reader.held = 0
        self.readers.pop(reader, None)
        self.freed.set()

    def _evict(self, reader: _Reading) -> None:
        now = time.monotonic()
        stalled, slow = [], []
        for r in self.readers:
            if r is reader or not r.held or r.need or r.refused or r.complete:
                continue
            if r.reserved_at is None:
                continue
            if now - r.last_read >= STALLED_SECONDS:
                stalled.append(r)
            elif r.length is not None and now - r.reserved_at >= STALLED_SECONDS:
                pace = r.received / max(now - r.reserved_at, 1e-3)  # bytes a second
                if (r.length - r.received) > pace * (r.deadline - now):
                    slow.append(r)
        if stalled:
            victim = min(stalled, key=lambda r: r.last_read)
            why = f"request body stalled for {STALLED_SECONDS:g} s"
        elif slow:
            victim = min(slow, key=lambda r: r.received / r.length)  # type: ignore[operator]
            why = "request body arriving too slowly to finish before the deadline"
        else:
            return
        victim.refused = True  # answered here; its reader then sees the disconnect
        asyncio.get_running_loop().create_task(
            self.front.refuse(
                victim.send,
                victim.scope,
                408,
                f"{why} while other requests waited for room; send it again",
                victim.received,
            )
        )


class AfterSend:
    """What a request leaves for after its answer (``webhooks.shell.AFTER_SEND``: a large
    sync's young collection, ``Collector.settle``), run once the answer is handed to the
    transport. Something added after that (the app's thread outlived its request, whose
    task was cancelled) runs at once, so nothing is left waiting for ever."""

    def __init__(self) -> None:
        self._calls: list[Callable[[], None]] = []
        self._done = False
        self._lock = threading.Lock()

    def append(self, call: Callable[[], None]) -> None:
        with self._lock:
            if not self._done:
                self._calls.append(call)
                return
        call()

    def run(self) -> None:
        with self._lock:
            self._done = True
            calls, self._calls = self._calls, []
        for call in calls:
            call()


class Front:
    """The ASGI app uvicorn calls: answers the liveness probe, refuses what must be
    refused, buffers a body in full, then hands the request to the Flask app in a thread
    (a2wsgi), with its first byte's time in the environ."""

    def __init__(self, app: Any, limits: Limits, threads: int) -> None:
        self.limits = limits
        self.bodies: Bodies | None = None  # made on the worker's loop
        Record.metrics = app.config.get("DRAGONET_METRICS")
        Record.hooks = frozenset(r.rule for r in app.url_map.iter_rules() if "POST" in r.methods)

        def with_first_byte(environ: dict[str, Any], start_response: Any) -> Any:
            scope = environ["asgi.scope"]
            environ[FIRST_BYTE] = scope.get(FIRST_BYTE)
            environ[AFTER_SEND] = scope[AFTER_SEND]
            # The body as it was read, shared (a2wsgi's input would copy it twice, fetching
            # each piece from the loop while the thread waits for the GIL).
            environ["wsgi.input"] = io.BytesIO(scope.pop(BODY, b""))
            return app(environ, start_response)

        self.wsgi = WSGIMiddleware(with_first_byte, workers=threads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = scope["headers"]
        if len(headers) > MAX_FIELDS or any(len(k) + len(v) + 2 > MAX_FIELD for k, v in headers):
            # (h11 bounds a head only while it is incomplete: one that came whole is here)
            await self.refuse(
                send, scope, 431,
                f"request headers over the server's limits: {MAX_FIELDS} fields of "
                f"{MAX_FIELD} bytes at most",
            )  # fmt: skip
            return
        if scope["method"] == "GET" and scope["path"] == LIVENESS:
            await send({"type": "http.response.start", "status": 200, "headers": ALIVE_HEADERS})
            await send({"type": "http.response.body", "body": ALIVE})
            return
        lengths = [v for k, v in scope["headers"] if k == b"content-length"]
        if lengths and any(k == b"transfer-encoding" for k, _ in scope["headers"]):
            await self.refuse(
                send, scope, 400,
                "malformed HTTP request: Content-Length together with Transfer-Encoding "
                "(RFC 9112 section 6.1)",
            )  # fmt: skip
            return
        if lengths and int(lengths[0]) > self.limits.max_body:
            await self.refuse(send, scope, 413, self._too_large(lengths[0].decode()))
            return
        if self.bodies is None:
            self.bodies = Bodies(self.limits.held_bodies, self)
        first = scope.get(FIRST_BYTE) or time.monotonic()
        reader = _Reading(send, scope, first + self.limits.deadline)
        reader.length = int(lengths[0]) if lengths else None
        self.bodies.readers[reader] = None
        try:
            body = await self._read(scope, receive, reader)
            if body is None or reader.refused:
                return
            headers = [
                (k, v) for k, v in scope["headers"]
                if k not in (b"content-length", b"transfer-encoding", b"expect")
            ]  # fmt: skip
            headers.append((b"content-length", str(len(body)).encode()))
            inner = dict(scope, headers=headers)
            inner[BODY] = body
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if sent:
                    return await receive()  # a disconnect, once the answer is sent
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            after_send = AfterSend()
            inner[AFTER_SEND] = after_send
            try:
                await self.wsgi(inner, replay, self._bounded(send, scope))
            finally:
                after_send.run()
        finally:
            self.bodies.give(reader)

    async def _read(self, scope: Scope, receive: Receive, reader: _Reading) -> bytes | None:
        """The whole body, within the deadline and the cap; None if answered already."""
        assert self.bodies is not None
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout_at(reader.deadline):
                while True:
                    message = await receive()
                    if message["type"] != "http.request" or reader.refused:
                        return None  # the client went away, or we answered it
                    data = message.get("body", b"")
                    if data:
                        reader.last_read = time.monotonic()
                        if reader.length is None:
                            await self.bodies.take(reader, len(data))
                        elif reader.reserved_at is None:  # its first bytes: all its room
                            await self.bodies.take(reader, reader.length)
                        if reader.refused:
                            return None
                        chunks.append(data)
                        size += len(data)
                        reader.received = size
                        if size > self.limits.max_body:
                            too_large = self._too_large(f"more than {size}")
                            await self.refuse(reader.send, scope, 413, too_large, size)
                            return None
                    if not message.get("more_body", False):
                        reader.complete = True
                        return b"".join(chunks)
        except TimeoutError:
            if not reader.refused:
                await self.refuse(
                    reader.send,
                    scope,
                    408,
                    f"request not received in full within the webhook's limit of "
                    f"{self.limits.deadline:g} s from its first byte "
                    "(DRAGONET_REQUEST_TIMEOUT_SECONDS)",
                    size,
                )
            return None

    def _bounded(self, send: Send, scope: Scope) -> Send:
        """``send``, given the deadline to go out: a client that does not read its answer
        loses the connection rather than keep it (and the answer's bytes) for ever. The
        thread is done by then: a2wsgi queues the answer for the loop."""

        async def bounded(message: Message) -> None:
            try:
                async with asyncio.timeout(self.limits.deadline):
                    await send(message)
            except TimeoutError:
                access.warning(
                    "answer not read by the client within %g s: connection dropped",
                    self.limits.deadline,
                    extra={"hook": scope["path"], "remote": (scope.get("client") or ["-"])[0]},
                )
                scope[ABORT]()

        return bounded

    def _too_large(self, size: str) -> str:
        return (
            f"request body of {size} bytes is over the webhook's limit of "
            f"{self.limits.max_body} bytes (DRAGONET_MAX_REQUEST_BYTES)"
        )

    async def refuse(
        self, send: Send, scope: Scope, status: int, message: str, size: int = 0
    ) -> None:
        """A JSON error, and the connection closed after it."""
        body = orjson.dumps({"error": message})
        length = (b"content-length", str(len(body)).encode())
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [JSON, length, CLOSE_HEADER],
            }
        )
        await send({"type": "http.response.body", "body": body})
        Record.answer(
            status, message, scope["method"], scope["path"], scope.get("client"),
            scope.get(FIRST_BYTE), size, len(body),
        )  # fmt: skip


# --- the worker -------------------------------------------------------------------------


class WireWorker(UvicornWorker):
    """gunicorn's uvicorn worker, with ``Wire`` connections and ``Front`` in front of the
    Flask app."""

    threads: ClassVar[int] = 4
    limits: ClassVar[Limits] = Limits(max_body=64 << 20, deadline=8.0)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = Front(self.wsgi, self.limits, self.threads)


def worker_class(settings: Settings) -> type[WireWorker]:
    """The worker class for gunicorn's ``worker_class``, bound to these settings."""
    limits = Limits(
        settings.max_request_bytes, settings.request_timeout_seconds, settings.max_connections
    )
    protocol = type("Wire", (Wire,), {"limits": limits, "open": {}})
    loop = _ssl_loop(settings.request_timeout_seconds)
    kwargs = {
        "http": protocol,
        "loop": f"{__name__}:_LOOP",
        "lifespan": "off",
        "interface": "asgi3",
        "h11_max_incomplete_event_size": HEADER_LIMIT,
        "server_header": False,
        # The arbiter kills a worker graceful_timeout after asking it to stop; end first.
        "timeout_graceful_shutdown": max(1, int(settings.request_timeout_seconds) + 2),
    }
    globals()["_LOOP"] = loop
    return type(
        "WireWorker",
        (WireWorker,),
        {"CONFIG_KWARGS": kwargs, "limits": limits, "threads": settings.threads},
    )
