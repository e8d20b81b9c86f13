"""The pool's sync hook as a pure function: observe, plan the queue once, answer Admissions.

Metacontroller deletes every owned child an answer leaves out, so the answer always holds
an Admission for every job the pool still plans (queued or admitted), and on a pool spec
it cannot use it hands back the Admissions it observed, unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import orjson
from pydantic import ValidationError

from policy.memo import NO_MEMO, Memo
from policy.model.admission import (
    ADMITTED,
    NO_KUBESHARE,
    NO_SUCH_POOL,
    QUEUED,
    Admission,
    AttainedService,
    BatchSize,
    Gang,
    JobRef,
    LastScale,
    Phase,
    Placement,
    QueuePlace,
    Refusal,
)
from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.bounds import MAX_DEPTH, nested_within
from policy.model.cluster import Cluster, Node
from policy.model.jobs import Job
from policy.model.migration import MigrationAnswer, Moves
from policy.model.pool import DEFAULT_POOL
from policy.model.resources import PODS, Resources, format_quantity
from policy.model.slot import Slot
from policy.model.timeutil import format_time
from policy.pool.batch import Terms as BatchTerms
from policy.pool.batch import chosen_batch
from policy.pool.cadence import DECIDED_AT, DEFERRED_SINCE, Cadence, due, next_tick, tick_from
from policy.pool.cycle import JobPlan, plan
from policy.pool.devices import name_devices
from policy.pool.gang_backends import gang_of, note
from policy.pool.observe import PoolSnapshot, items, observe
from policy.pool.policies import rules_for
from policy.pool.queue_status import places, queue_status, ranked
from policy.pool.rules import Rules
from policy.pool.running import last_scale
from policy.pool.stop import active_condition, held_message

_NO_MEMO = NO_MEMO
_PROBLEMS_SHOWN = 10  # the status names this many unreadable objects (it counts them all)


@dataclass(frozen=True)
class PoolDecision:
    children: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    resync_after: float | None = None


@dataclass(frozen=True)
class _Answered:
    """A pool's last answer, the plan-relevant input it answered, and until when no time
    rule (starvation, idle growth, a deadline) can change it."""

    key: frozenset
    children: list[dict[str, Any]]
    status: dict[str, Any]
    wake: datetime | None
    at: datetime  # the ``now`` it was planned at
    valid_until: datetime | None
    timeless: bool  # the same later too (``_timeless``); else only at ``at`` itself


def _fingerprint(parent: Mapping[str, Any], snap: PoolSnapshot, rules: Rules) -> frozenset | None:
    """What a plan reads, by value: two snapshots with equal fingerprints plan alike (up to
    the time rules). A job's status changes often (replica counts, its message); the plan
    reads only a few of its fields, so most of those changes leave this unchanged. None
    for an input with values that cannot be compared (nothing is then reused)."""
    cluster = snap.cluster
    if snap.spec_content is None:
        return None
    try:
        return _values(parent, snap, cluster, rules)
    except TypeError:
        return None


def _values(
    parent: Mapping[str, Any], snap: PoolSnapshot, cluster: Cluster, rules: Rules
) -> frozenset:
    # Least attained service reads when each pod started (its service grows from then).
    started = [("service", p.name, p.started) for p in cluster.pods] if rules.reads_service else []
    return frozenset(
        (
            ("spec", snap.spec_content),
            ("pools", snap.other_pools, snap.other_gangs),
            ("priorities", tuple(sorted(snap.priorities.classes.items())), snap.priorities.default),
            *(n.plan_key for n in cluster.nodes),
            *(p.plan_key for p in cluster.pods),
            # A stuck pod's refusal counts once: the plan reads when it was created.
            *(("stuck", p.namespace, p.name, p.created) for p in cluster.pods if p.stuck),
            *(j.plan_key for j in snap.jobs),
            *(
                ("started", j.key, j.status.get("startTime"))
                for j in snap.jobs
                if not (a := snap.admissions.get(j.key)) or not a.admitted_at
            ),
            *(j.plan_key for j, _ in snap.orphans),
            *(("no-kubeshare", j.plan_key) for j in snap.no_kubeshare),
            ("problems", snap.problems),
            *snap.admissions.values(),
            *(("migration", q) for reqs in snap.requests.values() for q in reqs),
            *started,
        )
    )


def sync(
    parent: Mapping[str, Any],
    children: Mapping[str, Any],
    related: Mapping[str, Any],
    now: datetime,
    memo: Memo = _NO_MEMO,
) -> PoolDecision:
    try:
        snap = observe(parent, children, related, memo)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in ("spec", *first["loc"]))
        problem = f"the pool's {where} is invalid: {first['msg']}"
        return _unchanged(children, problem, parent, now)
    interval = timedelta(seconds=snap.spec.decisionIntervalSeconds)
    cadence = Cadence.of(parent)
    if not due(cadence, now, interval):
        return _held(parent, children, cadence, now, interval)
    rules = memo.derive("rules", (snap.spec,), partial(rules_for, snap.spec))
    key = _fingerprint(parent, snap, rules) if memo.limit > 0 else None
    last = memo.last if key is not None else None
    if isinstance(last, _Answered) and last.key == key and _still_valid(last, now):
        status = _decided(_active(last.status, parent, snap, now), now, interval)
        return PoolDecision(last.children, status, _resync(last.wake, now, interval))
    result = plan(snap, now, rules, memo)
    stamp = format_time(now)
    hostnames = {n.name: n.hostname for n in snap.cluster.nodes if n.hostname != n.name}
    gpus: dict[str, dict[Slot, str | None]] = {}
    if snap.spec.kubeshare == "v1":
        admitted = {
            k: (jp.job, jp.placements) for k, jp in result.jobs.items() if jp.phase == ADMITTED
        }
        gpus = name_devices(snap.cluster, admitted)
    renamed = tuple(sorted(hostnames.items()))
    queued = ranked(result.jobs.values(), now, snap.priorities)
    placed = _deferred(snap, result.jobs.values(), places(queued))
    admissions = [
        _answer(
            snap, jp, now, hostnames, renamed, gpus.get(jp.job.key), memo, placed.get(jp.job.key)
        )
        for jp in result.jobs.values()
        if jp.phase in (QUEUED, ADMITTED)
    ]
    admissions += [_orphan(snap, job, wanted).to_object() for job, wanted in snap.orphans]
    admissions += [_no_kubeshare(snap, job).to_object() for job in snap.no_kubeshare]
    wakes = [jp.wake_at for jp in result.jobs.values() if jp.wake_at is not None]
    wake = min(wakes) if wakes else None
    deadlines = [
        jp.assessment.deadline for jp in result.jobs.values() if jp.assessment.deadline is not None
    ]
    until = min([*wakes, *deadlines]) if wakes or deadlines else None
    status = _status(snap, result.jobs.values(), memo)
    elsewhere = [(j, NO_SUCH_POOL) for j, _ in snap.orphans]
    elsewhere += [(j, NO_KUBESHARE) for j in snap.no_kubeshare]
    queue = queue_status(
        queued,
        now,
        rules,
        snap.priorities,
        waiting_elsewhere=elsewhere,
    )
    if queue:
        status["queue"] = queue
    if key is not None:
        timeless = _timeless(snap, admissions, stamp)
        memo.last = _Answered(key, admissions, status, wake, now, until, timeless)
    status = _decided(_active(status, parent, snap, now), now, interval)
    return PoolDecision(admissions, status, _resync(wake, now, interval))


def _deferred(
    snap: PoolSnapshot, plans: Iterable[JobPlan], placed: Mapping[str, QueuePlace]
) -> Mapping[str, QueuePlace]:
    """The places to write: in a sync that admits a job, a waiting job keeps the place its
    Admission holds. A place is for people, and rewriting every waiting job's Admission
    (and then its status) as the queue moves up spends Metacontroller's client budget
    (``--client-go-qps``) before the admitted job's pods are created: they came one at a
    time, 1.6 s instead of 0.2 s, in ``tests/test_simulate.py``'s FIFO scenario. The next
    sync, which the admitted job's pods bring within seconds, writes them."""
    admits = any(
        jp.phase == ADMITTED
        and not ((before := snap.admissions.get(jp.job.key)) is not None and before.admitted)
        for jp in plans
    )
    if not admits:
        return placed
    kept = dict(placed)
    for key in placed:
        before = snap.admissions.get(key)
        if before is not None and not before.admitted and before.queue is not None:
            kept[key] = before.queue
    return kept


