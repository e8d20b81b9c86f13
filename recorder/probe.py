"""The recorder's probes and metrics, hooked in around its API clients rather than into its
loop: each call it makes, and each change a watch brings, beats its ``Pulse``
(``/healthz``, ``/readyz``), and each call is counted. (The pools' metrics read the
informers' caches: ``RecorderMetrics.follow``.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from recorder.kube import Change, Listing, Objects, Resource
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
    """``Objects`` whose lists and watches beat the pulse and are counted: a watch beats
    with each change it brings (bookmarks included), and is counted when it ends."""

    def __init__(self, objects: Objects, metrics: RecorderMetrics, pulse: Pulse) -> None:
        self._objects = objects
        self._observer = _Observer(metrics, pulse)

    def list(self, resource: Resource) -> Listing:
        return self._observer.call(f"list_{resource.plural}", lambda: self._objects.list(resource))

    def watch(
        self, resource: Resource, resource_version: str, timeout_seconds: int
    ) -> Iterator[Change]:
        name, observer = f"watch_{resource.plural}", self._observer
        try:
            for change in self._objects.watch(resource, resource_version, timeout_seconds):
                observer.pulse.beat(True)
                yield change
        except Exception as err:
            observer.pulse.beat(False)
            observer.metrics.api_call(name, api_result(err))
            raise
        observer.pulse.beat(True)
        observer.metrics.api_call(name, "ok")


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
