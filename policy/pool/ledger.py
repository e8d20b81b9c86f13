"""What one planning cycle knows of capacity, and what its phases have decided so far.

Kube-scheduler passes a ``CycleState`` between its extension points; this is ours. It starts
from the observed free capacity (allocatable minus every pod that holds room, assumed pods
included) and each phase takes from ``free`` what it places. Capacity on its way back
(terminating pods, workers a shrink takes) is ``releasing``: a waiting job may reserve it,
and younger jobs may not take it.

What the phases share is two things kept apart: the ``Ledger``'s decisions (what the plan
says so far: free and releasing capacity, victims, new targets, preemptions) and its
``CycleCache`` (how fast it says it: answers a phase already worked out in this cycle, and
the pool's memo across syncs). Emptying the cache changes no decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType

from policy.memo import NO_MEMO, Memo
from policy.model.admission import LastScale
from policy.model.cluster import Cluster, Pod
from policy.model.gpushare import DeviceFree
from policy.model.hostports import capacity
from policy.model.jobs import Job, constraints_key
from policy.model.resources import Resources
from policy.model.speedup import Speedup
from policy.pool.filters import rejection
from policy.pool.placement import Eligible
from policy.pool.rules import Rules


@dataclass(frozen=True)
class Scale:
    """A change of a job's worker target decided in this cycle."""

    before: int
    after: int
    reason: str

    def recorded(self, now: datetime) -> LastScale:
        return LastScale(time=now, before=self.before, after=self.after, reason=self.reason)


@dataclass(frozen=True)
class Stopped:
    """A preemption decided in this cycle: for whom (a job's key, or "TrainingPool NAME"
    for a drain), why, and whether least attained service chose it. ``shown`` and
    ``reason`` are what the stopped job's tenant reads: the job it was stopped for by name
    if it is of the same namespace, else unnamed (``policy.pool.explain.named``)."""

    by: str
    reason: str
    las: bool
    shown: str


def floor0(r: Resources) -> Resources:
    """``r`` without what is at or below zero (a KubeShare node keeps its devices:
    ``policy.model.gpushare``)."""
    if isinstance(r, DeviceFree):
        return DeviceFree({k: v for k, v in r.items() if v > 0}, r.devices)
    return Resources({k: v for k, v in r.items() if v > 0})


@dataclass
class CycleCache:
    """Work saved within one cycle (and, through ``memo``, across a pool's syncs). Each
    entry is a pure function of its key and of capacity that only shrinks within the
    cycle, so a lookup answers what computing it again would."""

    memo: Memo = field(default_factory=lambda: NO_MEMO)  # the pool's, across syncs
    failed: set[int] = field(default_factory=set)  # gang shapes that found no room
    fits_observed: dict[int, bool] = field(default_factory=dict)  # ... with nothing claimed
    fits_empty: dict[int, bool] = field(default_factory=dict)  # ... in the pool with no pods
    reasons: dict[int, str] = field(default_factory=dict)  # why a shape waits (a code)
    unhelped: dict[tuple, bool] = field(default_factory=dict)  # shapes no shrink can help
    candidates: dict[tuple, list] = field(default_factory=dict)  # shrink victims, in order
    eligible: dict[bytes, frozenset[str]] = field(default_factory=dict)  # by constraints
    eligible_by_job: dict[str, Eligible] = field(default_factory=dict)
    shapes: dict[tuple, int] = field(default_factory=dict)


def _with_host_ports(cluster: Cluster, keys: frozenset[str]) -> Cluster:
    """Each node's one use of each host port, in its allocatable and free room (a KubeShare
    node's device accounting is left as it is: a host port pod does not fit there)."""
    ports = capacity(keys)
    nodes = tuple(replace(n, allocatable=n.allocatable + ports) for n in cluster.nodes)
    free = {k: (f + ports if f.plain else f) for k, f in cluster.free.items()}
    return replace(
        cluster,
        nodes=nodes,
        free=MappingProxyType(free),
        by_name=MappingProxyType({n.name: n for n in nodes}),
    )