def _active(
    status: dict[str, Any], parent: Mapping[str, Any], snap: PoolSnapshot, now: datetime
) -> dict[str, Any]:
    """The status with the pool's ``Active`` condition (``policy.pool.stop``), from its
    spec and the condition it has: no part of what a sync keeps, so an answer given again
    keeps the observed transition time too."""
    condition = active_condition(snap.spec.stopPolicy, parent.get("status"), format_time(now))
    return {**status, "conditions": [condition]}


def _decided(status: dict[str, Any], now: datetime, interval: timedelta) -> dict[str, Any]:
    """The status of a decision, which says when it was made under a decision interval."""
    return {**status, DECIDED_AT: format_time(now)} if interval else status


def _held(
    parent: Mapping[str, Any],
    children: Mapping[str, Any],
    cadence: Cadence,
    now: datetime,
    interval: timedelta,
) -> PoolDecision:
    """Between two ticks of the decision interval: every Admission as observed, the status
    as it is (with the first event that found no decision due), synced again at the tick."""
    kept, problems = _echoed(children)
    observed = parent.get("status")
    status = dict(observed) if isinstance(observed, Mapping) else {}
    if cadence.deferral(now) is None:
        status[DEFERRED_SINCE] = format_time(now)
    if problems:
        status["problems"] = problems[:_PROBLEMS_SHOWN]
    return PoolDecision(kept, status, _resync(next_tick(now, interval), now))


