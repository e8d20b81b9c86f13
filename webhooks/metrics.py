"""Prometheus metrics of the webhook (``/metrics``), correct across gunicorn's processes.

Under ``dragonet serve`` every worker process writes its samples to files in
``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode) and ``/metrics``, in
whichever worker answers it, adds up all of them: a scrape sees the whole pod, not one
random process. When a worker exits (recycled after ``max_requests``, killed, replaced),
the master folds its counters and histograms into one archive file per type
(``compact``): totals never go backwards, and the directory, a memory-backed volume in the
chart, stays as large as the number of live workers, not the number that ever lived.

Outside ``dragonet serve`` (tests, the simulator, ``dragonet render``) each app counts in
its own registry.

Names follow Prometheus' conventions (the unit last, ``_total`` on counters, base units);
``docs/metrics.md`` lists every metric with its type, labels, multiprocess aggregation and
meaning, and ``chart/dashboards/dragonet.json`` graphs them. A pool's gauges hold what its
last answered sync said, whichever process answered it (``mostrecent``): summing them over
processes would count a pool once per process that ever synced it.
"""

from __future__ import annotations

import glob
import os
import platform
import re
from collections.abc import Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

from policy.model.timeutil import format_time, parse_time

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
KiB, MiB = 1 << 10, 1 << 20

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 8.0, 10.0, 30.0)
_BYTES = (1 * KiB, 16 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)
# From a few seconds (the next pool sync) to a day (a job behind a long queue).
_WAIT_SECONDS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
ADMISSIONS = "Admission.dragonet.io/v1alpha1"  # Metacontroller's map key for Admissions
_ENQUEUED = re.compile(rb'"enqueueTime":"([^"]+)"')


def build_version() -> str:
    try:
        return version("dragonet")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


def unit(resource: str) -> str:
    """The unit of a resource's quantities, as kube-state-metrics labels them."""
    if resource == "cpu":
        return "core"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return "byte"
    return "integer"


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_DIR))


