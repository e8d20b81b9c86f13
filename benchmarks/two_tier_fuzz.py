"""Issue 24's two-tier fuzz against the real server: a healthy pool's request with one object
broken (``tests/fuzz_requests.py``, ``broken_in_pool``: bare JSON tokens, deep echoes, absurd
pool values, absurd annotations), then every job's sync on the Admission the pool answered,
as Metacontroller runs them.

Run: ``.venv/bin/python -m benchmarks.two_tier_fuzz --pools 4000`` (bounded: ``--pools`` pool
syncs and their jobs' syncs, about 6 requests per pool). It starts ``dragonet serve`` (2
workers x 4 threads, its own metrics directory) on 127.0.0.1 and stops it at the end.

Printed: the answers by tier and HTTP code, each 5xx with what was broken, the slowest answer
(wall time, including the client), and each worker's RSS as the run goes. Not a test: figures
go to benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.load import _children, _read, start
from tests.fuzz_requests import MXJOBS, bases, broken_in_pool, job_sync_after, with_token


class Client:
    """One keep-alive connection, made again if the server closes it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        started = time.perf_counter()
        for attempt in (1, 2):
            try:
                self.conn.request("POST", path, body, {"Content-Type": "application/json"})
                response = self.conn.getresponse()
                return response.status, response.read(), time.perf_counter() - started
            except (http.client.HTTPException, OSError):
                if attempt == 2:
                    raise
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        raise AssertionError("unreachable")


def _rss_mib(pid: int) -> int:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pools", type=int, default=1000, help="pool syncs (seeds 0..N-1)")
    args = parser.parse_args(argv)
    base = bases()
    tmp = Path(tempfile.mkdtemp(prefix="dragonet-fuzz-"))
    env = {"DRAGONET_WORKERS": "2", "DRAGONET_THREADS": "4", "DRAGONET_LOG_LEVEL": "warning"}
    proc, url = start({**env, "TMPDIR": str(tmp)}, tmp / "server.log")
    try:
        run(args.pools, base, int(url.rsplit(":", 1)[1]), proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run(pools: int, base: dict[str, dict[str, Any]], port: int, master: int) -> None:
    client = Client(port)
    codes: collections.Counter[tuple[str, int]] = collections.Counter()
    slowest = 0.0
    for seed in range(pools):
        if seed % max(pools // 8, 1) == 0:
            rss = ", ".join(f"{pid} {_rss_mib(pid)} MiB" for pid in _children(master))
            print(f"after {sum(codes.values())} requests: worker RSS {rss}")
        request, token, _, what, _ = broken_in_pool(base["/pools/sync"], random.Random(seed))
        code, data, took = client.post("/pools/sync", with_token(request, token))
        codes["pool", code] += 1
        slowest = max(slowest, took)
        if code >= 500:
            print(f"5xx pool: {what[:200]}: {data[:200]!r}")
        if code != 200:
            continue
        answer = orjson.loads(data)
        for tkey in ("TFJob.kubeflow.org/v1", MXJOBS):
            path = "/mxjobs/sync" if tkey == MXJOBS else "/tfjobs/sync"
            for key in sorted(request["related"][tkey]):
                job = job_sync_after(request, tkey, key, answer, base[path])
                code, data, took = client.post(path, with_token(job, token))
                codes["job", code] += 1
                slowest = max(slowest, took)
                if code >= 500:
                    print(f"5xx {key}: {what[:200]}: {data[:200]!r}")
    total = sum(codes.values())
    by_code = ", ".join(f"{tier} {code}: {n}" for (tier, code), n in sorted(codes.items()))
    print(f"{total} requests ({by_code}); slowest {slowest:.3f} s")


if __name__ == "__main__":
    main()
