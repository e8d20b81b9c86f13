"""Load on the real server: ``dragonet serve`` (gunicorn) on 127.0.0.1, called the way
Metacontroller's two controllers call it, with one worker killed mid-run.

Run: ``.venv/bin/python -m benchmarks.load`` (``--quick`` for a smoke run of a few seconds).

Clients, like Metacontroller's workers: one thread per pool syncs that pool over and over
(Metacontroller never syncs one parent twice at once), each time after one pod event
(a container restarted, so the pool plans again); ``--job-clients`` threads sync running
jobs. Requests are fixture-shaped (``benchmarks.sync_latency.scenario``: by default 1,000
nodes, 1,000 TFJobs, ~4,700 pods, a ~13 MiB pool request). A 429 is counted and the
client moves on to its next request, as a Metacontroller worker moves on to its next key.

It stops by itself: after ``--requests`` answers or ``--seconds``, whichever comes first.
Half-way, one gunicorn worker is killed with SIGKILL; the run reports when the master had
replaced it and how many requests failed meanwhile.

Memory: the peak RSS of each process (the kernel's high-water mark, VmHWM, read until a
process ends), and the peak of the pod's total, sampled every 50 ms as the sum of every
process's proportional set size (PSS: pages shared after fork counted once), which is what
the container's memory limit sees, plus the metrics files on the in-memory /tmp.

Not a test: the figures depend on the machine (record them in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import requests

from benchmarks.sync_latency import scenario

MiB = 1 << 20


@dataclass
class Result:
    hook: str
    status: int  # 0: no answer (connection refused or reset)
    seconds: float
    at: float  # monotonic time the request ended


@dataclass
class Memory:
    """Peaks of the server's processes, sampled from /proc."""

    hwm: dict[int, int] = field(default_factory=dict)  # pid -> VmHWM bytes
    role: dict[int, str] = field(default_factory=dict)
    pss_peak: int = 0
    files_peak: int = 0

    def sample(self, master: int, metrics_dir: Path) -> list[int]:
        pids = [master, *_children(master)]
        total = 0
        for pid in pids:
            self.role.setdefault(pid, "master" if pid == master else "worker")
            status = _read(f"/proc/{pid}/status")
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    self.hwm[pid] = max(self.hwm.get(pid, 0), int(line.split()[1]) * 1024)
            for line in _read(f"/proc/{pid}/smaps_rollup").splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        files = sum(f.stat().st_size for f in metrics_dir.glob("*.db") if f.exists())
        self.files_peak = max(self.files_peak, files)
        self.pss_peak = max(self.pss_peak, total + files)
        return pids[1:]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:  # the process just ended
        return ""


def _children(pid: int) -> list[int]:
    return [int(p) for p in _read(f"/proc/{pid}/task/{pid}/children").split()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pool_bodies(pool_request: dict[str, Any], name: str, count: int) -> list[bytes]:
    """The pool's request after ``count`` pod events: each a container restart of one pod."""
    out = []
    pods = sorted(pool_request["related"]["Pod.v1"])
    parent = copy.deepcopy(pool_request["parent"])
    parent["metadata"]["name"] = name
    for n in range(count):
        changed = dict(pool_request, parent=parent)
        if pods:
            key = pods[n % len(pods)]
            pod = copy.deepcopy(pool_request["related"]["Pod.v1"][key])
            pod["metadata"]["resourceVersion"] = f"9{n}"
            pod["status"]["containerStatuses"][0]["restartCount"] = n + 1
            changed["related"] = {
                **pool_request["related"],
                "Pod.v1": {**pool_request["related"]["Pod.v1"], key: pod},
            }
        out.append(orjson.dumps(changed))
    return out


def _job_bodies(job_request: dict[str, Any], count: int) -> list[bytes]:
    """A running job's request under ``count`` names (each its own parent for the memo)."""
    out = []
    for n in range(count):
        req = copy.deepcopy(job_request)
        req["parent"]["metadata"]["name"] = f"job-{n:04d}"
        req["parent"]["metadata"]["uid"] = f"uid-job-{n:04d}"
        out.append(orjson.dumps(req))
    return out


def start(
    env: dict[str, str],
    log: Path,
    command: tuple[str, ...] = ("-m", "cli.main", "serve"),
    name: str = "dragonet serve",
) -> tuple[subprocess.Popen, str]:
    """The server ``command`` on a free local port, once it answers /healthz with every
    worker (``DRAGONET_WORKERS``) up."""
    port = _free_port()
    env = {**os.environ, "DRAGONET_HOST": "127.0.0.1", "DRAGONET_PORT": str(port), **env}
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, *command],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited:\n{log.read_text()[-2000:]}")
        try:
            if requests.get(f"{url}/healthz", timeout=1).ok and len(_children(proc.pid)) >= int(
                env["DRAGONET_WORKERS"]
            ):
                return proc, url
        except requests.RequestException:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{name} did not answer /healthz within 30 s")


