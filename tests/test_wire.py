"""The wire against the real server (``dragonet serve`` on 127.0.0.1): issue 36's causes
1, 2, 3 and 6, one test each, and a protocol corpus (smuggling shapes, TLS close paths,
stop paths). Each cause's test failed on the worker before (webhooks/front.py). Last, the
worker's ASGI app in process: what it runs after an answer is sent."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import socket
import ssl
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import requests
from requests.adapters import HTTPAdapter

from tests.conftest import NOW, load_fixture
from tests.test_serve import Server, start_server, tls  # noqa: F401  (tls: a fixture)
from webhooks import shell, wire
from webhooks.app import create_app

CAP = 1 << 20
JOB = orjson.dumps(load_fixture("job-sync-job1-admitted.json"))


def _connect(server: Server, timeout: float = 10) -> socket.socket:
    host, port = server.url.split("://")[1].split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def _read_all(sock: socket.socket, within: float) -> tuple[bytes, bool]:
    """What arrives on ``sock`` within ``within`` seconds, and whether it was closed."""
    data, end = b"", time.monotonic() + within
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data, False
        except OSError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def _statuses(data: bytes) -> list[int]:
    return [int(line.split()[1]) for line in data.split(b"\r\n") if line.startswith(b"HTTP/1.")]


def _job(extra: bytes = b"") -> bytes:
    return (
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(JOB)
        + JOB
    )


def _one_answer(sock: socket.socket) -> tuple[int, bytes]:
    """One answer's status and head, read by its Content-Length (the connection may stay)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed without an answer after {data[:200]!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the middle of an answer")
        rest += chunk
    return int(head.split()[1]), head.lower()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from start_server(
        tmp_path_factory.mktemp("wire"),
        DRAGONET_REQUEST_TIMEOUT_SECONDS="6",
        DRAGONET_MAX_REQUEST_BYTES=str(CAP),
    )


# --- cause 6 and the smuggling corpus ---------------------------------------------------

SMUGGLED = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"


def test_content_length_with_transfer_encoding_is_refused_and_closed(plain: Server) -> None:
    """Cause 6: RFC 9112 section 6.1. The old worker framed it by Content-Length, kept the
    connection, and answered the bytes after the chunked end as a second request."""
    sock = _connect(plain)
    sock.sendall(
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED
    )
    data, closed = _read_all(sock, 3)
    sock.close()
    assert _statuses(data) == [400], data[:300]
    assert closed, "the connection is closed after the answer"


@pytest.mark.parametrize(
    "shape",
    [
        # two lengths that disagree
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 40\r\n"
        b"\r\n{}   " + SMUGGLED,
        # a length that is not a number
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n{}   " + SMUGGLED,
        # a transfer coding the server cannot frame
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n"
        b"0\r\n\r\n" + SMUGGLED,
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n"
        b"Content-Length: 5\r\n\r\n0\r\n\r\n" + SMUGGLED,
        # obs-fold: a header line continued on the next
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b" Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
        # a space before the colon
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n"
        b"Content-Length: 5\r\n\r\n0\r\n\r\n" + SMUGGLED,
    ],
    ids=["two-lengths", "signed-length", "chunked-identity", "xchunked", "obs-fold", "space"],
)
def test_smuggling_shapes_are_refused_and_closed(plain: Server, shape: bytes) -> None:
    sock = _connect(plain)
    sock.sendall(shape)
    data, closed = _read_all(sock, 3)
    sock.close()
    statuses = _statuses(data)
    assert (len(statuses) == 1 and 400 <= statuses[0] < 500) or statuses == [501], data[:300]
    assert closed


