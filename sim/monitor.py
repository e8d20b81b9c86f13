"""The Container Monitor and the training tasks that report to it, simulated.

container-migration's training tasks POST an evaluation metric to the monitor on their node
every ``batch_interval`` steps; the monitor asks for a move when a worker's metric has
converged or its node is overloaded (dragon-algorithm.md §8). Here each running non-chief
worker reports a metric curve of its job's progress every ``report_every_s``, and the
monitor decides with the Container Monitor's own code, behind a small interface:

* ``Tracker`` (``feed(t, value)``, ``.category``): one per pod, Progressing / Watching /
  Converged: ``monitor.convergence.ConvergenceTracker``;
* ``Overloaded`` (``(node_load, loads, threshold) -> bool``): ``monitor.imbalance.overloaded``.

A node's load is what Dragonet's monitor computes (``monitor.imbalance.NodeLoad``): the
larger of what its pods request and what they use, where use is what the node's cgroups
show of the CPU the simulator gives them (``Programs.cpu``, ``sim/cpu.py``); memory use is
not modelled (its requests stand for it). ``load="limits"`` is DRAGON's ``/cluster-info``
load instead: every pod at its limits, whatever it uses.

A decision becomes
a ``Migration`` in the API server (``policy.model.migration.request_object``), at most
one per pod per ``throttle_s``; a ``Refused`` one is deleted after ``retry_s`` (doubled
after each refusal of the pod, up to ``max_retry_s``) so the monitor may ask again. The
monitor never decides where a pod goes: the pool does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from monitor.convergence import ConvergenceTracker
from monitor.imbalance import NodeLoad, overloaded
from policy.model.cluster import L_TYPE
from policy.model.migration import REFUSED, request_object
from policy.model.migration import TYPE_KEY as MIGRATIONS
from policy.model.podspec import pod_limits, pod_request
from policy.model.resources import Resources
from sim.apiserver import ApiServer, Conflict, Obj, object_key
from sim.cpu import Usage
from sim.training import CHIEFS, PODS, Programs, job_of

NODES = "Node.v1"
PROGRESSING, WATCHING, CONVERGED = "Progressing", "Watching", "Converged"


class Tracker(Protocol):
    """One pod's convergence state, fed the metric it reports."""

    category: str

    def feed(self, t: float, value: float) -> None: ...


Overloaded = Callable[[float, Sequence[float], float], bool]


def accuracy(progress: float) -> float:
    """The reported metric: a running-mean accuracy that saturates as training proceeds."""
    return 0.95 * (1.0 - math.exp(-progress / 0.15))


@dataclass(frozen=True)
class MonitorConfig:
    report_every_s: float = 10.0  # how often a training task reports (batch_interval steps)
    threshold: float = 1.0  # OVERLOAD_THRESHOLD
    throttle_s: float = 3.0  # at most one request per pod this often
    retry_s: float = 60.0  # a Refused request is deleted after this long (ask again),
    max_retry_s: float = 1800.0  # doubled after each refusal of the pod, up to this
    converged: bool = True  # ask to move converged workers (DRAGON does)
    overload: bool = True  # ask to move workers of overloaded nodes
    quiet_steps_per_worker: float = 5.0  # no report within 5 x max workers steps of the end
    # a node's load: requests or cgroup usage (Dragonet's monitor), or DRAGON's limits
    load: Literal["usage", "limits"] = "usage"


