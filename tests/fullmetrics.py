"""Scenarios on a real full filesystem for tests/test_metrics_full.py (issue 36, cause 4).

Each runs as ``python -m tests.fullmetrics <scenario> <dir>`` where ``<dir>`` is a small
tmpfs (the chart's metrics directory is a memory-backed one) that the test mounted in a
mount namespace of its own; it prints one JSON line of what it saw. A process that dies of
SIGBUS prints nothing: the test sees the signal in the exit status.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests


def fill(directory: str) -> None:
    """Write a file into ``directory`` until its filesystem is full."""
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def worker(directory: str) -> dict[str, Any]:
    """A worker's metrics on a directory that fills up: new series for 200 hooks."""
    from webhooks.metrics import Metrics

    metrics = Metrics()
    if os.access(directory, os.W_OK) and not os.statvfs(directory).f_flag & os.ST_RDONLY:
        fill(directory)
    for i in range(200):
        metrics.hook_answer(f"/hook-{i}", 200, 0.1, 100, 100)
    return {"alive": True, "lost": str(metrics.lost)}


_WRITER = """
from webhooks.metrics import Metrics
m = Metrics()
for i in range(30):
    m.hook_answer(f"/hook-{i}", 200, 0.1, 100, 100)
"""


def compact(directory: str) -> dict[str, Any]:
    """The master folds an exited worker's files into archives on a full directory."""
    from webhooks import metrics

    writer = subprocess.run([sys.executable, "-c", _WRITER], check=True, env=os.environ)
    del writer
    files = sorted(p.name for p in Path(directory).glob("counter_*.db"))
    (dead,) = files
    pid = int(dead.removeprefix("counter_").removesuffix(".db"))
    fill(directory)
    metrics.compact(pid, directory)
    text = metrics.Metrics().expose().decode()
    counted = text.count('dragonet_hook_answers_total{code="200",hook="/hook-')
    return {
        "alive": True,
        "left": sorted(p.name for p in Path(directory).glob(f"*_{pid}.db")),
        "counted": counted,
    }


def serve(directory: str) -> dict[str, Any]:
    """``dragonet serve`` (2 workers) with its metrics directory full: pool syncs under 60
    new pool names, a worker stopped (the master compacts its files), more syncs."""
    from tests.conftest import load_fixture
    from tests.test_serve import start_server

    body = load_fixture("pool-sync-two-jobs.json")
    tmp = Path(directory).parent / "serve"
    tmp.mkdir(exist_ok=True)
    started = start_server(tmp, PROMETHEUS_MULTIPROC_DIR=directory)
    server = next(started)
    codes: list[int | str] = []

    def sync(name: str) -> None:
        body["parent"]["metadata"]["name"] = name
        try:
            r = requests.post(
                f"{server.url}/pools/sync",
                json=body,
                headers={"Connection": "close"},
                timeout=20,
            )
            codes.append(r.status_code)
        except requests.RequestException as err:
            codes.append(type(err).__name__)

    try:
        fill(directory)
        workers = server.workers()
        for i in range(60):
            sync(f"pool-{i}")
        died = sorted(workers - server.workers())
        victim = min(server.workers() or {0})
        if victim:
            os.kill(victim, signal.SIGTERM)  # a graceful exit, as max_requests recycles one
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and server.proc.poll() is None:
            now = server.workers()
            if victim not in now and len(now) == 2:
                break
            time.sleep(0.1)
        for i in range(60, 80):
            sync(f"pool-{i}")
        scrape = requests.get(f"{server.url}/metrics", timeout=10).status_code
        master = server.proc.poll()
        lost = sum("metrics are lost" in line for line in server.log.read_text().splitlines())
        return {
            "codes": codes,
            "died_before_stop": died,
            "master_exit": master,
            "scrape": scrape,
            "lost_logged": lost,
        }
    finally:
        if server.proc.poll() is None:
            started.close()


if __name__ == "__main__":
    scenario, where = sys.argv[1], sys.argv[2]
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = where
    print(json.dumps({"worker": worker, "compact": compact, "serve": serve}[scenario](where)))