@pytest.mark.parametrize(
    "shape",
    [
        # the same length twice: one length (RFC 9112 section 6.3 allows either)
        b"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
        # bare LF as the line end (RFC 9112 section 2.2: a recipient MAY accept it)
        b"POST /tfjobs/sync HTTP/1.1\nHost: x\nContent-Length: %d\n\n" % len(JOB) + JOB,
    ],
    ids=["same-length-twice", "bare-lf"],
)
def test_tolerated_shapes_are_framed_once(plain: Server, shape: bytes) -> None:
    """One request, framed one way: one answer, never a 5xx, and nothing left over that a
    second answer could come from."""
    sock = _connect(plain)
    sock.sendall(shape + b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data, closed = _read_all(sock, 3)
    sock.close()
    statuses = _statuses(data)
    assert closed and len(statuses) in (1, 2), data[:300]
    assert all(s < 500 for s in statuses)
    assert statuses[-1] == 200 or len(statuses) == 1


# --- cause 3 ---------------------------------------------------------------------------


def test_declared_lengths_reserve_nothing_before_authentication(plain: Server) -> None:
    """Cause 3: 16 connections declare a body at the cap and send a byte every 0.5 s. The
    old worker reserved each declared length before a byte came: hooks waited for room
    until those connections' deadline. Bodies now cost what has arrived."""
    stop = threading.Event()
    holders = [_connect(plain) for _ in range(16)]
    for sock in holders:
        sock.sendall(b"POST /pools/sync HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % CAP)

    def drip() -> None:
        while not stop.wait(0.5):
            for sock in holders:
                with contextlib.suppress(OSError):
                    sock.send(b"x")

    dripper = threading.Thread(target=drip)
    dripper.start()
    try:
        time.sleep(0.5)
        took = []
        for _ in range(12):  # new connections: both workers
            started = time.monotonic()
            answer = requests.post(
                f"{plain.url}/tfjobs/sync", data=JOB, timeout=10, headers={"Connection": "close"}
            )
            took.append(time.monotonic() - started)
            assert answer.status_code == 200, answer.text
        assert max(took) < 1.5, took
    finally:
        stop.set()
        dripper.join()
        for sock in holders:
            sock.close()


# --- cause 2 and the TLS close paths ----------------------------------------------------


@pytest.fixture(scope="module")
def https(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[Server, str]]:
    cert, key = request.getfixturevalue("tls")
    for started in start_server(
        tmp_path_factory.mktemp("wire-tls"),
        scheme="https",
        DRAGONET_TLS_CERT_FILE=cert,
        DRAGONET_TLS_KEY_FILE=key,
        DRAGONET_REQUEST_TIMEOUT_SECONDS="2",
    ):
        deadline = time.monotonic() + 20
        while len(started.workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        yield started, cert


def _tls(server: Server, cert: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=cert)
    return context.wrap_socket(_connect(server), server_hostname="127.0.0.1")


def test_requests_that_end_their_connection_over_https_kill_no_worker(
    https: tuple[Server, str],
) -> None:
    """Cause 2: under TLS, Connection: close (the kubelet's HTTPS probe sends it), HTTP/1.0
    and a long target each killed the old worker while it closed the connection."""
    server, cert = https
    workers = server.workers()
    shapes = [
        b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /readyz HTTP/1.0\r\nHost: x\r\n\r\n",
        b"GET /healthz HTTP/1.0\r\n\r\n",
        b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # was 414, then a dead worker
        _job(b"Connection: close\r\n"),
    ] * 3
    for shape in shapes:
        sock = _tls(server, cert)
        sock.sendall(shape)
        if shape.endswith(b" HTTP/1.1\r\nHost: x\r\n\r\n"):  # kept alive: one answer, then
            sock.settimeout(5)  # nothing more (read by its length, not waited out)
            status, head = _one_answer(sock)
            more, closed = _read_all(sock, 0.5)
            data = head + more
            statuses = [status, *_statuses(more)]
        else:
            data, closed = _read_all(sock, 5)
            statuses = _statuses(data)
            assert closed, (shape[:60], data[:300])
        sock.close()
        assert len(statuses) == 1 and statuses[0] < 500, (shape[:60], data[:300])
    assert server.workers() == workers, "no worker died"


def test_half_a_client_hello_held_past_the_deadline_kills_no_worker(
    https: tuple[Server, str],
) -> None:
    server, cert = https
    workers = server.workers()
    # The first 40 bytes of a real ClientHello, then nothing.
    context = ssl.create_default_context(cafile=cert)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls_object = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls_object.do_handshake()
    hello = outgoing.read()
    halves = []
    for _ in range(4):
        sock = _connect(server)
        sock.sendall(hello[:40])
        halves.append(sock)
    time.sleep(2.6)  # past the deadline (2 s)
    for sock in halves:
        _, closed = _read_all(sock, 3)
        assert closed, "dropped once the deadline passed"
        sock.close()
    answer = requests.post(
        f"{server.url}/tfjobs/sync", data=JOB, timeout=10, verify=cert,
        headers={"Connection": "close"},
    )  # fmt: skip
    assert answer.status_code == 200
    assert server.workers() == workers, "no worker died"


# --- cause 1 and the stop paths ---------------------------------------------------------


@pytest.fixture
def single(tmp_path: pytest.TempPathFactory) -> Iterator[Server]:
    """One worker: every connection is that worker's."""
    yield from start_server(tmp_path, DRAGONET_WORKERS="1", DRAGONET_REQUEST_TIMEOUT_SECONDS="4")


def test_a_stopping_worker_answers_what_was_sent_and_closes_cleanly(single: Server) -> None:
    """Cause 1: told to stop, the old worker closed idle kept-alive connections at once and
    dropped a request on its way. A request sent on a kept-alive connection just after the
    stop, and one whose head was half sent before it, are answered with Connection: close."""
    [worker] = single.workers()
    kept, arriving = _connect(single), _connect(single)
    kept.sendall(_job())
    assert _one_answer(kept)[0] == 200  # now idle, kept alive
    request = _job()
    arriving.sendall(request[:30])
    time.sleep(0.2)
    os.kill(worker, signal.SIGTERM)  # what max_requests, SIGHUP and the master's SIGTERM do
    time.sleep(0.1)
    kept.sendall(_job())
    arriving.sendall(request[30:])
    for sock in (kept, arriving):
        status, head = _one_answer(sock)
        assert status == 200
        assert b"connection: close" in head
        data, closed = _read_all(sock, 3)
        assert (data, closed) == (b"", True), "then closed cleanly"
        sock.close()


@pytest.fixture
def recycling(tmp_path: pytest.TempPathFactory) -> Iterator[Server]:
    """Workers replaced every ~150 requests (max_requests)."""
    yield from start_server(tmp_path, DRAGONET_MAX_REQUESTS="150")


def _load(server: Server, clients: int, stop: threading.Event) -> tuple[Counter, list[str]]:
    """Keep-alive clients (one requests.Session each, no retries) posting a job's sync until
    ``stop``: their answers' statuses, and the requests that got no answer."""
    statuses: Counter = Counter()
    lost: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        with requests.Session() as session:
            session.mount("http://", HTTPAdapter(max_retries=0))
            while not stop.is_set():
                try:
                    answer = session.post(f"{server.url}/tfjobs/sync", data=JOB, timeout=15)
                    with lock:
                        statuses[answer.status_code] += 1
                except requests.RequestException as err:
                    with lock:
                        lost.append(repr(err)[:200])

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join()
    return statuses, lost


@pytest.mark.slow
def test_recycles_sigterm_and_sighup_under_keep_alive_load_lose_no_request(
    recycling: Server,
) -> None:
    """8 keep-alive clients for ~20 s: workers recycled by max_requests, a worker sent
    SIGTERM three times, the master SIGHUP twice. Every request is answered, none 5xx. (The
    old worker lost 4 to 12 in such a run.)"""
    stop = threading.Event()
    result: list[tuple[Counter, list[str]]] = []
    loader = threading.Thread(target=lambda: result.append(_load(recycling, 8, stop)))
    loader.start()
    seen: set[int] = set(recycling.workers())
    try:
        for round_ in range(5):
            time.sleep(3)
            seen |= recycling.workers()
            if round_ in (1, 3):
                os.kill(recycling.proc.pid, signal.SIGHUP)
            else:
                os.kill(min(recycling.workers()), signal.SIGTERM)
        time.sleep(3)
        seen |= recycling.workers()
    finally:
        stop.set()
        loader.join()
    statuses, lost = result[0]
    assert lost == [], f"{len(lost)} requests without an answer: {lost[:3]}"
    assert set(statuses) <= {200, 429}, statuses  # 429: every slot busy, retried by Metacontroller
    assert statuses[200] > 400, statuses  # several recycles' worth
    assert len(seen) >= 8, "workers were replaced"


@pytest.fixture
def crowded(tmp_path: pytest.TempPathFactory) -> Iterator[Server]:
    """One worker holding 16 connections at most."""
    yield from start_server(tmp_path, DRAGONET_WORKERS="1", DRAGONET_MAX_CONNECTIONS="16")


def test_a_full_process_closes_its_oldest_idle_connection_so_a_probe_gets_in(
    crowded: Server,
) -> None:
    """uvicorn alone accepts without bound (or answers 503 past ``limit_concurrency``)."""
    idle = [_connect(crowded) for _ in range(40)]
    time.sleep(0.3)
    for _ in range(3):
        answer = requests.get(f"{crowded.url}/healthz", timeout=1, headers={"Connection": "close"})
        assert answer.status_code == 200
    closed = 0
    for sock in idle:
        _, gone = _read_all(sock, 0.05)
        closed += gone
        sock.close()
    assert closed >= 40 - 16 + 1, closed  # the oldest, so that the newest fit


# --- after the answer (in process: the worker's ASGI app, without a socket) --------------


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_large_syncs_young_collection_runs_after_its_answer_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker sends a large sync's answer before the shell's collector walks what the
    sync left (webhooks.shell.Collector.settle: ~12 % of a cold 1,000-node sync's CPU);
    the cycles it left are freed right after, and the collector is back on."""
    monkeypatch.setattr(shell, "COLLECTOR", shell.Collector(big=1))
    left: list[weakref.ref[_Cycle]] = []

    def clock() -> Any:  # garbage in a reference cycle, made while the sync is answered
        left.append(weakref.ref(_Cycle()))
        return NOW

    front = wire.Front(create_app(clock=clock), wire.Limits(max_body=CAP, deadline=8), 1)
    body = orjson.dumps(load_fixture("pool-sync-two-jobs.json"))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/pools/sync", "raw_path": b"/pools/sync",
        "query_string": b"", "root_path": "", "server": ("127.0.0.1", 8443),
        "client": ("127.0.0.1", 50000),
        "headers": [(b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[tuple[str, bool, bool]] = []  # each message: type, collector on, cycle freed

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await asyncio.sleep(3600)  # (no disconnect while the answer is sent)
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append((message["type"], gc.isenabled(), all(ref() is None for ref in left)))

    was = gc.isenabled()
    gc.enable()
    try:
        asyncio.run(front(scope, receive, send))
        assert sent[0][0] == "http.response.start" and sent[-1][0] == "http.response.body"
        assert len(left) == 1
        assert sent[-1][1:] == (False, False)  # the answer went out before any collection
        assert left[0]() is None and gc.isenabled()  # then the cycle went, collector on
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()


def test_what_a_request_adds_after_its_answer_was_sent_runs_at_once() -> None:
    """A request whose task ended (cancelled) while its app thread still ran: the young
    collection its teardown leaves for later is not left waiting for ever."""
    ran: list[str] = []
    after = wire.AfterSend()
    after.append(lambda: ran.append("before"))
    assert ran == []
    after.run()
    assert ran == ["before"]
    after.append(lambda: ran.append("late"))
    assert ran == ["before", "late"]