@dataclass
class Ledger:
    """The cycle's decisions so far, over the view it plans (``cluster``, ``rules``,
    ``now``, never changed), and its ``cache``."""

    cluster: Cluster
    rules: Rules
    now: datetime
    free: dict[str, Resources] = field(default_factory=dict)
    allocatable: dict[str, Resources] = field(default_factory=dict)
    # Jobs that took capacity in this cycle, in order (to say who is ahead of a waiting job).
    claimed_by: tuple[str, ...] = ()
    # Capacity that frees once pods on their way out are gone: terminating pods, workers a
    # shrink takes. A job that waits for it reserves it from younger jobs.
    releasing: dict[str, list[tuple[str, Pod]]] = field(default_factory=dict)
    victims: dict[str, list[Pod]] = field(default_factory=dict)
    scales: dict[str, Scale] = field(default_factory=dict)
    # Running jobs preempted in this cycle: job key -> for whom and why (policy.pool.preempt).
    preempted: dict[str, Stopped] = field(default_factory=dict)
    acted: bool = False  # admitted or shrank something in this cycle
    head_waits: bool = False  # a starving queue head still waits (DRAGON: no growth)
    cache: CycleCache = field(default_factory=CycleCache)
    # Reporting jobs' throughput models, by job key (PoolSnapshot.speedups).
    speedups: Mapping[str, Speedup] = field(default_factory=dict)
    # Nodes the kube-scheduler refused a job's pods on, avoided by that job's pods until
    # the backoff ends (policy.pool.refusals): job key -> node names.
    avoid: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def open(
        cls,
        cluster: Cluster,
        rules: Rules,
        now: datetime,
        memo: Memo = NO_MEMO,
        host_ports: frozenset[str] = frozenset(),
        speedups: Mapping[str, Speedup] | None = None,
        avoid: Mapping[str, frozenset[str]] | None = None,
    ) -> Ledger:
        """``host_ports``: the ones the jobs want; each node has one of each, less what its
        pods hold (``policy.model.hostports``). ``avoid``: nodes each job's pods may not
        use now (refused)."""
        if host_ports:
            cluster = _with_host_ports(cluster, host_ports)
        ledger = cls(
            cluster=cluster,
            rules=rules,
            now=now,
            free=dict(cluster.free),
            allocatable={n.name: n.allocatable for n in cluster.nodes},
            cache=CycleCache(memo=memo),
            speedups=speedups or {},
            avoid=avoid or {},
        )
        for p in cluster.pods:
            if p.terminating:
                ledger.release(p.job or "", p)
        return ledger

    def release(self, job_key: str, pod: Pod) -> None:
        if pod.node and pod.occupies and pod.node in self.free:
            self.releasing.setdefault(pod.node, []).append((job_key, pod))

    def take(self, job_key: str, free: Mapping[str, Resources]) -> None:
        """A phase placed pods for ``job_key``: what it left is what is free now."""
        self.free = dict(free)
        self.claimed_by = (*self.claimed_by, job_key)

    def reserve(self, used: Mapping[str, Resources], keep_devices: bool = True) -> None:
        """Keep room on each node for a waiting job whose room is on its way out: younger
        jobs get only what it will not need. (``keep_devices`` False: a KubeShare node's
        free room is kept as a plain vector, as preemption always kept it.)"""
        for node, request in used.items():
            left = self.free[node] - request
            if keep_devices:
                self.free[node] = floor0(left)
            else:
                self.free[node] = Resources({k: v for k, v in left.items() if v > 0})

    def shrink(self, job_key: str, pods: Sequence[Pod], scale: Scale) -> None:
        """Workers of ``job_key`` a shrink takes: their room is releasing; its new target."""
        for p in pods:
            self.release(job_key, p)
        self.victims.setdefault(job_key, []).extend(pods)
        self.scales[job_key] = scale

    def stop(self, job_key: str, why: Stopped, pods: Iterable[Pod]) -> None:
        """A running job preempted as a whole: its ``pods``' room is releasing."""
        self.preempted[job_key] = why
        for p in pods:
            self.release(job_key, p)

    def mark_acted(self) -> None:
        """Something was admitted, shrunk or preempted in this cycle (the idle rule)."""
        self.acted = True

    def mark_head_waits(self) -> None:
        """A starving queue head still waits (DRAGON grows nobody then)."""
        self.head_waits = True

    def eligible(self, job: Job) -> Eligible:
        """Nodes that may take each replica type (less the nodes that refused the job's
        pods); jobs with equal constraints share the work."""
        cache = self.cache
        known = cache.eligible_by_job.get(job.key)
        if known is not None:
            return known
        out = {}
        for t, key in job.constraints:
            nodes = cache.eligible.get(key)
            if nodes is None:
                spec = job.replicas[t].template.get("spec") or {}
                nodes = cache.eligible[key] = self._filter(spec)
            out[t] = nodes
        refused = self.avoid.get(job.key)
        if refused:
            out = {t: nodes - refused for t, nodes in out.items()}
        cache.eligible_by_job[job.key] = out
        return out

    def shape(self, job: Job) -> int:
        """What decides whether the job's gang fits: each gang type's count and request, and
        the nodes each type may go to (``Job.placement_shape``). Jobs of one shape fit alike,
        so one that failed is not tried again. A number that stands for the shape in this
        cycle: its keys are hashed for every queued job."""
        shapes = self.cache.shapes
        refused = self.avoid.get(job.key)
        shape = (job.placement_shape, refused) if refused else job.placement_shape
        return shapes.setdefault(shape, len(shapes))

    def eligible_for(self, spec: Mapping) -> frozenset[str]:
        """Nodes that may take a pod of this spec (pods of equal constraints share the work)."""
        key = constraints_key(spec)
        nodes = self.cache.eligible.get(key)
        if nodes is None:
            nodes = self.cache.eligible[key] = self._filter(spec)
        return nodes

    def _filter(self, spec: Mapping) -> frozenset[str]:
        return frozenset(n.name for n in self.cluster.nodes if rejection(n, spec) is None)

    def future(self, extra: Sequence[Pod] = ()) -> dict[str, Resources]:
        """Free capacity once everything releasing (and ``extra``) is gone."""
        future = dict(self.free)
        for node, pods in self.releasing.items():
            future[node] = future[node] + Resources.total(p.request for _, p in pods)
        for pod in extra:
            future[pod.node] = future[pod.node] + pod.request
        return future