def _timeless(snap: PoolSnapshot, answered: list[dict[str, Any]], stamp: str) -> bool:
    """Whether the same input answers the same later (until a time rule's wake), so the
    answer may be given again. Not when it records this sync's time (a job admitted or
    scaled now, a preemption with what its victim attained by now, a move): a sync a
    second later writes its own, in any process. Nor when a job resumes now (it joins the
    queue at ``now``, and its starvation clock with it)."""
    if any(job.resumed for job in snap.jobs):
        return False
    try:
        return b'"' + stamp.encode() + b'"' not in orjson.dumps(answered)
    except TypeError:  # (cannot happen: Admissions are plain JSON) never answered again
        return False


def _still_valid(last: _Answered, now: datetime) -> bool:
    """At the very time it was planned; if timeless, from then (a clock set back plans
    again) until a time rule fires."""
    if now == last.at:
        return True
    return last.timeless and last.at < now and (last.valid_until is None or now < last.valid_until)


def _resync(
    wake: datetime | None, now: datetime, interval: timedelta = timedelta(0)
) -> float | None:
    """Seconds until ``wake``; under a decision interval, until the first tick from then
    (a sync before it could not decide)."""
    if wake is None:
        return None
    if interval and wake > now:
        wake = tick_from(wake, interval)
    return max(1.0, math.ceil((wake - now).total_seconds()))


def _answer(
    snap: PoolSnapshot,
    jp: JobPlan,
    now: datetime,
    hostnames: Mapping[str, str],
    renamed: tuple[tuple[str, str], ...],
    gpus: Mapping[Slot, str | None] | None,
    memo: Memo,
    place: QueuePlace | None = None,
) -> dict[str, Any]:
    """The Admission object for a plan (``place``: a queued job's place in the queue). A
    running job's plan that is the very object of an earlier sync (nothing in this cycle
    touched it: policy.pool.cycle), answered from the same Admission, under the same pool
    spec, gets the same object (written without ``now``: its admission time and last
    scale are on record)."""
    previous = snap.admissions.get(jp.job.key)
    make = partial(_admission, snap, jp, now, hostnames, place=place)
    if gpus is None and previous is not None:
        if jp.phase == ADMITTED and jp.scale is None and previous.admitted and previous.admitted_at:
            return memo.derive(
                "admission",
                (jp, previous, snap.spec),
                lambda: make().to_object(),
                snap.name,
                snap.other_gangs,
                renamed,
            )
        if _still_waiting(jp, previous):
            # A queued job that waits for the same reason keeps its words (_admission):
            # its Admission is a function of the job and the one it had.
            return memo.derive(
                "waiting",
                (jp.job, previous, snap.spec),
                lambda: make().to_object(),
                jp.reason,
                place,
                snap.name,
                snap.other_gangs,
            )
    return make(gpus).to_object()


