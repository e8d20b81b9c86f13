"""The webhook's gunicorn worker: gthread, with every request read in full by the worker's
event loop before a thread sees it. So a slow or stalled client costs a connection, never
a thread, and its time is bounded from its first byte.

Why this worker (benchmarks/slow_clients.py, figures in benchmarks/README.md). Stock
gthread hands a connection to a thread as soon as a byte arrives, and the thread then
reads the headers and the body with blocking calls and no time limit: 8 clients that send
half a request hold all 8 threads of a pod, and the kubelet's probes wait behind them. An
async worker class (gevent) reads without threads, but the hooks are CPU-bound Python (a
large pool's sync takes seconds): a request that never yields stops the event loop, and
every probe and request of that process waits for it; the per-request time limit
(``webhooks.deadline``) needs real threads too. A buffering front (nginx) would need a
second process in the image. Here the buffering is gthread's own poller loop, which only
moves bytes: h11 (python-hyper's sans-IO HTTP/1.1 parser) frames each request while it
arrives, and only a complete request goes to the thread pool, where gunicorn parses it
again from memory and answers as usual. The CPU-bound hooks keep their threads; the loop
gets the GIL at every switch interval (5 ms), so reading and probes go on meanwhile.

What a client is allowed, per connection:

* **idle**: no byte for ``keepalive`` seconds (a new or kept-alive connection): closed.
* **the deadline** (``DRAGONET_REQUEST_TIMEOUT_SECONDS``) counts from the request's first
  byte (the TLS handshake's, under HTTPS). A request not complete by then is answered
  **408** at the deadline and the connection closed. Why 408 and not the shell's 422: 408
  says the client did not finish *sending* in time (RFC 9110 §15.5.9); 422 says a
  well-formed request asked for more work than one request may take. The rest of the
  deadline goes with the request (``FIRST_BYTE`` in its WSGI environ): the shell's time
  limit ends at the same instant, so the answer never comes later than the deadline,
  however the time was spent.
* **the cap** (``DRAGONET_MAX_REQUEST_BYTES``): a Content-Length over it is answered
  **413** before a byte of the body is read; a chunked body as soon as it passes the cap.
* **``GET /healthz``**, the liveness probe, is answered by the loop itself (``_alive``).
* **malformed** framing: **400**; headers over gunicorn's limits (100 fields of 8,190
  bytes), or over 16 KiB and not yet complete: **431**.
* **too many connections**: when a process holds ``worker_connections``, the connection
  that has been reading longest is closed, so a new one (a probe) is always accepted.
* **memory**: a process holds at most twice the cap of request bodies (arriving, or
  complete and not yet answered). A Content-Length body reserves its whole length before
  a byte of it is read, so a body under way can always finish (half-read bodies never wait
  for each other). With no room, a body whose client has sent nothing for a second gives
  its room up (408); failing that, the new body waits unread (TCP makes its client wait,
  its deadline runs on), and room goes to the smallest waiting body first.

Answers of the loop itself are JSON ``{"error": ...}`` with ``Connection: close``, counted
and logged like the app's; the connection then lingers, half-closed, for up to 2 s so the
client reads the answer instead of a reset.

It overrides gunicorn 27's ``ThreadWorker`` where a connection enters and leaves the loop
(``accept``, ``handle``, ``finish_request``, ``murder_pending``): pyproject pins gunicorn
below 28, and tests/test_slow_clients.py runs against the real server.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import selectors
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus
from typing import Any

import h11
import orjson
from gunicorn import http, util
from gunicorn import sock as gsock
from gunicorn.workers.gthread import TConn, ThreadWorker

from webhooks.config import Settings
from webhooks.deadline import FIRST_BYTE

STALLED_SECONDS = 1.0  # a body this long without a byte yields its room to moving ones
LINGER_SECONDS = 2.0  # a refused or finished connection drains this long before closing
READ_CHUNK = 256 * 1024
HEAD_READ = 64 * 1024  # what is read while a request's head has not arrived
LIVENESS = b"/healthz"
_ALIVE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n"
    + orjson.dumps({"status": "ok"})
)
_ALIVE_CLOSE = _ALIVE.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
HEADER_LIMIT = 16 * 1024  # a request's line and headers (431 past it); gunicorn's apply too
access = logging.getLogger("dragonet.access")


@dataclass(frozen=True)
class Limits:
    """What one request may cost the loop: its bytes, and seconds from its first byte."""

    max_body: int
    deadline: float

    @property
    def held_bodies(self) -> int:
        """Bytes of bodies one process holds at most (plus one read's worth)."""
        return 2 * self.max_body


@dataclass
class _Reading:
    """A connection's next request while it arrives (or its closing, once ``lingering``)."""

    expires: float
    parser: h11.Connection = field(
        default_factory=lambda: h11.Connection(h11.SERVER, max_incomplete_event_size=HEADER_LIMIT)
    )
    first_byte: float | None = None
    handshaken: bool = False
    request: h11.Request | None = None
    body: list[bytes] = field(default_factory=list)
    size: int = 0
    lingering: bool = False
    last_read: float = 0.0
    remaining: int | None = None  # of a Content-Length body, counted without h11
    reserved: int = 0  # bytes of ``held`` that are this request's
    waiting: bool = False  # for room to reserve its Content-Length
    pending: bytes = b""  # read before it had to wait
    leftover: bytes = b""  # bytes after the request: the next one's


@dataclass
class _Complete:
    """A request read in full, on its way to a thread and back."""

    first_byte: float
    body: bytes
    size: int  # reserved in ``held`` until the thread is done
    leftover: bytes  # what came after it: the next request's first bytes


def _path(request: h11.Request) -> bytes:
    return request.target.split(b"?", 1)[0]


def worker_class(settings: Settings) -> type[BufferedWorker]:
    """The worker class for gunicorn's ``worker_class``, bound to these settings."""
    limits = Limits(settings.max_request_bytes, settings.request_timeout_seconds)
    return type("BufferedWorker", (BufferedWorker,), {"limits": limits})


class BufferedWorker(ThreadWorker):
    limits = Limits(max_body=64 << 20, deadline=8.0)

    def init_process(self) -> None:
        self.reading: dict[TConn, _Reading] = {}  # insertion order: the oldest first
        self.held = 0  # bytes of bodies read and not yet answered
        self.paused: dict[TConn, None] = {}  # not read until ``held`` falls
        self.next_expiry = float("inf")
        self.local = threading.local()
        super().init_process()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        app, local = self.wsgi, self.local
        # The loop's own answers are counted with the app's (/metrics), by hook; any other
        # path is "other", so a client cannot make up labels.
        self.metrics = app.config.get("DRAGONET_METRICS")
        self.hooks = {r.rule for r in app.url_map.iter_rules() if "POST" in r.methods}

        def with_first_byte(environ: dict[str, Any], start_response: Any) -> Any:
            environ[FIRST_BYTE] = local.first_byte
            return app(environ, start_response)

        self.wsgi = with_first_byte

    # --- the loop: accept, read, expire --------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        try:
            client, addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = TConn(self.cfg, client, addr, listener.getsockname())  # non-blocking
        conn.initialized = True  # parsed here, never by TConn.init in a thread
        if self.cfg.is_ssl:
            try:
                conn.sock = gsock.ssl_context(self.cfg).wrap_socket(
                    conn.sock,
                    server_side=True,
                    suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
                    do_handshake_on_connect=False,
                )
            except (OSError, ValueError):
                self.nr_conns -= 1
                util.close(client)
                return
        self._await(conn, _Reading(expires=time.monotonic() + self.cfg.keepalive))
        self._make_room()

    def _make_room(self) -> None:
        """Full: close the connections that have been reading longest, so that a new one
        (a probe) always gets in."""
        while self.nr_conns >= self.worker_connections and self.reading:
            self._drop(next(iter(self.reading)))

    def _await(self, conn: TConn, state: _Reading, leftover: bytes = b"") -> None:
        self.reading[conn] = state
        self.next_expiry = min(self.next_expiry, state.expires)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._readable, conn))
        if leftover:  # a pipelined request that came with the last one
            self._receive(conn, state, leftover)

    def _readable(self, conn: TConn, _sock: Any) -> None:
        state = self.reading.get(conn)
        if state is None:
            return
        if state.waiting:
            if not self._reserve(conn, state):
                self._pause(conn)  # still no room for its body
                return
        elif state.request is not None and state.remaining is None and not self._room(conn, 1):
            self._pause(conn)  # a chunked body to read and no room for it yet
            return
        if state.first_byte is None and not state.lingering:
            self._started(state)
        chunks: list[bytes] = []
        closed = False
        try:
            if self.cfg.is_ssl and not state.handshaken:
                conn.sock.do_handshake()
                state.handshaken = True
            # A head is read in small bites: what comes with it may have to wait for room.
            most = 4 * READ_CHUNK if state.request is not None else HEAD_READ
            while sum(map(len, chunks)) < most:  # then let others have a turn
                data = conn.sock.recv(min(READ_CHUNK, most))
                if not data:
                    closed = True
                    break
                chunks.append(data)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except (OSError, ssl.SSLError):
            self._drop(conn)
            return
        if state.lingering:
            if closed:
                self._drop(conn)
            return
        data, state.pending = state.pending + b"".join(chunks), b""
        if data:
            self._receive(conn, state, data)
        if closed and conn in self.reading:
            self._drop(conn)  # the client went away before its request was complete

    def _reserve(self, conn: TConn, state: _Reading) -> bool:
        """Room for the whole of a Content-Length body before a byte of it is read: a body
        under way can always finish (no two half-read bodies wait for each other)."""
        need = state.remaining or 0
        if need and not self._room(conn, need):
            state.waiting = True
            return False
        state.waiting = False
        state.reserved += need
        self.held += need
        return True

    def _room(self, reader: TConn, need: int) -> bool:
        """Whether ``need`` more bytes of bodies may be held now. With no room, bodies whose
        clients stopped sending a while ago give theirs up (408), the longest stalled
        first, so that a stalled client cannot keep a moving one waiting."""
        now = time.monotonic()
        while self.held + need > self.limits.held_bodies:
            stalled = [
                (state.last_read, id(conn), conn)
                for conn, state in self.reading.items()
                if state.reserved and not state.lingering and conn not in self.paused
                and conn is not reader and now - state.last_read >= STALLED_SECONDS
            ]  # fmt: skip
            if not stalled:
                return False
            self._refuse(
                min(stalled)[2],
                408,
                f"request body stalled for {STALLED_SECONDS:g} s while other requests waited "
                "for room; send it again",
            )
        return True

    def _started(self, state: _Reading) -> None:
        state.first_byte = time.monotonic()
        state.expires = state.first_byte + self.limits.deadline
        self.next_expiry = min(self.next_expiry, state.expires)

    def _receive(self, conn: TConn, state: _Reading | None, data: bytes) -> None:
        """Bytes for a connection's request; pipelined liveness probes in them are answered
        one after the other (a loop, not recursion: a client may send thousands)."""
        while state is not None and data:
            state, data = self._step(conn, state, data)

    def _step(self, conn: TConn, state: _Reading, data: bytes) -> tuple[_Reading | None, bytes]:
        """Feed one request; returns the next one and its bytes if the connection goes on
        with more already received."""
        if state.first_byte is None:
            self._started(state)
        state.last_read = time.monotonic()
        if state.remaining is not None:
            return self._counted(conn, state, data)
        try:
            state.parser.receive_data(data)
            while True:
                event = state.parser.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return None, b""
                if isinstance(event, h11.Request):
                    state.request = event
                    ok, length = self._head(conn, state, event)
                    if not ok:
                        return None, b""
                    if length is not None:
                        state.remaining = length
                        rest = state.parser.trailing_data[0]
                        if not self._reserve(conn, state):
                            state.pending = rest
                            self._pause(conn)
                            return None, b""
                        return self._counted(conn, state, rest)
                elif isinstance(event, h11.Data):  # a chunked body
                    state.body.append(event.data)
                    state.size += len(event.data)
                    state.reserved += len(event.data)
                    self.held += len(event.data)
                    if state.size > self.limits.max_body:
                        self._refuse(conn, 413, self._too_large(f"more than {state.size}"))
                        return None, b""
                elif isinstance(event, h11.EndOfMessage):
                    return self._complete(conn, state, state.parser.trailing_data[0])
                else:  # ConnectionClosed
                    self._drop(conn)
                    return None, b""
        except h11.RemoteProtocolError as err:
            self._refuse(conn, err.error_status_hint, f"malformed HTTP request: {err}")
            return None, b""

    def _counted(self, conn: TConn, state: _Reading, data: bytes) -> tuple[_Reading | None, bytes]:
        """A Content-Length body is counted here rather than framed by h11, which would
        copy it twice more (a third of the loop's time on a large pool's request)."""
        assert state.remaining is not None
        take = data[: state.remaining] if len(data) > state.remaining else data
        if take:
            state.body.append(take)
            state.size += len(take)
            state.remaining -= len(take)
        if state.remaining:
            return None, b""
        return self._complete(conn, state, data[len(take) :])

    def _complete(
        self, conn: TConn, state: _Reading, leftover: bytes
    ) -> tuple[_Reading | None, bytes]:
        """A request has arrived in full: the liveness probe is answered here, any other
        request goes to a thread."""
        request = state.request
        assert request is not None
        if request.method != b"GET" or _path(request) != LIVENESS:
            state.leftover = leftover
            self._dispatch(conn, state)
            return None, b""
        after = self._alive(conn, state)
        return (after, leftover) if after is not None else (None, b"")

    def _head(self, conn: TConn, state: _Reading, request: h11.Request) -> tuple[bool, int | None]:
        """The request's headers have arrived: refuse a body over the cap before reading it
        (not ok), else say "100 Continue" if the client waits for it. Returns whether it
        goes on, and the body's Content-Length (None: chunked, or no body)."""
        if self._too_many_headers(request):
            self._refuse(
                conn,
                431,
                f"request headers over the server's limits: {self.cfg.limit_request_fields} "
                f"fields of {self.cfg.limit_request_field_size} bytes at most",
            )
            return False, None
        headers = dict(request.headers)
        length = headers.get(b"content-length")
        if length is not None and int(length) > self.limits.max_body:
            self._refuse(conn, 413, self._too_large(length.decode()))
            return False, None
        if headers.get(b"expect", b"").lower() == b"100-continue":
            self._send(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
        return True, int(length) if length is not None else None

    def _too_many_headers(self, request: h11.Request) -> bool:
        """gunicorn's limits (it would answer them in HTML), checked here to answer in JSON."""
        most, size = self.cfg.limit_request_fields, self.cfg.limit_request_field_size
        items = request.headers.raw_items()
        return (most > 0 and len(items) > most) or (
            size > 0 and any(len(name) + len(value) + 2 > size for name, value in items)
        )

    def _too_large(self, size: str) -> str:
        return (
            f"request body of {size} bytes is over the webhook's limit of "
            f"{self.limits.max_body} bytes (DRAGONET_MAX_REQUEST_BYTES)"
        )

    def murder_pending(self) -> None:
        """Called by gthread's loop after every wait: ends what is past its time."""
        super().murder_pending()
        self._make_room()
        self._retry_paused()
        now = time.monotonic()
        if now < self.next_expiry and self.alive:
            return
        for conn, state in list(self.reading.items()):
            if state.first_byte is None and not self.alive:
                self._drop(conn)  # stopping: no new request on an idle connection
            elif now < state.expires:
                continue
            elif state.lingering or state.first_byte is None or not self.alive:
                self._drop(conn)  # idle, or done lingering
            else:
                self._refuse(
                    conn,
                    408,
                    f"request not received in full within the webhook's limit of "
                    f"{self.limits.deadline:g} s from its first byte "
                    "(DRAGONET_REQUEST_TIMEOUT_SECONDS)",
                )
        self.next_expiry = min((s.expires for s in self.reading.values()), default=float("inf"))

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        """Wake for the next expiry too, so a deadline is kept to the millisecond."""
        soonest = self.next_expiry - time.monotonic()
        if self.paused:  # and look again soon whether a stalled body gives up its room
            soonest = min(soonest, STALLED_SECONDS / 4)
        super().wait_for_and_dispatch_events(max(0.0, min(timeout, soonest)))

    # --- leaving the loop: to a thread, or closed ------------------------------------------

    def _dispatch(self, conn: TConn, state: _Reading) -> None:
        """A complete request: to a thread, its head as the bytes gunicorn's parser reads,
        its body as the WSGI input (gunicorn's reader takes 70 ms for 4 MiB from memory; a
        BytesIO shares the bytes). The body stays counted in ``held`` until the thread is
        done with it."""
        self._unwatch(conn, release=False)
        request = state.request
        assert request is not None
        head = [request.method + b" " + request.target + b" HTTP/" + request.http_version]
        for name, value in request.headers.raw_items():
            if name.lower() not in (b"content-length", b"transfer-encoding", b"expect"):
                head.append(name + b": " + value)
        head.append(b"content-length: " + str(state.size).encode())
        raw = b"\r\n".join(head) + b"\r\n\r\n"
        conn.parser = http.get_parser(self.cfg, iter([raw]), conn.client)
        conn.complete = _Complete(
            first_byte=state.first_byte or time.monotonic(),
            body=b"".join(state.body),
            size=state.reserved,
            leftover=state.leftover,
        )
        self.enqueue_req(conn)

    def handle(self, conn: TConn) -> bool:
        """In a thread: answer one complete request. True if the connection stays open."""
        self.local.first_byte = conn.complete.first_byte
        req = None
        try:
            # Writing the answer is bounded too: a client that does not read it costs
            # this thread at most the deadline.
            conn.sock.settimeout(self.limits.deadline)
            req = next(conn.parser)
            req.body = io.BytesIO(conn.complete.body)
            return self._keepalive_after(conn, self.handle_request(req, conn))
        except (http.errors.NoMoreData, StopIteration):
            pass
        except (OSError, ssl.SSLError) as e:
            self.log.debug("Socket error while answering: %s", e)
        except Exception as e:
            self.handle_error(req, conn.sock, conn.client, e)
        return False

    def _keepalive_after(self, conn: TConn, keepalive: bool) -> bool:
        """The loop read the request to its last byte (what came after is ``leftover``), so
        nothing is left on the socket to drain. gunicorn's drain would read the unread rest
        of the in-memory body instead and, past 64 KiB, close a connection whose answer
        promised to keep it: the client's next request on it then got no answer."""
        return keepalive

    def finish_request(self, conn: TConn, fs: Any) -> None:
        """Back in the loop after a thread answered: wait for the next request, or close."""
        try:
            keep = bool(fs.result()) if not fs.cancelled() else False
        except Exception:
            keep = False
        conn.parser = None  # the request's bytes
        conn.complete.body = b""
        self._release(conn.complete.size)
        try:
            conn.sock.setblocking(False)
        except OSError:
            keep = False
        if keep and self.alive:
            state = _Reading(expires=time.monotonic() + self.cfg.keepalive)
            self._await(conn, state, leftover=conn.complete.leftover)
        else:
            self._linger(conn, _Reading(expires=0.0))

    def _alive(self, conn: TConn, state: _Reading) -> _Reading | None:
        """The liveness probe, answered here: this process accepts and reads, and its loop
        gets the GIL. So the kubelet's restart waits for a process that has stopped, never
        for a busy one (its threads' requests end at their deadline, or the process exits:
        webhooks/deadline.py). Readiness (/readyz) is the app's, from a thread.

        Returns the connection's next request, if it stays open."""
        request = state.request
        assert request is not None
        connection = dict(request.headers).get(b"connection", b"").lower()
        close = request.http_version != b"1.1" or b"close" in connection or not self.alive
        self._send(conn, _ALIVE_CLOSE if close else _ALIVE)
        self._unwatch(conn)
        if close:
            self._linger(conn, state)
            return None
        after = _Reading(expires=time.monotonic() + self.cfg.keepalive)
        self._await(conn, after)
        return after

    def _refuse(self, conn: TConn, status: int, message: str) -> None:
        body = orjson.dumps({"error": message})
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        self._send(conn, head.encode() + body)
        state = self.reading.get(conn) or _Reading(expires=0.0)
        request = state.request
        path = _path(request).decode(errors="replace") if request else ""
        if self.metrics is not None:
            seconds = time.monotonic() - (state.first_byte or time.monotonic())
            hook = path if path in self.hooks else "other"
            self.metrics.hook_answer(hook, status, seconds, state.size or None, len(body))
        access.info(
            "%s %s %d",
            request.method.decode() if request else "-",
            request.target.decode(errors="replace") if request else "-",
            status,
            extra={
                "hook": path or None,
                "status": status,
                "remote": conn.client[0] if conn.client else None,
                "error": message,
            },
        )
        self._unwatch(conn)
        self._linger(conn, state)

    def _send(self, conn: TConn, data: bytes) -> None:
        """A short answer from the loop: what the socket takes now (all of it, in practice:
        far less than its buffer); a client that does not read loses the rest."""
        with contextlib.suppress(OSError, ssl.SSLError):
            conn.sock.send(data)

    def _linger(self, conn: TConn, state: _Reading) -> None:
        """Half-close and drain for a while, so the client reads our last answer instead
        of a reset (gunicorn's close_graceful, without blocking the loop)."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            self._forget(conn)
            return
        state.lingering = True
        state.expires = time.monotonic() + LINGER_SECONDS
        self._await(conn, state)

    def _unwatch(self, conn: TConn, release: bool = True) -> None:
        state = self.reading.pop(conn, None)
        if state is None:
            return
        if conn in self.paused:
            del self.paused[conn]  # (not in the poller)
        else:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)
        if release and state.reserved:
            state.body, reserved, state.reserved = [], state.reserved, 0
            self._release(reserved)

    def _pause(self, conn: TConn) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)
        self.paused[conn] = None

    def _release(self, size: int) -> None:
        """``size`` bytes of bodies are freed: read the paused connections again."""
        self.held -= size
        for conn in self._waiting():
            if self.held >= self.limits.held_bodies:
                break
            self._resume(conn)

    def _waiting(self) -> list[TConn]:
        """The paused connections, the smallest body first: a job's sync of a few KiB gets
        room before a pool's of megabytes (and before a flood of large bodies)."""
        return sorted(self.paused, key=lambda conn: self.reading[conn].remaining or 0)

    def _resume(self, conn: TConn) -> None:
        if self.paused.pop(conn, False) is not None:
            return  # not paused
        self.reading[conn].last_read = time.monotonic()  # its wait was ours
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._readable, conn))
        # What it read before it waited may be all of it: look again from the loop (soon,
        # not from here: releases can chain).
        self.method_queue.defer(self._readable, conn, None)

    def _retry_paused(self) -> None:
        """Bodies waiting for room, in order: the stalled may have stalled long enough by
        now to give theirs up (``_room``)."""
        for conn in self._waiting():
            state = self.reading.get(conn)
            if state is None:
                continue
            if not (self._reserve(conn, state) if state.waiting else self._room(conn, 1)):
                return
            self._resume(conn)

    def _drop(self, conn: TConn) -> None:
        self._unwatch(conn)
        self._forget(conn)

    def _forget(self, conn: TConn) -> None:
        self.nr_conns -= 1
        conn.close()
