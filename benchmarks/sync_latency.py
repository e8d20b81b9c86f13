"""Hook latency as the cluster grows: the pool's sync plans the whole queue; a job's sync
renders one job and should not notice the cluster's size at all (docs/architecture.md).

Run: ``.venv/bin/python -m benchmarks.sync_latency`` (add ``--quick`` for a smoke run).

Each scenario has N nodes (8 cpu) and J TFJobs (1 PS + 10 workers, 1.5 cpu each, fixed
size). The older jobs run (their pods and Admissions are in the request) until about 94 %
of the cpu is used; the pool has admitted what else fits (Admissions whose pods are not
created yet) and the rest are queued. Measured through the real Flask app:

* the pool's sync, *cold* (a fresh process: nothing parsed before) against the time
  ``orjson.loads`` takes to parse the same request (the ratio), and *warm* (the previous
  sync parsed everything but the one pod that changed since, as after one pod event);
* where a cold pool sync spends its time (JSON, reading objects, the plan, the answer);
* a job's sync (a running job with its 11 pods and its Admission), at every size.

Times are CPU time (``time.process_time``), the JSON baseline's too: on a machine shared
with other work, wall time measures the neighbours as much as the hook.

Not a test: the numbers depend on the machine (record them in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from policy.job.render import render_pod
from policy.memo import Memo
from policy.model.admission import Placement
from policy.model.jobs import parse_job
from policy.model.kinds import TFJOB
from policy.pool.cycle import plan
from policy.pool.observe import observe
from policy.pool.policies import rules_for
from policy.pool.sync import sync as pool_sync
from tests import metacontroller as mc
from tests.conftest import NOW, Clock
from webhooks.app import create_app
from webhooks.gunicorn_conf import tune_gc

PODS_PER_JOB = 11
CPU_PER_POD = 1.5
NODE_CPU = 8


def _job(i: int) -> dict[str, Any]:
    job = mc.compat("dragon-job1-cpu.yaml")
    del job["spec"]["min-instances"], job["spec"]["max-instances"]
    for spec in job["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"] = {
            "limits": {"cpu": str(CPU_PER_POD), "memory": "2Gi"}
        }
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = PODS_PER_JOB - 1
    minute, second = divmod(i, 60)
    return mc.tfjob(
        job,
        name=f"job-{i:04d}",
        created=f"2026-11-21T0{minute // 60}:{minute % 60:02d}:{second:02d}Z",
    )


def scenario(nodes: int, jobs: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the pool's sync request, a running job's sync request)."""
    cluster = [mc.node(f"node-{i:04d}", cpu=str(NODE_CPU), memory="64Gi") for i in range(nodes)]
    all_jobs = [_job(i) for i in range(jobs)]
    per_node = int(NODE_CPU // CPU_PER_POD)
    slots = [n["metadata"]["name"] for n in cluster for _ in range(per_node)]
    running = min(jobs, int(len(slots) * 0.94) // PODS_PER_JOB)
    pods, admissions = [], []
    cursor = 0
    for job in all_jobs[:running]:
        parsed = parse_job(job, TFJOB)
        placed = []
        for rtype, replica in parsed.replicas.items():
            for index in range(replica.replicas):
                node = slots[cursor]
                cursor += 1
                placed.append((rtype, index, node))
                child = render_pod(
                    parsed, Placement(type=rtype, index=index, node=node), "affinity", "", 1
                )
                pods.append(mc.observed_pod(job, child))
        workers = sum(1 for t, _, _ in placed if t == "Worker")
        admissions.append(mc.admission(job, placed, workers=workers))
    w = mc.world(all_jobs[0], cluster, all_jobs, pods)
    pool_request = mc.pool_request(w, admissions)
    # Steady state: the pool already admitted what fits (those pods are not created yet).
    first = pool_sync(pool_request["parent"], {}, pool_request["related"], NOW)
    stored = [mc.stored_admission(pool_request["parent"], c, None) for c in first.children]
    pool_request = mc.pool_request(w, stored)
    own = mc.world(all_jobs[0], cluster, all_jobs, pods)
    job_request = mc.job_request(own, admissions[0] if admissions else None)
    return pool_request, job_request


def _timed(n: int, call: Callable[[], Any]) -> list[float]:
    """CPU time of each call, in ms: what a sync costs a worker process of its own (the
    webhook serves a request on one thread), unmoved by other work on a shared machine."""
    out = []
    for _ in range(n):
        t0 = time.process_time()
        call()
        out.append((time.process_time() - t0) * 1000)
    return sorted(out)


def _p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(len(values) * 0.99))]