def _still_waiting(jp: JobPlan, previous: Admission) -> bool:
    return (
        jp.phase == QUEUED
        and bool(jp.reason)
        and previous.phase == QUEUED
        and previous.reason == jp.reason
        and bool(previous.message)
        and not jp.placements
        and not jp.moves
        and not jp.migrations
        and jp.service is None
        and jp.scale is None
        and jp.workers_target == 0
        and jp.refused == previous.refused
    )


def _admission(
    snap: PoolSnapshot,
    jp: JobPlan,
    now: datetime,
    hostnames: Mapping[str, str],
    gpus: Mapping[Slot, str | None] | None = None,
    place: QueuePlace | None = None,
) -> Admission:
    job = jp.job
    previous = snap.admissions.get(job.key)
    scale: LastScale | None
    if jp.scale is not None and jp.scale.after != jp.scale.before:
        scale = jp.scale.recorded(now)
    else:
        scale = last_scale(job, previous)
    if (
        previous is not None
        and jp.reason
        and previous.reason == jp.reason
        and previous.phase == jp.phase
        and previous.message
        and previous.refused == jp.refused  # a new refusal has words of its own
    ):
        message = previous.message  # the reason is the same: so are the words (explain.py)
    else:
        message = _message(jp)
    admitted = None
    if jp.phase == ADMITTED:  # written once, when the pool admits the job
        kept = previous.admitted_at if previous is not None and previous.admitted else None
        # A job resumed a moment ago still shows the start it kept while suspended; one
        # preempted runs anew from now.
        again = job.resumed or (previous is not None and previous.preempted)
        started = None if again else job.started_at
        admitted = kept or started or now
    running = None  # the batch its running pods were given (none: every pod starts)
    if previous is not None and previous.admitted and not job.resumed:
        running = previous.batch
    batch = chosen_batch(
        job,
        snap.speedups.get(job.key),
        jp.placements,
        jp.workers_target if jp.phase == ADMITTED else 0,
        running,
        BatchTerms(snap.spec.restartSeconds, snap.spec.minGainPerWorker),
    )
    service = jp.service or (previous.service if previous is not None else None)
    if service is None:
        service = _status_service(job)
    return _admission_for(
        job,
        snap,
        phase=jp.phase,
        message=message,
        reason=jp.reason,
        workers=jp.workers_target,
        pods=_written(job, jp.placements, hostnames, gpus or {}),
        last_scale=scale,
        admitted_at=admitted,
        gang=gang_of(snap.spec),
        gang_note=note(job, snap.name, snap.spec, snap.other_gangs),
        moves=jp.moves or (previous.moves if previous is not None else ()),
        migrations=jp.migrations,
        service=service,
        grace_seconds=snap.spec.preemptionGraceSeconds,
        refused=jp.refused,
        queue=place if jp.phase == QUEUED else None,
        batch=batch,
        kubeshare=snap.spec.kubeshare
        if job.wants_kubeshare and snap.spec.kubeshare != "none"
        else "",
    )


def _written(
    job: Job,
    placements: Mapping[Slot, Placement],
    hostnames: Mapping[str, str],
    gpus: Mapping[Slot, str | None],
) -> tuple[Placement, ...]:
    """The plan's placements as the Admission lists them: in the kind's replica order (a
    TensorBoard last), each with its node's hostname when that is not the node's name and
    its KubeShare device; a fractional pod no device was found for is left out (placed
    again next sync)."""
    types = job.kind.replica_types

    def order(slot: Slot) -> tuple[int, int]:
        t, i = slot
        return (types.index(t) if t in types else len(types), i)

    out = []
    for slot in sorted(placements, key=order):
        gpu = gpus.get(slot, "")
        if gpu is None:
            continue  # no device found for it: placed again
        p = placements[slot]
        host = hostnames.get(p.node) if p.node else None
        if host is not None or gpu:
            p = replace(p, hostname=host, gpu=gpu or None)
        out.append(p)
    return tuple(out)