@dataclass
class Monitor:
    api: ApiServer
    schedule: Callable[[float, Callable[[], None]], None]
    programs: Programs
    config: MonitorConfig = field(default_factory=MonitorConfig)
    tracker: Callable[[], Tracker] = ConvergenceTracker
    is_overloaded: Overloaded = overloaded
    requests: int = 0  # Migrations created
    trackers: dict[str, Tracker] = field(default_factory=dict)
    _asked: dict[str, float] = field(default_factory=dict)  # pod key -> last request time
    _refused: dict[str, float] = field(default_factory=dict)  # request key -> first seen
    _refusals: dict[str, int] = field(default_factory=dict)  # request key -> replaced so far

    def start(self) -> None:
        self.schedule(self.config.report_every_s, self._tick)

    def _tick(self) -> None:
        now = self.api.clock()
        pods = list(self.api.list(PODS))
        loads = (
            _limit_loads(self.api, pods)
            if self.config.load == "limits"
            else _usage_loads(self.api, pods, self.programs.cpu())
        )
        values = list(loads.values())
        for pod in sorted(pods, key=object_key):
            reason = self._reason(pod, now, loads, values)
            if reason is not None:
                self._ask(pod, reason, now)
        self._retry(now)
        if any(t.finished_s is None for t in self.programs.jobs.values()) or not (
            self.programs.jobs
        ):
            self.schedule(self.config.report_every_s, self._tick)

    def _reason(
        self, pod: Obj, now: float, loads: Mapping[str, float], values: Sequence[float]
    ) -> str | None:
        job = job_of(pod)
        labels = pod["metadata"].get("labels") or {}
        if job is None or job not in self.programs.jobs or labels.get(L_TYPE) != "worker":
            return None
        if labels.get(L_TYPE) in CHIEFS or (pod.get("status") or {}).get("phase") != "Running":
            return None
        if pod["metadata"].get("deletionTimestamp"):
            return None
        t = self.programs.jobs[job]
        if t.finished_s is not None or t.rate <= 0:
            return None
        done = self.programs.progress_now(job, now)
        if t.spec.steps - done <= self.config.quiet_steps_per_worker * max(t.workers_live, 1):
            return None  # near the end: no report, so no move
        key = object_key(pod)
        tracker = self.trackers.setdefault(key, self.tracker())
        tracker.feed(now, accuracy(done / max(t.spec.steps, 1.0)))
        category = tracker.category
        if self.config.converged and str(getattr(category, "value", category)) == CONVERGED:
            return "Converged"
        node = pod["spec"].get("nodeName")
        if (
            self.config.overload
            and node in loads
            and self.is_overloaded(loads[node], values, self.config.threshold)
        ):
            return "Overloaded"
        return None

    def _ask(self, pod: Obj, reason: str, now: float) -> None:
        key = object_key(pod)
        if now - self._asked.get(key, -math.inf) < self.config.throttle_s:
            return
        if self.api.get(MIGRATIONS, key) is not None:
            return  # one live request per pod (a create would be a 409)
        self._asked[key] = now
        try:
            self.api.create(request_object(pod, reason, f"monitor/{pod['spec']['nodeName']}"))
        except Conflict:
            return
        self.requests += 1

    def _retry(self, now: float) -> None:
        for obj in list(self.api.list(MIGRATIONS)):
            key = object_key(obj)
            if (obj.get("status") or {}).get("phase") != REFUSED:
                continue
            first = self._refused.setdefault(key, now)
            n = self._refusals.get(key, 0)
            first_wait, most = self.config.retry_s, self.config.max_retry_s
            wait = max(first_wait, min(first_wait * 2 ** min(n, 30), most))
            if now - first >= wait:
                self._refused.pop(key, None)
                self._refusals[key] = n + 1
                self.api.delete(MIGRATIONS, key)


def _usage_loads(api: ApiServer, pods: Sequence[Obj], cpu: Mapping[str, Usage]) -> dict[str, float]:
    """Dragonet's monitor's per-node load: cpu and memory, the larger of what the pods
    bound there request and what they use (cgroup usage, as metrics.k8s.io reports it)."""
    requested: dict[str, Resources] = {}
    used: dict[str, float] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        requested[node] = requested.get(node, Resources({})) + pod_request(pod["spec"])
        if (u := cpu.get(object_key(pod))) is not None:
            used[node] = used.get(node, 0.0) + u.cores
    out: dict[str, float] = {}
    for node in api.list(NODES):
        name = node["metadata"]["name"]
        alloc, req = Resources.parse(node["status"].get("allocatable")), requested.get(name)
        plain = {r: alloc[r] / 1000 for r in ("cpu", "memory")}
        asked = {r: (req or Resources({}))[r] / 1000 for r in ("cpu", "memory")}
        out[name] = NodeLoad(name, plain, asked, {"cpu": used.get(name, 0.0)}).load
    return out


def _limit_loads(api: ApiServer, pods: Sequence[Obj]) -> dict[str, float]:
    """DRAGON's per-node load (/cluster-info): 0.5 cpu limits/allocatable + 0.5 memory,
    over the pods bound there that have not finished."""
    used: dict[str, Resources] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        used[node] = used.get(node, Resources({})) + pod_limits(pod["spec"])
    out: dict[str, float] = {}
    for node in api.list(NODES):
        name = node["metadata"]["name"]
        alloc = Resources.parse(node["status"].get("allocatable"))
        u = used.get(name, Resources({}))
        out[name] = 0.5 * u["cpu"] / max(alloc["cpu"], 1) + 0.5 * u["memory"] / max(
            alloc["memory"], 1
        )
    return out
