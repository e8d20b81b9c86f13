"""The Container Monitor's costs (docs/monitor.md), measured, with the reference's way as the
baseline in the same run:

1. the convergence test per report after N reports of one pod: ours (a fit over the last
   ``window`` scores) against the reference's (a fit over every score since the pod began);
2. memory per tracked pod, each after many reports (tracemalloc);
3. reports per second through the real HTTP app (Flask test client, one thread), against
   an in-memory API, each report with its pod's token (monitor/auth.py: one TokenReview
   per pod, then the cache), against the same reports unauthenticated (auth "none").

    .venv/bin/python -m benchmarks.monitor [--quick]
"""

from __future__ import annotations

import argparse
import gc
import math
import time
import tracemalloc
from collections.abc import Mapping
from typing import Any

from monitor.app import create_app
from monitor.config import MonitorSettings
from monitor.convergence import ConvergenceTracker, fit_line
from monitor.kube import AlreadyExists, PodInfo
from monitor.service import Monitor
from policy.model.cluster import L_OPERATOR, OPERATOR_NAME


class ReferenceTracker:
    """The reference's bookkeeping (model/pod.go): every score kept, every report refits
    log(score) over all of them (its category rule aside: the cost is the point here)."""

    def __init__(self) -> None:
        self.scores: list[tuple[float, float]] = []
        self.last: tuple[float, float] | None = None

    def feed(self, t: float, value: float) -> None:
        if self.last is not None:
            score = abs(value - self.last[1]) / (t - self.last[0])
            self.scores.append((t, math.log(max(score, 1e-9))))
            if len(self.scores) >= 3:
                fit_line(self.scores)
        self.last = (t, value)


def curve(i: int) -> float:
    return 0.9 * (1 - math.exp(-i / 50)) + 0.005 * math.sin(i * 7.3)


def per_report_us(make: Any, n: int, measured: int = 200) -> float:
    """Microseconds per report for reports n .. n+measured of one pod."""
    tracker = make()
    for i in range(n):
        tracker.feed(float(i * 10), curve(i))
    start = time.perf_counter()
    for i in range(n, n + measured):
        tracker.feed(float(i * 10), curve(i))
    return (time.perf_counter() - start) / measured * 1e6


class _Cluster:
    """Every pod name is a worker on this node; Migrations kept in a dict."""

    def __init__(self) -> None:
        self.migrations: dict[str, Mapping[str, Any]] = {}

    def pods_named(self, name: str, node: str, namespace: str | None) -> list[PodInfo]:
        # Dragonet's pods say so (the monitor refuses reports about anyone else's).
        labels = {"training.kubeflow.org/replica-type": "worker", L_OPERATOR: OPERATOR_NAME}
        return [PodInfo(name, "bench", f"uid-{name}", node, labels, {"cpu": 1.0})]

    def pool_status(self, pool: str) -> Mapping[str, Any]:
        return {}

    def node_metrics(self) -> None:
        return None

    def create_migration(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        if name in self.migrations:
            raise AlreadyExists("409 Conflict", 409)
        self.migrations[name] = body

    def get_migration(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.migrations.get(name)

    def delete_migration(self, namespace: str, name: str, uid: str) -> None:
        self.migrations.pop(name, None)

    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        """The token is the pod's name: valid, bound to that pod (as ``pods_named`` has it)."""
        self.reviews = getattr(self, "reviews", 0) + 1
        extra = {
            "authentication.kubernetes.io/pod-name": [token],
            "authentication.kubernetes.io/pod-uid": [f"uid-{token}"],
        }
        user = {"username": "system:serviceaccount:bench:default", "extra": extra}
        return {"authenticated": True, "audiences": [audience], "user": user}


def memory_per_pod(pods: int, reports: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    settings = MonitorSettings(node_name="n", max_pods=pods, forget_seconds=1e9)
    clock = [0.0]
    monitor = Monitor(_Cluster(), settings)  # type: ignore[arg-type]
    monitor.clock = type(monitor.clock)(monotonic=lambda: clock[0])
    for r in range(reports):
        for p in range(pods):
            clock[0] += 0.01
            monitor.report(f"worker-{p}", None, curve(r))
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used / pods


def reports_per_second(count: int, auth: str = "token") -> float:
    settings = MonitorSettings(node_name="n", forget_seconds=1e9, auth=auth)
    monitor = Monitor(_Cluster(), settings)  # type: ignore[arg-type]
    client = create_app(monitor).test_client()
    reports = [
        (f'{{"pod": "worker-{i % 32}", "value": {curve(i)}}}', f"Bearer worker-{i % 32}")
        for i in range(count)
    ]
    start = time.perf_counter()
    for body, token in reports:
        answer = client.post(
            "/monitor",
            data=body,
            content_type="application/json",
            headers={"Authorization": token},
        )
        assert answer.status_code == 200, answer.get_json()
    return count / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    args = parser.parse_args(argv)
    sizes = [100, 1000] if args.quick else [100, 1000, 5000]
    print("convergence test, per report after N reports of one pod")
    print(f"{'N':>6} {'windowed us':>12} {'reference us':>13} {'reference/ours':>15}")
    for n in sizes:
        ours = per_report_us(ConvergenceTracker, n)
        theirs = per_report_us(ReferenceTracker, n)
        print(f"{n:>6} {ours:>12.1f} {theirs:>13.1f} {theirs / ours:>14.1f}x")
    pods, reports = (32, 50) if args.quick else (256, 500)
    print(
        f"\nmemory: {memory_per_pod(pods, reports) / 1024:.1f} KiB per tracked pod "
        f"({pods} pods, {reports} reports each)"
    )
    count = 500 if args.quick else 5000
    # Alternated, best of three each: the machine is shared and noisy.
    plain = checked = 0.0
    for _ in range(3):
        plain = max(plain, reports_per_second(count, auth="none"))
        checked = max(checked, reports_per_second(count))
    print(
        f"HTTP: {checked:.0f} reports/s through the app with each pod's token checked "
        f"(TokenReview once per pod, then cached), {plain:.0f} without: "
        f"{checked / plain:.2f}x, one thread ({count} reports of 32 pods)"
    )


if __name__ == "__main__":
    main()