class Metrics:
    """What the shell counts. Pool gauges hold the pool as of the last sync this pod
    answered (``mostrecent`` across the pod's processes). ``build_info`` is set as the
    app is made, so ``/metrics`` says something before the first hook request."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.latency = Histogram(
            "dragonet_hook_duration_seconds",
            "Time from a hook request's arrival to its answer, by hook path.",
            ["hook"],
            buckets=_SECONDS,
            registry=r,
        )
        self.request_bytes = Histogram(
            "dragonet_hook_request_bytes",
            "Size of hook request bodies (as declared by Content-Length), by hook path.",
            ["hook"],
            buckets=_BYTES,
            registry=r,
        )
        self.response_bytes = Histogram(
            "dragonet_hook_response_bytes",
            "Size of hook answers, by hook path.",
            ["hook"],
            buckets=_BYTES,
            registry=r,
        )
        self.answers = Counter(
            "dragonet_hook_answers",
            "Hook answers by hook path and HTTP status code.",
            ["hook", "code"],
            registry=r,
        )
        self.queued = Gauge(
            "dragonet_pool_queued_jobs",
            "Jobs waiting in the pool's queue (status.queued of its last sync).",
            ["pool"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.admitted = Gauge(
            "dragonet_pool_admitted_jobs",
            "Jobs the pool has admitted (status.admitted of its last sync).",
            ["pool"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.scaled = Counter(
            "dragonet_pool_scale_actions",
            "Worker targets the pool changed (an answered Admission with a new lastScale), "
            "by direction (up: grown, down: shrunk).",
            ["pool", "direction"],
            registry=r,
        )
        self.jobs = Gauge(
            "dragonet_pool_jobs",
            "Jobs of the pool by phase (Queued: waiting in its queue; Admitted: may run), "
            "as of its last sync.",
            ["pool", "phase"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.nodes = Gauge(
            "dragonet_pool_nodes",
            "Nodes the pool schedules onto, as of its last sync.",
            ["pool"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.capacity = Gauge(
            "dragonet_pool_capacity",
            "Allocatable resources of the pool's nodes, by resource (nvidia.com/gpu: GPUs), "
            "in the unit the unit label names.",
            ["pool", "resource", "unit"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.allocated = Gauge(
            "dragonet_pool_allocated",
            "Resources the pods on the pool's nodes request (allocated to them), by resource, "
            "in the unit the unit label names.",
            ["pool", "resource", "unit"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.queue_wait = Histogram(
            "dragonet_pool_queue_wait_seconds",
            "Time from a job's enqueueTime to its admission, observed as the pool admits it.",
            ["pool"],
            buckets=_WAIT_SECONDS,
            registry=r,
        )
        self.build = Gauge(
            "dragonet_build_info",
            "Always 1: the version of Dragonet and of Python this webhook runs.",
            ["version", "python_version"],
            multiprocess_mode="max",
            registry=r,
        )
        self.build.labels(build_version(), platform.python_version()).set(1)

        # Each labelled series, looked up once: the very child ``labels`` returns, without
        # its checks and lock on every request (a series appears once first observed).
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def _series(self, metric: Any, *values: str) -> Any:
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def hook_answer(
        self, hook: str, code: int, seconds: float, request_bytes: int | None, size: int | None
    ) -> None:
        """Count one answer of a hook: its latency, its code, and the sizes known."""
        self._series(self.latency, hook).observe(seconds)
        self._series(self.answers, hook, str(code)).inc()
        if request_bytes is not None:
            self._series(self.request_bytes, hook).observe(request_bytes)
        if size is not None:
            self._series(self.response_bytes, hook).observe(size)

    def expose(self) -> bytes:
        if multiprocess():
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)

    def pool_answer(
        self,
        pool: str,
        scaled: tuple[str, ...],
        status: Any,
        waits: tuple[float, ...] = (),
    ) -> None:
        """Count what one pool sync decided: its queue, nodes and resources, each
        Admission whose lastScale differs from the one Metacontroller sent
        (``PoolDecision.scaled``) and the wait of each job it newly admitted
        (``queue_waits``)."""
        if isinstance(status, Mapping):
            for gauge, key in ((self.queued, "queued"), (self.admitted, "admitted")):
                value = status.get(key)
                if isinstance(value, int):
                    self._series(gauge, pool).set(value)
                    self._series(self.jobs, pool, key.capitalize()).set(value)
            if isinstance(status.get("nodes"), int):
                self._series(self.nodes, pool).set(status["nodes"])
            for gauge, key in ((self.capacity, "capacity"), (self.allocated, "allocated")):
                self._resources(gauge, pool, status.get(key))
        for direction in scaled:
            self._series(self.scaled, pool, direction).inc()
        for seconds in waits:
            self._series(self.queue_wait, pool).observe(seconds)

    def _resources(self, gauge: Any, pool: str, quantities: Any) -> None:
        if not isinstance(quantities, Mapping):
            return
        # Loaded by create_app already (webhooks/app.py): importing this module, as `render`
        # does, must not load the Kubernetes client.
        from kubernetes.utils.quantity import parse_quantity

        for resource, quantity in quantities.items():
            try:
                value = float(parse_quantity(quantity))
            except (ValueError, TypeError, ArithmeticError):
                continue  # not a quantity: no sample rather than a wrong one
            self._series(gauge, pool, str(resource), unit(str(resource))).set(value)


def queue_waits(
    answered: list[dict[str, Any]],
    observed: Mapping[str, Any],
    related: Mapping[str, Any],
    now: datetime,
) -> tuple[float, ...]:
    """Seconds each job waited, for every Admission this sync admits: answered Admitted
    with ``admittedTime`` ``now`` (the pool writes the time of the sync that admits a job,
    once) that the observed one (the request's children) does not have yet; from the job's
    ``enqueueTime`` (its status, in ``related``) to then. An admission answered again by a
    later sync (Metacontroller had not applied it yet) carries the earlier time and is not
    counted again. Only admitted answers are read, and only newly admitted jobs decoded."""
    stamp = format_time(now)
    # The request is Metacontroller's, but any part of it may be broken (the plan leaves
    # out what it cannot read): a counter reads only what is a map.
    known = _map(observed.get(ADMISSIONS))
    waits: list[float] = []
    for child in answered:
        spec = child.get("spec") or {}
        if spec.get("admittedTime") != stamp or spec.get("phase") != "Admitted":
            continue
        meta = child.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        before = known.get(key)
        raw = getattr(before, "raw", None)
        if raw is not None and f'"admittedTime":"{stamp}"'.encode() in raw:
            continue
        if raw is None and _map(_map(before).get("spec")).get("admittedTime") == stamp:
            continue
        job = spec.get("job") or {}
        tkey = f"{job.get('kind')}.{job.get('apiVersion')}"
        found = _map(related.get(tkey)).get(f"{meta.get('namespace')}/{job.get('name')}")
        enqueued = _enqueue_time(found)
        if enqueued is not None and now >= enqueued:
            waits.append((now - enqueued).total_seconds())
    return tuple(waits)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _enqueue_time(job: Any) -> datetime | None:
    """The job's ``status.enqueueTime``, else its creation time (a job the pool admits in
    its first sync has no status yet)."""
    if job is None:
        return None
    raw = getattr(job, "raw", None)
    if raw is not None:
        found = _ENQUEUED.search(raw)
        if found is not None:
            return parse_time(found.group(1).decode())
    status = job.get("status") if isinstance(job, Mapping) else None
    when = status.get("enqueueTime") if isinstance(status, Mapping) else None
    meta = job.get("metadata") if isinstance(job, Mapping) else None
    created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    return parse_time(when) or parse_time(created)


def prepare(path: str) -> None:
    """Start a server with an empty directory: files of an earlier run (a restarted
    container keeps its emptyDir) would be counted again."""
    os.makedirs(path, exist_ok=True)
    for name in glob.glob(os.path.join(path, "*.db")):
        os.remove(name)


_FOLD = {
    "counter": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "histogram": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "summary": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "gauge_sum": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "gauge_max": max,
    "gauge_min": min,
    "gauge_mostrecent": lambda old, new: new if new[1] > old[1] else old,
}


def compact(pid: int, path: str | None = None) -> None:
    """Fold the files of an exited worker into one archive file per metric type (and gauge
    mode) and delete them; a counter's or a histogram's samples add up, a ``mostrecent``
    gauge keeps its newest value. Runs in gunicorn's master, the archives' only writer."""
    path = path or os.environ.get(MULTIPROC_DIR, "")
    if not path:
        return
    for dead in glob.glob(os.path.join(path, f"*_{pid}.db")):
        kind = os.path.basename(dead)[: -len(f"_{pid}.db")]  # counter, gauge_mostrecent, ...
        if kind.startswith("gauge_live"):
            os.remove(dead)  # a live-only gauge dies with its process
            continue
        fold = _FOLD.get(kind)
        if fold is None:
            continue  # gauge_all: one series per process, by design
        archive = os.path.join(path, f"{kind}_archive.db")
        values: dict[str, tuple[float, float]] = {}
        for source in (archive, dead):
            if not os.path.exists(source):
                continue
            for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(source):
                new = (value, timestamp)
                values[key] = fold(values[key], new) if key in values else new
        tmp = archive + ".tmp"  # not *.db: a scrape meanwhile reads the old archive
        out = MmapedDict(tmp)
        try:
            for key, (value, timestamp) in values.items():
                out.write_value(key, value, timestamp)
        finally:
            out.close()
        os.replace(tmp, archive)
        os.remove(dead)
