"""A 1,000-node pool with about 1,000 jobs not yet admitted, against the 8 s deadline (issue 36).

Run: ``.venv/bin/python -m benchmarks.large_pool`` (``--quick`` for a smoke run;
``--concurrent 2,3,4`` to also send that many such pools at once to a real server).

The pool is ``benchmarks.sync_latency``'s scenario (nodes of 8 cpu, TFJobs of 11 pods of
1.5 cpu, the older jobs running until about 94 % of the cpu is used, what else fits
admitted by an earlier sync) with 1.482 jobs per node, so that about as many jobs wait as
there are nodes: 1,000 nodes, 1,482 jobs, 4,697 pods, 1,028 queued. The baseline is the
same shape at ``--base`` nodes (100: 148 jobs, 102 queued), measured in the same run.

Through the real Flask app (``webhooks.app.create_app``), CPU time (``time.process_time``)
per pool sync:

* *cold*: a fresh app (nothing parsed before), median of ``--repeats`` (``--stat min``:
  their minimum), until the answer is sent (the app is kept, as a server keeps it);
* *after*: what the process does once the cold answer is sent, as ``dragonet serve`` runs
  it (``webhooks.shell.AFTER_SEND``: the young collection of what the request left and
  the freeze, ``Collector.settle``); cold + after is the sync's whole CPU;
* *warm*: the same app after one pod event (a container restarted in place: the plan
  reads it, so the pool plans again; every other object is in the memo);
* where a cold sync goes, without Flask: reading the objects (``observe``), the plan
  (``policy.pool.cycle.plan``), and the whole pure sync (both, and the answer: Admissions,
  status, queue), each timed on its own.

The answer's digest (SHA-256 of its JSON with sorted keys) is printed, so that a change
that must not move a decision can be checked on the same pool (``--dump DIR`` writes the
answers).

With ``--concurrent``: ``dragonet serve`` with the chart's defaults (2 processes x 4
threads, the 8 s deadline) on 127.0.0.1, and K such pools (each its own name) posted at
once, each retried as Metacontroller retries (after ``Retry-After`` on a 429, after 1 s on
anything else but a 200) for at most ``--window`` seconds; first one pool alone, the
baseline of the same run. Printed: each pool's answers in order, how long until the first
and the last 200, and both as ratios to the pool alone.

Not a test: the figures depend on the machine (record them in benchmarks/README.md as
ratios).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import requests

from benchmarks.load import _pool_bodies, start
from benchmarks.sync_latency import scenario
from policy.memo import Memo
from policy.pool.cycle import plan
from policy.pool.observe import observe
from policy.pool.policies import rules_for
from policy.pool.sync import sync as pool_sync
from tests.conftest import NOW, Clock
from webhooks.app import create_app
from webhooks.config import Settings
from webhooks.gunicorn_conf import tune_gc
from webhooks.shell import AFTER_SEND

JOBS_PER_NODE = 1.482  # about as many jobs wait as there are nodes
# In process the measure is CPU time: no deadline (on a busy machine the wall clock's 8 s
# fire first; the server's deadline is what --concurrent measures).
NO_LIMIT = Settings(request_timeout_seconds=3600)


def pool_of(nodes: int) -> dict[str, Any]:
    """The pool's sync request at ``nodes`` nodes."""
    request, _ = scenario(nodes, round(nodes * JOBS_PER_NODE))
    return request


def _cpu(call: Callable[[], Any]) -> float:
    t0 = time.process_time()
    call()
    return time.process_time() - t0


def digest(answer: bytes) -> str:
    """The answer's decisions, independent of key order."""
    canonical = orjson.dumps(orjson.loads(answer), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:16]


def measure(request: dict[str, Any], repeats: int, stat: str = "median") -> dict[str, Any]:
    """``stat``: of the repeats, the median or the minimum (on a busy host the minimum
    moves less from run to run)."""
    pick = min if stat == "min" else statistics.median
    body = orjson.dumps(request)
    answers: list[bytes] = []

    after_send: list[Callable[[], None]] = []  # as dragonet serve runs them (webhooks.wire)
    sent = {AFTER_SEND: after_send}

    # The cold app lives on until its answer's after-work has run, as a server's does (what
    # that work walks is what the app's memos keep); freeing it is not timed.
    apps: list[Any] = []

    def cold() -> None:
        client = create_app(NO_LIMIT, clock=Clock()).test_client()
        apps.append(client)
        got = client.post("/pools/sync", data=body, environ_overrides=sent)
        assert got.status_code == 200, got.data[:200]
        answers.append(got.data)

    def then() -> None:
        while after_send:
            after_send.pop(0)()

    colds, afters = [], []
    for _ in range(repeats):
        colds.append(_cpu(cold))
        afters.append(_cpu(then))
        apps.clear()
    client = create_app(NO_LIMIT, clock=Clock()).test_client()
    client.post("/pools/sync", data=body, environ_overrides=sent)
    then()
    events = iter(_pool_bodies(request, request["parent"]["metadata"]["name"], repeats))
    warms = []
    for _ in range(repeats):
        warms.append(
            _cpu(lambda: client.post("/pools/sync", data=next(events), environ_overrides=sent))
        )
        then()

    req = orjson.loads(body)
    t0 = time.process_time()
    snap = observe(req["parent"], req["children"], req["related"], Memo(limit=0))
    t1 = time.process_time()
    result = plan(snap, NOW, rules_for(snap.spec))
    t2 = time.process_time()
    pool_sync(req["parent"], req["children"], req["related"], NOW)
    t3 = time.process_time()
    return {
        "mib": len(body) / 2**20,
        "pods": len(request["related"]["Pod.v1"]),
        "jobs": len(snap.jobs),
        "queued": sum(1 for jp in result.jobs.values() if jp.phase == "Queued"),
        "cold": pick(colds),
        "after": pick(afters),  # the young collection after the cold answer is sent
        "warm": pick(warms),
        "observe": t1 - t0,
        "plan": t2 - t1,
        "whole": t3 - t2,  # the pure sync: reading, the plan, the answer (no Flask, no JSON)
        "digest": digest(answers[0]),
        "answer_bytes": answers[0],
    }


