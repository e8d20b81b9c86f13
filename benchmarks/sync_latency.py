"""Sync-hook latency as the cluster grows: every sync plans the whole queue (DESIGN §2).

Run: ``.venv/bin/python -m benchmarks.sync_latency`` (add ``--quick`` for a smoke run).
Each scenario has N nodes and J TFJobs (1 PS + 4 workers, 1 cpu each); the older half is
running (its pods are in the request), the younger half is queued. The measured request is
the youngest job's sync, sent through the real Flask app. Prints wall time per sync (median
and p99 of repeated calls), the share spent in the pure policy, the request size, and the
ratio to a one-job, one-node baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import orjson

from policy.config import PolicyConfig
from policy.plan import plan
from policy.reconcile import reconcile
from policy.snapshot import observe, sync
from tests import metacontroller as mc
from tests.conftest import NOW, Clock
from webhooks.app import create_app


def _job(i: int) -> dict[str, Any]:
    job = mc.compat("dragon-job1-cpu.yaml")
    for spec in job["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"] = {
            "limits": {"cpu": "1", "memory": "2Gi"}
        }
    minute, second = divmod(i, 60)
    return mc.tfjob(
        job,
        name=f"job-{i:04d}",
        created=f"2026-11-21T0{minute // 60}:{minute % 60:02d}:{second:02d}Z",
    )


def scenario(nodes: int, jobs: int) -> dict[str, Any]:
    cluster = [mc.node(f"node-{i:03d}", cpu="32", memory="256Gi") for i in range(nodes)]
    all_jobs = [_job(i) for i in range(jobs)]
    running = all_jobs[: jobs // 2]
    # One plan admits every older job that fits; render each one's pods from it.
    related = {"Node.v1": {n["metadata"]["name"]: n for n in cluster}}
    related["TFJob.kubeflow.org/v1"] = {j["metadata"]["name"]: j for j in running}
    snap = observe(None, {}, related)
    admitted = plan(snap.jobs, snap.cluster, NOW)
    pods: list[dict[str, Any]] = []
    for job in running:
        jp = admitted.jobs[f"default/{job['metadata']['name']}"]
        decision = reconcile(jp, snap.cluster, NOW, PolicyConfig())
        pods += [mc.observed_pod(job, c) for c in decision.children if c["kind"] == "Pod"]
    return mc.sync_request(all_jobs[-1], cluster, all_jobs, pods)


def measure(request: dict[str, Any], repeats: int) -> dict[str, float]:
    app = create_app(clock=Clock())
    client = app.test_client()
    memo = app.config["DRAGONET_MEMO"]
    body = orjson.dumps(request)
    wall, warm, core = [], [], []
    for _ in range(repeats):
        memo.entries.clear()  # cold: nothing parsed or planned before
        t0 = time.perf_counter()
        answer = client.post("/tfjobs/sync", data=body)
        wall.append(time.perf_counter() - t0)
        assert answer.status_code == 200
        # warm: the same snapshot was planned by an earlier sync (a Metacontroller round)
        t0 = time.perf_counter()
        client.post("/tfjobs/sync", data=body)
        warm.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sync(request["parent"], request["children"], request["related"], NOW, PolicyConfig())
        core.append(time.perf_counter() - t0)
    wall.sort()
    return {
        "p50_ms": statistics.median(wall) * 1000,
        "p99_ms": wall[min(len(wall) - 1, int(len(wall) * 0.99))] * 1000,
        "policy_ms": statistics.median(core) * 1000,
        "warm_ms": statistics.median(warm) * 1000,
        "request_kb": len(body) / 1024,
        "pods": len(request["related"]["Pod.v1"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    args = parser.parse_args()
    sizes = (
        [(1, 1), (16, 40), (64, 200)]
        if args.quick
        else [(1, 1), (16, 40), (64, 200), (64, 1000), (256, 1000)]
    )
    repeats = 5 if args.quick else 30
    columns = [("nodes", 5), ("jobs", 5), ("pods", 5), ("req KiB", 8), ("p50 ms", 8)]
    columns += [("p99 ms", 8), ("policy ms", 9), ("x base", 7), ("warm ms", 8)]
    print(" ".join(f"{name:>{width}}" for name, width in columns))
    base = None
    for nodes, jobs in sizes:
        r = measure(scenario(nodes, jobs), repeats if jobs < 1000 else max(3, repeats // 5))
        base = base or r["p50_ms"]
        print(
            f"{nodes:>5} {jobs:>5} {r['pods']:>5} {r['request_kb']:>8.0f} {r['p50_ms']:>8.1f}"
            f" {r['p99_ms']:>8.1f} {r['policy_ms']:>9.1f} {r['p50_ms'] / base:>7.1f}"
            f" {r['warm_ms']:>8.1f}"
        )


if __name__ == "__main__":
    main()
