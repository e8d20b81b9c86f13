"""The global plan: a pure function of the observed cluster, every job, and ``now``.

Every sync computes the same plan from the same snapshot and renders only its own job's
slice of it (DESIGN §2), so two syncs never hand the same free capacity to two jobs. One
pass runs these phases, kube-scheduler style but over whole gangs:

1. *Assess* each job (lifecycle): finished, suspended, admitted, or queued.
2. *Queue sort*: priority, then enqueue time, then namespace/name.
3. *Repair* admitted jobs first: their missing required pods, restarting pods and workers
   below ``min-instances`` claim capacity before any queued job.
4. *Admit* queued jobs in order as whole gangs; a job that does not fit is skipped
   (backfill). For the first job that waits, *make room*: shrink running jobs (elastic
   policies), and keep the room it waits for from younger jobs.
5. *Top up* admitted jobs below their recorded worker target (lost workers).
6. *Grow* running jobs into capacity nobody waiting can use (elastic policies).

New pods go only into capacity that is free in the observed state (facts beat plans);
a shrunk job's workers free their room for the waiting job only once they are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from types import MappingProxyType

import orjson

from policy.config import PolicyConfig
from policy.elastic import (
    Rules,
    Scale,
    idle_since,
    last_scale,
    rules_for,
    shrinkable,
    waited,
)
from policy.model import conditions as cond
from policy.model.cluster import Cluster, Pod
from policy.model.jobs import WORKER, Job, Replica, child_name
from policy.model.lifecycle import Assessment, assess
from policy.model.priority import Priorities
from policy.model.resources import Resources
from policy.model.timeutil import parse_time
from policy.pool.explain import (
    awaited_message,
    blocked_message,
    repair_message,
    unhelped_message,
    unknown_class_message,
    wait_message,
)
from policy.pool.filters import rejection
from policy.pool.placement import (
    Assignment,
    Eligible,
    Free,
    Slot,
    place_binpacked,
    place_gang,
    place_repairs,
    used_per_node,
)

QUEUED = "Queued"
ADMITTED = "Admitted"
FINISHED = "Finished"
SUSPENDED = "Suspended"
INVALID = "Invalid"

_NEVER = datetime.max.replace(tzinfo=UTC)
# A worker off its parameter servers' node trains at about this fraction of the speed of one
# next to them (Pollux's placements: bert, 4 GPUs, 0.96 packed vs 0.63 spread).
REMOTE = 0.65


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
    remove: frozenset[str] = frozenset()  # names of workers a shrink takes
    scale: Scale | None = None  # the target changes now (recorded in the status)
    wake_at: datetime | None = None  # when a time rule may change this job's plan

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


def priority(job: Job, priorities: Priorities) -> int:
    value = priorities.value(job.priority_class)
    return value if value is not None else priorities.default


_NO_PRIORITIES = Priorities()


def queue_key(job: Job, now: datetime, priorities: Priorities = _NO_PRIORITIES) -> tuple:
    return (-priority(job, priorities), enqueue_time(job, now), job.namespace, job.name)


def recorded_target(job: Job) -> int:
    """The worker count the job's status records (``Worker.replicas`` before any)."""
    if job.worker is None:
        return 0
    recorded = ((job.status.get("scheduling") or {}).get("workers") or {}).get("target")
    target = recorded if type(recorded) is int and recorded >= 0 else job.worker.replicas
    return max(job.min_workers, min(target, job.max_workers))


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


def _floor0(r: Resources) -> Resources:
    return Resources({k: v for k, v in r.items() if v > 0})