def per_sync(args: argparse.Namespace) -> None:
    print(
        f"{'nodes':>5} {'jobs':>5} {'pods':>5} {'queued':>6} {'MiB':>6} {'cold s':>7}"
        f" {'x base':>6} {'after':>6} {'warm s':>7} {'x base':>6} {'observe':>7} {'plan':>6}"
        f" {'whole':>6}  digest"
    )
    base: dict[str, Any] | None = None
    for nodes in (args.base, args.nodes):
        r = measure(pool_of(nodes), args.repeats, args.stat)
        base = base or r
        print(
            f"{nodes:>5} {r['jobs']:>5} {r['pods']:>5} {r['queued']:>6} {r['mib']:>6.1f}"
            f" {r['cold']:>7.3f} {r['cold'] / base['cold']:>6.1f} {r['after']:>6.3f}"
            f" {r['warm']:>7.3f} {r['warm'] / base['warm']:>6.1f} {r['observe']:>7.3f}"
            f" {r['plan']:>6.3f} {r['whole']:>6.3f}  {r['digest']}"
        )
        if args.dump:
            Path(args.dump).mkdir(parents=True, exist_ok=True)
            (Path(args.dump) / f"answer-{nodes}.json").write_bytes(r["answer_bytes"])


def _send(url: str, body: bytes, window: float, out: list[tuple[float, int]]) -> None:
    """Post until a 200 or the window ends, as Metacontroller retries."""
    started = time.monotonic()
    while time.monotonic() - started < window:
        try:
            got = requests.post(
                f"{url}/pools/sync",
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=12,
            )
            code, wait = got.status_code, float(got.headers.get("Retry-After", 1))
        except requests.RequestException:
            code, wait = 0, 1.0
        out.append((time.monotonic() - started, code))
        if code == 200:
            return
        time.sleep(wait)


def concurrent(args: argparse.Namespace) -> None:
    """K pools at once; first one pool alone (the baseline, same run): how long until the
    first and the last 200, and those as ratios to the pool alone."""
    request = pool_of(args.nodes)
    counts = [1] + [int(k) for k in args.concurrent.split(",") if int(k) != 1]
    bodies = {n: _pool_bodies(request, f"pool-{n}", 1)[0] for n in range(max(counts))}
    print(
        f"\n{len(bodies)} pools of {args.nodes} nodes, at once, to dragonet serve "
        "(chart defaults), retried as Metacontroller retries:"
    )
    print(
        f"{'at once':>7} {'200 in 8 s':>10} {'200s':>4} {'first 200 s':>11} {'x alone':>7}"
        f" {'last 200 s':>10} {'x alone':>7}  answers (s:code)"
    )
    env = {"DRAGONET_WORKERS": "2", "DRAGONET_THREADS": "4"}
    alone: float | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for k in counts:
            proc, url = start(env, Path(tmp) / f"server-{k}.log")  # fresh: every memo cold
            try:
                seen: list[list[tuple[float, int]]] = [[] for _ in range(k)]
                threads = [
                    threading.Thread(target=_send, args=(url, bodies[i], args.window, seen[i]))
                    for i in range(k)
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            done = [s[-1][0] for s in seen if s and s[-1][1] == 200]
            fast = sum(1 for s in seen if s and s[-1][1] == 200 and s[-1][0] < 8.0)
            shown = " | ".join(" ".join(f"{t:.1f}:{c}" for t, c in s) for s in seen)
            first, last = (min(done), max(done)) if done else (None, None)
            alone = alone or first
            print(
                f"{k:>7} {fast:>10} {len(done):>4} {_s(first):>11} {_x(first, alone):>7}"
                f" {_s(last):>10} {_x(last, alone):>7}  {shown}"
            )


def _s(seconds: float | None) -> str:
    return f"{seconds:.1f}" if seconds is not None else "-"


def _x(seconds: float | None, alone: float | None) -> str:
    return f"{seconds / alone:.1f}" if seconds is not None and alone else "-"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="<= 200 nodes vs 50, 1 repeat")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--base", type=int, default=100, help="the baseline pool's nodes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stat", choices=("median", "min"), default="median")
    parser.add_argument("--concurrent", default="", help="e.g. 2,3,4: pools sent at once")
    parser.add_argument("--window", type=float, default=30.0, help="seconds each pool retries")
    parser.add_argument("--dump", default="", help="write each pool's answer into this folder")
    args = parser.parse_args()
    if args.quick:  # (smaller sizes given with it win)
        args.nodes, args.base = min(args.nodes, 200), min(args.base, 50)
        args.repeats = 1
    tune_gc()  # as the webhook's processes do
    per_sync(args)
    if args.concurrent:
        concurrent(args)


if __name__ == "__main__":
    main()
