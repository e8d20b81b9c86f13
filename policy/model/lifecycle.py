"""How a job stands, from its spec, its observed pods, its recorded status and ``now``.

Kubeflow v1 semantics (reference: tfjob-mxjob-semantics.md §1.3): restart policies and
exit codes, ``activeDeadlineSeconds``, ``backoffLimit``, and success by each kind's own rule
(``JobKind.succeeded``, in its module under ``policy/model/kinds/``, from the helpers
here). The first terminal condition wins and is never revised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from policy.model import conditions as cond
from policy.model.cluster import Pod
from policy.model.jobs import WORKER, Job, child_name

# Kubeflow's sentinel for "the main container never terminated" (e.g. evicted): retryable.
NO_EXIT_CODE = 0xBEEF
REASON_DEADLINE = "DeadlineExceeded"
REASON_BACKOFF = "BackoffLimitExceeded"
REASON_INVALID = "FailedValidation"
# Failures after which every pod goes, whatever cleanPodPolicy says (as in Kubeflow).
DELETE_ALL_REASONS = (REASON_DEADLINE, REASON_BACKOFF, REASON_INVALID)


@dataclass(frozen=True)
class Outcome:
    """A terminal state: the condition type, its reason and message."""

    type: str  # Succeeded | Failed
    reason: str
    message: str

    @property
    def deletes_everything(self) -> bool:
        return any(self.reason.endswith(r) for r in DELETE_ALL_REASONS)


@dataclass(frozen=True)
class Assessment:
    outcome: Outcome | None  # terminal, whether reached earlier or just now
    restarts: tuple[Pod, ...]  # failed pods to delete so that they are recreated
    running: bool  # Kubeflow's Running rule holds (chief, or any worker, active)
    deadline: datetime | None  # when activeDeadlineSeconds fires, if it has not yet


def _recorded(job: Job) -> Outcome | None:
    c = cond.terminal(job.status.get("conditions") or [])
    if c is None:
        return None
    return Outcome(c["type"], c.get("reason", ""), c.get("message", ""))


def succeeded_pod(
    job: Job, pods: Sequence[Pod], rtype: str, index: int, exit_zero: bool = False
) -> bool:
    """The pod of (type, index) has succeeded (with ``exit_zero``: and exited 0, if known)."""
    name = child_name(job, rtype, index)
    return any(
        p.name == name and p.phase == "Succeeded" and (not exit_zero or p.exit_code in (0, None))
        for p in pods
    )


def all_succeeded(job: Job, pods: Sequence[Pod], rtype: str) -> bool:
    """The job has pods of the type, and every one of them has succeeded."""
    replica = job.replicas.get(rtype)
    return (
        replica is not None
        and replica.replicas > 0
        and all(succeeded_pod(job, pods, rtype, i) for i in range(job.size(rtype)))
    )


def workers_done(job: Job, pods: Sequence[Pod]) -> bool:
    """Every worker the job has now (a shrink may have left gaps in the indices) has
    succeeded, and it has at least its minimum of them."""
    workers = [p for p in pods if p.replica_type == "worker" and not p.terminating]
    return len(workers) >= max(job.min_workers, 1) and all(p.phase == "Succeeded" for p in workers)


_WAITING = Assessment(None, (), False, None)


def assess(job: Job, pods: Sequence[Pod], now: datetime) -> Assessment:
    recorded = _recorded(job)
    if recorded:
        return Assessment(recorded, (), False, None)
    # The start a suspended job kept is over once it resumes (its startTime starts anew, as
    # in Kubeflow): a deadline never counts the time it spent suspended.
    start = None if job.resumed else job.started_at
    if not pods and start is None:
        return _WAITING  # nothing has run: nothing to judge, no deadline running

    def ended(outcome: Outcome) -> Assessment:
        return Assessment(outcome, (), False, None)

    kind, name = job.kind.kind, job.name
    deadline = None
    if job.active_deadline_seconds is not None and start is not None and not job.suspend:
        deadline = start + timedelta(seconds=job.active_deadline_seconds)
        if now >= deadline:
            return ended(
                Outcome(
                    cond.FAILED,
                    f"{kind}{REASON_DEADLINE}",
                    f"Job {name} has failed because it was active longer than specified "
                    f"deadline ({job.active_deadline_seconds}s)",
                )
            )

    if job.backoff_limit is not None:
        restarting_types = {
            t
            for t, r in job.replicas.items()
            if r.restart_policy in ("OnFailure", "Always", "ExitCode")
        }
        restarts = sum(
            p.restarts
            for p in pods
            if p.phase == "Running" and _type_of(job, p) in restarting_types
        )
        if (job.backoff_limit == 0 and restarts > 0) or (
            job.backoff_limit > 0 and restarts >= job.backoff_limit
        ):
            return ended(
                Outcome(
                    cond.FAILED,
                    f"{kind}{REASON_BACKOFF}",
                    f"Job {name} has failed because it has reached the specified backoff "
                    f"limit ({restarts} restarts, backoffLimit {job.backoff_limit})",
                )
            )

    if job.kind.succeeded(job, pods):
        return ended(
            Outcome(cond.SUCCEEDED, f"{kind}Succeeded", f"{kind} {job.key} successfully completed.")
        )

    restarts_now: list[Pod] = []
    for p in pods:
        rtype = _type_of(job, p)
        if p.phase != "Failed" or p.terminating or rtype is None:
            continue
        policy = job.replicas[rtype].restart_policy
        code = p.exit_code if p.exit_code is not None else NO_EXIT_CODE
        if policy in ("Always", "OnFailure") or (policy == "ExitCode" and code >= 128):
            restarts_now.append(p)
            continue
        if policy == "Never" and job.dynamic_workers and rtype == WORKER:
            continue
        why = (
            f"{p.name} exited with code {code}, a permanent error under restartPolicy ExitCode"
            if policy == "ExitCode"
            else f"{p.name} failed (exit code {code}) and restartPolicy is {policy}"
        )
        return ended(
            Outcome(
                cond.FAILED,
                f"{kind}Failed",
                f"{kind} {job.key} has failed because 1 {rtype} replica(s) failed: {why}.",
            )
        )

    active = {(_type_of(job, p)) for p in pods if p.phase == "Running" and not p.terminating}
    running = bool(active.intersection(running_types(job)))
    return Assessment(None, tuple(restarts_now), running, deadline)


def running_types(job: Job) -> tuple[str, ...]:
    """The types whose running pods make the job Running: its decisive types, else the
    chief, else the workers."""
    if job.kind.decisive_types:
        return job.kind.decisive_types
    return (job.chief_type or WORKER,)


def _type_of(job: Job, pod: Pod) -> str | None:
    return job.type_of(pod.replica_type)
