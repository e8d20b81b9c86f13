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
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
KiB, MiB = 1 << 10, 1 << 20

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 8.0, 10.0, 30.0)
_BYTES = (1 * KiB, 16 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_DIR))


class Metrics:
    """What the shell counts. Pool gauges hold the pool as of the last sync this pod
    answered (``mostrecent`` across the pod's processes)."""

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

    def pool_answer(self, pool: str, scaled: tuple[str, ...], status: Any) -> None:
        """Count what one pool sync decided: its queue, and each Admission whose lastScale
        differs from the one Metacontroller sent (``PoolDecision.scaled``)."""
        if isinstance(status, Mapping):
            for gauge, key in ((self.queued, "queued"), (self.admitted, "admitted")):
                value = status.get(key)
                if isinstance(value, int):
                    self._series(gauge, pool).set(value)
        for direction in scaled:
            self._series(self.scaled, pool, direction).inc()


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