def _status_service(job: Job) -> AttainedService | None:
    """The record a job's status copied from an Admission that is gone (e.g. lost)."""
    section = job.status.get("scheduling")
    return (
        AttainedService.from_json(section.get("service")) if isinstance(section, Mapping) else None
    )


def _admission_for(
    job: Job,
    snap: PoolSnapshot,
    phase: Phase,
    *,
    message: str = "",
    reason: str = "",
    workers: int = 0,
    pods: tuple[Placement, ...] = (),
    last_scale: LastScale | None = None,
    admitted_at: datetime | None = None,
    gang: Gang | None = None,
    gang_note: str = "",
    moves: tuple[Moves, ...] = (),
    migrations: tuple[MigrationAnswer, ...] = (),
    service: AttainedService | None = None,
    grace_seconds: int | None = None,
    refused: tuple[Refusal, ...] = (),
    kubeshare: str = "",
    queue: QueuePlace | None = None,
    batch: BatchSize | None = None,
) -> Admission:
    """The job's Admission in this pool: what every one says of its job and pool, and the
    fields the plan decided, each by its name in ``Admission`` (a misspelt one is a
    TypeError here, never a field left out)."""
    return Admission(
        pool=snap.name,
        namespace=job.namespace,
        job=JobRef(
            api_version=job.kind.api_version, kind=job.kind.kind, name=job.name, uid=job.uid
        ),
        phase=phase,
        binding=snap.spec.binding,
        message=message,
        reason=reason,
        workers=workers,
        pods=pods,
        last_scale=last_scale,
        admitted_at=admitted_at,
        gang=gang,
        gang_note=gang_note,
        moves=moves,
        migrations=migrations,
        service=service,
        grace_seconds=grace_seconds,
        refused=refused,
        kubeshare=kubeshare,
        queue=queue,
        batch=batch,
    )


def _message(jp: JobPlan) -> str:
    message = jp.message
    if jp.phase != QUEUED or message.startswith("waiting"):
        return message
    return f"waiting: {message}" if message else "waiting for admission"


def _orphan(snap: PoolSnapshot, job: Job, wanted: str) -> Admission:
    pools = ", ".join((DEFAULT_POOL, *snap.other_pools))
    message = (
        f"waiting: TrainingPool {wanted!r} does not exist (pools: {pools}); set "
        "spec.runPolicy.schedulingPolicy.queue to one of them, or create the pool"
    )
    return _admission_for(job, snap, QUEUED, message=message, reason=NO_SUCH_POOL)


def _no_kubeshare(snap: PoolSnapshot, job: Job) -> Admission:
    message = (
        f"waiting: the job asks for fractional GPUs (KubeShare), and TrainingPool "
        f"{snap.name!r} has no KubeShare (spec.kubeshare: none); it never runs without its "
        "GPU. Set the pool's spec.kubeshare to v1 or v2 (chart value scheduling.kubeshare), or ask "
        "for whole GPUs (nvidia.com/gpu)"
    )
    return _admission_for(job, snap, QUEUED, message=message, reason=NO_KUBESHARE)


def _status(snap: PoolSnapshot, plans: Any, memo: Memo = NO_MEMO) -> dict[str, Any]:
    """Counts for people (``kubectl get trainingpools``): no times, so it stays stable."""
    plans = list(plans)
    capacity = Resources.total(n.allocatable for n in snap.cluster.nodes)
    allocated = capacity - Resources.total(snap.cluster.free.values())
    names = sorted(k for k in capacity if k != PODS and not k.startswith("dragonet.io/"))
    status: dict[str, Any] = {
        "nodes": len(snap.cluster.nodes),
        "queued": sum(1 for jp in plans if jp.phase == QUEUED) + len(snap.orphans),
        "admitted": sum(1 for jp in plans if jp.phase == ADMITTED),
        "capacity": {k: format_quantity(k, capacity[k]) for k in names},
        "allocated": {k: format_quantity(k, allocated[k]) for k in names},
        "usage": _usage(capacity, allocated),
        "nodeAllocation": _node_allocation(snap, memo),
    }
    said = []
    if snap.spec.stopPolicy != "None":
        said.append(held_message(snap.name, snap.spec.stopPolicy).removeprefix("waiting: "))
    if snap.orphans:
        shown = ", ".join(sorted({w for _, w in snap.orphans}))
        said.append(f"{len(snap.orphans)} job(s) name pools that do not exist: {shown}")
    if snap.no_kubeshare:
        status["queued"] += len(snap.no_kubeshare)
        said.append(
            f"{len(snap.no_kubeshare)} job(s) ask for fractional GPUs and the pool has no "
            "KubeShare (spec.kubeshare)"
        )
    if snap.problems:
        said.append(f"{len(snap.problems)} object(s) could not be read and are left out")
        status["problems"] = list(snap.problems[:_PROBLEMS_SHOWN])
    if said:
        status["message"] = "; ".join(said)
    return status


