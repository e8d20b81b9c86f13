"""The chart's recorder (``recorder/``) in the simulated cluster: the real pass
(``recorder.loop.record_once``, ``wait_seconds``) over the simulated API server, writing
``events.k8s.io/v1`` Events into it.

Like the real one it lists the Admissions, the jobs and the pools every interval and
writes each new fact once, and exports the pools' metrics from what it lists
(``recorder.metrics``; ``metrics.registry``). It is not part
of every run (a long trace would pay for its passes): ``attach`` adds it to a simulation
before it runs, as the chart adds the Deployment. ``writes`` counts its API writes, to
weigh them against Metacontroller's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from recorder.kube import Resource
from recorder.loop import record_once
from recorder.metrics import RecorderMetrics
from recorder.probe import ObservedObjects
from recorder.write import API_VERSION, TokenBucket, Written
from sim.apiserver import ApiServer, Conflict
from sim.engine import Simulation
from webhooks.health import Pulse
from webhooks.kubeapi import AlreadyExists

EVENTS = f"Event.{API_VERSION}"


class SimEvents:
    """``recorder.write.Events`` over the simulated API server."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.writes = 0

    def list_ours(self) -> Iterator[Mapping[str, Any]]:
        return self.api.list(EVENTS)

    def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.api.get(EVENTS, f"{namespace}/{name}")

    def create(self, event: Mapping[str, Any]) -> None:
        self.writes += 1
        try:
            self.api.create(event)
        except Conflict as err:
            raise AlreadyExists(str(err), 409) from err

    def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self.writes += 1
        self.api.patch(EVENTS, f"{namespace}/{name}", **body)


class SimObjects:
    """``recorder.kube.Objects`` over the simulated API server."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api

    def list(self, resource: Resource) -> Iterator[Mapping[str, Any]]:
        return self.api.list(f"{resource.kind}.{resource.api_version}")


class Recorder:
    def __init__(self, sim: Simulation, interval_s: float = 10.0, max_age_s: float = 3600.0):
        self.sim = sim
        self.interval_s = interval_s
        self.events = SimEvents(sim.api)
        self.objects = SimObjects(sim.api)
        # Its /metrics (the pools'), fed as the real process feeds them: by its listings.
        self.metrics = RecorderMetrics(clock=lambda: sim.clock().timestamp())
        self.pulse = Pulse(interval_s * 3 + 60, clock=lambda: sim.clock().timestamp())
        self._observed = ObservedObjects(self.objects, self.metrics, self.pulse)
        self.written = Written(timedelta(seconds=max_age_s))
        self.limit = TokenBucket(0, 1)  # writes are counted (``writes``), not timed
        self.passes = 0

    def start(self) -> None:
        self.sim.schedule(0.0, self._pass)

    def restart(self) -> None:
        """A new recorder process: nothing kept but what the API server holds."""
        self.written = Written(self.written.max_age)
        self.written.load(self.events.list_ours(), self.sim.clock())

    def _pass(self) -> None:
        now = self.sim.clock().replace(microsecond=0)
        record_once(self._observed, self.events, self.written, now, "recorder-0", self.limit)
        self.passes += 1
        if self.sim._goes_on():
            self.sim.schedule(self.interval_s, self._pass)


def attach(sim: Simulation, interval_s: float = 10.0) -> Recorder:
    """Run a recorder in ``sim`` (call before ``sim.run()``)."""
    recorder = Recorder(sim, interval_s)
    recorder.start()
    return recorder
