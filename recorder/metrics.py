"""The pools' metrics, exported by the one process that lists every pool: the recorder.

The webhook runs as several replicas, each answering some of a pool's syncs: what one
replica answered last is not what another did, and none of them learns that a pool was
deleted. So a pool's metrics are exported as kube-state-metrics exports objects: by one
writer (the recorder, one replica) from the objects it lists anyway to tell the jobs'
stories.

* **State** (``dragonet_pool_queued_jobs``, ``_nodes``, ``_capacity``, ``_allocated``,
  ...) is each TrainingPool's ``status`` as the recorder's informer holds it (its cache:
  the last whole list and every change watched since), read at scrape time: a deleted
  pool is gone from the cache, and its series are gone at once.
* **Decisions** (``dragonet_pool_decisions_total{pool, reason}``): the pool's admissions,
  preemptions, shrinks, grows and migrations, the facts ``recorder.story`` derives from
  the Admissions (the same facts its Events tell), each counted once: a fact is known by
  its object, reason and identity, and counted again only when it happened again (a
  later time). The webhook replicas that decided it, and how often they answered it, do
  not matter. What the objects already hold when the recorder starts is not counted:
  its counters start at 0, and counting the past would read as a burst to ``rate()``.
* **Queue waits** (``dragonet_pool_queue_wait_seconds{pool}``): with each admission
  counted, its job's wait from ``status.enqueueTime`` (else its creation) to the
  Admission's ``admittedTime``.

The series of a pool that is no longer listed (deleted) leave ``/metrics`` with the
listing that misses it. The informers' caches are read as listings (``follow``): whenever
one has changed, at most once a second from the recorder's loop, and at every scrape.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from policy.model.pool import ADMISSION_KIND, POOL_KIND
from policy.model.timeutil import parse_time
from recorder.story import admission_facts
from webhooks.health import build_info

# The facts counted, by their Events' reason: a fixed set (the label is bounded by it).
COUNTED = ("Admitted", "Preempted", "Shrunk", "Grown", "Migrated")
PHASES = ("Queued", "Admitted")
# From a few seconds (the next pool sync) to a day (a job behind a long queue).
WAIT_SECONDS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)

FactKey = tuple[str, str, str, str, str, str]  # kind, namespace, name, uid, reason, identity
JobKey = tuple[str, str, str]  # kind, namespace, name


def unit(resource: str) -> str:
    """The unit of a resource's quantities, as kube-state-metrics labels them."""
    if resource == "cpu":
        return "core"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return "byte"
    return "integer"


