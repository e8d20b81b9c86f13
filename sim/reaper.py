"""The chart's reaper (``reaper/``) in the simulated cluster: the real pass
(``reaper.loop.reap_once``, ``wait_seconds``) over the simulated API server.

Like the real one it lists every job each interval, or sooner at the next expiry it
knows of, and deletes each expired job by its uid. It runs only while some job asks for a
``ttlSecondsAfterFinished`` (a run without one is unchanged), and not past the end of the
run (``running``: the simulation ends an hour after its last job finished, whatever is
still to come, and a reaper with a day-long TTL to wait for must not keep it going).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from policy.model.jobs import COEXIST_LABEL, COEXIST_LABEL_VALUE, JobKind, labels_of
from policy.model.kinds import KINDS
from policy.model.request import job_type_key
from policy.model.ttl import ttl_seconds
from reaper.loop import reap_once, wait_seconds
from sim.apiserver import ApiServer, Conflict, Obj

Schedule = Callable[[float, Callable[[], None]], None]


_TYPES = frozenset(job_type_key(k) for k in KINDS)


class _Jobs:
    """``reaper.kube.Jobs`` over the simulated API server."""

    def __init__(self, api: ApiServer, kubeflow_coexist: bool = False) -> None:
        self.api = api
        self.coexist = kubeflow_coexist  # list only the jobs labelled for Dragonet

    def list(self, kind: JobKind) -> Iterator[Mapping[str, Any]]:
        jobs = self.api.list(job_type_key(kind))
        if not self.coexist:
            return jobs
        return (j for j in jobs if labels_of(j).get(COEXIST_LABEL) == COEXIST_LABEL_VALUE)

    def delete(self, kind: JobKind, namespace: str, name: str, uid: str) -> bool:
        tkey, key = job_type_key(kind), f"{namespace}/{name}"
        if self.api.get(tkey, key) is None:
            return False
        try:
            self.api.delete(tkey, key, uid=uid)
        except Conflict:  # a newer job of that name
            return False
        return True


class Reaper:
    def __init__(
        self,
        api: ApiServer,
        schedule: Schedule,
        clock: Callable[[], datetime],
        interval_s: float = 30.0,
        running: Callable[[], bool] = lambda: True,
        kubeflow_coexist: bool = False,
    ) -> None:
        self.api, self._schedule, self._clock = api, schedule, clock
        self.interval_s = interval_s
        self._run_goes_on = running
        self._jobs = _Jobs(api, kubeflow_coexist)
        self._running = False
        self.deleted: list[tuple[str, str]] = []  # (time, "Kind namespace/name")
        api.watchers.append(self._on_change)

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if self._running or new is None or tkey not in _TYPES:
            return
        if ttl_seconds(new.get("spec")) is not None:
            self._running = True
            self._schedule(0.0, self._pass)

    def _pass(self) -> None:
        now = self._clock().replace(microsecond=0)
        done = reap_once(self._jobs, now)
        self.deleted += ((now.isoformat(), d) for d in done.deleted)
        if self._asked() and self._run_goes_on():
            self._schedule(wait_seconds(done, now, self.interval_s), self._pass)
        else:
            self._running = False  # started again by the next job that asks for a TTL

    def _asked(self) -> bool:
        """Some job still asks for a TTL."""
        return any(ttl_seconds(j.get("spec")) is not None for t in _TYPES for j in self.api.list(t))
