"""The global plan: a pure function of the observed cluster, every job, and ``now``.

Every sync computes the same plan from the same snapshot and renders only its own job's
slice of it (DESIGN §2), so two syncs never hand the same free capacity to two jobs:

1. *Assess* each job (lifecycle): finished, suspended, admitted, or queued.
2. *Repair* admitted jobs first, in queue order: their missing pods claim capacity before
   any queued job, so a restarting parameter server is never starved by newcomers.
3. *Admit* queued jobs in FIFO order (enqueue time, then namespace/name) as whole gangs;
   a job that does not fit is skipped (backfill) and its capacity stays with it: younger
   jobs only get what older ones could not use.

New pods go only into capacity that is free in the observed state (facts beat plans).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from types import MappingProxyType

import orjson

from policy import conditions as cond
from policy.cluster import Cluster, Pod
from policy.config import PolicyName
from policy.filters import rejection
from policy.jobs import WORKER, Job, Replica, child_name
from policy.lifecycle import Assessment, assess
from policy.placement import (
    Assignment,
    Eligible,
    Free,
    Slot,
    place_binpacked,
    place_gang,
    place_repairs,
)
from policy.resources import PODS, Resources, format_quantity
from policy.timeutil import parse_time

QUEUED = "Queued"
ADMITTED = "Admitted"
FINISHED = "Finished"
SUSPENDED = "Suspended"
INVALID = "Invalid"

_NEVER = datetime.max.replace(tzinfo=UTC)


def _nothing() -> str:
    return ""


@dataclass(frozen=True)
class JobPlan:
    job: Job
    pods: tuple[Pod, ...]
    assessment: Assessment
    phase: str
    workers_target: int  # 0 while queued
    # (type, index) -> node (None: left to the kube-scheduler): pods its sync creates now.
    create: Mapping[tuple[str, int], str | None]
    # Why it waits, in plain words ("" when nothing is in the way). Built on demand: each
    # sync plans every job but reports only its own.
    explain: Callable[[], str] = field(default=_nothing, compare=False, repr=False)

    @property
    def message(self) -> str:
        return self.explain()


@dataclass(frozen=True)
class Plan:
    jobs: Mapping[str, JobPlan]


def enqueue_time(job: Job, now: datetime) -> datetime:
    """When the job joined the queue; a job just resumed from suspension joins it now."""
    if cond.is_true(job.status.get("conditions") or [], cond.SUSPENDED) and not job.suspend:
        return now
    return parse_time(job.status.get("enqueueTime")) or job.created or _NEVER


def queue_key(job: Job, now: datetime) -> tuple:
    return (enqueue_time(job, now), job.namespace, job.name)


def worker_target(job: Job, pods: Sequence[Pod]) -> int:
    """Admitted workers: the recorded target, never below a live worker's index."""
    if job.worker is None:
        return 0
    recorded = ((job.status.get("scheduling") or {}).get("workers") or {}).get("target")
    target = recorded if isinstance(recorded, int) and recorded >= 0 else job.worker.replicas
    live = [p.index + 1 for p in pods if p.replica_type == "worker" and p.live]
    return min(max(target, *live) if live else target, job.max_workers)


def _slots(replica: Replica | None, count: int) -> list[Slot]:
    return [Slot(replica.type, i, replica) for i in range(count)] if replica else []


def _required_slots(job: Job) -> list[Slot]:
    return [s for r in job.required() for s in _slots(r, r.replicas)]


