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

Metrics never cost an answer nor a process. prometheus-client grows its files sparse and
writes them through ``mmap``: on a full filesystem (the chart's memory-backed volume) such
a write faults on a page nothing backs and the process dies of SIGBUS, a worker at its
first new series and then the master as it compacts. Here every file's space is reserved
(``posix_fallocate``) before a byte is written into it (``_Reserved``), so a full or
unwritable directory is an ``OSError``: the process stops counting (``Metrics.lost``, logged
once) and answers on; the master's compaction leaves the exited worker's file as it is.

A deleted pool is never announced to the webhook (the pools' CompositeController has no
finalize hook), but every live pool is synced at least at each Metacontroller relist
(``--cache-flush-interval``, 30 min by default): a pool not answered for ``POOL_TTL_SECONDS``
is gone, and its series leave ``/metrics`` (and the archives, when the master compacts).

Names follow Prometheus' conventions (the unit last, ``_total`` on counters, base units);
``docs/metrics.md`` lists every metric with its type, labels, multiprocess aggregation and
meaning, and ``chart/dashboards/dragonet.json`` graphs them. A pool's gauges hold what its
last answered sync said, whichever process answered it (``mostrecent``): summing them over
processes would count a pool once per process that ever synced it.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import platform
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import values as _values
from prometheus_client.metrics_core import Metric
from prometheus_client.mmap_dict import _INITIAL_MMAP_SIZE, MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

from policy.model.timeutil import format_time, parse_time

log = logging.getLogger("dragonet.metrics")

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
# A pool answered no longer ago than this is alive: four of Metacontroller's relists
# (--cache-flush-interval, 30 min by default), each of which syncs every live pool.
POOL_TTL_SECONDS = 2 * 3600.0
LAST_SYNC = "dragonet_pool_last_sync_timestamp_seconds"
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


_fallocate = getattr(os, "posix_fallocate", None)  # (Linux; elsewhere files stay sparse)


def _reserve(fd: int, size: int) -> None:
    if _fallocate is not None:
        _fallocate(fd, 0, size)


class _Reserved(MmapedDict):
    """prometheus-client's file of samples with its space reserved before anything is
    written through its map, at creation and at each doubling: where the library's sparse
    file would die of SIGBUS on a full filesystem, this raises ``OSError`` (ENOSPC) and
    writes nothing."""

    def __init__(self, filename: str, read_mode: bool = False) -> None:
        if not read_mode:
            fd = os.open(filename, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                try:
                    _reserve(fd, max(size, _INITIAL_MMAP_SIZE))
                except OSError:
                    if size == 0:  # an empty *.db breaks every scrape's read of the directory
                        os.remove(filename)
                    raise
            finally:
                os.close(fd)
        super().__init__(filename, read_mode)

    def _init_value(self, key: str) -> None:
        encoded = len(key.encode("utf-8"))
        entry = 4 + encoded + (8 - (encoded + 4) % 8) + 16  # as the library packs it
        capacity = self._capacity
        while self._used + entry > capacity:
            capacity *= 2
        if capacity > self._capacity:
            _reserve(self._f.fileno(), capacity)
        super()._init_value(key)


# prometheus-client opens its files by this module-level name (values.MultiProcessValue).
_values.MmapedDict = _Reserved  # type: ignore[attr-defined,misc]


class Metrics:
    """What the shell counts. Pool gauges hold the pool as of the last sync this pod
    answered (``mostrecent`` across the pod's processes). ``build_info`` is set as the
    app is made, so ``/metrics`` says something before the first hook request."""

    def __init__(self, pool_ttl_seconds: float = POOL_TTL_SECONDS) -> None:
        self.pool_ttl_seconds = pool_ttl_seconds
        # Why this process stopped counting (its metrics directory is full or unwritable).
        self.lost: OSError | None = None
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
        self.last_sync = Gauge(
            LAST_SYNC,
            "When the pool's last sync was answered (Unix time); a pool not answered for "
            "two hours is gone and its series leave /metrics.",
            ["pool"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self._safely(lambda: self.build.labels(build_version(), platform.python_version()).set(1))

        # Each labelled series, looked up once: the very child ``labels`` returns, without
        # its checks and lock on every request (a series appears once first observed).
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def _safely(self, count: Callable[[], None]) -> None:
        """``count()``, unless this process has lost its metrics; the first ``OSError``
        (the directory full or unwritable) loses them, logged once."""
        if self.lost is not None:
            return
        try:
            count()
        except OSError as err:
            self.lost = err
            log.error(
                "metrics are lost in this process from now on (pid %d): %s; "
                "its answers go on (PROMETHEUS_MULTIPROC_DIR=%s)",
                os.getpid(),
                err,
                os.environ.get(MULTIPROC_DIR, ""),
            )

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
        self._safely(lambda: self._hook_answer(hook, code, seconds, request_bytes, size))

    def _hook_answer(
        self, hook: str, code: int, seconds: float, request_bytes: int | None, size: int | None
    ) -> None:
        self._series(self.latency, hook).observe(seconds)
        self._series(self.answers, hook, str(code)).inc()
        if request_bytes is not None:
            self._series(self.request_bytes, hook).observe(request_bytes)
        if size is not None:
            self._series(self.response_bytes, hook).observe(size)

    def expose(self, now: float | None = None) -> bytes:
        """The exposition of every process's samples, without the series of pools not
        answered for ``pool_ttl_seconds`` before ``now`` (default: the time)."""
        source: Any = self.registry
        if multiprocess():
            source = CollectorRegistry()
            MultiProcessCollector(source)
        cutoff = (time.time() if now is None else now) - self.pool_ttl_seconds
        return generate_latest(_Alive(source, cutoff))  # type: ignore[arg-type]

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
        self._safely(lambda: self._pool_answer(pool, scaled, status, waits))

    def _pool_answer(
        self, pool: str, scaled: tuple[str, ...], status: Any, waits: tuple[float, ...]
    ) -> None:
        self._series(self.last_sync, pool).set(time.time())
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
    container keeps its emptyDir) would be counted again. A directory that cannot be made
    or emptied costs the metrics (each process says so as it fails to count), never the
    server's start."""
    try:
        os.makedirs(path, exist_ok=True)
        for name in glob.glob(os.path.join(path, "*.db")):
            os.remove(name)
    except OSError as err:
        log.error("the metrics directory %s cannot be prepared: %s", path, err)


_FOLD = {
    "counter": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "histogram": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "summary": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "gauge_sum": lambda old, new: (old[0] + new[0], max(old[1], new[1])),
    "gauge_max": max,
    "gauge_min": min,
    "gauge_mostrecent": lambda old, new: new if new[1] > old[1] else old,
}


def compact(
    pid: int, path: str | None = None, now: float | None = None, ttl: float = POOL_TTL_SECONDS
) -> None:
    """Fold the files of an exited worker into one archive file per metric type (and gauge
    mode) and delete them; a counter's or a histogram's samples add up, a ``mostrecent``
    gauge keeps its newest value, and the series of pools gone (not answered for ``ttl``
    seconds before ``now``) are left out. Runs in gunicorn's master, the archives' only
    writer, and never raises: a file it cannot fold (the directory full, unwritable) stays
    as it is, still counted by every scrape."""
    path = path or os.environ.get(MULTIPROC_DIR, "")
    if not path:
        return
    try:
        gone = _gone_pools(path, (time.time() if now is None else now) - ttl)
    except Exception as err:  # an unreadable file: keep every series
        log.error("could not read the pools' last syncs in %s: %s", path, err)
        gone = frozenset()
    for dead in glob.glob(os.path.join(path, f"*_{pid}.db")):
        try:
            _fold(dead, pid, path, gone)
        except Exception as err:  # the master must outlive any metrics file
            log.error(
                "could not fold the metrics of exited worker %d into the archive: %s; "
                "its file %s stays and is still counted",
                pid,
                err,
                dead,
            )


def _fold(dead: str, pid: int, path: str, gone: frozenset[str]) -> None:
    kind = os.path.basename(dead)[: -len(f"_{pid}.db")]  # counter, gauge_mostrecent, ...
    if kind.startswith("gauge_live"):
        os.remove(dead)  # a live-only gauge dies with its process
        return
    fold = _FOLD.get(kind)
    if fold is None:
        return  # gauge_all: one series per process, by design
    archive = os.path.join(path, f"{kind}_archive.db")
    values: dict[str, tuple[float, float]] = {}
    for source in (archive, dead):
        if not os.path.exists(source):
            continue
        for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(source):
            if gone and _pool_of(key) in gone:
                continue
            new = (value, timestamp)
            values[key] = fold(values[key], new) if key in values else new
    tmp = archive + ".tmp"  # not *.db: a scrape meanwhile reads the old archive
    try:
        out = _Reserved(tmp)
        try:
            for key, (value, timestamp) in values.items():
                out.write_value(key, value, timestamp)
        finally:
            out.close()
        os.replace(tmp, archive)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.remove(dead)


def _pool_of(key: str) -> str | None:
    """The ``pool`` label of a sample's key in a file (prometheus-client's ``mmap_key``)."""
    try:
        labels = json.loads(key)[2]
    except (ValueError, IndexError, TypeError):
        return None
    pool = labels.get("pool") if isinstance(labels, dict) else None
    return pool if isinstance(pool, str) else None


def _gone_pools(path: str, cutoff: float) -> frozenset[str]:
    """The pools whose last answered sync, in any process's file, is older than ``cutoff``."""
    last: dict[str, float] = {}
    for name in glob.glob(os.path.join(path, "gauge_*mostrecent_*.db")):
        try:
            found = MmapedDict.read_all_values_from_file(name)
        except FileNotFoundError:  # a live gauge's file, removed meanwhile
            continue
        for key, value, _, _ in found:
            if key.startswith(f'["{LAST_SYNC}"'):
                pool = _pool_of(key)
                if pool is not None:
                    last[pool] = max(value, last.get(pool, value))
    return _older(last.items(), cutoff)


def _older(last: Iterable[tuple[str | None, float]], cutoff: float) -> frozenset[str]:
    return frozenset(pool for pool, at in last if pool is not None and at < cutoff)


class _Alive:
    """A registry's collection without the series of pools gone: their last answered
    sync (``LAST_SYNC``) is older than ``cutoff``."""

    def __init__(self, source: Any, cutoff: float) -> None:
        self.source, self.cutoff = source, cutoff

    def collect(self) -> Iterator[Metric]:
        families = list(self.source.collect())
        last = [
            (s.labels.get("pool"), s.value)
            for f in families
            if f.name == LAST_SYNC
            for s in f.samples
        ]
        gone = _older(last, self.cutoff)
        for family in families:
            if gone:
                family.samples = [s for s in family.samples if s.labels.get("pool") not in gone]
            yield family
