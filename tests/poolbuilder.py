"""A small builder for one pool cycle's view, so a phase can be tested where its rule lives.

A test lists nodes, running jobs (their pods on named nodes, their Admission) and queued
jobs in a few words; the builder writes them as the Metacontroller objects a pool's sync
receives (``tests/metacontroller.py``), reads them with the pool's own ``observe`` and
runs the cycle's first steps (``assess_jobs``, ``open_ledger``), so the view a phase gets
is the one ``plan`` would give it. Nothing here decides anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policy.job.render import render_pod
from policy.memo import Memo
from policy.model.admission import Placement
from policy.model.jobs import Job, parse_job
from policy.model.kinds import TFJOB
from policy.model.priority import Priorities
from policy.pool.attained_service import Attained
from policy.pool.cycle import Assessed, assess_jobs, open_ledger
from policy.pool.ledger import Ledger
from policy.pool.observe import PoolSnapshot, observe
from policy.pool.policies import rules_for
from policy.pool.rules import Rules
from policy.pool.running import Running
from tests import metacontroller as mc
from tests.conftest import NOW

# Pod placements in a row: "PS-0@n1" (type-index@node).
Where = tuple[str, ...]


def _manifest(
    name: str,
    ps: int,
    workers: int,
    low: int | None,
    high: int | None,
    cpu: str,
    gpu: int,
    priority_class: str | None,
    annotations: dict[str, str] | None,
    host_network: bool = False,
) -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        limits: dict[str, str] = {"cpu": cpu, "memory": "1Gi"}
        if gpu:
            limits["nvidia.com/gpu"] = str(gpu)
        container = {"name": "tensorflow", "image": "tf", "resources": {"limits": limits}}
        spec: dict[str, Any] = {"containers": [container]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        if host_network:  # each task's port 2222 is then a host port
            spec["hostNetwork"] = True
        return {"replicas": n, "template": {"spec": spec}}

    spec: dict[str, Any] = {"tfReplicaSpecs": {"Worker": replica(workers)}}
    if ps:
        spec["tfReplicaSpecs"]["PS"] = replica(ps)
    spec["min-instances"] = low if low is not None else workers
    spec["max-instances"] = high if high is not None else workers
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": meta, "spec": spec}


@dataclass
class PoolBuilder:
    """Nodes and jobs of one pool, in the order a test adds them (queued jobs arrive one
    second apart, in that order)."""

    policy: str = "dragonet"
    pool_spec: dict[str, Any] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    admissions: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)

    def node(self, name: str, cpu: int = 8, gpu: int = 0) -> PoolBuilder:
        self.nodes.append(mc.node(name, cpu=str(cpu), memory="64Gi", gpu=gpu))
        return self

    def priority_class(self, name: str, value: int) -> PoolBuilder:
        self.classes.append(mc.priority_class(name, value))
        return self

    def queued(
        self,
        name: str,
        ps: int = 0,
        workers: int = 1,
        low: int | None = None,
        high: int | None = None,
        cpu: str = "1",
        gpu: int = 0,
        created: str | None = None,
        priority_class: str | None = None,
        host_network: bool = False,
    ) -> PoolBuilder:
        """A job with no pods and no Admission yet (enqueued at ``created``)."""
        manifest = _manifest(
            name, ps, workers, low, high, cpu, gpu, priority_class, None, host_network
        )
        when = created or f"2026-11-21T09:59:{len(self.jobs):02d}Z"
        self.jobs.append(mc.tfjob(manifest, created=when))
        return self

    def running(
        self,
        name: str,
        where: Where,
        ps: int = 0,
        workers: int | None = None,
        low: int | None = None,
        high: int | None = None,
        cpu: str = "1",
        gpu: int = 0,
        started: str = "2026-11-21T09:00:00Z",
        priority_class: str | None = None,
        phases: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        target: int | None = None,
        host_network: bool = False,
    ) -> PoolBuilder:
        """An admitted job with a Running pod at each ``where`` ("Worker-1@n2"), and the
        Admission that placed them; ``workers``: Worker.replicas (default: as placed).
        ``phases``: a pod's phase other than Running, by "Worker-1". ``target``: the
        Admission's worker target (default: the workers placed)."""
        placed = [_where(w) for w in where]
        count = sum(1 for t, _, _ in placed if t == "Worker")
        n = workers if workers is not None else count
        manifest = _manifest(
            name, ps, n, low, high, cpu, gpu, priority_class, annotations, host_network
        )
        status = {"startTime": started}
        job = mc.tfjob(manifest, created=started, status=status)
        self.jobs.append(job)
        parsed = parse_job(job, TFJOB)
        for t, i, node in placed:
            child = render_pod(parsed, Placement(type=t, index=i, node=node), "affinity", "", 1)
            phase = (phases or {}).get(f"{t}-{i}", "Running")
            self.pods.append(mc.observed_pod(job, child, phase=phase))
        admission = mc.admission(job, placed, workers=target if target is not None else count)
        admission["spec"]["admittedTime"] = started
        self.admissions.append(admission)
        return self

    def request(self) -> dict[str, Any]:
        """The pool's sync request, as Metacontroller sends it."""
        pool = mc.pool(policy=self.policy, **self.pool_spec)
        first = (
            self.jobs[0] if self.jobs else mc.tfjob(_manifest("x", 0, 1, 1, 1, "1", 0, None, None))
        )
        w = mc.world(
            first, self.nodes, jobs=self.jobs, pods=self.pods, priority_classes=self.classes
        )
        return mc.pool_request(w, self.admissions, parent=pool)

    def view(self, now: datetime = NOW) -> CycleView:
        request = self.request()
        snap = observe(request["parent"], request["children"], request["related"], Memo(limit=0))
        rules = rules_for(snap.spec)
        memo = Memo(limit=0)
        service: dict[str, Attained] = {}
        by_job: dict[str, list] = {}
        for p in snap.cluster.pods:
            if p.job:
                by_job.setdefault(p.job, []).append(p)
        assessed = assess_jobs(
            snap.jobs, by_job, snap.admissions, service, now, snap.priorities, memo
        )
        ledger = open_ledger(snap, rules, now, memo, assessed.leaving)
        return CycleView(snap, rules, assessed, ledger, now)


@dataclass
class CycleView:
    """What a phase gets: the snapshot, the policy's rules, the assessed jobs, the ledger."""

    snap: PoolSnapshot
    rules: Rules
    assessed: Assessed
    ledger: Ledger
    now: datetime

    @property
    def running(self) -> list[Running]:
        return list(self.assessed.running)

    def run(self, name: str) -> Running:
        return next(r for r in self.assessed.running if r.job.name == name)

    def job(self, name: str) -> Job:
        return next(j for j in self.snap.jobs if j.name == name)

    @property
    def priorities(self) -> Priorities:
        return self.snap.priorities


def _where(text: str) -> tuple[str, int, str]:
    slot, node = text.split("@")
    t, i = slot.rsplit("-", 1)
    return t, int(i), node


def nodes_of(placed: Any) -> dict[str, str | None]:
    """A phase's placements as "Type-index" -> node, for a row's expected outcome."""
    return {f"{t}-{i}": p.node for (t, i), p in sorted(placed.items())}
