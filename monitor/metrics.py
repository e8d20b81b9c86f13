"""Prometheus metrics of the monitor (``/metrics``). The monitor is one process (its
records live in memory), so one registry is the whole truth."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MonitorMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.reports = Counter(
            "dragonet_monitor_reports",
            "POST /monitor answers by HTTP status code.",
            ["code"],
            registry=r,
        )
        self.tracked = Gauge(
            "dragonet_monitor_tracked_pods",
            "Pods whose reports the monitor keeps, by convergence category.",
            ["category"],
            registry=r,
        )
        self.forgotten = Counter(
            "dragonet_monitor_forgotten_pods",
            "Pods forgotten after reporting nothing for DRAGONET_MONITOR_FORGET_SECONDS.",
            registry=r,
        )
        self.requests = Counter(
            "dragonet_monitor_migration_requests",
            "Migration requests by reason (Converged, Overloaded) and result (created, "
            "exists: one is already there, retried: a Refused one was replaced, throttled, "
            "gone: the pod no longer exists, error).",
            ["reason", "result"],
            registry=r,
        )
        self.speeds = Counter(
            "dragonet_monitor_speed_reports",
            "POST /throughput reports taken, by result (taken, written: the job's history "
            "was patched, unchanged, gone, error).",
            ["result"],
            registry=r,
        )
        self.api_errors = Counter(
            "dragonet_monitor_api_errors",
            "Kubernetes API calls that failed, by call.",
            ["call"],
            registry=r,
        )
        self.node_load = Gauge(
            "dragonet_monitor_node_load",
            "This node's load (mean of cpu and memory, the larger of requested and used, "
            "as a share of allocatable).",
            registry=r,
        )
        self.pool_mean = Gauge(
            "dragonet_monitor_pool_load_mean", "Mean load of the pool's nodes.", registry=r
        )
        self.pool_std = Gauge(
            "dragonet_monitor_pool_load_stddev",
            "Population standard deviation of the pool's node loads.",
            registry=r,
        )
        self.overloaded = Gauge(
            "dragonet_monitor_node_overloaded",
            "1 when this node's load exceeds the pool's mean by more than threshold x std.",
            registry=r,
        )

    def expose(self) -> bytes:
        return generate_latest(self.registry)