def _node_allocation(snap: PoolSnapshot, memo: Memo) -> list[dict[str, Any]]:
    """Each node's allocatable and what its pods request, the load the Container Monitor
    (``monitor/``) compares across the pool. It changes only when the totals above do.
    (A node and its free room are the objects of the last sync while they are unchanged:
    so is its row. Callers do not change the row.)"""
    rows = []
    for node in snap.cluster.nodes:
        free = snap.cluster.free.get(node.name, node.allocatable)
        rows.append(memo.derive("row", (node, free), partial(_node_row, node, free)))
    return rows


def _node_row(node: Node, free: Resources) -> dict[str, Any]:
    # Plain vectors: a KubeShare node's device accounting is not part of its row.
    name, allocatable, free = node.name, Resources(node.allocatable), Resources(free)
    used = allocatable - free
    names = sorted(k for k in allocatable if k != PODS)
    return {
        "name": name,
        "allocatable": {k: format_quantity(k, allocatable[k]) for k in names},
        "allocated": {k: format_quantity(k, used[k]) for k in names},
    }


def _usage(capacity: Resources, allocated: Resources) -> str:
    gpus = [k for k in capacity if k.endswith("/gpu")]
    if gpus:
        used, total = sum(allocated[k] for k in gpus), sum(capacity[k] for k in gpus)
        return f"{format_quantity('gpu', used)}/{format_quantity('gpu', total)} GPU"
    return (
        f"{format_quantity('cpu', allocated['cpu'])}/{format_quantity('cpu', capacity['cpu'])} cpu"
    )


def _unchanged(
    children: Mapping[str, Any], problem: str, parent: Mapping[str, Any], now: datetime
) -> PoolDecision:
    """Keep every Admission as observed (leaving one out would delete it), and say why (the
    pool admits nothing: its ``Active`` condition is False)."""
    kept, problems = _echoed(children)
    observed = parent.get("status")
    condition = active_condition(None, observed, format_time(now), problem)
    status: dict[str, Any] = {"message": problem, "conditions": [condition]}
    if problems:
        status["problems"] = problems[:_PROBLEMS_SHOWN]
    return PoolDecision(kept, status)


def _echoed(children: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every Admission as observed, and what could not be. One that cannot be echoed (not
    JSON we can read, or nested deeper than any Admission the API server stores) is left
    out and named: its job keeps its pods (they are facts, policy.job.sync), and the pool
    writes its Admission anew at its next decision."""
    kept: list[dict[str, Any]] = []
    problems: list[str] = []
    for key, obj in items(children, ADMISSIONS):
        try:
            meta = obj.get("metadata") or {}
            labels = meta.get("labels")
            echo = {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "metadata": {k: meta[k] for k in ("name", "namespace") if k in meta},
                "spec": obj.get("spec"),
            }
            if isinstance(labels, Mapping):
                strings = {k: v for k, v in labels.items() if isinstance(v, str)}
                echo["metadata"]["labels"] = strings
        except (AttributeError, ValueError) as err:  # not an object, or undecodable
            problems.append(f"Admission {key} is left out: {err or type(err).__name__}")
            continue
        if not nested_within(echo):
            problems.append(f"Admission {key} is left out: nested deeper than {MAX_DEPTH} levels")
            continue
        kept.append(echo)
    return kept, problems
