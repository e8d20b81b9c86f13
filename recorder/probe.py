"""The recorder's probes and metrics, hooked in around its API clients rather than into its
loop: each call it makes beats its ``Pulse`` (``/healthz``, ``/readyz``) and is counted,
and each whole listing is handed to ``RecorderMetrics`` (the pools' metrics)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from recorder.kube import Objects, Resource
from recorder.metrics import RecorderMetrics
from recorder.write import Events
from webhooks.health import Pulse, api_result

T = TypeVar("T")


class _Observer:
    def __init__(self, metrics: RecorderMetrics, pulse: Pulse) -> None:
        self.metrics, self.pulse = metrics, pulse

    def call(self, name: str, make: Callable[[], T]) -> T:
        """``make()``, counted and beating the pulse whether it answers or fails."""
        try:
            with self.pulse.call():
                out = make()
        except Exception as err:
            self.metrics.api_call(name, api_result(err))
            raise
        self.metrics.api_call(name, "ok")
        return out


class ObservedObjects:
    """``Objects`` whose whole listings the pools' metrics read (a listing that fails
    part-way is not handed on: the last whole one stays)."""

    def __init__(self, objects: Objects, metrics: RecorderMetrics, pulse: Pulse) -> None:
        self._objects = objects
        self._observer = _Observer(metrics, pulse)

    def list(self, resource: Resource) -> Iterator[Mapping[str, Any]]:
        items = self._observer.call(
            f"list_{resource.plural}", lambda: list(self._objects.list(resource))
        )
        self._observer.metrics.resource_listed(resource.kind, resource.plural, items)
        return iter(items)


class ObservedEvents:
    """``Events`` whose calls beat the pulse and are counted."""

    def __init__(self, events: Events, metrics: RecorderMetrics, pulse: Pulse) -> None:
        self._events = events
        self._observer = _Observer(metrics, pulse)

    def list_ours(self) -> Iterator[Mapping[str, Any]]:
        return iter(self._observer.call("list_events", lambda: list(self._events.list_ours())))

    def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._observer.call("get_event", lambda: self._events.read(namespace, name))

    def create(self, event: Mapping[str, Any]) -> None:
        self._observer.call("create_event", lambda: self._events.create(event))

    def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self._observer.call("patch_event", lambda: self._events.patch(namespace, name, body))