def run(args: argparse.Namespace) -> dict[str, Any]:
    pool_request, job_request = scenario(args.nodes, args.jobs)
    pools = {f"pool-{p}": _pool_bodies(pool_request, f"pool-{p}", 8) for p in range(args.pools)}
    jobs = _job_bodies(job_request, 200)
    pool_mib = len(next(iter(pools.values()))[0]) / MiB if pools else 0.0
    tmp = Path(tempfile.mkdtemp(prefix="dragonet-load-"))
    metrics_dir = tmp / "metrics"
    env = {
        "DRAGONET_WORKERS": str(args.workers),
        "DRAGONET_THREADS": str(args.threads),
        "DRAGONET_LOG_LEVEL": "warning",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    proc, url = start(env, tmp / "server.log")
    memory = Memory()
    results: list[Result] = []
    lock = threading.Lock()
    stop = threading.Event()
    started = time.monotonic()
    kill: dict[str, Any] = {}

    def record(hook: str, status: int, t0: float) -> None:
        now = time.monotonic()
        with lock:
            results.append(Result(hook, status, now - t0, now))
            if len(results) >= args.requests:
                stop.set()

    def client(hook: str, bodies: list[bytes], seed: int) -> None:
        rng = random.Random(seed)
        session = requests.Session()
        while not stop.is_set():
            body = bodies[rng.randrange(len(bodies))]
            t0 = time.monotonic()
            try:
                answer = session.post(f"{url}{hook}", data=body, timeout=30)
                status = answer.status_code
            except requests.RequestException:
                status = 0
                session = requests.Session()
            record(hook, status, t0)

    threads = [
        threading.Thread(target=client, args=("/pools/sync", bodies, i), daemon=True)
        for i, bodies in enumerate(pools.values())
    ] + [
        threading.Thread(target=client, args=("/tfjobs/sync", jobs, 100 + i), daemon=True)
        for i in range(args.job_clients)
    ]
    try:
        for t in threads:
            t.start()
        while not stop.wait(0.05):
            elapsed = time.monotonic() - started
            workers = memory.sample(proc.pid, metrics_dir)
            if elapsed > args.seconds:
                stop.set()
            half = len(results) >= args.requests // 2 or elapsed > args.seconds / 2
            if half and "pid" not in kill and workers:
                victim = max(workers, key=lambda pid: memory.hwm.get(pid, 0))
                os.kill(victim, signal.SIGKILL)
                kill.update(pid=victim, at=time.monotonic(), before=set(workers))
            if "pid" in kill and "replaced" not in kill:
                new = set(workers) - kill["before"]
                if new and len(workers) == args.workers:
                    kill.update(replaced=time.monotonic(), by=new.pop())
        for t in threads:
            t.join(timeout=35)
        deadline = time.monotonic() + 10
        while "pid" in kill and "replaced" not in kill and time.monotonic() < deadline:
            workers = memory.sample(proc.pid, metrics_dir)  # the run ended first: wait
            new = set(workers) - kill["before"]
            if new and len(workers) == args.workers:
                kill.update(replaced=time.monotonic(), by=new.pop())
            time.sleep(0.05)
        memory.sample(proc.pid, metrics_dir)
        metrics = requests.get(f"{url}/metrics", timeout=10).text
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    elapsed = time.monotonic() - started
    return {
        "results": results,
        "started": started,
        "elapsed": elapsed,
        "memory": memory,
        "kill": kill,
        "pool_mib": pool_mib,
        "pods": len(pool_request["related"]["Pod.v1"]),
        "metrics": metrics,
        "log": (tmp / "server.log").read_text(),
    }


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    results: list[Result] = r["results"]
    codes = Counter((x.hook, x.status) for x in results)
    ok = [x for x in results if x.status == 200]
    print(
        f"server: {args.workers} workers x {args.threads} threads on 127.0.0.1; "
        f"{args.pools} pool(s) of {args.nodes} nodes, {args.jobs} jobs, {r['pods']} pods "
        f"({r['pool_mib']:.1f} MiB a pool sync); {args.job_clients} job clients"
    )
    print(
        f"requests: {len(results)} in {r['elapsed']:.1f} s, {len(ok) / r['elapsed']:.1f}/s "
        f"answered 200; 429: {sum(n for (_, s), n in codes.items() if s == 429)}; "
        f"no answer: {sum(n for (_, s), n in codes.items() if s == 0)}; "
        f"other: {sum(n for (_, s), n in codes.items() if s not in (0, 200, 429))}"
    )
    print(f"{'hook':<14} {'200s':>6} {'429s':>6} {'/s':>7} {'p50 ms':>8} {'p99 ms':>8}")
    for hook in ("/pools/sync", "/tfjobs/sync"):
        lat = [x.seconds * 1000 for x in ok if x.hook == hook]
        print(
            f"{hook:<14} {len(lat):>6} {codes[(hook, 429)]:>6} {len(lat) / r['elapsed']:>7.1f}"
            f" {_pct(lat, 0.5):>8.1f} {_pct(lat, 0.99):>8.1f}"
        )
    kill = r["kill"]
    if "pid" in kill:
        after = [x for x in results if x.at > kill["at"]]
        lost = sum(1 for x in after if x.status == 0 and x.at < kill.get("replaced", 1e18) + 1)
        replaced = (
            f"replaced by {kill['by']} after {kill['replaced'] - kill['at']:.2f} s"
            if "replaced" in kill
            else "NOT replaced"
        )
        print(
            f"killed worker {kill['pid']} (SIGKILL) at {kill['at'] - r['started']:.1f} s:"
            f" {replaced}; {lost} request(s) got no answer; "
            f"{sum(1 for x in after if x.status == 200)} answered 200 after the kill"
        )
    m: Memory = r["memory"]
    print("peak RSS (VmHWM) per process:")
    for pid in sorted(m.hwm, key=lambda p: (m.role[p] != "master", p)):
        note = " (killed)" if pid == kill.get("pid") else ""
        print(f"  {m.role[pid]:<7} {pid:>8} {m.hwm[pid] / MiB:>7.0f} MiB{note}")
    print(
        f"peak of the pod's total (sum of PSS + metrics files): {m.pss_peak / MiB:.0f} MiB "
        f"(metrics files at most {m.files_peak / 1024:.0f} KiB)"
    )
    total = [
        line for line in r["metrics"].splitlines() if line.startswith("dragonet_hook_answers_total")
    ]
    print("/metrics after the run (every worker's, the killed one's included):")
    for line in total:
        print(f"  {line}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small pool, a few seconds")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pools", type=int, default=2, help="pools, each synced serially")
    parser.add_argument("--job-clients", type=int, default=5, help="threads syncing jobs")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per process")
    parser.add_argument("--requests", type=int, default=3000, help="stop after this many")
    parser.add_argument("--seconds", type=float, default=60.0, help="or after this long")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.jobs, args.requests, args.seconds = 16, 40, 120, 3.0
    report(args, run(args))


if __name__ == "__main__":
    main()
