"""A job's status: Kubeflow's conditions and replica statuses, times, and Dragonet's
``scheduling`` section (phase, why it waits, workers, nodes, last scaling).

Status only changes when something happened: timestamps are written once, when the event
they record occurs, and taken from the pods where the pods know them, so a sync that reads
a stale copy of its job writes the same time again (DESIGN §2.7).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from policy.job.podgroup import pod_group_name
from policy.job.view import FINISHED, INVALID, SUSPENDED, JobSyncView
from policy.model import conditions as cond
from policy.model.admission import ADMITTED, QUEUED, WAITING_FOR_POOL, AttainedService, LastScale
from policy.model.jobs import CHECKPOINT_ANNOTATION, Job, JobKind
from policy.model.lifecycle import REASON_INVALID, running_types
from policy.model.migration import Moves
from policy.model.refusal import refused_note
from policy.model.timeutil import format_time, parse_time

LAST_SCALE = "lastScale"
# The longest problem a Failed condition quotes: metav1.Condition's bound on a message
# (32768), less room for the words around it.
MAX_PROBLEM = 32_000
SERVICE = "service"  # attained service of earlier runs, preemptions (pool/attained_service.py)


def replica_statuses(v: JobSyncView, succeeded: bool) -> dict[str, dict[str, int]]:
    out = {}
    for rtype in v.job.replicas:
        mine = [p for p in v.pods if p.replica_type == rtype.lower()]
        active = sum(1 for p in mine if p.phase == "Running" and not p.terminating)
        failed = sum(
            1 for p in mine if p.phase == "Failed" or (p.phase == "Running" and p.terminating)
        )
        done = sum(1 for p in mine if p.phase == "Succeeded")
        if succeeded:
            done, active = done + active, 0
        out[rtype] = {"active": active, "succeeded": done, "failed": failed}
    return out


def conditions(v: JobSyncView, stamp: str) -> list[dict[str, Any]]:
    job, kind, outcome = v.job, v.job.kind.kind, v.assessment.outcome

    def mark(conds: list, ctype: str, status: str, reason: str, message: str) -> list:
        return cond.set_condition(conds, ctype, status, f"{kind}{reason}", message, stamp)

    conds = list(v.job.status.get("conditions") or [])
    # When the job was created, not when this sync ran: a sync reading a stale copy of the
    # job (without the condition) writes the very same condition again.
    created = _created(job) or stamp
    conds = cond.set_condition(
        conds, cond.CREATED, "True", f"{kind}Created", f"{kind} {job.name} is created.", created
    )
    if v.phase == FINISHED and outcome is not None:
        return cond.set_condition(
            conds, outcome.type, "True", outcome.reason, outcome.message, _ended(v, stamp)
        )
    if v.phase == SUSPENDED:
        suspended = f"{kind} {job.name} is suspended."
        if cond.is_true(conds, cond.RUNNING):
            conds = mark(conds, cond.RUNNING, "False", "Suspended", suspended)
        return mark(conds, cond.SUSPENDED, "True", "Suspended", suspended)
    if v.resumed:
        conds = mark(conds, cond.SUSPENDED, "False", "Resumed", f"{kind} {job.name} is resumed.")
    restarts = v.assessment.restarts
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
    admission = v.admission
    if v.phase == QUEUED and admission is not None and admission.preempted:
        last = admission.service.last if admission.service is not None else None
        if last is not None and cond.is_true(conds, cond.RUNNING):
            words = f"{kind} {job.name} was preempted by {last.by}: {last.reason}."
            conds = cond.set_condition(
                conds, cond.RUNNING, "False", f"{kind}Preempted", words, format_time(last.time)
            )
        return conds
    if v.assessment.running:
        since = _running_since(v) or stamp
        conds = cond.set_condition(
            conds, cond.RUNNING, "True", f"{kind}Running", f"{kind} {job.key} is running.", since
        )
    return conds


# Times taken from the pods, not from ``now``: a sync that reads a stale parent (one whose
# status lacks the time an earlier sync wrote) then writes the same time again, instead of a
# newer one that the next stale read would overwrite, back and forth, forever.


def _running_since(v: JobSyncView) -> str | None:
    """When the pods that make the job Running (its chief, else its workers) started."""
    types = {t.lower() for t in running_types(v.job)}
    times = [
        p.started
        for p in v.pods
        if p.replica_type in types and p.phase == "Running" and p.live and p.started
    ]
    return _earliest(times)


def _ended(v: JobSyncView, stamp: str) -> str:
    """When the job ended: its recorded completion, else when its last pod terminated."""
    recorded = v.job.status.get("completionTime")
    if isinstance(recorded, str) and parse_time(recorded):
        return recorded
    done = [p.finished for p in v.pods if p.finished and p.phase in ("Succeeded", "Failed")]
    return format_time(max(done)) if done else stamp


def _earliest(times: list[datetime]) -> str | None:
    return format_time(min(times)) if times else None


def times(v: JobSyncView, stamp: str) -> dict[str, str]:
    """Written once, when the event happens; then carried over unchanged.

    As in Kubeflow, ``startTime`` stays while the job is suspended, and starts anew when
    it runs again after a resume, so ``activeDeadlineSeconds`` never counts the time spent
    suspended (or queued again). DRAGON's ``enqueueTime`` and ``startRunTime`` go with the
    suspension: a resumed job joins the queue at the back, and the pool reads a start-run
    time as "admitted before". A job that finished is never resumed (its status may still
    say Suspended, if it finished while suspended): its times stay as they were
    (``JobSyncView.resumed``)."""
    prev, out = v.job.status, {}
    resumed = v.resumed
    if v.phase == SUSPENDED:
        if prev.get("startTime"):
            out["startTime"] = prev["startTime"]
        return out
    out["enqueueTime"] = stamp if resumed else prev.get("enqueueTime") or _created(v.job) or stamp
    started = None if resumed else prev.get("startTime")
    if v.phase == ADMITTED or (v.phase == FINISHED and started):
        # Pods on their way out (the ones a suspension deleted) did not start this run.
        first = _earliest([p.created for p in v.pods if p.created and not p.terminating])
        out["startTime"] = started or first or stamp
        out["startRunTime"] = (None if resumed else prev.get("startRunTime")) or out["startTime"]
    if v.phase == FINISHED:
        out["completionTime"] = prev.get("completionTime") or _ended(v, stamp)
        out["finishedTime"] = prev.get("finishedTime") or out["completionTime"]
    return out


def scheduling(v: JobSyncView, nodes: list[str]) -> dict[str, Any]:
    job = v.job
    section: dict[str, Any] = {
        "phase": v.phase,
        "pool": v.pool,  # kubectl get tfjobs' Pool column
        "message": message(v),
        "workers": {
            "current": sum(1 for p in v.pods if p.replica_type == "worker" and p.live),
            "target": _target(v),
            "min": job.min_workers,
            "max": job.max_workers,
        },
        "nodes": nodes,
    }
    if not job.kind.elastic or not job.extension.scalable:  # so nobody waits for it to scale
        section["elastic"] = False
    reason = _reason(v)
    if reason:
        section["reason"] = reason
    place = v.admission.queue if v.admission is not None and v.phase == QUEUED else None
    if place is not None:  # its place in the pool's queue, readable in its own namespace
        section["queue"] = place.to_json()
    scale = v.admission.last_scale if v.admission is not None else None
    if scale is None:
        scale = LastScale.from_json((job.status.get("scheduling") or {}).get(LAST_SCALE))
    if scale is not None:
        section[LAST_SCALE] = scale.to_json()
    if v.admission is not None and v.admission.batch is not None:  # the pool chose it
        section["batch"] = v.admission.batch.model_dump(by_alias=True)
    moves = _moves(v)
    if moves:  # migration: counts and last moves
        section["moves"] = moves
    if v.admission is not None and v.admission.migrations:  # answers to live requests
        section["migrations"] = [d.to_json() for d in v.admission.migrations]
    if v.admission is not None and v.admission.refused:  # nodes the kube-scheduler refused
        section["refused"] = [r.to_json() for r in v.admission.refused]
    service = v.admission.service if v.admission is not None else None
    if service is None:
        service = AttainedService.from_json((job.status.get("scheduling") or {}).get(SERVICE))
    if service is not None:  # kept: the pool reads it back if the Admission is lost
        section[SERVICE] = service.to_json()
    if job.checkpoint_interval is not None or service is not None:
        section["preemptible"] = preemptible(job)
    return section


def _moves(v: JobSyncView) -> list[dict[str, Any]]:
    """The Admission's move counts; once it is gone (the job finished), the ones the
    status kept."""
    if v.admission is not None and v.admission.moves:
        return [m.to_json() for m in v.admission.moves]
    kept = (v.job.status.get("scheduling") or {}).get("moves")
    try:
        return [Moves.from_json(m).to_json() for m in kept] if isinstance(kept, list) else []
    except (KeyError, TypeError, ValueError):
        return []  # a status someone broke reads as never written


def preemptible(job: Job) -> str:
    """Who may preempt the job, as its status says."""
    if job.checkpoint_interval is None:
        return (
            f"only by a job of higher priority: it declares no checkpoint interval "
            f"(annotation {CHECKPOINT_ANNOTATION})"
        )
    return (
        f"by a job of higher priority, or by one ahead of it in the pool's queue (least "
        f"attained service, or shortest remaining first): it checkpoints every "
        f"{job.checkpoint_interval:g} s"
    )


def _reason(v: JobSyncView) -> str:
    """Why it waits, as a code: the Admission's, or that it has none yet."""
    if v.phase not in (QUEUED, ADMITTED):
        return ""
    if v.admission is None:
        return WAITING_FOR_POOL
    return v.admission.reason


