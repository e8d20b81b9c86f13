"""One scheduling cycle of a pool: a pure function of what the pool's sync observed and ``now``.

Kube-scheduler's phases, over whole gangs, run once per pool event (DESIGN §2). ``plan``
is these steps, one call each; every phase lives in a module of its own:

1. *Attained service* (least attained service only): each job's GPU-seconds and queue
   (``policy.pool.attained_service``).
2. *Assess* each job (Kubeflow's lifecycle), in *queue order* (priority, then the job's
   LAS queue, then enqueue time, then namespace/name): finished, suspended, running, or
   queued (``policy.pool.view``, ``policy.pool.queue``).
3. *Open the ledger*: the observed free capacity; what is on its way out (terminating
   pods, workers a job gives up, pods it may not have) is releasing; nodes the
   kube-scheduler refused a job's pods on, though the pool saw room, are left out of that
   job's eligible nodes until their backoff ends (``policy.pool.refusals``).
4. *Drain* a pool whose ``stopPolicy`` is ``HoldAndDrain``: every admitted job is
   preempted (``stop.py``). *Repair* the admitted jobs that stay: their missing required
   pods, restarting pods and workers below ``min-instances`` claim capacity before any
   queued job; admitted gangs that over-commit the nodes give one back (``repair.py``,
   ``overcommit.py``).
5. *Admit* queued jobs in order, each through the admission checks
   (``policy.pool.admission_checks.CHECKS``), as whole gangs; a job that does not fit is skipped
   (backfill). For the first job that waits, *make room*: shrink running jobs (elastic
   policies), and keep the room it waits for from younger jobs. When no shrink can,
   *preempt* whole running jobs of lower priority (or, under least attained service, of a
   later queue): they go back to the queue as whole gangs (``admit.py``, ``shrink.py``,
   ``preempt.py``). A held pool (``stopPolicy`` ``Hold`` or ``HoldAndDrain``) admits none:
   each waits, saying why (``stop.py``).
6. *Top up* admitted jobs below their worker target (lost workers), then place the
   *TensorBoards* of admitted jobs into what is left (``policy.pool.tensorboard``).
7. *Grow* running jobs into capacity nobody waiting can use (elastic policies, when the
   idle rule allows: ``grow.py``), and under the allocation rule give back workers a
   job's own reports say add nothing (``goodput.py``); a job's size is decided again
   only ``Rules.interval`` after its last change. A held pool grows nobody.
8. *Migrate*: answer Migration requests, and move workers where it pays (``migrate.py``).
9. *Write* each job's plan, once, from what the steps decided.

New pods go only into capacity that is free in the observed state, where pods an Admission
placed but their job has not created yet already hold their room (facts beat plans); a
shrunk job's workers free their room for the waiting job only once they are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from types import MappingProxyType

from policy.memo import NO_MEMO, Memo
from policy.model.admission import (
    ADMITTED,
    FINISHED,
    NO_SHRINK_HELPS,
    PODS_WAITING_FOR_ROOM,
    PREEMPTED,
    QUEUED,
    SUSPENDED,
    WAITING_FOR_CAPACITY,
    Admission,
    AttainedService,
    JobPhase,
    Placement,
    Preemption,
    Refusal,
)
from policy.model.cluster import Cluster, Pod
from policy.model.hostports import wanted
from policy.model.jobs import WORKER, Job, child_name
from policy.model.lifecycle import Assessment
from policy.model.migration import MigrationAnswer, Moves
from policy.model.priority import Priorities
from policy.model.slot import Slot, SlotLabel
from policy.model.speedup import Speedup
from policy.model.tensorboard import SLOT as TENSORBOARD
from policy.pool import admission_checks
from policy.pool.attained_service import Attained, attained, recorded, service_of
from policy.pool.checks import Admit, Check, QueueCycle, Turn, run
from policy.pool.explain import (
    repair_message,
)
from policy.pool.goodput import give_back
from policy.pool.grow import grow
from policy.pool.ledger import Ledger, Scale, Stopped
from policy.pool.migrate import JobMoves, migrate
from policy.pool.observe import PoolSnapshot
from policy.pool.overcommit import take_back
from policy.pool.placement import Placed
from policy.pool.queue import NEVER, priority, queue_key
from policy.pool.refusals import avoided, next_end, refusals, unexplained
from policy.pool.repair import Repair, place_for, repair
from policy.pool.rules import Behaviour, Rules
from policy.pool.running import Running, idle_since, scaled_at
from policy.pool.stop import drain, holds
from policy.pool.tensorboard import near_nodes, placed_at
from policy.pool.view import job_view, running_of

# Why a queued job waits when room elsewhere in the pool could take it (defragmentation).
_ROOM_WOULD_HELP = (WAITING_FOR_CAPACITY, NO_SHRINK_HELPS)


def _nothing() -> str:
    return ""


@dataclass(frozen=True, kw_only=True)
class JobPlan:
    job: Job
    pods: tuple[Pod, ...]
    assessment: Assessment
    phase: JobPhase
    workers_target: int  # 0 while queued
    # Every pod the job may have, where it is or goes (the Admission's pods): its node
    # (None: left to the kube-scheduler), and for a migrated worker its pod's name and the
    # node it moves from.
    placements: Placed = field(default_factory=dict)
    # Why it waits, in plain words ("" when nothing is in the way), built on demand.
    explain: Callable[[], str] = field(default=_nothing, compare=False, repr=False)
    remove: frozenset[str] = frozenset()  # names of workers a shrink takes
    scale: Scale | None = None  # the target changes now
    wake_at: datetime | None = None  # when a time rule may change this job's plan
    reason: str = ""  # why it waits (a code from policy.pool.explain); "" if nothing
    # Migration (policy.pool.migrate): durable move counts, answers to Migration requests.
    moves: tuple[Moves, ...] = ()
    migrations: tuple[MigrationAnswer, ...] = ()
    service: AttainedService | None = None  # a preemption decided now: the record it writes
    # Nodes the kube-scheduler refused its pods on (policy.pool.refusals): the record it writes.
    refused: tuple[Refusal, ...] = ()
    queue: int = 0  # its queue in the cycle's order (policy.pool.attained_service; 0 without)

    @property
    def message(self) -> str:
        return self.explain()

    @property
    def create(self) -> Placed:
        """The job's pods placed now whose pod does not exist yet: what its sync creates
        (a moving worker's replacement, and the TensorBoard, are not counted)."""
        existing = {p.name for p in self.pods}
        return {
            s: p
            for s, p in self.placements.items()
            if s != TENSORBOARD
            and p.source is None
            and (p.pod or child_name(self.job, *s)) not in existing
        }


@dataclass(frozen=True)
class Plan:
    jobs: Mapping[str, JobPlan]


@dataclass(frozen=True)
class _Queued:
    job: Job
    pods: tuple[Pod, ...]
    verdict: Assessment
    queue: int = 0  # its least-attained-service queue (0 without LAS)
    stopping: bool = False  # preempted, and some of its pods still exist


@dataclass(frozen=True)
class _Settled:
    """A job no phase decides anything for: finished, or suspended."""

    job: Job
    pods: tuple[Pod, ...]
    verdict: Assessment
    phase: JobPhase


@dataclass(frozen=True)
class Assessed:
    """Step 2's outcome: every job the pool plans, by what it is now, in queue order."""

    settled: tuple[_Settled, ...]
    running: tuple[Running, ...]  # in victim order: lowest priority, then started first
    queued: tuple[_Queued, ...]
    boards: Mapping[str, tuple[Pod, ...]]  # TensorBoard pods, by job: no part of its gang
    leaving: tuple[tuple[str, Pod], ...]  # pods on their way out that still hold room


@dataclass(frozen=True)
class QueueOutcome:
    """Step 5's decision for one queued job: admitted now (with its placements), or why it
    waits and when a time rule may change that."""

    queued: _Queued
    phase: JobPhase
    workers: int = 0
    placed: Placed = field(default_factory=dict)
    explain: Callable[[], str] = field(default=_nothing, compare=False, repr=False)
    reason: str = ""
    wake_at: datetime | None = None


@dataclass(frozen=True)
class Growth:
    """Step 7's outcome: the workers each job grows by, and when growth may start if the
    idle rule holds it back now."""

    grown: Mapping[str, Placed]
    wake: datetime | None


def plan(
    snap: PoolSnapshot,
    now: datetime,
    rules: Rules,
    memo: Memo = NO_MEMO,
    checks: Sequence[Check] | None = None,
) -> Plan:
    """The pool's plan for what its sync observed (``snap``, whole) at ``now``. ``memo``
    (a pool's, across its syncs) only saves work: the plan is the same without.
    ``checks``: the admission rules each queued job meets, in order (None:
    ``admission_checks.CHECKS``, read at each call)."""
    jobs, cluster, admissions = snap.jobs, snap.cluster, snap.admissions
    priorities, pool = snap.priorities, snap.name
    by_job: dict[str, list[Pod]] = {}
    stuck: set[str] = set()
    for p in cluster.pods:
        if p.job:
            by_job.setdefault(p.job, []).append(p)
            if p.stuck:
                stuck.add(p.job)
    # 1. Attained service: each job's, and when one may change (least attained service).
    service, wakes = _attained_service(jobs, by_job, admissions, now, rules, snap.speedups)
    # 2. Assess every job, in queue order.
    assessed = assess_jobs(jobs, by_job, admissions, service, now, priorities, memo)
    running = assessed.running
    # 3. Open the ledger: observed free capacity, with what is on its way out releasing,
    # and the nodes each job avoids (the kube-scheduler refused its pods there).
    refused = _refusals(by_job, stuck, admissions, cluster, now)
    avoid = {k: nodes for k, r in refused.items() if (nodes := avoided(r, now))}
    ledger = open_ledger(snap, rules, now, memo, assessed.leaving, avoid)
    # 4. Drain (HoldAndDrain), then repair the admitted jobs that stay, and take back a
    # gang that over-commits the nodes.
    drained = drain(ledger, running, pool)
    repairs = _repair(ledger, [r for r in running if r.job.key not in drained], memo)
    # 5. Admit queued jobs in order through the admission checks, making room for the
    # first one that waits (a held pool admits none).
    checks = admission_checks.CHECKS if checks is None else checks
    queue = _admit_queue(ledger, assessed.queued, running, priorities, wakes, pool, checks)
    # 6. Top up lost workers, then place TensorBoards.
    topped = _top_up(ledger, running, repairs)
    staying = [r for r in running if r.job.key not in ledger.preempted]
    boarded = _place_tensorboards(ledger, staying, repairs, queue, assessed.boards)
    # 7. Grow into idle capacity (a held pool grows nobody).
    growth = Growth({}, None) if holds(rules) else _grow(ledger, rules, running, now)
    # 8. Migrate (never the workers of a job preempted in this cycle: all its pods go).
    moved = migrate(ledger, staying, snap.requests, rules.migration, now, _first_waiting(queue))
    # 9. Write each job's plan.
    return _plans(
        assessed, queue, repairs, topped, growth, boarded, moved, ledger, wakes, memo, refused
    )


def _refusals(
    by_job: Mapping[str, Sequence[Pod]],
    stuck: set[str],
    admissions: Mapping[str, Admission],
    cluster: Cluster,
    now: datetime,
) -> dict[str, tuple[Refusal, ...]]:
    """Each job's refusals (``policy.pool.refusals``), for the jobs that have a stuck pod or
    a refusal on record; the others have none."""
    keys = stuck | {k for k, a in admissions.items() if a.refused}
    if not keys:
        return {}
    nodes = unexplained(cluster.pods, cluster.free) if stuck else frozenset()
    out = {}
    for key in sorted(keys):
        got = refusals(by_job.get(key, ()), admissions.get(key), nodes, now)
        if got:
            out[key] = got
    return out


def _attained_service(
    jobs: Sequence[Job],
    by_job: Mapping[str, Sequence[Pod]],
    admissions: Mapping[str, Admission],
    now: datetime,
    rules: Rules,
    speedups: Mapping[str, Speedup],
) -> tuple[dict[str, Attained], list[datetime]]:
    """Every job's attained service and LAS queue, and when one may change (empty without
    least attained service)."""
    service: dict[str, Attained] = {}
    wakes: list[datetime] = []
    if not rules.las:
        return service, wakes
    for job in jobs:
        model = speedups.get(job.key)
        got, wake = service_of(
            job,
            by_job.get(job.key, ()),
            admissions.get(job.key),
            now,
            rules.las,
            promotion=Behaviour.LAS_PROMOTION in rules.does,
            remaining=Behaviour.LAS_REMAINING in rules.does,
            left_worker_s=model.left_worker_s if model is not None else None,
        )
        service[job.key] = got
        if wake is not None:
            wakes.append(wake)
    return service, wakes


def assess_jobs(
    jobs: Sequence[Job],
    by_job: Mapping[str, Sequence[Pod]],
    admissions: Mapping[str, Admission],
    service: Mapping[str, Attained],
    now: datetime,
    priorities: Priorities,
    memo: Memo,
) -> Assessed:
    """Each job the pool plans, in queue order: finished or suspended (nothing to decide),
    running (admitted before), or queued (a preempted job queues again as a whole gang,
    and its pods' room frees as they go)."""

    def order(job: Job) -> tuple:
        key = queue_key(job, now, priorities)
        got = service.get(job.key)
        return (key[0], got.queue, *key[1:]) if got is not None else key

    settled: list[_Settled] = []
    running: list[Running] = []
    queued: list[_Queued] = []
    leaving: list[tuple[str, Pod]] = []
    stopping: list[tuple[str, Pod]] = []
    boards: dict[str, tuple[Pod, ...]] = {}
    for job in sorted(jobs, key=order):
        if job.managed_elsewhere or job.deleting:
            continue  # not ours, or going away: it claims nothing
        admission = admissions.get(job.key)
        view = job_view(job, by_job.get(job.key, ()), admission, now, memo)
        boards[job.key] = view.boards
        leaving += ((job.key, p) for p in view.strays)
        pods, verdict = view.pods, view.verdict
        got = service.get(job.key)
        queue = got.queue if got is not None else 0
        if verdict.outcome is not None:
            settled.append(_Settled(job, pods, verdict, FINISHED))
        elif job.suspend:
            settled.append(_Settled(job, pods, verdict, SUSPENDED))
        elif admission is not None and admission.preempted:
            stopping += ((job.key, p) for p in pods if not p.terminating)
            queued.append(_Queued(job, pods, verdict, queue, stopping=bool(pods)))
        elif pods or job.status.get("startRunTime") or (admission and admission.admitted):
            prio = priority(job, priorities)
            running.append(running_of(view, prio, admission, got, memo))
        else:
            queued.append(_Queued(job, pods, verdict, queue))
    # Shrinks take from the lowest priority, then from the job that started first.
    running.sort(key=_victim_order)
    surplus = [(r.job.key, p) for r in running for p in r.surplus]
    return Assessed(
        tuple(settled),
        tuple(running),
        tuple(queued),
        MappingProxyType(boards),
        (*surplus, *leaving, *stopping),
    )


def open_ledger(
    snap: PoolSnapshot,
    rules: Rules,
    now: datetime,
    memo: Memo,
    leaving: Sequence[tuple[str, Pod]],
    avoid: Mapping[str, frozenset[str]] | None = None,
) -> Ledger:
    """The ledger over the snapshot's cluster, with the host ports its jobs want counted on
    each node, their throughput models, ``leaving`` releasing, and the nodes each job
    avoids."""
    ports = wanted(r.request for j in snap.jobs for r in j.replicas.values())
    ledger = Ledger.open(snap.cluster, rules, now, memo, ports, snap.speedups, avoid)
    for key, p in leaving:
        ledger.release(key, p)
    return ledger


def _repair(ledger: Ledger, running: Sequence[Running], memo: Memo) -> dict[str, Repair]:
    """Each admitted job's repair. Admitted gangs that over-commit the nodes (each holds
    room the other lacks): the later is taken back, so the other completes
    (policy/pool/overcommit.py)."""
    repairs = {r.job.key: repair(ledger, r, memo) for r in running}
    take_back(ledger, running, repairs)
    return repairs


def _top_up(
    ledger: Ledger, running: Sequence[Running], repairs: Mapping[str, Repair]
) -> dict[str, Placed]:
    """Lost workers above ``min-instances`` of jobs nobody shrinks or preempts now."""
    return {
        r.job.key: place_for(ledger, r, repairs[r.job.key].top_up)
        for r in running
        if r.job.key not in ledger.victims and r.job.key not in ledger.preempted
    }


def _grow(ledger: Ledger, rules: Rules, running: Sequence[Running], now: datetime) -> Growth:
    allowed, wake = _growth_allowed(rules, ledger, running, now)
    if not allowed:
        return Growth({}, wake)
    ready, wake = _held(rules, running, now)
    grown = grow(ledger, ready)
    give_back(ledger, [r for r in ready if r.job.key not in grown])
    return Growth(grown, wake)


def _first_waiting(queue: Sequence[QueueOutcome]) -> Job | None:
    """The first queued job that room elsewhere in the pool could take (defragmentation's
    beneficiary)."""
    for o in queue:
        if o.phase == QUEUED and o.reason in _ROOM_WOULD_HELP:
            return o.queued.job
    return None


def _plans(
    assessed: Assessed,
    queue: Sequence[QueueOutcome],
    repairs: Mapping[str, Repair],
    topped: Mapping[str, Placed],
    growth: Growth,
    boarded: Mapping[str, str | None],
    moved: Mapping[str, JobMoves],
    ledger: Ledger,
    wakes: Sequence[datetime],
    memo: Memo,
    refused: Mapping[str, tuple[Refusal, ...]] | None = None,
) -> Plan:
    """Each job's plan, built once from what the steps decided (in the order the pool's
    sync answers them: settled jobs, the queue, then running jobs)."""
    refused = refused or {}
    now = ledger.now
    result: dict[str, JobPlan] = {}
    for st in assessed.settled:
        m = moved.get(st.job.key)
        decisions = m.decisions if m is not None else ()
        result[st.job.key] = JobPlan(
            job=st.job,
            pods=st.pods,
            assessment=st.verdict,
            phase=st.phase,
            workers_target=0,
            migrations=decisions,
        )
    # A queue or a job's preemptibility changes at the soonest wake: the queue's first
    # job plans again then.
    soonest = min((w for w in wakes if w > now), default=None) if queue else None
    for i, o in enumerate(queue):
        wake = o.wake_at
        if i == 0 and soonest is not None and (wake is None or soonest < wake):
            wake = soonest
        key = o.queued.job.key
        own = refused.get(key, ())
        if own and (end := next_end(own, now)) is not None and (wake is None or end < wake):
            wake = end
        result[key] = _queued_plan(o, boarded, moved.get(key), wake, own)
    for r in assessed.running:
        key = r.job.key
        stopped = ledger.preempted.get(key)
        own = refused.get(key, ())
        if stopped is not None:
            result[key] = _preempted_plan(r, stopped, now, own)
            continue
        repaired, top, grew = repairs[key], topped.get(key, {}), growth.grown.get(key, {})
        m = moved.get(key)
        board = _board(boarded, key)
        if m is None and not own and _untouched(r, ledger, repaired, top, grew, growth.wake):
            # (keyed by the job's state without its attained service, which such a
            # plan does not read: the same object across syncs under LAS too)
            result[key] = memo.derive(
                "untouched",
                (r.base,),
                lambda r=r, p=repaired, b=board: _running_plan(r, p, now, board=b),
                board,
            )
        else:
            result[key] = _running_plan(
                r, repaired, now, ledger, top, grew, growth.wake, m, board, own
            )
    return Plan(jobs=MappingProxyType(result))


def _board(boarded: Mapping[str, str | None], key: str) -> Placement | None:
    """The job's TensorBoard's placement, if it has one in this cycle."""
    if key not in boarded:
        return None
    return Placement(type=TENSORBOARD[0], index=TENSORBOARD[1], node=boarded[key])


def _queued_plan(
    o: QueueOutcome,
    boarded: Mapping[str, str | None],
    m: JobMoves | None,
    wake: datetime | None,
    refused: tuple[Refusal, ...] = (),
) -> JobPlan:
    q = o.queued
    placements = dict(o.placed)
    board = _board(boarded, q.job.key)
    if board is not None:
        placements[TENSORBOARD] = board
    return JobPlan(
        job=q.job,
        pods=q.pods,
        assessment=q.verdict,
        phase=o.phase,
        workers_target=o.workers,
        placements=MappingProxyType(placements),
        explain=o.explain,
        wake_at=wake,
        reason=o.reason,
        migrations=m.decisions if m is not None else (),
        refused=refused,
        queue=q.queue,
    )


def _moved(placements: dict[Slot, Placement], m: JobMoves) -> None:
    """Migrations into ``placements``: a moving slot is placed on its target, under its new
    name, with the node it leaves; the old pod runs until the replacement does (the job's
    sync sees ``source``). A slot whose pod has another name keeps that name. (A shrink
    that takes the worker wins over its move: a slot no longer placed stays out.)"""
    for slot, name in m.names.items():
        placed = placements.get(slot)
        if placed is None:
            continue
        move = m.moving.get(slot)
        if move is None:
            placements[slot] = replace(placed, pod=name)
        else:
            placements[slot] = replace(placed, node=move.target, pod=name, source=move.source)


def _place_tensorboards(
    ledger: Ledger,
    running: Sequence[Running],
    repairs: Mapping[str, Repair],
    queue: Sequence[QueueOutcome],
    boards: Mapping[str, Sequence[Pod]],
) -> dict[str, str | None]:
    """Where each admitted job's TensorBoard is or goes (running jobs first, then the jobs
    admitted in this cycle, in queue order); a job whose TensorBoard waits is left out."""
    wanted: list[tuple[Job, list[str | None]]] = []
    for r in running:
        if r.job.tensorboard is not None:
            kept = [(p.replica_type != "worker", p.node) for p in r.pods if p.live]
            placed = [(p.type != WORKER, p.node) for p in repairs[r.job.key].placed.values()]
            wanted.append((r.job, near_nodes([*kept, *placed])))
    wanted += [
        (o.queued.job, near_nodes([(p.type != WORKER, p.node) for p in o.placed.values()]))
        for o in queue
        if o.phase == ADMITTED and o.queued.job.tensorboard is not None
    ]
    out: dict[str, str | None] = {}
    for job, near in wanted:
        ok, node = placed_at(ledger, job, boards.get(job.key, ()), near)
        if ok:
            out[job.key] = node
    return out


def _victim_order(r: Running) -> tuple:
    admitted = r.admission.admitted_at if r.admission is not None else None
    started = admitted or r.job.started_at or NEVER
    return (r.priority, started, r.job.namespace, r.job.name)


def _admit_queue(
    ledger: Ledger,
    queued: Sequence[_Queued],
    running: Sequence[Running],
    priorities: Priorities,
    wakes: list[datetime],
    pool: str,
    checks: Sequence[Check],
) -> list[QueueOutcome]:
    """Step 5: each queued job in order through the admission checks
    (``policy.pool.admission_checks``): admitted as a whole gang, or waiting (and why)."""
    cycle = QueueCycle(ledger, running, priorities, pool, wakes)
    starvation = ledger.rules.starvation
    out: list[QueueOutcome] = []
    for q in queued:
        turn = Turn(q.job, ledger.now, starvation, q.queue, q.stopping)
        got = run(checks, turn, cycle)
        if isinstance(got, Admit):
            out.append(QueueOutcome(q, ADMITTED, got.workers, got.placed))
        else:
            out.append(
                QueueOutcome(q, QUEUED, explain=got.explain, reason=got.reason, wake_at=got.wake_at)
            )
    return out


def _preempted_plan(
    r: Running, stopped: Stopped, now: datetime, refused: tuple[Refusal, ...] = ()
) -> JobPlan:
    """A running job preempted now: Queued without pods, with what it attained so far and
    ``refused``, the kube-scheduler's refusals on the job's record (written as they are)."""
    past = r.attained.past if r.attained is not None else recorded(r.job, r.admission)
    total = _attained_now(r, now)
    record = AttainedService(
        gpu_seconds=total,
        preemptions=past.preemptions + 1,
        las_preemptions=past.las_preemptions + (1 if stopped.las else 0),
        last=Preemption(time=now, by=stopped.shown, reason=stopped.reason),
    )
    count = record.preemptions
    words = (
        f"preempted by {stopped.shown} ({stopped.reason}); queued again as a whole gang "
        f"({count} preemption{'s' if count != 1 else ''}, {total / 3600:.1f} GPU-h attained)"
    )
    return JobPlan(
        job=r.job,
        pods=r.pods,
        assessment=r.verdict,
        phase=QUEUED,
        workers_target=0,
        explain=partial(str, words),
        reason=PREEMPTED,
        service=record,
        refused=refused,
        queue=r.queue,
    )


def _attained_now(r: Running, now: datetime) -> float:
    if r.attained is not None:
        return r.attained.total
    got, _ = attained(r.job, r.pods, r.admission, now, (), 0.0)
    return got.total


def _growth_allowed(
    rules: Rules, ledger: Ledger, running: Sequence[Running], now: datetime
) -> tuple[bool, datetime | None]:
    """Whether the idle rule lets running jobs grow now, else when it may."""
    if Behaviour.ELASTIC not in rules.does:
        return False, None
    if Behaviour.GROW_WHEN_IDLE_ONLY not in rules.does:
        return True, None
    if ledger.acted or ledger.head_waits:
        return False, None
    since = idle_since((r.job, r.admission) for r in running)
    if since is None or now - since >= rules.idle:
        return True, None
    return False, since + rules.idle


def _held(
    rules: Rules, running: Sequence[Running], now: datetime
) -> tuple[list[Running], datetime | None]:
    """The jobs whose size may be decided again (``rules.interval`` since their last
    scale, from their Admission), and when the next of the others may."""
    if not rules.interval:
        return list(running), None
    ready, wakes = [], []
    for r in running:
        when = scaled_at(r.job, r.admission)
        if when is None or now - when >= rules.interval:
            ready.append(r)
        elif r.count < r.job.max_workers:
            wakes.append(when + rules.interval)
    return ready, min(wakes, default=None)


def _untouched(
    r: Running,
    ledger: Ledger,
    repaired: Repair,
    topped: Placed,
    grown: Placed,
    wake: datetime | None,
) -> bool:
    """Nothing of this cycle changes the job: its plan is a function of ``r`` alone."""
    key = r.job.key
    return (
        not repaired.placed
        and not repaired.unplaced
        and not topped
        and not grown
        and wake is None
        and key not in ledger.victims
        and key not in ledger.scales
    )


def _running_plan(
    r: Running,
    repaired: Repair,
    now: datetime,
    ledger: Ledger | None = None,  # None: nothing of the cycle touches the job (_untouched)
    topped: Placed | None = None,
    grown: Placed | None = None,
    wake: datetime | None = None,
    moves: JobMoves | None = None,
    board: Placement | None = None,
    refused: tuple[Refusal, ...] = (),
) -> JobPlan:
    """An admitted job's plan: the pods it keeps, what the cycle placed for it (repairs,
    top-ups, growth, migrations, its TensorBoard), who leaves and its worker target. A
    stuck pod (refused where it is pinned) is not kept: its slot is placed again, or
    waits; the nodes that refused the job wake it when their backoff ends."""
    job = r.job
    victims = ledger.victims.get(job.key, []) if ledger is not None else []
    removed = frozenset(p.name for p in (*r.surplus, *victims))
    scale = ledger.scales.get(job.key) if ledger is not None else None
    target = scale.after if scale is not None else r.target
    if grown:
        target = r.count + len(grown)
        scale = Scale(
            r.target, target, f"grew from {r.count} to {target} workers into idle capacity"
        )
    placed = {**repaired.placed, **(topped or {}), **(grown or {})}
    gone = removed.union(p.name for p in r.verdict.restarts)
    kept = {
        SlotLabel(p.replica_type, p.index): p.node
        for p in r.pods
        if not p.terminating and not p.stuck and p.name not in gone
    }
    placements = {**_typed(job, kept), **placed}
    if moves is not None:
        _moved(placements, moves)
    if board is not None:
        placements[TENSORBOARD] = board
    wake_at = None
    if (
        wake is not None
        and ledger is not None
        and job.worker is not None
        and r.count < job.max_workers
    ):
        when = scaled_at(job, r.admission)
        hold = ledger.rules.interval or ledger.rules.idle
        own = when + hold if when is not None else wake
        wake_at = max(wake, own)
    wake_at = wake_at if wake_at is not None and wake_at > now else None
    if moves is not None and moves.wake_at is not None and moves.wake_at > now:
        wake_at = moves.wake_at if wake_at is None else min(wake_at, moves.wake_at)
    if refused and (end := next_end(refused, now)) is not None:
        wake_at = end if wake_at is None else min(wake_at, end)
    explain, reason = _nothing, ""
    if repaired.unplaced:
        active = tuple(r for r in refused if r.node in avoided(refused, now))
        explain = partial(repair_message, job, repaired.unplaced, active)
        reason = PODS_WAITING_FOR_ROOM
    return JobPlan(
        job=job,
        pods=r.pods,
        assessment=r.verdict,
        phase=ADMITTED,
        workers_target=target,
        placements=MappingProxyType(placements),
        explain=explain,
        remove=removed,
        scale=scale,
        wake_at=wake_at,
        reason=reason,
        moves=moves.moves if moves is not None else (),
        migrations=moves.decisions if moves is not None else (),
        refused=refused,
    )


def _typed(job: Job, by_label: Mapping[SlotLabel, str | None]) -> Placed:
    """Pods' (lower-case type label, index) on their nodes, placed as the job's (replica
    type, index)."""
    types = job.type_of
    return {
        Slot(rt, i): Placement(type=rt, index=i, node=node)
        for (t, i), node in by_label.items()
        if (rt := types(t)) and i >= 0
    }
