"""Slow, stalled and idle clients against the real server (``dragonet serve`` on
127.0.0.1), while probes and hook requests are sent: what a kubelet and Metacontroller
see while some client misbehaves, for each candidate server setup.

Run: ``.venv/bin/python -m benchmarks.slow_clients`` (``--quick`` for a smoke run of a
few seconds; ``--servers wire,front,gthread,gevent`` to choose; gevent must be installed).

Servers (each 2 workers; the request limit is the chart's 8 s unless ``--limit``):

* ``wire``: what ``dragonet serve`` runs, uvicorn workers under gunicorn with the Flask app
  in 4 threads, each request read in full on the event loop first (``webhooks/wire.py``);
* ``front``: the worker before it (issue 24 to 36), gthread x 4 threads whose loop framed
  each request with h11 (``webhooks/front.py``), run from the checkout given by
  ``--old-checkout`` (e.g. ``git archive`` of a commit before the wire);
* ``gthread``: gunicorn's stock gthread worker x 4 threads (what ran before that);
* ``gevent``: gunicorn's gevent worker (an async worker class: no threads; the per-request
  time limit cannot preempt a greenlet).

Scenarios, one after the other, each ``--seconds`` long on a fresh server:

* ``stall``: ``--clients`` connections send a hook's headers and 100 bytes of a 1,000-byte
  body, then nothing;
* ``drip``: ``--clients`` connections send a header line every 0.5 s, never ending;
* ``idle``: ``--idle`` connections opened and held, sending nothing;
* ``busy``: 3 clients send a large pool's sync (``--nodes`` nodes and as many TFJobs), one
  after the other: CPU-bound Python, seconds each;
* ``hold``: ``--clients`` connections each send all but the last KiB of a body at the cap
  (``--cap``, the chart's 64 MiB), as fast as the server reads, then nothing: what the
  bodies a worker holds cost in memory.

Meanwhile a kubelet-like prober GETs /healthz and /readyz alternately every 0.25 s, each
on a new connection with a 1 s timeout, and a Metacontroller-like client posts a job's
sync every 0.5 s (10 s timeout, the hook's). Printed per scenario: each probe's answers in
time and latency (median/max), the hook's 200s and 429s and its slowest answer, whether a
worker was restarted, the peak of the workers' resident memory (together, sampled every
0.2 s), and what became of the misbehaving clients (answered with which status, after how
long; closed without an answer; still open at the end).

``--overhead MIB`` measures instead what reading in the loop costs a well-behaved client:
wire and stock gthread side by side, 30 POSTs each of a MIB-MiB body that the hook
refuses at once (not JSON: 400), alternating, on kept-alive connections; medians, minima
and the ratio.

Bounded: every loop stops after ``--seconds``; traffic goes to 127.0.0.1 only. Not a
test: the figures depend on the machine (record them in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import requests

from benchmarks import load
from benchmarks.load import _children
from benchmarks.sync_latency import scenario

SERVERS = ("wire", "front", "gthread", "gevent")
OLD_CHECKOUT = "DRAGONET_BENCH_OLD_CHECKOUT"  # the environment's, for a "front" server
SCENARIOS = ("stall", "drip", "idle", "busy", "hold")


@dataclass
class Outcome:
    """What the misbehaving connections got: ``{status or "closed": [seconds]}``."""

    answered: dict[str, list[float]] = field(default_factory=dict)
    open: int = 0


Call = tuple[int, float]  # (HTTP status, 0 for none in time; seconds)


@dataclass
class Row:
    server: str
    scenario: str
    live: list[Call]  # GET /healthz
    ready: list[Call]  # GET /readyz
    hooks: list[Call]  # POST /tfjobs/sync
    outcome: Outcome
    restarted: bool
    rss_mib: float  # the peak of the workers' resident memory, together

    def ok(self, calls: list[Call]) -> int:
        return sum(status == 200 for status, _ in calls)


def serve_as(kind: str) -> None:
    """In a child process: ``dragonet serve`` with the worker class of ``kind``."""
    if kind == "front":  # the old checkout's code, all of it
        sys.path.insert(0, os.environ[OLD_CHECKOUT])
        for name in [m for m in sys.modules if m.split(".")[0] in ("cli", "webhooks", "policy")]:
            del sys.modules[name]
    from cli import main as cli
    from webhooks import gunicorn_conf
    from webhooks.config import Settings

    options = gunicorn_conf.options

    def patched(settings: Settings) -> dict[str, Any]:
        opts = options(settings)
        if kind not in ("wire", "front"):
            opts["worker_class"] = kind
            opts["threads"] = settings.threads
        return opts

    gunicorn_conf.options = patched
    cli.serve(Settings())


def start(kind: str, limit: float, cap: int, log: Path) -> tuple[subprocess.Popen, str]:
    env = {
        "DRAGONET_WORKERS": "2",
        "DRAGONET_THREADS": "4",
        "DRAGONET_REQUEST_TIMEOUT_SECONDS": str(limit),
        "DRAGONET_MAX_REQUEST_BYTES": str(cap),
        "DRAGONET_LOG_LEVEL": "warning",
    }
    command = ("-m", "benchmarks.slow_clients", "--serve-as", kind)
    return load.start(env, log, command, name=f"server {kind}")


class Misbehaving:
    """Connections that misbehave, and one thread that watches what the server does with
    them (and, for ``drip``, keeps dripping)."""

    def __init__(self, port: int, kind: str, count: int, cap: int = 0) -> None:
        self.kind = kind
        self.socks: dict[socket.socket, float] = {}
        self.outcome = Outcome()
        self.stop = threading.Event()
        senders = []
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                continue  # refused: counted as not open
            sock.setblocking(False)
            if kind == "stall":
                sock.send(
                    b"POST /tfjobs/sync HTTP/1.1\r\nHost: dragonet\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b"{" * 100
                )
            elif kind == "drip":
                sock.send(b"POST /tfjobs/sync HTTP/1.1\r\nHost: dragonet\r\n")
            elif kind == "hold":
                head = b"POST /pools/sync HTTP/1.1\r\nHost: dragonet\r\nContent-Length: %d\r\n\r\n"
                senders.append(threading.Thread(target=_send_all, args=(sock, head % cap, cap)))
            self.socks[sock] = time.monotonic()
        for sender in senders:
            sender.start()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        selector = selectors.DefaultSelector()
        for sock in self.socks:
            selector.register(sock, selectors.EVENT_READ)
        next_drip = time.monotonic() + 0.5
        drops = 0
        while not self.stop.is_set() and selector.get_map():
            for key, _ in selector.select(timeout=0.1):
                sock = key.fileobj
                try:
                    data = sock.recv(64)
                    what = data.split(b" ", 2)[1].decode() if data else "closed"
                except OSError:
                    what = "closed"
                self.outcome.answered.setdefault(what, []).append(
                    time.monotonic() - self.socks[sock]
                )
                selector.unregister(sock)
            if self.kind == "drip" and time.monotonic() >= next_drip:
                for key in list(selector.get_map().values()):
                    with contextlib.suppress(OSError):
                        key.fileobj.send(b"X-Drip-%d: x\r\n" % drops)
                drops += 1
                next_drip += 0.5
        self.outcome.open = len(selector.get_map())

    def close(self) -> Outcome:
        self.stop.set()
        self.thread.join()
        for sock in self.socks:
            sock.close()
        return self.outcome


def _send_all(sock: socket.socket, head: bytes, cap: int) -> None:
    """Send ``head`` and all but the last KiB of a ``cap``-byte body, as fast as the server
    takes it (its answer, once it comes, is read by the watcher)."""
    chunk, left = b"x" * (1 << 20), cap - 1024
    with contextlib.suppress(OSError):
        sock.setblocking(True)
        sock.settimeout(30)
        sock.sendall(head)
        while left > 0:
            sent = sock.send(chunk[: min(left, len(chunk))])
            left -= sent


def _loop(seconds: float, period: float, call: Any) -> list[Call]:
    """``call()`` every ``period`` seconds for ``seconds``."""
    out = []
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        out.append(call())
        time.sleep(max(0.0, period - (time.monotonic() - now)))
    return out


def _timed(
    method: str, url: str, timeout: float, session: requests.Session | None = None, **kw: Any
) -> Call:
    started = time.monotonic()
    try:
        status = (session or requests).request(method, url, timeout=timeout, **kw).status_code
    except requests.RequestException:
        status = 0
    return status, time.monotonic() - started


def _rss_mib(pids: set[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def run_scenario(kind: str, name: str, args: argparse.Namespace, pool: bytes) -> Row:
    with tempfile.TemporaryDirectory(prefix="dragonet-slow-") as tmp:
        proc, url = start(kind, args.limit, args.cap, Path(tmp) / "server.log")
        port = int(url.rsplit(":", 1)[1])
        workers = _children(proc.pid)
        job = orjson.dumps(_job_request())
        close = {"Connection": "close"}
        stop = threading.Event()
        busy: list[threading.Thread] = []
        bad = None
        try:
            if name in ("stall", "drip"):
                bad = Misbehaving(port, name, args.clients)
            elif name == "idle":
                bad = Misbehaving(port, name, args.idle)
            elif name == "hold":
                bad = Misbehaving(port, name, args.clients, args.cap)
            else:

                def sync_pools() -> None:
                    while not stop.is_set():
                        _timed("POST", f"{url}/pools/sync", 30, data=pool, headers=close)

                busy = [threading.Thread(target=sync_pools, daemon=True) for _ in range(3)]
                for t in busy:
                    t.start()
            live: list[Call] = []
            ready: list[Call] = []

            def probe() -> Call:
                calls, path = (live, "/healthz") if len(live) <= len(ready) else (ready, "/readyz")
                calls.append(_timed("GET", f"{url}{path}", 1.0, headers=close))
                return calls[-1]

            hooks: list[Call] = []

            def hook_loop() -> None:
                hooks.extend(
                    _loop(
                        args.seconds,
                        0.5,
                        lambda: _timed("POST", f"{url}/tfjobs/sync", 10, data=job, headers=close),
                    )
                )

            peak = [0.0]

            def sample_rss() -> None:
                while not stop.wait(0.2):
                    peak[0] = max(peak[0], _rss_mib(_children(proc.pid)))

            hook_thread = threading.Thread(target=hook_loop)
            hook_thread.start()
            sampler = threading.Thread(target=sample_rss)
            sampler.start()
            _loop(args.seconds, 0.25, probe)
            hook_thread.join()
            stop.set()
            sampler.join()
            rss = peak[0]
            outcome = bad.close() if bad else Outcome()
            for t in busy:
                t.join(timeout=30)
            restarted = _children(proc.pid) != workers
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    return Row(kind, name, live, ready, hooks, outcome, restarted, rss)


def _job_request() -> dict[str, Any]:
    from tests.conftest import load_fixture

    return load_fixture("job-sync-job1-admitted.json")


def _outcome(o: Outcome) -> str:
    parts = [
        f"{len(times)}x {what} at {min(times):.1f}-{max(times):.1f} s"
        for what, times in sorted(o.answered.items())
    ]
    if o.open:
        parts.append(f"{o.open} still open")
    return ", ".join(parts) or "-"


HEADER = (
    f"{'server':8} {'scenario':8} {'/healthz ok':>11} {'p50/max ms':>10} "
    f"{'/readyz ok':>10} {'p50/max ms':>10} {'hooks 200':>9} {'429':>3} {'max ms':>6} "
    f"{'restart':>7} {'RSS MiB':>7}  misbehaving clients"
)


def _ms(calls: list[Call]) -> str:
    times = [s * 1000 for _, s in calls] or [0.0]
    return f"{statistics.median(times):.0f}/{max(times):.0f}"


def line(r: Row) -> str:
    hook_ms = max((s for _, s in r.hooks), default=0.0) * 1000
    return (
        f"{r.server:8} {r.scenario:8} {f'{r.ok(r.live)}/{len(r.live)}':>11} {_ms(r.live):>10} "
        f"{f'{r.ok(r.ready)}/{len(r.ready)}':>10} {_ms(r.ready):>10} "
        f"{f'{r.ok(r.hooks)}/{len(r.hooks)}':>9} "
        f"{sum(status == 429 for status, _ in r.hooks):>3} {hook_ms:6.0f} "
        f"{'yes' if r.restarted else 'no':>7} {r.rss_mib:7.0f}  {_outcome(r.outcome)}"
    )


def overhead(mib: int, args: argparse.Namespace) -> float:
    """Round trips of a ``mib``-MiB request through wire and stock gthread, alternating:
    wire's median over gthread's."""
    body = b"x" * (mib << 20)
    times: dict[str, list[float]] = {"wire": [], "gthread": []}
    with tempfile.TemporaryDirectory(prefix="dragonet-slow-") as tmp:
        servers = {k: start(k, args.limit, args.cap, Path(tmp) / f"{k}.log") for k in times}
        try:
            sessions = {k: requests.Session() for k in times}
            for _ in range(30):
                for kind, (_, url) in servers.items():
                    status, seconds = _timed(
                        "POST", f"{url}/tfjobs/customize", 30, data=body, session=sessions[kind]
                    )
                    assert status == 400, status
                    times[kind].append(seconds)
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(timeout=15)
    for kind, seconds in times.items():
        print(
            f"{kind:8} {mib} MiB: median {statistics.median(seconds) * 1000:.1f} ms, "
            f"min {min(seconds) * 1000:.1f} ms"
        )
    ratio = statistics.median(times["wire"]) / statistics.median(times["gthread"])
    print(f"wire / gthread (medians): {ratio:.2f}")
    return ratio


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="wire,gthread")
    parser.add_argument("--old-checkout", help="a checkout with webhooks/front.py (server front)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--limit", type=float, default=8.0, help="request time limit, s")
    parser.add_argument("--clients", type=int, default=12, help="stalling/dripping clients")
    parser.add_argument("--idle", type=int, default=300, help="idle connections")
    parser.add_argument("--nodes", type=int, default=1000, help="size of the busy pool")
    parser.add_argument("--cap", type=int, default=64 << 20, help="DRAGONET_MAX_REQUEST_BYTES")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument("--overhead", type=int, metavar="MIB", help="see the module's doc")
    parser.add_argument("--serve-as", choices=SERVERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_as:
        serve_as(args.serve_as)
        return []
    if args.overhead:
        overhead(args.overhead, args)
        return []
    if args.quick:
        args.servers, args.seconds, args.limit, args.nodes = "wire", 4.0, 2.5, 100
        args.clients, args.idle, args.cap = 8, 50, 4 << 20
    servers = [s for s in args.servers.split(",") if s]
    scenarios = [s for s in args.scenarios.split(",") if s]
    for s in servers:
        if s not in SERVERS:
            parser.error(f"unknown server {s!r}: one of {', '.join(SERVERS)}")
    if "front" in servers:
        if not args.old_checkout:
            parser.error("server front runs from --old-checkout")
        os.environ[OLD_CHECKOUT] = os.path.abspath(args.old_checkout)
    pool = orjson.dumps(scenario(args.nodes, args.nodes)[0]) if "busy" in scenarios else b""
    print(
        f"2 workers on 127.0.0.1, request limit {args.limit:g} s, {args.seconds:g} s per "
        f"scenario; {args.clients} stalling/dripping clients, {args.idle} idle connections, "
        f"busy: 3 clients syncing a pool of {args.nodes} nodes ({len(pool) / 2**20:.1f} MiB); "
        f"hold: bodies of {args.cap / 2**20:g} MiB, the cap"
    )
    print(HEADER)
    rows = []
    for server in servers:
        for name in scenarios:
            rows.append(run_scenario(server, name, args, pool))
            print(line(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