def _target(v: JobSyncView) -> int:
    if v.phase == ADMITTED and v.admission is not None:
        return v.admission.workers
    if v.phase == FINISHED:
        recorded = ((v.job.status.get("scheduling") or {}).get("workers") or {}).get("target")
        return recorded if type(recorded) is int and recorded >= 0 else 0
    return 0


def _created(job: Job) -> str | None:
    return format_time(job.created) if job.created else None


def message(v: JobSyncView) -> str:
    if v.phase == FINISHED and v.assessment.outcome:
        return v.assessment.outcome.message
    if v.phase == SUSPENDED:
        return "suspended (runPolicy.suspend is true); resuming re-enters the queue"
    if v.admission is None:
        return (
            f"waiting for TrainingPool {v.pool!r} to plan it (kubectl get trainingpool "
            f"{v.pool} shows the pool; a job names its pool in "
            "spec.runPolicy.schedulingPolicy.queue)"
        )
    if v.phase == QUEUED:
        text = v.admission.message or "waiting for admission"
    else:
        text = v.admission.message or _foreign_scheduler(v) or refused_note(v.admission.refused)
    return "; ".join(t for t in (text, v.admission.gang_note) if t)


def _foreign_scheduler(v: JobSyncView) -> str:
    """Pods pinned by Dragonet still need a scheduler to bind them; one that names a
    scheduler the cluster may not run (kube-batch, volcano) can wait forever. Under the
    pool's gang scheduler, the pods wait for it to bind their PodGroup."""
    waiting = sorted(
        {p.scheduler for p in v.pods if p.live and not p.bound and p.scheduler}
        - {"default-scheduler"}
    )
    if not waiting:
        return ""
    gang = v.admission.gang if v.admission is not None else None
    if gang is not None and waiting == [gang.scheduler_name]:
        n = sum(1 for p in v.pods if p.live and not p.bound)
        said = f" ({gang.scheduler_name} says: {v.pod_group})" if v.pod_group else ""
        return (
            f"{n} pod(s) wait for {gang.scheduler_name} to bind them: it binds PodGroup "
            f"{pod_group_name(v.job)} all at once when its pods fit together{said}"
        )
    n = sum(1 for p in v.pods if p.live and not p.bound and p.scheduler in waiting)
    return (
        f"{n} pod(s) wait to be bound by scheduler {', '.join(waiting)} (their template's "
        "schedulerName); Dragonet places them, so without that scheduler they stay Pending: "
        "remove schedulerName, or use binding nodeName"
    )


def invalid(
    obj_status: Mapping[str, Any],
    kind: JobKind,
    key: str,
    name: str,
    problem: str,
    stamp: str,
    created: str | None = None,
) -> dict[str, Any]:
    """An invalid spec's status: a Failed condition naming the problem."""
    conds = cond.set_condition(
        obj_status.get("conditions") or [],
        cond.CREATED,
        "True",
        f"{kind.kind}Created",
        f"{kind.kind} {name} is created.",
        created or stamp,
    )
    if len(problem) > MAX_PROBLEM:  # it may quote the user's input: bounded, as Kubernetes
        problem = problem[: MAX_PROBLEM - 3] + "..."  # bounds a Condition's message
    text = f"{kind.kind} {key} is invalid: {problem}"
    conds = cond.set_condition(
        conds, cond.FAILED, "True", f"{kind.kind}{REASON_INVALID}", text, stamp
    )
    status = {
        k: v for k, v in obj_status.items() if k in ("enqueueTime", "startTime", "startRunTime")
    }
    status.update(
        conditions=conds,
        completionTime=obj_status.get("completionTime") or stamp,
        scheduling={"phase": INVALID, "message": text},
    )
    return status
