"""One job's slice of the plan, turned into what its sync hook answers.

``reconcile`` returns the desired children (existing pods the job keeps, new pods the plan
gives it, a headless Service for each) and the job's status. Status only changes when
something happened: timestamps are written once, when the event they record occurs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policy.config import PolicyConfig
from policy.elastic import LAST_SCALE
from policy.job.render import render_pod, render_service
from policy.model import conditions as cond
from policy.model.cluster import Cluster, Pod
from policy.model.jobs import Job, JobKind
from policy.model.lifecycle import REASON_INVALID
from policy.model.timeutil import format_time, parse_time
from policy.plan import ADMITTED, FINISHED, INVALID, QUEUED, SUSPENDED, JobPlan


@dataclass(frozen=True)
class Decision:
    children: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    resync_after: float | None = None


def _kept_pods(jp: JobPlan) -> list[Pod]:
    """Observed pods that stay; the rest are omitted, so Metacontroller deletes them."""
    pods = [p for p in jp.pods if not p.terminating]
    if jp.phase == SUSPENDED:
        return []
    if jp.phase == FINISHED:
        outcome = jp.assessment.outcome
        policy = jp.job.clean_pod_policy
        if outcome is None or outcome.deletes_everything or policy == "All":
            return []
        if policy == "Running":
            return [p for p in pods if p.phase in ("Succeeded", "Failed")]
        return pods
    restarting = {p.name for p in jp.assessment.restarts}
    return [p for p in pods if p.name not in restarting and not p.stuck and p.name not in jp.remove]


def _replica_statuses(jp: JobPlan, succeeded: bool) -> dict[str, dict[str, int]]:
    out = {}
    for rtype in jp.job.replicas:
        mine = [p for p in jp.pods if p.replica_type == rtype.lower()]
        active = sum(1 for p in mine if p.phase == "Running" and not p.terminating)
        failed = sum(
            1 for p in mine if p.phase == "Failed" or (p.phase == "Running" and p.terminating)
        )
        done = sum(1 for p in mine if p.phase == "Succeeded")
        if succeeded:
            done, active = done + active, 0
        out[rtype] = {"active": active, "succeeded": done, "failed": failed}
    return out


def _children(
    jp: JobPlan, cluster: Cluster, config: PolicyConfig
) -> tuple[list[dict[str, Any]], list[str]]:
    job = jp.job
    placed: dict[tuple[str, int], str | None] = {}
    for p in _kept_pods(jp):
        slot = _slot_of(job, p)
        if slot is not None:
            placed[slot] = p.node
    placed.update(jp.create)
    pods = []
    for (rtype, index), node in sorted(placed.items()):
        n = cluster.by_name.get(node) if node else None
        hostname = n.hostname if n else node
        pods.append(
            render_pod(job, rtype, index, node, hostname, config.binding, config.cluster_domain)
        )
    # A restarting pod keeps its Service: its peers' DNS name never disappears.
    named = set(placed) | {_slot_of(job, p) for p in jp.assessment.restarts} - {None}
    services = [render_service(job, rtype, index) for rtype, index in sorted(named)]
    return [*pods, *services], sorted({n for n in placed.values() if n})


def _slot_of(job: Job, pod: Pod) -> tuple[str, int] | None:
    rtype = next((t for t in job.replicas if t.lower() == pod.replica_type), None)
    return (rtype, pod.index) if rtype is not None and pod.index >= 0 else None


def _conditions(jp: JobPlan, stamp: str, resumed: bool) -> list[dict[str, Any]]:
    job, kind, outcome = jp.job, jp.job.kind.kind, jp.assessment.outcome

    def mark(conds: list, ctype: str, status: str, reason: str, message: str) -> list:
        return cond.set_condition(conds, ctype, status, f"{kind}{reason}", message, stamp)

    conds = list(jp.job.status.get("conditions") or [])
    conds = mark(conds, cond.CREATED, "True", "Created", f"{kind} {job.name} is created.")
    if jp.phase == FINISHED and outcome is not None:
        return cond.set_condition(
            conds, outcome.type, "True", outcome.reason, outcome.message, _ended(jp, stamp)
        )
    if jp.phase == SUSPENDED:
        suspended = f"{kind} {job.name} is suspended."
        if cond.is_true(conds, cond.RUNNING):
            conds = mark(conds, cond.RUNNING, "False", "Suspended", suspended)
        return mark(conds, cond.SUSPENDED, "True", "Suspended", suspended)
    if resumed:
        conds = mark(conds, cond.SUSPENDED, "False", "Resumed", f"{kind} {job.name} is resumed.")
    restarts = jp.assessment.restarts
    if restarts:
        types = "/".join(sorted({p.replica_type for p in restarts}))
        why = f"{len(restarts)} {types} replica(s) failed"
        return mark(
            conds,
            cond.RESTARTING,
            "True",
            "Restarting",
            f"job {job.name} is restarting because {why}.",
        )
    if jp.assessment.running:
        since = _running_since(jp) or stamp
        conds = cond.set_condition(
            conds, cond.RUNNING, "True", f"{kind}Running", f"{kind} {job.key} is running.", since
        )
    return conds


# Times taken from the pods, not from ``now``: a sync that reads a stale parent (one whose
# status lacks the time an earlier sync wrote) then writes the same time again, instead of a
# newer one that the next stale read would overwrite, back and forth, forever.


def _running_since(jp: JobPlan) -> str | None:
    """When the pods that make the job Running (its chief, else its workers) started."""
    chief = (jp.job.chief_type or "Worker").lower()
    times = [
        p.started
        for p in jp.pods
        if p.replica_type == chief and p.phase == "Running" and p.live and p.started
    ]
    return _earliest(times)


def _ended(jp: JobPlan, stamp: str) -> str:
    """When the job ended: its recorded completion, else when its last pod terminated."""
    recorded = jp.job.status.get("completionTime")
    if isinstance(recorded, str) and parse_time(recorded):
        return recorded
    done = [p.finished for p in jp.pods if p.finished and p.phase in ("Succeeded", "Failed")]
    latest = [t for t in (parse_time(s) for s in done) if t is not None]
    return format_time(max(latest)) if latest else stamp


def _first_created(jp: JobPlan) -> str | None:
    return _earliest([p.created for p in jp.pods if p.created])


def _earliest(stamps: list[str]) -> str | None:
    parsed = [t for t in (parse_time(s) for s in stamps) if t is not None]
    return format_time(min(parsed)) if parsed else None


def _times(jp: JobPlan, stamp: str, resumed: bool) -> dict[str, str]:
    """Written once, when the event happens; then carried over unchanged."""
    prev, times = jp.job.status, {}
    if jp.phase != SUSPENDED:
        times["enqueueTime"] = (
            stamp if resumed else prev.get("enqueueTime") or _created(jp.job) or stamp
        )
    if jp.phase == ADMITTED or (jp.phase == FINISHED and prev.get("startTime")):
        times["startTime"] = prev.get("startTime") or _first_created(jp) or stamp
        times["startRunTime"] = prev.get("startRunTime") or times["startTime"]
    if jp.phase == FINISHED:
        times["completionTime"] = prev.get("completionTime") or _ended(jp, stamp)
        times["finishedTime"] = prev.get("finishedTime") or times["completionTime"]
    return times


def reconcile(jp: JobPlan, cluster: Cluster, now: datetime, config: PolicyConfig) -> Decision:
    job, stamp = jp.job, format_time(now)
    resumed = cond.is_true(job.status.get("conditions") or [], cond.SUSPENDED) and (
        jp.phase != SUSPENDED
    )
    children, nodes = _children(jp, cluster, config)
    outcome = jp.assessment.outcome
    succeeded = outcome is not None and outcome.type == cond.SUCCEEDED
    status: dict[str, Any] = {
        **_times(jp, stamp, resumed),
        "conditions": _conditions(jp, stamp, resumed),
        "replicaStatuses": _replica_statuses(jp, succeeded),
        "scheduling": {
            "phase": jp.phase,
            "message": _message(jp),
            "workers": {
                "current": sum(1 for p in jp.pods if p.replica_type == "worker" and p.live),
                "target": jp.workers_target,
                "min": job.min_workers,
                "max": job.max_workers,
            },
            "nodes": nodes,
        },
    }
    scale = _last_scale(jp, stamp)
    if scale:
        status["scheduling"][LAST_SCALE] = scale
    wake = [t for t in (jp.wake_at,) if t is not None]
    if jp.assessment.deadline is not None and jp.phase == ADMITTED:
        wake.append(jp.assessment.deadline)
    resync = max(1.0, math.ceil((min(wake) - now).total_seconds())) if wake else None
    return Decision(children=children, status=status, resync_after=resync)


def _last_scale(jp: JobPlan, stamp: str) -> dict[str, Any] | None:
    """Written once, when the plan changes the worker target; then carried over, so the
    idle rule and users can read when and why the job last scaled."""
    if jp.scale is not None and jp.scale.after != jp.scale.before:
        return {
            "time": stamp,
            "from": jp.scale.before,
            "to": jp.scale.after,
            "reason": jp.scale.reason,
        }
    prev = (jp.job.status.get("scheduling") or {}).get(LAST_SCALE)
    return dict(prev) if isinstance(prev, Mapping) else None


def _created(job: Job) -> str | None:
    return format_time(job.created) if job.created else None


def _message(jp: JobPlan) -> str:
    if jp.phase == FINISHED and jp.assessment.outcome:
        return jp.assessment.outcome.message
    if jp.phase == SUSPENDED:
        return "suspended (runPolicy.suspend is true); resuming re-enters the queue"
    if jp.phase == QUEUED:
        message = jp.message
        if message.startswith("waiting"):
            return message
        return f"waiting: {message}" if message else "waiting for admission"
    return jp.message or _foreign_scheduler(jp)


def _foreign_scheduler(jp: JobPlan) -> str:
    """Pods pinned by Dragonet still need a scheduler to bind them; one that names a
    scheduler the cluster may not run (kube-batch, volcano) can wait forever."""
    waiting = sorted(
        {p.scheduler for p in jp.pods if p.live and not p.bound and p.scheduler}
        - {"default-scheduler"}
    )
    if not waiting:
        return ""
    n = sum(1 for p in jp.pods if p.live and not p.bound and p.scheduler in waiting)
    return (
        f"{n} pod(s) wait to be bound by scheduler {', '.join(waiting)} (their template's "
        "schedulerName); Dragonet places them, so without that scheduler they stay Pending: "
        "remove schedulerName, or use binding nodeName"
    )


def invalid(
    obj_status: Mapping[str, Any], kind: JobKind, key: str, name: str, problem: str, now: datetime
) -> Decision:
    """An invalid spec: no children, and a Failed condition naming the problem."""
    stamp = format_time(now)
    conds = cond.set_condition(
        obj_status.get("conditions") or [],
        cond.CREATED,
        "True",
        f"{kind.kind}Created",
        f"{kind.kind} {name} is created.",
        stamp,
    )
    message = f"{kind.kind} {key} is invalid: {problem}"
    conds = cond.set_condition(
        conds, cond.FAILED, "True", f"{kind.kind}{REASON_INVALID}", message, stamp
    )
    status = {
        k: v for k, v in obj_status.items() if k in ("enqueueTime", "startTime", "startRunTime")
    }
    status.update(
        conditions=conds,
        completionTime=obj_status.get("completionTime") or stamp,
        scheduling={"phase": INVALID, "message": message},
    )
    return Decision(children=[], status=status)
