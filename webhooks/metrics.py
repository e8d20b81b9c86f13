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

Only what each process knows of its own answers is counted here: latency, sizes and codes
by hook. A pool's state and decisions are not: the webhook runs as several replicas, each
answering some of a pool's syncs, and none learns that a pool was deleted. The recorder
exports them, once, from the pools and Admissions it lists (``recorder/metrics.py``).

Names follow Prometheus' conventions (the unit last, ``_total`` on counters, base units);
``docs/metrics.md`` lists every metric with its type, labels, multiprocess aggregation and
meaning, and ``chart/dashboards/dragonet.json`` graphs them.
"""

from __future__ import annotations

import glob
import logging
import os
import platform
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import values as _values
from prometheus_client.mmap_dict import _INITIAL_MMAP_SIZE, MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

log = logging.getLogger("dragonet.metrics")

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
KiB, MiB = 1 << 10, 1 << 20

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 8.0, 10.0, 30.0)
_BYTES = (1 * KiB, 16 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)


def build_version() -> str:
    try:
        return version("dragonet")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


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
    """What the shell counts: its own answers. ``build_info`` is set as the app is made,
    so ``/metrics`` says something before the first hook request."""

    def __init__(self) -> None:
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
        self.build = Gauge(
            "dragonet_build_info",
            "Always 1: the version of Dragonet and of Python this webhook runs.",
            ["version", "python_version"],
            multiprocess_mode="max",
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

    def expose(self) -> bytes:
        """The exposition of every process's samples."""
        source: Any = self.registry
        if multiprocess():
            source = CollectorRegistry()
            MultiProcessCollector(source)
        return generate_latest(source)


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


def compact(pid: int, path: str | None = None) -> None:
    """Fold the files of an exited worker into one archive file per metric type (and gauge
    mode) and delete them; a counter's or a histogram's samples add up, a ``mostrecent``
    gauge keeps its newest value. Runs in gunicorn's master, the archives' only writer,
    and never raises: a file it cannot fold (the directory full, unwritable) stays as it
    is, still counted by every scrape."""
    path = path or os.environ.get(MULTIPROC_DIR, "")
    if not path:
        return
    for dead in glob.glob(os.path.join(path, f"*_{pid}.db")):
        try:
            _fold(dead, pid, path)
        except Exception as err:  # the master must outlive any metrics file
            log.error(
                "could not fold the metrics of exited worker %d into the archive: %s; "
                "its file %s stays and is still counted",
                pid,
                err,
                dead,
            )


def _fold(dead: str, pid: int, path: str) -> None:
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
