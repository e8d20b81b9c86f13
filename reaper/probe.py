"""The reaper's probes and metrics, hooked in around its API client rather than into its
loop: each call beats its ``Pulse`` (``/healthz``, ``/readyz``) and is counted, and each
job it deletes is counted by kind."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from policy.model.jobs import JobKind
from reaper.kube import Jobs, plural
from webhooks.health import Pulse, api_result, build_info

T = TypeVar("T")


class ReaperMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.deleted = Counter(
            "dragonet_reaper_deleted_jobs",
            "Finished jobs deleted once their ttlSecondsAfterFinished had passed, by kind.",
            ["kind"],
            registry=r,
        )
        self.listed = Gauge(
            "dragonet_reaper_listed_timestamp_seconds",
            "When the jobs of each kind were last listed whole (Unix time).",
            ["kind"],
            registry=r,
        )
        self.calls = Counter(
            "dragonet_reaper_api_calls",
            "The reaper's Kubernetes API calls, by call and result (ok, or the HTTP status "
            "of the error; error: no answer).",
            ["call", "result"],
            registry=r,
        )
        build_info(r, "reaper")


class ObservedJobs:
    """``Jobs`` whose calls beat the pulse and are counted."""

    def __init__(self, jobs: Jobs, metrics: ReaperMetrics, pulse: Pulse, clock: Any) -> None:
        self._jobs, self._metrics, self._pulse, self._clock = jobs, metrics, pulse, clock

    def _call(self, name: str, make: Callable[[], T]) -> T:
        try:
            with self._pulse.call():
                out = make()
        except Exception as err:
            self._metrics.calls.labels(name, api_result(err)).inc()
            raise
        self._metrics.calls.labels(name, "ok").inc()
        return out

    def list(self, kind: JobKind) -> Iterator[Mapping[str, Any]]:
        items = self._call(f"list_{plural(kind)}", lambda: list(self._jobs.list(kind)))
        self._metrics.listed.labels(kind.kind).set(self._clock())
        return iter(items)

    def delete(self, kind: JobKind, namespace: str, name: str, uid: str) -> bool:
        gone = self._call(
            f"delete_{plural(kind)}", lambda: self._jobs.delete(kind, namespace, name, uid)
        )
        if gone:
            self._metrics.deleted.labels(kind.kind).inc()
        return gone