def _quantities(raw: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(raw, Mapping):
        return ()
    from kubernetes.utils.quantity import parse_quantity

    out = []
    for resource, quantity in sorted(raw.items()):
        try:
            out.append((str(resource), float(parse_quantity(quantity))))
        except (ValueError, TypeError, ArithmeticError):
            continue  # not a quantity: no sample rather than a wrong one
    return tuple(out)


def _count(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class PoolState:
    """What a TrainingPool's status says, as its gauges show it."""

    name: str
    queued: int | None
    admitted: int | None
    nodes: int | None
    capacity: tuple[tuple[str, float], ...]
    allocated: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> PoolState | None:
        name = _map(obj.get("metadata")).get("name")
        if not isinstance(name, str) or not name:
            return None
        status = _map(obj.get("status"))
        return cls(
            name,
            _count(status.get("queued")),
            _count(status.get("admitted")),
            _count(status.get("nodes")),
            _quantities(status.get("capacity")),
            _quantities(status.get("allocated")),
        )


class _PoolGauges:
    """The gauges of the pools in the last complete listing, made at each scrape."""

    def __init__(self) -> None:
        self.pools: tuple[PoolState, ...] = ()  # replaced whole by each listing

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        queued, admitted, jobs, nodes, capacity, allocated = families
        for p in self.pools:  # one reference: a listing meanwhile replaces the tuple
            for gauge, value, phase in (
                (queued, p.queued, "Queued"),
                (admitted, p.admitted, "Admitted"),
            ):
                if value is not None:
                    gauge.add_metric([p.name], value)
                    jobs.add_metric([p.name, phase], value)
            if p.nodes is not None:
                nodes.add_metric([p.name], p.nodes)
            for family, quantities in ((capacity, p.capacity), (allocated, p.allocated)):
                for resource, value in quantities:
                    family.add_metric([p.name, resource, unit(resource)], value)
        return iter(families)

    @staticmethod
    def _families() -> list[GaugeMetricFamily]:
        def g(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        return [
            g(
                "dragonet_pool_queued_jobs",
                "Jobs waiting in the pool's queue (its status.queued).",
                ["pool"],
            ),
            g(
                "dragonet_pool_admitted_jobs",
                "Jobs the pool has admitted (its status.admitted).",
                ["pool"],
            ),
            g(
                "dragonet_pool_jobs",
                "Jobs of the pool by phase (Queued: waiting in its queue; Admitted: may run).",
                ["pool", "phase"],
            ),
            g("dragonet_pool_nodes", "Nodes the pool schedules onto (its status.nodes).", ["pool"]),
            g(
                "dragonet_pool_capacity",
                "Allocatable resources of the pool's nodes, by resource (nvidia.com/gpu: GPUs), "
                "in the unit the unit label names.",
                ["pool", "resource", "unit"],
            ),
            g(
                "dragonet_pool_allocated",
                "Resources the pods on the pool's nodes request, by resource, in the unit the "
                "unit label names.",
                ["pool", "resource", "unit"],
            ),
        ]


class _Refresh:
    """A collector that collects nothing: registered first, it brings the metrics up to
    date with the informers' caches before the others are collected."""

    def __init__(self, refresh: Any) -> None:
        self._refresh = refresh

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> list[Metric]:
        self._refresh()
        return []


class Listed(Protocol):
    """What ``follow`` reads: an informer's cache (``recorder.informer.Cache``)."""

    version: int
    synced: bool

    def items(self) -> list[Mapping[str, Any]]: ...


class RecorderMetrics:
    """The recorder's ``/metrics``: the pools' (module docstring) and its own."""

    def __init__(self, clock: Any = time.time) -> None:
        self._clock = clock
        self.registry = r = CollectorRegistry()
        self._lock = threading.Lock()
        self._followed: list[tuple[str, str, Listed]] = []
        self._read: dict[str, int] = {}  # each followed cache's version as last read
        r.register(_Refresh(self.refresh))  # type: ignore[arg-type]
        self._gauges = _PoolGauges()
        r.register(self._gauges)  # type: ignore[arg-type]
        self.decisions = Counter(
            "dragonet_pool_decisions",
            "The pool's decisions about its jobs, each counted once as the recorder sees it "
            "in the Admissions, by reason: Admitted, Preempted, Shrunk, Grown, Migrated.",
            ["pool", "reason"],
            registry=r,
        )
        self.queue_wait = Histogram(
            "dragonet_pool_queue_wait_seconds",
            "Time from a job's enqueueTime to its admission (admittedTime), observed once "
            "per admission.",
            ["pool"],
            buckets=WAIT_SECONDS,
            registry=r,
        )
        self.listed = Gauge(
            "dragonet_recorder_listed_timestamp_seconds",
            "When each resource was last listed whole (Unix time): the pools' gauges are as "
            "of their listing.",
            ["resource"],
            registry=r,
        )
        self.calls = Counter(
            "dragonet_recorder_api_calls",
            "The recorder's Kubernetes API calls, by call and result (ok, or the HTTP status "
            "of the error; error: no answer).",
            ["call", "result"],
            registry=r,
        )
        build_info(r, "recorder")
        # Each counted fact, by key, with the time it last happened; None until the first
        # listing of the Admissions (what it holds is the past, not counted).
        self._seen: dict[FactKey, datetime] | None = None
        self._counted_pools: set[str] = set()
        self._enqueued: dict[JobKey, datetime] = {}
        self._waiting: dict[JobKey, tuple[str, datetime]] = {}  # admitted, job not yet read

    # --- what the recorder lists -----------------------------------------------------

    def follow(self, caches: Iterable[tuple[str, str, Listed]]) -> None:
        """Read these caches (kind, plural, cache), in this order, as listings."""
        self._followed = list(caches)

    def refresh(self) -> None:
        """Each followed cache that changed since it was last read, as a whole listing
        (from the loop and from each scrape: one at a time)."""
        with self._lock:
            for kind, plural, cache in self._followed:
                version = cache.version
                if not cache.synced or self._read.get(plural) == version:
                    continue
                self._read[plural] = version
                self.resource_listed(kind, plural, cache.items())

    def resource_listed(self, kind: str, plural: str, items: list[Mapping[str, Any]]) -> None:
        """A whole listing of one resource (none when the listing failed part-way)."""
        self.listed.labels(plural).set(self._clock())
        if kind == POOL_KIND:
            self.pools_listed(items)
        elif kind == ADMISSION_KIND:
            self.admissions_listed(items)
        else:
            self.jobs_listed(kind, items)

    def pools_listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        pools = tuple(p for p in (PoolState.of(obj) for obj in items) if p is not None)
        self._gauges.pools = pools
        names = {p.name for p in pools}
        for name in names - self._counted_pools:  # at 0 from the start: rate() sees the first
            for reason in COUNTED:
                self.decisions.labels(name, reason)
            self.queue_wait.labels(name)
        for name in self._counted_pools - names:  # deleted: its series go
            for reason in COUNTED:
                self._remove(self.decisions, name, reason)
            self._remove(self.queue_wait, name)
        self._counted_pools = names

    def admissions_listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        first = self._seen is None
        seen = self._seen or {}
        now: dict[FactKey, datetime] = {}
        for obj in items:
            pool = _map(obj.get("spec")).get("pool")
            if not isinstance(pool, str) or not pool:
                continue
            for f in admission_facts(obj):
                if f.reason not in COUNTED or f.at is None:
                    continue
                r = f.regarding
                key = (r.kind, r.namespace, r.name, r.uid, f.reason, f.identity)
                before = seen.get(key)
                if not first and (before is None or f.at > before):
                    self._happened(pool, f.reason, (r.kind, r.namespace, r.name), f.at)
                now[key] = f.at if before is None else max(before, f.at)
        self._seen = now  # a fact its objects no longer hold is forgotten

    def jobs_listed(self, kind: str, items: Iterable[Mapping[str, Any]]) -> None:
        enqueued = {k: v for k, v in self._enqueued.items() if k[0] != kind}
        for obj in items:
            meta = _map(obj.get("metadata"))
            when = parse_time(_map(obj.get("status")).get("enqueueTime")) or parse_time(
                meta.get("creationTimestamp")
            )
            name, namespace = meta.get("name"), meta.get("namespace")
            if when is not None and isinstance(name, str) and isinstance(namespace, str):
                enqueued[(kind, namespace, name)] = when
        self._enqueued = enqueued
        for job in [j for j in self._waiting if j[0] == kind]:
            pool, admitted = self._waiting.pop(job)
            self._wait(pool, job, admitted)  # or never: the job is gone, or queued again

    def api_call(self, call: str, result: str) -> None:
        self.calls.labels(call, result).inc()

    # --- counting ----------------------------------------------------------------------

    def _happened(self, pool: str, reason: str, job: JobKey, at: datetime) -> None:
        self.decisions.labels(pool, reason).inc()
        if reason == "Admitted" and not self._wait(pool, job, at):
            self._waiting[job] = (pool, at)  # its job's next listing says since when

    def _wait(self, pool: str, job: JobKey, admitted: datetime) -> bool:
        enqueued = self._enqueued.get(job)
        if enqueued is None or enqueued > admitted:  # unknown, or that of a later spell
            return False
        self.queue_wait.labels(pool).observe((admitted - enqueued).total_seconds())
        return True

    @staticmethod
    def _remove(metric: Any, *labels: str) -> None:
        with contextlib.suppress(KeyError):
            metric.remove(*labels)