def _with_new_pod_version(request: dict[str, Any], n: int) -> bytes:
    """The same pool request after one pod event: a container of one pod restarted in
    place (a change the plan reads, so the pool plans again)."""
    changed = copy.copy(request)
    pods = dict(request["related"]["Pod.v1"])
    if pods:
        key = sorted(pods)[n % len(pods)]
        pod = copy.deepcopy(pods[key])
        pod["metadata"]["resourceVersion"] = f"9{n}"
        pod["status"]["containerStatuses"][0]["restartCount"] = n + 1
        pods[key] = pod
    changed["related"] = {**request["related"], "Pod.v1": pods}
    return orjson.dumps(changed)


def measure(pool_request: dict[str, Any], job_request: dict[str, Any], repeats: int) -> dict:
    body = orjson.dumps(pool_request)
    job_body = orjson.dumps(job_request)
    parse = _timed(repeats, lambda: orjson.loads(body))

    def cold() -> None:
        client = create_app(clock=Clock()).test_client()
        assert client.post("/pools/sync", data=body).status_code == 200

    cold_ms = _timed(repeats, cold)
    app = create_app(clock=Clock())
    client = app.test_client()
    client.post("/pools/sync", data=body)
    warm_bodies = [_with_new_pod_version(pool_request, i) for i in range(repeats)]
    it = iter(warm_bodies)
    warm_ms = _timed(repeats, lambda: client.post("/pools/sync", data=next(it)))
    job_ms = _timed(repeats * 5, lambda: client.post("/tfjobs/sync", data=job_body))

    # Where a cold pool sync goes (the pure parts, without Flask).
    req = orjson.loads(body)
    t0 = time.process_time()
    snap = observe(req["parent"], req["children"], req["related"], Memo(limit=0))
    t1 = time.process_time()
    result = plan(snap, NOW, rules_for(snap.spec))
    t2 = time.process_time()
    answer = pool_sync(req["parent"], req["children"], req["related"], NOW)
    orjson.dumps({"status": answer.status, "children": answer.children})
    t3 = time.process_time()
    return {
        "request_kib": len(body) / 1024,
        "pods": len(pool_request["related"]["Pod.v1"]),
        "queued": sum(1 for jp in result.jobs.values() if jp.phase == "Queued"),
        "parse_ms": statistics.median(parse),
        "cold_ms": statistics.median(cold_ms),
        "cold_p99_ms": _p99(cold_ms),
        "warm_ms": statistics.median(warm_ms),
        "warm_p99_ms": _p99(warm_ms),
        "job_ms": statistics.median(job_ms),
        "job_p99_ms": _p99(job_ms),
        "observe_ms": (t1 - t0) * 1000,
        "plan_ms": (t2 - t1) * 1000,
        "whole_ms": (t3 - t2) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    args = parser.parse_args()
    sizes = [(16, 40), (64, 200)] if args.quick else [(16, 40), (64, 200), (256, 500), (1000, 500)]
    repeats = 5 if args.quick else 20
    tune_gc()  # as the webhook's processes do; the JSON baseline runs under the same settings
    columns = [
        ("nodes", 5),
        ("jobs", 5),
        ("pods", 5),
        ("queued", 6),
        ("req KiB", 8),
        ("JSON ms", 8),
        ("cold ms", 8),
        ("cold/JSON", 9),
        ("warm p50", 8),
        ("warm p99", 8),
        ("job p50", 8),
        ("job p99", 8),
    ]
    print(" ".join(f"{name:>{width}}" for name, width in columns))
    breakdown = []
    gc.collect()
    for nodes, jobs in sizes:
        r = measure(*scenario(nodes, jobs), repeats)
        breakdown.append((nodes, jobs, r))
        print(
            f"{nodes:>5} {jobs:>5} {r['pods']:>5} {r['queued']:>6} {r['request_kib']:>8.0f}"
            f" {r['parse_ms']:>8.1f} {r['cold_ms']:>8.1f} {r['cold_ms'] / r['parse_ms']:>9.2f}"
            f" {r['warm_ms']:>8.1f} {r['warm_p99_ms']:>8.1f} {r['job_ms']:>8.2f}"
            f" {r['job_p99_ms']:>8.2f}"
        )
    print("\nWhere a cold pool sync goes (pure policy, no Flask; ms):")
    print(f"{'nodes':>5} {'jobs':>5} {'read objects':>12} {'plan':>8} {'whole sync':>10}")
    for nodes, jobs, r in breakdown:
        print(
            f"{nodes:>5} {jobs:>5} {r['observe_ms']:>12.1f} {r['plan_ms']:>8.1f}"
            f" {r['whole_ms']:>10.1f}"
        )


if __name__ == "__main__":
    main()
