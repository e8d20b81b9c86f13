"""The pool hook's request with objects as a real API server returns them, against the
webhook's and Metacontroller's limits (issue 25).

Run: ``.venv/bin/python -m benchmarks.request_sizes [--quick]``.

The scenario is ``benchmarks.sync_latency``'s (N nodes of 8 cpu, TFJobs of 11 pods, the
older ones running until about 94 % of the cpu is used). Each object of the pool's request
is then dressed as a real cluster has it (``sim/sizes.py``: managedFields, node images and
conditions, kubelet pod status, ``kubectl apply``'s annotation on jobs) and, for the
children Metacontroller wrote (pods, Admissions), dynamic-apply's
``metacontroller.k8s.io/last-applied-configuration``. For the simulator's minimal objects
and the real ones: the request's size, ``orjson.loads`` of it, and a cold pool sync
through the real Flask app (CPU time, median of a few), against the webhook's request cap
(64 MiB), its deadline (8 s) and Metacontroller's hook timeout (10 s), judged on CPU time
(a worker process of its own); the wall time and the HTTP status of the slowest call are
printed too (on a loaded machine the 8 s deadline, which is wall time, fires first: 422).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Mapping
from typing import Any

import orjson

from benchmarks.sync_latency import scenario
from sim.metacontroller import LAST_APPLIED
from sim.sizes import dress
from tests.conftest import Clock
from webhooks.app import create_app
from webhooks.gunicorn_conf import tune_gc

WHEN = "2026-11-21T00:00:00Z"
CAP_MIB, DEADLINE_S, MC_TIMEOUT_S = 64, 8.0, 10.0
SERVER_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def _applied(child: Mapping[str, Any]) -> str:
    """dynamic-apply's copy of a child: as answered (no owner, no server fields)."""
    meta = {
        k: v
        for k, v in child["metadata"].items()
        if k not in (*SERVER_META, "ownerReferences", "annotations")
    }
    body = {k: v for k, v in child.items() if k != "status"}
    return orjson.dumps({**body, "metadata": meta}, option=orjson.OPT_SORT_KEYS).decode()


def _real(obj: Mapping[str, Any], metacontroller_child: bool) -> dict[str, Any]:
    if metacontroller_child:
        meta = dict(obj["metadata"])
        meta["annotations"] = {**(meta.get("annotations") or {}), LAST_APPLIED: _applied(obj)}
        obj = {**obj, "metadata": meta}
    return dress(None, dict(obj), WHEN)


def real_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The same request with every object as a real cluster returns it."""
    related = {
        tkey: {k: _real(o, tkey == "Pod.v1") for k, o in objs.items()}
        for tkey, objs in request["related"].items()
    }
    children = {
        tkey: {k: _real(o, True) for k, o in objs.items()}
        for tkey, objs in request["children"].items()
    }
    parent = dress(None, dict(request["parent"]), WHEN)
    return {**request, "parent": parent, "related": related, "children": children}


def _cpu(call: Any) -> float:
    t0 = time.process_time()
    call()
    return time.process_time() - t0


def measure(request: Mapping[str, Any], repeats: int) -> dict[str, float]:
    body = orjson.dumps(request)
    parse = [_cpu(lambda: orjson.loads(body)) for _ in range(repeats)]

    codes: list[int] = []

    def cold() -> None:
        client = create_app(clock=Clock()).test_client()
        codes.append(client.post("/pools/sync", data=body).status_code)

    colds, walls = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        colds.append(_cpu(cold))
        walls.append(time.perf_counter() - started)
    return {
        "status": max(codes),
        "wall_s": max(walls),
        "mib": len(body) / 2**20,
        "parse_s": statistics.median(parse),
        "cold_s": statistics.median(colds),
        "cold_max_s": max(colds),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 nodes only, one repeat")
    args = parser.parse_args()
    sizes = [(100, 100)] if args.quick else [(100, 100), (1000, 500)]
    repeats = 1 if args.quick else 3
    tune_gc()
    print(
        f"{'nodes':>5} {'jobs':>5} {'pods':>5} {'objects':>8} {'MiB':>7} {'x':>5}"
        f" {'JSON s':>7} {'cold s':>7} {'cold max':>8} {'cap':>5} {'8 s':>4} {'10 s':>5}"
        f" {'wall s':>7} {'HTTP':>5}"
    )
    for nodes, jobs in sizes:
        minimal, _ = scenario(nodes, jobs)
        real = real_request(minimal)
        pods = len(minimal["related"].get("Pod.v1", {}))
        base = None
        for name, request in (("minimal", minimal), ("real", real)):
            r = measure(request, repeats)
            base = base or r["mib"]
            print(
                f"{nodes:>5} {jobs:>5} {pods:>5} {name:>8} {r['mib']:>7.2f}"
                f" {r['mib'] / base:>5.1f} {r['parse_s']:>7.3f} {r['cold_s']:>7.3f}"
                f" {r['cold_max_s']:>8.3f} {'ok' if r['mib'] < CAP_MIB else 'OVER':>5}"
                f" {'ok' if r['cold_max_s'] < DEADLINE_S else 'OVER':>4}"
                f" {'ok' if r['cold_max_s'] < MC_TIMEOUT_S else 'OVER':>5}"
                f" {r['wall_s']:>7.2f} {r['status']:>5}"
            )


if __name__ == "__main__":
    main()