@dataclass(frozen=True)
class Running:
    """An admitted job as one pass sees it: its workers and what is recorded of them."""

    job: Job
    pods: tuple[Pod, ...]
    verdict: Assessment
    priority: int
    target: int  # recorded worker target
    workers: tuple[Pod, ...]  # worker pods that hold an index (not terminating)
    surplus: tuple[Pod, ...]  # workers beyond the recorded target: a shrink in progress
    ps_nodes: frozenset[str]

    @classmethod
    def of(cls, job: Job, pods: tuple[Pod, ...], verdict: Assessment, prio: int) -> Running:
        target = recorded_target(job)
        workers = tuple(p for p in pods if p.replica_type == "worker" and not p.terminating)
        ps_nodes = frozenset(
            p.node for p in pods if p.replica_type != "worker" and p.live and p.node
        )
        extra = len(workers) - target
        surplus = tuple(shrinkable(job, workers, ps_nodes)[:extra]) if extra > 0 else ()
        return cls(job, pods, verdict, prio, target, workers, surplus, ps_nodes)

    @property
    def count(self) -> int:
        """Workers the job keeps (before this pass's decisions)."""
        return len(self.workers) - len(self.surplus)

    def new_indices(self, n: int) -> list[int]:
        """The lowest free worker indices: TF_CONFIG lists max-instances of them."""
        taken = {p.index for p in self.pods if p.replica_type == "worker"}
        free = [i for i in range(self.job.max_workers) if i not in taken]
        return free[:n]


Victim = tuple[Running, Pod]  # a worker a shrink takes, and its job


