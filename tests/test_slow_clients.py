"""Slow, stalled and greedy clients against the real server (``dragonet serve`` on
127.0.0.1, 2 workers x 3 threads): each costs a connection, never a thread, and gets its
bounded answer; the probes and the hooks answer all the while."""

from __future__ import annotations

import contextlib
import http.client
import io
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
import requests

from tests.conftest import load_fixture
from tests.test_serve import Server, start_server, tls  # noqa: F401  (tls: a fixture)

# Real servers and real deadlines (a minute of waiting): `make test-slow` and CI run them.
pytestmark = pytest.mark.slow

LIMIT = 2.0  # DRAGONET_REQUEST_TIMEOUT_SECONDS of this module's server
CAP = 1 << 20  # DRAGONET_MAX_REQUEST_BYTES
IDLE = 5.0  # gunicorn's keepalive (webhooks/gunicorn_conf.py): an idle connection's life


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    for started in start_server(
        tmp_path_factory.mktemp("slow"),
        DRAGONET_REQUEST_TIMEOUT_SECONDS=str(LIMIT),
        DRAGONET_MAX_REQUEST_BYTES=str(CAP),
    ):
        deadline = time.monotonic() + 20  # /healthz answers once the first worker is up
        while len(started.workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        yield started


def _connect(server: Server) -> socket.socket:
    host, port = server.url.split("://")[1].split(":")
    return socket.create_connection((host, int(port)), timeout=10)


class _Received:
    """What was read from a socket, as ``http.client`` reads a response from one."""

    def __init__(self, data: bytes) -> None:
        self._file = io.BytesIO(data)

    def makefile(self, *_: object, **__: object) -> io.BytesIO:
        return self._file


def _answer(sock: socket.socket) -> tuple[int, dict]:
    """The status and JSON body of the one answer on ``sock`` (read until it closes),
    framed as HTTP/1.1 allows: by Content-Length or in chunks (one of a CI run's 408s
    came chunked, which a split at the first blank line misread)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    response = http.client.HTTPResponse(_Received(data))  # type: ignore[arg-type]
    response.begin()
    return response.status, orjson.loads(response.read())


def _probes_answer(server: Server, n: int = 6, within: float = 1.0) -> list[float]:
    """``n`` probes, alternately /healthz and /readyz, each on a new connection: all 200,
    each within ``within`` seconds (the chart's probe timeout is 1 s)."""
    took = []
    for i in range(n):
        path = "/healthz" if i % 2 == 0 else "/readyz"
        started = time.monotonic()
        answer = requests.get(
            f"{server.url}{path}", timeout=within, headers={"Connection": "close"}
        )
        took.append(time.monotonic() - started)
        assert answer.status_code == 200, answer.text
    return took


def _hook_answers(server: Server) -> None:
    answer = requests.post(
        f"{server.url}/tfjobs/sync",
        data=orjson.dumps(load_fixture("job-sync-job1-admitted.json")),
        timeout=5,
        headers={"Connection": "close"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"]["scheduling"]["phase"] == "Admitted"


def test_stalled_bodies_get_408_at_the_deadline_and_cost_no_thread(server: Server) -> None:
    """Ten clients (more than the 6 threads) send 100 bytes of a 1,000-byte body and stop."""
    workers = server.workers()
    stalled = []
    for _ in range(10):
        sock = _connect(server)
        sock.sendall(
            b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b"{" * 100
        )
        stalled.append((sock, time.monotonic()))
    _probes_answer(server)
    _hook_answers(server)
    for sock, sent in stalled:
        status, body = _answer(sock)
        waited = time.monotonic() - sent
        assert status == 408
        assert "2 s from its first byte" in body["error"]
        assert LIMIT - 0.05 <= waited <= LIMIT + 0.5, waited
        sock.close()
    assert server.workers() == workers, "no worker was restarted"
    key = ("dragonet_hook_answers_total", (("code", "408"), ("hook", "/tfjobs/sync")))
    assert server.metrics()[key] >= 10  # counted with the app's answers


def test_dripping_headers_are_cut_off_at_the_deadline_while_probes_answer(
    server: Server,
) -> None:
    """Twelve connections send a header line every 0.2 s, for ever."""
    stop = threading.Event()
    results: list[tuple[int, float]] = []

    def drip() -> None:
        sock = _connect(server)
        started = time.monotonic()
        try:
            sock.sendall(b"POST /pools/sync HTTP/1.1\r\nHost: x\r\n")
            i = 0
            while not stop.is_set():
                sock.sendall(b"X-Drip-%d: x\r\n" % i)
                i += 1
                if select.select([sock], [], [], 0.2)[0]:
                    break  # the server answered
        except OSError:  # the server closed it: read its answer
            pass
        sock.settimeout(5)
        try:
            status, _ = _answer(sock)
        except (OSError, ValueError, IndexError):
            status = 0  # dropped without an answer
        results.append((status, time.monotonic() - started))
        sock.close()

    with ThreadPoolExecutor(max_workers=12) as pool:
        for _ in range(12):
            pool.submit(drip)
        time.sleep(0.3)
        _probes_answer(server)
        _hook_answers(server)
        time.sleep(LIMIT + 0.5)
        stop.set()
    assert len(results) == 12
    assert [status for status, _ in results] == [408] * 12
    assert all(took <= LIMIT + 0.6 for _, took in results), results


def test_many_idle_connections_neither_block_probes_nor_stay_open(server: Server) -> None:
    idle = [_connect(server) for _ in range(300)]
    try:
        _probes_answer(server, n=10)
        _hook_answers(server)
        time.sleep(IDLE + 1.5)
        closed = 0
        for sock in idle:
            sock.settimeout(0.5)
            try:
                closed += sock.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == 300, "an idle connection is closed after the keep-alive time"
        _probes_answer(server, n=2)
    finally:
        for sock in idle:
            sock.close()


def test_a_chunked_body_over_the_cap_is_answered_413_as_the_cap_is_passed(
    server: Server,
) -> None:
    sock = _connect(server)
    sock.sendall(b"POST /pools/sync HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    sent = 0
    sock.setblocking(False)
    answered_after = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and sent < 32 * CAP:
        try:
            if sock.recv(1, socket.MSG_PEEK):
                answered_after = sent
                break
        except BlockingIOError:
            pass
        try:
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sent += len(chunk)
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            break
    sock.setblocking(True)
    sock.settimeout(5)
    status, body = _answer(sock)
    sock.close()
    assert status == 413
    assert f"over the webhook's limit of {CAP} bytes" in body["error"]
    # Answered long before the body ends: after the cap and what the kernel's buffers
    # held on the way (a few MiB on loopback), not after reading all 32 MiB.
    assert answered_after is not None and answered_after < CAP + (8 << 20), answered_after
    _probes_answer(server, n=2)


def test_a_slowly_sent_request_that_arrives_in_time_is_answered(server: Server) -> None:
    """Sent in 10 pieces over about a second: within the deadline, so a normal 200."""
    body = orjson.dumps(load_fixture("job-sync-job1-admitted.json"))
    request = (
        b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    sock = _connect(server)
    step = len(request) // 10 + 1
    for i in range(0, len(request), step):
        sock.sendall(request[i : i + step])
        time.sleep(0.1)
    status, answer = _answer(sock)
    sock.close()
    assert status == 200
    assert answer["status"]["scheduling"]["phase"] == "Admitted"


def test_kept_alive_and_pipelined_requests_are_all_answered(server: Server) -> None:
    with requests.Session() as session:
        assert [session.get(f"{server.url}/readyz", timeout=5).status_code for _ in range(3)] == [
            200
        ] * 3
    sock = _connect(server)
    sock.sendall(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    assert data.count(b"HTTP/1.1 200 OK") == 2
    assert data.endswith(b'{"status":"ready"}')


def test_a_large_body_the_app_answers_unread_keeps_its_connection_for_the_next_request(
    server: Server,
) -> None:
    """An answer that did not need the body (a 404 here; a 429 or an early 400 alike) on a
    body over 64 KiB: the connection stays usable, as the answer's headers promise. The
    body was read in full by the loop, so there is nothing left to drain; gunicorn's drain
    of "unread" bytes once closed such connections after answering, and the client's next
    request on it got no answer (the fuzz campaign's one "no answer" per run)."""
    big = orjson.dumps({"pad": "x" * (200 << 10)})
    job = orjson.dumps(load_fixture("job-sync-job1-admitted.json"))
    sock = _connect(server)
    statuses = []
    for path, body in (("/no-such-hook", big), ("/tfjobs/sync", job)):
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        data = b""
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head, f"no answer to {path} on the kept-alive connection"
        length = int(
            next(
                line.split(b":", 1)[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
        )
        while len(rest) < length and (chunk := sock.recv(65536)):
            rest += chunk
        assert b"connection: close" not in head.lower()
        statuses.append(int(head.split()[1]))
    sock.close()
    assert statuses == [404, 200]


def test_liveness_is_answered_by_the_loop_even_pipelined_by_the_thousand(
    server: Server,
) -> None:
    sock = _connect(server)
    sock.sendall(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
        + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    data = b""
    while chunk := sock.recv(1 << 20):
        data += chunk
    sock.close()
    assert data.count(b"HTTP/1.1 200 OK") == 2001
    assert data.endswith(b'Connection: close\r\n\r\n{"status":"ok"}')
    _probes_answer(server, n=2)


def test_headers_over_the_limits_are_answered_431_in_json(server: Server) -> None:
    sock = _connect(server)
    sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * (20 << 10) + b"\r\n\r\n")
    status, body = _answer(sock)
    sock.close()
    assert status == 431
    assert "request headers over the server's limits" in body["error"]


def test_a_malformed_request_is_answered_400_in_json(server: Server) -> None:
    sock = _connect(server)
    sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
    status, body = _answer(sock)
    sock.close()
    assert status == 400
    assert body["error"].startswith("malformed HTTP request")


def _rss(server: Server) -> int:
    """The workers' resident memory, bytes."""
    total = 0
    for pid in server.workers():
        for line in open(f"/proc/{pid}/status").read().splitlines():  # noqa: SIM115
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def test_bodies_held_at_once_are_bounded_by_twice_the_cap(server: Server) -> None:
    """40 clients each send all but the last KiB of a body at the cap, at once: a worker
    holds at most two caps of them, the rest wait in TCP; all get their 408."""
    before = _rss(server)
    body = b"x" * (CAP - 1024)

    def stall_big() -> socket.socket:
        sock = _connect(server)
        sock.settimeout(LIMIT * 0.75)
        with contextlib.suppress(TimeoutError):  # the server does not read it (yet)
            sock.sendall(
                b"POST /pools/sync HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % CAP + body
            )
        return sock

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=40) as pool:
        socks = list(pool.map(lambda _: stall_big(), range(40)))
    grown = _rss(server) - before
    _probes_answer(server, n=2)
    # Measured: 13 caps (2 processes x 2 caps of bodies, plus the parser's buffers and a
    # read each); 67 when every body was read as it came.
    assert grown < 24 * CAP, f"{grown / CAP:.1f} caps held"
    statuses = []
    for sock in socks:
        sock.settimeout(LIMIT + 3)
        try:
            statuses.append(_answer(sock)[0])
        except OSError:
            statuses.append(0)
        sock.close()
    assert statuses == [408] * 40
    assert time.monotonic() - started < LIMIT + 4


@pytest.mark.slow
def test_the_slow_client_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import slow_clients

    rows = slow_clients.main(["--quick"])
    assert [(r.server, r.scenario) for r in rows] == [
        ("wire", s) for s in ("stall", "drip", "idle", "busy", "hold")
    ]
    for r in rows:
        assert r.ok(r.live) == len(r.live) > 0, r
        assert r.ok(r.ready) == len(r.ready) > 0, r
        assert r.ok(r.hooks) > 0, r  # and each other answer a 429 (every slot busy)
        assert {status for status, _ in r.hooks} <= {200, 429}, r
        assert not r.restarted
    assert {r.scenario: sorted(r.outcome.answered) for r in rows if r.outcome.answered} == {
        "stall": ["408"],
        "drip": ["408"],
        "hold": ["408"],
    }
    (idle,) = [r for r in rows if r.scenario == "idle"]
    assert idle.outcome.open == 50  # held open, shorter than the idle time
    assert "misbehaving clients" in capsys.readouterr().out


@pytest.fixture(scope="module")
def patient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose deadline (6 s) is far from the 1 s after which a stalled body yields."""
    yield from start_server(
        tmp_path_factory.mktemp("patient"),
        DRAGONET_REQUEST_TIMEOUT_SECONDS="6",
        DRAGONET_MAX_REQUEST_BYTES=str(CAP),
    )


def test_a_stalled_body_gives_up_its_room_to_a_moving_one(patient: Server) -> None:
    """Ten clients each send 90 % of a body at the cap and stall: more than the two caps a
    worker holds. A second later hooks arrive, their bodies a moment after their heads:
    stalled bodies are refused (408, "stalled") to make room for them within about a
    second, instead of the hooks waiting for the stalled bodies' deadline (6 s)."""
    started = time.monotonic()
    stalled = []
    for _ in range(10):
        sock = _connect(patient)
        sock.settimeout(0.5)
        with contextlib.suppress(TimeoutError):
            sock.sendall(
                b"POST /pools/sync HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % CAP
                + b"x" * (CAP * 9 // 10)
            )
        stalled.append(sock)
    time.sleep(max(0.0, started + 1.2 - time.monotonic()))
    body = orjson.dumps(load_fixture("job-sync-job1-admitted.json"))
    hooks = []
    for _ in range(4):  # on new connections: to both workers
        sent = time.monotonic()
        hook = _connect(patient)
        hook.sendall(
            b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        time.sleep(0.05)  # the body in a read of its own
        hook.sendall(body)
        hooks.append((_answer(hook)[0], time.monotonic() - sent))
        hook.close()
    assert [status for status, _ in hooks] == [200] * 4
    assert max(took for _, took in hooks) < 2.0, "long before the stalled bodies' deadline"
    answers = []
    for sock in stalled:
        sock.settimeout(10)
        try:
            answers.append(_answer(sock))
        except OSError:
            answers.append((0, {}))
        sock.close()
    assert {status for status, _ in answers} == {408}
    assert any("stalled for 1 s" in body["error"] for _, body in answers)


@pytest.fixture(scope="module")
def tls_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[Server, str]]:
    """HTTPS (test_serve's certificate): the server and its CA bundle."""
    cert, key = request.getfixturevalue("tls")
    for started in start_server(
        tmp_path_factory.mktemp("slow-tls"),
        scheme="https",
        DRAGONET_TLS_CERT_FILE=cert,
        DRAGONET_TLS_KEY_FILE=key,
        DRAGONET_REQUEST_TIMEOUT_SECONDS=str(LIMIT),
    ):
        yield started, cert


def test_over_https_a_stalled_body_gets_its_408_and_probes_answer(
    tls_server: tuple[Server, str],
) -> None:
    server, cert = tls_server
    context = ssl.create_default_context(cafile=cert)
    stalled = []
    for _ in range(8):
        sock = context.wrap_socket(_connect(server), server_hostname="127.0.0.1")
        sock.sendall(
            b"POST /tfjobs/sync HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b"{" * 100
        )
        stalled.append((sock, time.monotonic()))
    silent = _connect(server)  # not even a TLS hello
    for path in ("/healthz", "/readyz"):
        assert requests.get(f"{server.url}{path}", timeout=1, verify=cert).ok
    for sock, sent in stalled:
        status, _ = _answer(sock)
        assert status == 408
        assert LIMIT - 0.05 <= time.monotonic() - sent <= LIMIT + 0.5
        sock.close()
    silent.settimeout(IDLE + 2)
    assert silent.recv(1) == b""  # closed once idle
    silent.close()
