"""The chart's recorder (``recorder/``) in the simulated cluster: the real writer
(``recorder.write.record``, with client-go's correlator) over the simulated API server,
writing ``events.k8s.io/v1`` Events into it.

Like the real one it watches the Admissions, the jobs and the pools, and writes each new
fact as the object that holds it changes: it is one more watcher of the API server, which
adds nothing to the run's schedule, so a run decides and measures the same with it. (The
real recorder's Event lands within about a second of its fact; here, at once.) Its informer
caches are kept from the same changes, and the pools' metrics read them
(``recorder.metrics``; ``metrics.registry``) at most once per ``metrics_interval_s`` of
simulated time and at every read of the registry. It is not part of every run: ``attach``
adds it before the run, as the chart adds the Deployment, and ``simulate --dump`` adds it
so the dump holds the Events a cluster would. ``writes`` counts its API writes, to weigh
them against Metacontroller's. Beside Kubeflow (``SimConfig.kubeflow_coexist``, the chart's
``kubeflow.coexist``) it lists and watches only the jobs labelled for Dragonet, as the real
one's selector does: no Event about Kubeflow's jobs, and they are not in its caches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from policy.model.jobs import COEXIST_LABEL, COEXIST_LABEL_VALUE, labels_of
from policy.model.kinds import KINDS
from recorder.correlate import Correlator
from recorder.informer import Cache
from recorder.kube import Change, Listing, Resource
from recorder.loop import record_once, sources
from recorder.metrics import RecorderMetrics
from recorder.probe import ObservedObjects
from recorder.story import Fact
from recorder.write import API_VERSION, Tally, TokenBucket, Written, record
from sim.apiserver import ApiServer, Conflict, Obj
from sim.engine import Simulation
from webhooks.health import Pulse
from webhooks.kubeapi import AlreadyExists

EVENTS = f"Event.{API_VERSION}"
INSTANCE = "recorder-0"


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


_JOBS = {f"{k.kind}.{k.api_version}" for k in KINDS}


class SimObjects:
    """``recorder.kube.Objects`` over the simulated API server (its lists: a restarted
    recorder lists; the running one is handed each change by ``Recorder``). With
    ``labelled_jobs``, the jobs of its lists are those labelled for Dragonet only, as
    ``recorder.kube.KubeObjects``' label selector lists them."""

    def __init__(self, api: ApiServer, labelled_jobs: bool = False) -> None:
        self.api = api
        self.labelled_jobs = labelled_jobs

    def seen(self, tkey: str, obj: Obj) -> bool:
        """Whether the recorder's list or watch of ``tkey`` holds ``obj``."""
        if not self.labelled_jobs or tkey not in _JOBS:
            return True
        return labels_of(obj).get(COEXIST_LABEL) == COEXIST_LABEL_VALUE

    def list(self, resource: Resource) -> Listing:
        tkey = f"{resource.kind}.{resource.api_version}"
        items = [o for o in self.api.list(tkey) if self.seen(tkey, o)]
        return Listing(items, str(self.api._rv))

    def watch(self, resource: Resource, resource_version: str, timeout: int) -> Iterator[Change]:
        return iter(())  # changes come through ``ApiServer.watchers``


def _unchanged(tkey: str, old: Obj | None, new: Obj) -> bool:
    """A change the story cannot tell from the one before (it reads an Admission's spec,
    a job's spec and status, a pool's status): nothing new to write."""
    if old is None:
        return False
    if tkey.startswith("Admission."):
        return old.get("spec") == new.get("spec")
    if tkey.startswith("TrainingPool."):
        return old.get("status") == new.get("status")
    return old.get("spec") == new.get("spec") and old.get("status") == new.get("status")


class Recorder:
    def __init__(
        self,
        api: ApiServer,
        clock: Callable[[], datetime],
        max_age_s: float = 3600.0,
        metrics_interval_s: float = 10.0,
        labelled_jobs: bool = False,
    ) -> None:
        self.api = api
        self.clock = clock
        self.caches = {f"{r.kind}.{r.api_version}": (r, Cache()) for r, _ in sources()}
        self.metrics = RecorderMetrics(clock=lambda: clock().timestamp())
        self.metrics.follow((r.kind, r.plural, c) for r, c in self.caches.values())
        self.metrics_interval_s = metrics_interval_s
        self._refreshed: datetime | None = None
        self.refreshes = 0  # times the pools' metrics read the caches
        self.events = SimEvents(api)
        self.objects = SimObjects(api, labelled_jobs)
        self.written = Written(timedelta(seconds=max_age_s))
        self.correlator = Correlator()
        self.limit = TokenBucket(0, 1)  # writes are counted (``writes``), not timed
        self.tally = Tally()
        self.restarts = 0
        self._readers: dict[str, Callable[[Mapping[str, Any]], list[Fact]]] = {
            f"{r.kind}.{r.api_version}": read for r, read in sources()
        }

    def start(self) -> None:
        # Its informers' first lists, counted and beating its pulse as the real one's.
        pulse = Pulse(3600.0, clock=lambda: self.clock().timestamp())
        observed = ObservedObjects(self.objects, self.metrics, pulse)
        for resource, cache in self.caches.values():
            cache.replace(observed.list(resource).items)
        self._refresh()
        self.api.watchers.append(self._on_change)

    def _refresh(self) -> None:
        self.refreshes += 1
        self._refreshed = self.clock()
        self.metrics.refresh()

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if not self.objects.seen(tkey, new if new is not None else old or {}):
            return  # not in what its selector lists and watches (the label never changes)
        cached = self.caches.get(tkey)
        if cached is not None:
            kind = "DELETED" if new is None else ("ADDED" if old is None else "MODIFIED")
            cached[1].apply(Change(kind, new if new is not None else old or {}))
            assert self._refreshed is not None
            if (self.clock() - self._refreshed).total_seconds() >= self.metrics_interval_s:
                self._refresh()
        read = self._readers.get(tkey)
        if read is None or new is None or _unchanged(tkey, old, new):
            return
        now = self.clock().replace(microsecond=0)
        facts = read(new)
        if facts:
            self._add(
                record(
                    facts,
                    self.events,
                    self.written,
                    now,
                    INSTANCE,
                    self.limit,
                    correlator=self.correlator,
                )
            )

    def _add(self, tally: Tally) -> None:
        for name in ("created", "counted", "failed", "folded", "dropped"):
            setattr(self.tally, name, getattr(self.tally, name) + getattr(tally, name))

    def restart(self) -> None:
        """A new recorder process: nothing kept but what the API server holds. It lists
        its Events, then every source, and writes what is new (what changed while it was
        away), as the real one's informers do when they start."""
        self.restarts += 1
        now = self.clock().replace(microsecond=0)
        self.written = Written(self.written.max_age)
        self.written.load(self.events.list_ours(), now)
        self.correlator = Correlator()
        done = record_once(
            self.objects,
            self.events,
            self.written,
            now,
            INSTANCE,
            self.limit,
            correlator=self.correlator,
        )
        self._add(done.tally)


def attach(sim: Simulation) -> Recorder:
    """Run a recorder in ``sim`` (call before ``sim.run()``)."""
    recorder = Recorder(sim.api, sim.clock, labelled_jobs=sim.config.kubeflow_coexist)
    recorder.start()
    return recorder