def _constraints(spec: Mapping) -> bytes:
    """What the filter phase reads of a pod spec, as a hashable key."""
    return orjson.dumps(
        [spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")],
        option=orjson.OPT_SORT_KEYS,
    )


def _eligible(job: Job, cluster: Cluster, memo: dict[bytes, frozenset[str]]) -> Eligible:
    """Nodes that may take each replica type; jobs with equal constraints share the work."""
    out = {}
    for t, r in job.replicas.items():
        spec = r.template.get("spec") or {}
        key = _constraints(spec)
        if key not in memo:
            memo[key] = frozenset(n.name for n in cluster.nodes if rejection(n, spec) is None)
        out[t] = memo[key]
    return out


def _shape(job: Job, eligible: Eligible) -> tuple:
    """What decides whether a gang fits: each type's count, request and eligible nodes."""
    counts = [(r.type, r.replicas, r.request, eligible[r.type]) for r in job.required()]
    worker = job.worker
    if worker:
        counts.append((worker.type, worker.replicas, worker.request, eligible[worker.type]))
    return (tuple(counts), job.min_workers)


@dataclass
class _Pass:
    """The running state of one planning pass: what is still free, and who claimed it."""

    cluster: Cluster
    free: dict[str, Resources]
    allocatable: dict[str, Resources]
    policy: PolicyName = "dragonet"
    claimed_by: list[str] = field(default_factory=list)
    memo: dict[bytes, frozenset[str]] = field(default_factory=dict)
    failed: set[tuple] = field(default_factory=set)
    fits_observed: dict[tuple, bool] = field(default_factory=dict)

    def repair(self, job: Job, pods: tuple[Pod, ...], verdict: Assessment, target: int) -> JobPlan:
        """Place an admitted job's missing pods (and claim room for restarting ones)."""
        existing = {p.name for p in pods}
        restarting = {p.name for p in verdict.restarts} | {p.name for p in pods if p.stuck}
        wanted = [*_required_slots(job), *_slots(job.worker, target)]
        missing = [
            s
            for s in wanted
            if child_name(job, s.type, s.index) not in existing
            or child_name(job, s.type, s.index) in restarting
        ]
        if not missing:
            return JobPlan(job, pods, verdict, ADMITTED, target, {})
        if self.policy == "kube-default":
            create = {
                (s.type, s.index): None
                for s in missing
                if child_name(job, s.type, s.index) not in existing
            }
            return JobPlan(job, pods, verdict, ADMITTED, target, MappingProxyType(create))
        near: dict[str, tuple[int, int]] = {}
        for p in pods:
            if p.node and p.live and not p.stuck:
                req, total = near.get(p.node, (0, 0))
                near[p.node] = (req + (p.replica_type != "worker"), total + 1)
        repaired = place_repairs(missing, near, self.free, _eligible(job, self.cluster, self.memo))
        self.free = dict(repaired.free)
        if repaired.nodes:
            self.claimed_by.append(job.key)
        create = {
            (s.type, s.index): node
            for s, node in repaired.nodes.items()
            if child_name(job, s.type, s.index) not in existing
        }
        unplaced = [s for s in missing if s not in repaired.nodes]
        explain = partial(_repair_message, job, unplaced, self.free, self.allocatable)
        return JobPlan(
            job,
            pods,
            verdict,
            ADMITTED,
            target,
            MappingProxyType(create),
            explain if unplaced else _nothing,
        )

    def _place(
        self, required: list[Slot], workers: list[Slot], min_workers: int, free: Free, eligible
    ) -> Assignment | None:
        if self.policy == "gang-fifo":  # static size: every worker, each pod bin-packed
            return place_binpacked([*required, *workers], free, self.allocatable, eligible)
        return place_gang(required, workers, min_workers, free, self.allocatable, eligible)

    def admit(self, job: Job, pods: tuple[Pod, ...], verdict: Assessment) -> JobPlan:
        """Admit a queued job's whole gang, or explain why it waits."""
        required = _required_slots(job)
        workers = _slots(job.worker, job.worker.replicas if job.worker else 0)
        if self.policy == "kube-default":  # no admission: everything, unplaced
            create = {(s.type, s.index): None for s in [*required, *workers]}
            return JobPlan(job, pods, verdict, ADMITTED, len(workers), MappingProxyType(create))
        eligible = _eligible(job, self.cluster, self.memo)
        # Free capacity only shrinks during a pass, so a gang shape that failed is not tried
        # again (deterministic, and exact but for the placement heuristic's node ordering).
        shape = _shape(job, eligible)
        gang = None
        if shape not in self.failed:
            gang = self._place(required, workers, job.min_workers, self.free, eligible)
        if gang is not None:
            self.free = dict(gang.free)
            self.claimed_by.append(job.key)
            create = {(s.type, s.index): n for s, n in gang.nodes.items()}
            return JobPlan(
                job, pods, verdict, ADMITTED, gang.placed_workers, MappingProxyType(create)
            )
        self.failed.add(shape)
        if shape not in self.fits_observed:  # would it fit if nobody ahead claimed anything?
            self.fits_observed[shape] = bool(
                self.claimed_by
                and self._place(required, workers, job.min_workers, self.cluster.free, eligible)
            )
        explain = partial(
            _wait_message,
            job,
            required,
            workers,
            self.cluster,
            self.free,
            eligible,
            self.allocatable,
            tuple(self.claimed_by),
            self.fits_observed[shape],
        )
        return JobPlan(job, pods, verdict, QUEUED, 0, {}, explain)


def plan(
    jobs: Sequence[Job], cluster: Cluster, now: datetime, policy: PolicyName = "dragonet"
) -> Plan:
    by_job: dict[str, list[Pod]] = {}
    for p in cluster.pods:
        if p.job:
            by_job.setdefault(p.job, []).append(p)
    result: dict[str, JobPlan] = {}
    admitted: list[tuple[Job, tuple[Pod, ...], Assessment, int]] = []
    queued: list[tuple[Job, tuple[Pod, ...], Assessment]] = []

    # 1. Assess.
    for job in sorted(jobs, key=lambda j: queue_key(j, now)):
        if job.managed_elsewhere or job.deleting:
            continue  # not ours, or going away: it claims nothing
        pods = tuple(by_job.get(job.key, ()))
        target = worker_target(job, pods)
        verdict = assess(job, pods, now, target)
        if verdict.outcome is not None:
            result[job.key] = JobPlan(job, pods, verdict, FINISHED, target, {})
        elif job.suspend:
            result[job.key] = JobPlan(job, pods, verdict, SUSPENDED, 0, {})
        elif pods or job.status.get("startRunTime"):
            admitted.append((job, pods, verdict, target))
        else:
            queued.append((job, pods, verdict))

    state = _Pass(
        cluster=cluster,
        free=dict(cluster.free),
        allocatable={n.name: n.allocatable for n in cluster.nodes},
        policy=policy,
    )
    # 2. Repair admitted jobs, then 3. admit queued ones, each in queue order.
    for job, pods, verdict, target in admitted:
        result[job.key] = state.repair(job, pods, verdict, target)
    for job, pods, verdict in queued:
        result[job.key] = state.admit(job, pods, verdict)
    return Plan(jobs=MappingProxyType(result))


# --- words for users ----------------------------------------------------------------------

_NAMES = {"PS": "parameter server", "Chief": "chief", "Master": "master", "Evaluator": "evaluator"}


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe_gang(slots: Sequence[Slot]) -> str:
    counts: dict[str, int] = {}
    for s in slots:
        counts[s.type] = counts.get(s.type, 0) + 1
    parts = [_count(n, _NAMES.get(t, t.lower())) for t, n in counts.items() if t != WORKER]
    text = " and ".join(parts) if parts else ""
    if WORKER in counts:
        w = _count(counts[WORKER], "worker")
        text = f"{text} plus {w}" if text else w
    return text


def _free_text(free: Resources, names: Sequence[str]) -> str:
    return ", ".join(f"{format_quantity(k, free[k])} {k}" for k in names) or "nothing"


def _largest(
    free: Free, allocatable: Mapping[str, Resources], need: Resources, nodes: Sequence[str]
) -> str:
    """The node that covers most of ``need`` (ties: first by name)."""
    names = [k for k in need if k != PODS]

    def cover(n: str) -> float:
        return sum(min(free[n][k], need[k]) / max(need[k], 1) for k in names)

    return min(nodes, key=lambda n: (-cover(n), n))


def _wait_message(
    job: Job,
    required: list[Slot],
    workers: list[Slot],
    cluster: Cluster,
    free: Free,
    eligible: Eligible,
    allocatable: Mapping[str, Resources],
    ahead: Sequence[str],
    fits_without_claims: bool,
) -> str:
    gang = [*required, *workers[: job.min_workers]]
    if not cluster.nodes:
        return "the training pool has no nodes"
    for rtype in dict.fromkeys(s.type for s in gang):
        if not eligible.get(rtype):
            spec = job.replicas[rtype].template.get("spec") or {}
            why = [rejection(n, spec) for n in cluster.nodes][:3]
            return f"no node can take its {rtype} pods: {'; '.join(filter(None, why))}"
    if fits_without_claims:
        shown = ", ".join(ahead[:3]) + (f" and {len(ahead) - 3} more" if len(ahead) > 3 else "")
        return f"jobs ahead in the queue ({shown}) claim the free capacity it needs"
    need = Resources.total(s.request for s in gang)
    names = [k for k in need if k != PODS] or [PODS]
    usable = sorted({n for s in gang for n in eligible[s.type]})
    best = _largest(free, allocatable, need, usable)
    extra = " (min-instances)" if job.worker and job.min_workers else ""
    return (
        f"needs {need.without(PODS).describe() or 'a pod slot'} for its "
        f"{describe_gang(gang)}{extra} at once; the largest free node, {best}, has "
        f"{_free_text(free[best], names)} free"
    )


def _repair_message(
    job: Job, unplaced: Sequence[Slot], free: Free, allocatable: Mapping[str, Resources]
) -> str:
    names = ", ".join(child_name(job, s.type, s.index) for s in unplaced[:3])
    need = unplaced[0].request
    keys = [k for k in need if k != PODS] or [PODS]
    best = _largest(free, allocatable, need, sorted(free)) if free else None
    where = f"; the largest free node, {best}, has {_free_text(free[best], keys)}" if best else ""
    return (
        f"{_count(len(unplaced), 'pod')} waiting for room ({names}): each needs "
        f"{need.without(PODS).describe() or 'a pod slot'}{where}"
    )