@dataclass
class _Pass:
    """The running state of one planning pass: what is still free, and who claimed it."""

    cluster: Cluster
    free: dict[str, Resources]
    allocatable: dict[str, Resources]
    config: PolicyConfig
    rules: Rules
    now: datetime
    claimed_by: list[str] = field(default_factory=list)
    memo: dict[bytes, frozenset[str]] = field(default_factory=dict)
    failed: set[tuple] = field(default_factory=set)
    fits_observed: dict[tuple, bool] = field(default_factory=dict)
    # Capacity that frees once pods on their way out are gone: terminating pods, workers a
    # shrink takes. A job that waits for it reserves it from younger jobs.
    releasing: dict[str, list[tuple[str, Pod]]] = field(default_factory=dict)
    victims: dict[str, list[Pod]] = field(default_factory=dict)
    scales: dict[str, Scale] = field(default_factory=dict)
    # Gang shapes no shrink can place (and whether there was anything to shrink at all).
    unhelped: dict[tuple, bool] = field(default_factory=dict)
    acted: bool = False  # admitted or shrank something in this pass
    head_waits: bool = False  # a starving queue head still waits (DRAGON: no growth)

    @property
    def policy(self) -> str:
        return self.config.policy

    def release(self, job_key: str, pod: Pod) -> None:
        if pod.node and pod.occupies:
            self.releasing.setdefault(pod.node, []).append((job_key, pod))

    # --- 3. repair -------------------------------------------------------------------

    def repair(
        self, r: Running
    ) -> tuple[list[Slot], list[Slot], dict[tuple[str, int], str | None]]:
        """Place what the job cannot train without. Returns the workers to top up later,
        the slots that found no room, and the pods to create."""
        job, pods = r.job, r.pods
        existing = {p.name for p in pods}
        restarting = {p.name for p in r.verdict.restarts} | {p.name for p in pods if p.stuck}
        missing = [
            s
            for s in _required_slots(job)
            if child_name(job, s.type, s.index) not in existing
            or child_name(job, s.type, s.index) in restarting
        ]
        for p in r.workers:
            if p.name in restarting and p not in r.surplus:
                missing.append(Slot(WORKER, p.index, job.worker))
        deficit = max(0, r.target - len(r.workers))
        new = [Slot(WORKER, i, job.worker) for i in r.new_indices(deficit)]
        urgent = max(0, job.min_workers - len(r.workers))
        missing += new[:urgent]
        placed = self.place_for(r, missing)
        unplaced = [s for s in missing if s not in placed]
        return new[urgent:], unplaced, _new_pods(r, placed)

    def place_for(self, r: Running, slots: Sequence[Slot]) -> dict[Slot, str | None]:
        """Place pods of a running job next to its parameter servers, then its other pods;
        slots that find no room are left out."""
        if not slots:
            return {}
        if self.policy == "kube-default":
            return dict.fromkeys(slots)
        near: dict[str, tuple[int, int]] = {}
        for p in r.pods:
            if p.node and p.live and not p.stuck:
                req, total = near.get(p.node, (0, 0))
                near[p.node] = (req + (p.replica_type != "worker"), total + 1)
        placed = place_repairs(slots, near, self.free, _eligible(r.job, self.cluster, self.memo))
        self.free = dict(placed.free)
        if placed.nodes:
            self.claimed_by.append(r.job.key)
        return dict(placed.nodes)

    # --- 4. admit ---------------------------------------------------------------------

    def _place(
        self,
        required: list[Slot],
        workers: list[Slot],
        min_workers: int,
        free: Free,
        eligible: Eligible,
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
            self.acted = True
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
            wait_message,
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

    def make_room(
        self, jp: JobPlan, prio: int, since: datetime, running: Sequence[Running]
    ) -> tuple[JobPlan | None, bool]:
        """For the first job that waits: reserve room that is on its way out, or shrink
        running jobs to make it. Returns the waiting job's plan, or None if no shrink this
        policy allows would do, and whether there were workers it could have taken."""
        job = jp.job
        required = _required_slots(job)
        gang = _slots(job.worker, job.min_workers)
        eligible = _eligible(job, self.cluster, self.memo)
        future = self._future()
        fit = place_gang(required, gang, len(gang), future, self.allocatable, eligible)
        starving = self.now - since >= self.rules.starvation
        chosen: list[Victim] = []
        if fit is None:
            shape = (_shape(job, eligible), prio, starving)
            if shape in self.unhelped:
                return None, self.unhelped[shape]
            need = Resources.total(s.request for s in [*required, *gang])
            have = Resources.total(future.values())
            for r, pod in self._pool(prio, starving, running):
                chosen.append((r, pod))
                future[pod.node] = future[pod.node] + pod.request
                have = have + pod.request
                if need.fits_in(have):  # placing is dearer than adding: only once it may fit
                    fit = place_gang(required, gang, len(gang), future, self.allocatable, eligible)
                    if fit is not None:
                        break
            if fit is None:
                self.unhelped[shape] = bool(chosen)
                return None, bool(chosen)
            pruned = self._prune(chosen, required, gang, eligible)
            tight = place_gang(
                required, gang, len(gang), self._future(pruned), self.allocatable, eligible
            )
            if tight is not None:
                chosen, fit = pruned, tight
            self._shrink(job, chosen, starving, since)
        # Keep the room from younger jobs: they get only what this job will not need.
        used = used_per_node(fit)
        for node, request in used.items():
            self.free[node] = _floor0(self.free[node] - request)
        self.acted = self.acted or bool(chosen)
        awaited = [(k, p) for n in sorted(used) for k, p in self.releasing.get(n, ())]
        waiting = JobPlan(
            job,
            jp.pods,
            jp.assessment,
            QUEUED,
            0,
            {},
            partial(awaited_message, awaited, job.key),
        )
        return waiting, True

    def _future(self, extra: Sequence[Victim] = ()) -> dict[str, Resources]:
        future = dict(self.free)
        for node, pods in self.releasing.items():
            future[node] = future[node] + Resources.total(p.request for _, p in pods)
        for _, pod in extra:
            future[pod.node] = future[pod.node] + pod.request
        return future

    def _pool(self, prio: int, starving: bool, running: Sequence[Running]) -> list[Victim]:
        """Workers a shrink may take for a job of priority ``prio``, in the order taken."""
        pool: list[tuple[tuple, Running, Pod]] = []
        for order, r in enumerate(running):
            if r.job.worker is None or r.verdict.outcome is not None:
                continue
            taken = len(self.victims.get(r.job.key, ()))
            keep = r.count - taken
            if r.priority < prio or (starving and r.priority == prio):
                floor = r.job.min_workers
            elif self.rules.reclaim_borrowed and r.priority <= prio:
                floor = max(r.job.min_workers, r.job.worker.replicas)
            else:
                continue
            leaving = {p.name for p in (*r.surplus, *self.victims.get(r.job.key, ()))}
            candidates = [
                p for p in shrinkable(r.job, r.workers, r.ps_nodes) if p.name not in leaving
            ]
            for rank, pod in enumerate(candidates[: max(0, keep - floor)]):
                if pod.node is None or not pod.occupies:
                    continue
                if self.rules.growth_order == "oldest":  # DRAGON: job by job, oldest first
                    key = (r.priority, order, rank)
                else:  # borrowed workers first, then from the jobs with most workers per PS
                    borrowed = keep - rank > r.job.worker.replicas
                    per_ps = (keep - rank) / max(len(r.ps_nodes), 1)
                    key = (r.priority, not borrowed, pod.node in r.ps_nodes, -per_ps, order, rank)
                pool.append((key, r, pod))
        pool.sort(key=lambda t: t[0])
        return [(r, p) for _, r, p in pool]

    def _prune(
        self, chosen: list[Victim], required: list[Slot], gang: list[Slot], eligible: Eligible
    ) -> list[Victim]:
        """Drop victims whose room the waiting job does not need (last taken first)."""
        kept = list(chosen)
        for item in reversed(chosen):
            trial = [c for c in kept if c is not item]
            future = self._future(trial)
            if place_gang(required, gang, len(gang), future, self.allocatable, eligible):
                kept = trial
        return kept

    def _shrink(self, waiting: Job, chosen: list[Victim], starving: bool, since: datetime) -> None:
        """Record the victims: their jobs' new targets, and why (for their statuses)."""
        by_job: dict[str, list[Pod]] = {}
        runs: dict[str, Running] = {}
        for r, pod in chosen:
            by_job.setdefault(r.job.key, []).append(pod)
            runs[r.job.key] = r
            self.release(r.job.key, pod)
        why = f"waited {waited(since, self.now)}" if starving else "has higher priority"
        for key, pods in by_job.items():
            r = runs[key]
            self.victims.setdefault(key, []).extend(pods)
            before = r.target
            after = r.count - len(self.victims[key])
            self.scales[key] = Scale(
                before,
                after,
                f"shrunk from {before} to {after} workers to make room for {waiting.key}, "
                f"which {why}",
            )

    # --- 6. grow ----------------------------------------------------------------------

    def grow(self, running: Sequence[Running]) -> dict[str, dict[tuple[str, int], str | None]]:
        """Workers to add to running jobs, toward max-instances, next to their PS first."""
        out: dict[str, dict[tuple[str, int], str | None]] = {}
        counts: dict[str, int] = {}
        candidates: list[tuple[int, Running]] = []
        for order, r in enumerate(running):
            job = r.job
            if job.worker is None or r.verdict.outcome is not None or r.surplus:
                continue
            if job.key in self.victims or len(r.workers) < r.target or r.verdict.restarts:
                continue
            if r.count < job.max_workers:
                counts[job.key] = r.count
                candidates.append((order, r))
        if self.rules.growth_order == "oldest":  # DRAGON: each job to its max, oldest first
            for _, r in candidates:
                slots = _slots_at(r, r.new_indices(r.job.max_workers - r.count))
                placed = self.place_for(r, slots)
                if placed:
                    out[r.job.key] = _new_pods(r, placed)
            return out
        # One worker at a time, to the job whose speed grows most, relatively (Optimus-like):
        # a worker next to a parameter server counts 1, elsewhere REMOTE (the cross-node
        # penalty of comm-heavy models); ties go to the fewest workers per PS.
        speed = {r.job.key: _effective_workers(r) for _, r in candidates}
        active = list(candidates)

        def gain(t: tuple[int, Running]) -> tuple:
            order, r = t
            local = self._room_next_to_ps(r)
            per_ps = counts[r.job.key] / max(len(r.ps_nodes), 1)
            return (-(1.0 if local else REMOTE) / max(speed[r.job.key], REMOTE), per_ps, order)

        while active:
            active.sort(key=gain)
            r = active[0][1]
            n = counts[r.job.key]
            index = r.new_indices(n - r.count + 1)[n - r.count :]
            placed = self.place_for(r, _slots_at(r, index)) if index else {}
            if not placed:
                active.pop(0)
                continue
            out.setdefault(r.job.key, {}).update(_new_pods(r, placed))
            counts[r.job.key] = n + 1
            node = next(iter(placed.values()))
            local = not r.ps_nodes or node in r.ps_nodes
            speed[r.job.key] += 1.0 if local else REMOTE
            if n + 1 >= r.job.max_workers:
                active.pop(0)
        return out

    def _room_next_to_ps(self, r: Running) -> bool:
        worker = r.job.worker
        if worker is None:
            return False
        if not r.ps_nodes:
            return True
        ok = _eligible(r.job, self.cluster, self.memo)[worker.type]
        return any(n in ok and worker.request.fits_in(self.free[n]) for n in r.ps_nodes)


def _effective_workers(r: Running) -> float:
    """Workers weighted by locality: what the job's speed is roughly proportional to."""
    live = [p for p in r.workers if p.live and p not in r.surplus]
    if not r.ps_nodes:
        return float(len(live))
    return sum(1.0 if p.node in r.ps_nodes else REMOTE for p in live)


def _new_pods(r: Running, placed: Mapping[Slot, str | None]) -> dict[tuple[str, int], str | None]:
    """The placed slots whose pod does not exist yet (a restarting pod is re-created once
    it is gone; until then its room is claimed)."""
    existing = {p.name for p in r.pods}
    return {
        (s.type, s.index): node
        for s, node in placed.items()
        if child_name(r.job, s.type, s.index) not in existing
    }


def _slots_at(r: Running, indices: Sequence[int]) -> list[Slot]:
    return [Slot(WORKER, i, r.job.worker) for i in indices] if r.job.worker else []


_DEFAULT_CONFIG = PolicyConfig()


def _growth_allowed(
    rules: Rules, state: _Pass, jobs: Sequence[Job], now: datetime
) -> tuple[bool, datetime | None]:
    """Whether the idle rule lets running jobs grow now, else when it may."""
    if not rules.elastic:
        return False, None
    if not rules.grow_when_idle_only:
        return True, None
    if state.acted or state.head_waits:
        return False, None
    since = idle_since(jobs)
    if since is None or now - since >= rules.idle:
        return True, None
    return False, since + rules.idle


def plan(
    jobs: Sequence[Job],
    cluster: Cluster,
    now: datetime,
    config: PolicyConfig = _DEFAULT_CONFIG,
    priorities: Priorities = _NO_PRIORITIES,
) -> Plan:
    rules = rules_for(config)
    by_job: dict[str, list[Pod]] = {}
    for p in cluster.pods:
        if p.job:
            by_job.setdefault(p.job, []).append(p)
    result: dict[str, JobPlan] = {}
    running: list[Running] = []
    queued: list[tuple[Job, tuple[Pod, ...], Assessment]] = []

    # 1. Assess, in 2. queue order.
    for job in sorted(jobs, key=lambda j: queue_key(j, now, priorities)):
        if job.managed_elsewhere or job.deleting:
            continue  # not ours, or going away: it claims nothing
        pods = tuple(by_job.get(job.key, ()))
        verdict = assess(job, pods, now)
        if verdict.outcome is not None:
            result[job.key] = JobPlan(job, pods, verdict, FINISHED, recorded_target(job), {})
        elif job.suspend:
            result[job.key] = JobPlan(job, pods, verdict, SUSPENDED, 0, {})
        elif pods or job.status.get("startRunTime"):
            running.append(Running.of(job, pods, verdict, priority(job, priorities)))
        else:
            queued.append((job, pods, verdict))
    # Shrinks take from the lowest priority, then from the job that started first.
    running.sort(
        key=lambda r: (
            r.priority,
            parse_time(r.job.status.get("startTime")) or _NEVER,
            r.job.namespace,
            r.job.name,
        )
    )

    state = _Pass(
        cluster=cluster,
        free=dict(cluster.free),
        allocatable={n.name: n.allocatable for n in cluster.nodes},
        config=config,
        rules=rules,
        now=now,
    )
    for p in cluster.pods:
        if p.terminating:
            state.release(p.job or "", p)
    for r in running:
        for p in r.surplus:
            state.release(r.job.key, p)

    # 3. Repair.
    pending: dict[str, list[Slot]] = {}
    unplaced: dict[str, list[Slot]] = {}
    create: dict[str, dict[tuple[str, int], str | None]] = {}
    for r in running:
        pending[r.job.key], unplaced[r.job.key], create[r.job.key] = state.repair(r)
    # 4. Admit, making room for the first job that waits.
    blocked: str | None = None  # DRAGON: the starving head nothing can help
    room_made = False
    for job, pods, verdict in queued:
        if blocked:
            result[job.key] = JobPlan(
                job, pods, verdict, QUEUED, 0, {}, partial(blocked_message, blocked)
            )
            continue
        jp = state.admit(job, pods, verdict)
        since = enqueue_time(job, now)
        # DRAGON makes room for the head of the queue only; Dragonet for the first job that
        # some shrink can help, so a head nothing can help does not starve the jobs behind.
        if jp.phase == QUEUED and rules.elastic and not room_made:
            waiting, could_shrink = state.make_room(jp, priority(job, priorities), since, running)
            room_made = waiting is not None or rules.block_behind_head
            starving = now - since >= rules.starvation
            if waiting is not None:
                jp = waiting
                state.head_waits = state.head_waits or starving
            elif starving:
                state.head_waits = True
                blocked = job.key if rules.block_behind_head else None
                if could_shrink:
                    jp = replace(jp, explain=partial(unhelped_message, jp.explain))
        if jp.phase == QUEUED and rules.elastic and now - since < rules.starvation:
            jp = replace(jp, wake_at=since + rules.starvation)
        if jp.phase == QUEUED and priorities.value(job.priority_class) is None:
            unknown = partial(unknown_class_message, jp.explain, job.priority_class, priorities)
            jp = replace(jp, explain=unknown)
        result[job.key] = jp
    # 5. Top up (lost workers), 6. grow.
    for r in running:
        if r.job.key not in state.victims:
            create[r.job.key].update(_new_pods(r, state.place_for(r, pending[r.job.key])))
    allowed, wake = _growth_allowed(rules, state, jobs, now)
    grown = state.grow(running) if allowed else {}
    for r in running:
        result[r.job.key] = _running_plan(
            r, state, create[r.job.key], grown.get(r.job.key, {}), unplaced[r.job.key], wake, now
        )
    return Plan(jobs=MappingProxyType(result))


def _running_plan(
    r: Running,
    state: _Pass,
    create: dict[tuple[str, int], str | None],
    grown: Mapping[tuple[str, int], str | None],
    unplaced: Sequence[Slot],
    wake: datetime | None,
    now: datetime,
) -> JobPlan:
    job = r.job
    victims = state.victims.get(job.key, [])
    scale = state.scales.get(job.key)
    target = scale.after if scale is not None else r.target
    if grown:
        target = r.count + len(grown)
        scale = Scale(
            r.target, target, f"grew from {r.count} to {target} workers into idle capacity"
        )
    wake_at = None
    if wake is not None and job.worker is not None and r.count < job.max_workers:
        when, _ = last_scale(job)
        own = when + state.rules.idle if when is not None else wake
        wake_at = max(wake, own)
    explain = _nothing
    if unplaced:
        explain = partial(repair_message, job, unplaced, state.free, state.allocatable)
    return JobPlan(
        job,
        r.pods,
        r.verdict,
        ADMITTED,
        target,
        MappingProxyType({**create, **grown}),
        explain,
        frozenset(p.name for p in (*r.surplus, *victims)),
        scale,
        wake_at if wake_at is not None and wake_at > now else None,
    )
