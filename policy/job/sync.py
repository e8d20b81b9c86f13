"""A job's sync hook as a pure function: the size of a Metacontroller hook.

It reads the job, its own pods and its Admission (never the cluster), so its cost does not
depend on the cluster's size. The finished case first, then the pods the Admission places,
then the status from what was observed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policy.job.render import render_pod, render_service
from policy.job.status import conditions, invalid, replica_statuses, scheduling, times
from policy.job.view import FINISHED, SUSPENDED, JobView
from policy.memo import Memo, content_key
from policy.model import conditions as cond
from policy.model.admission import ADMITTED, QUEUED, Admission
from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.cluster import Pod
from policy.model.jobs import (
    TFJOB,
    InvalidJob,
    Job,
    JobKind,
    child_name,
    managed_elsewhere,
    parse_metadata,
    readable_status,
)
from policy.model.lifecycle import assess
from policy.model.pool import admission_name, pool_of
from policy.model.timeutil import format_time, parse_time
from policy.pool.observe import UNREADABLE, MalformedRequest, objects, parsed_job

PODS = "Pod.v1"
SERVICES = "Service.v1"
_NO_MEMO = Memo(limit=0)


@dataclass(frozen=True)
class JobConfig:
    """How a job's pods are written beyond what its Admission says."""

    # Appended after ".svc" in TF_CONFIG addresses (Kubeflow's CUSTOM_CLUSTER_DOMAIN).
    cluster_domain: str = ""


@dataclass(frozen=True)
class Decision:
    children: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    resync_after: float | None = None


def related_rules(parent: Mapping[str, Any], kind: JobKind) -> list[dict[str, Any]]:
    """A job's customize answer: its own Admission, by name, and nothing of the cluster."""
    meta = _metadata(parent)
    return [
        {
            "apiVersion": "dragonet.io/v1alpha1",
            "resource": "admissions",
            "namespace": meta.namespace,
            "names": [admission_name(kind.kind, meta.name)],
        }
    ]


def _metadata(parent: Mapping[str, Any]):
    try:
        return parse_metadata(parent)
    except ValueError as err:
        raise MalformedRequest(f"parent.metadata: {err}") from err


def _own_admission(related: Mapping[str, Any], job: Job) -> Admission | None:
    key = f"{job.namespace}/{admission_name(job.kind.kind, job.name)}"
    obj = (related.get(ADMISSIONS) or {}).get(key)
    if not isinstance(obj, Mapping):
        return None
    try:
        admission = Admission.from_object(obj)
    except ValueError:
        return None
    if admission.job_name != job.name or admission.job_uid not in ("", job.uid):
        return None  # for an earlier job of the same name
    return admission


def _pods(children: Mapping[str, Any], admission: Admission | None, kind: JobKind, memo: Memo):
    renamed = (
        {p.hostname: p.node for p in admission.pods if p.node and p.hostname} if admission else {}
    )
    out = []
    for obj in objects(children, PODS):
        key = content_key("pod", obj, kind.container)
        try:
            pod = memo.get(key, lambda o=obj: Pod.from_object(o, kind.container))
        except UNREADABLE:
            # Not a pod as Dragonet writes them (no API server stores one; someone edited
            # it): its slot reads as empty, so the answer names it where the Admission
            # places it, and Metacontroller (OnDelete) leaves the existing pod alone.
            continue
        out.append(pod.on_nodes(renamed) if renamed else pod)
    return tuple(sorted(out, key=lambda p: p.name))


def _phase(job: Job, view_admission: Admission | None, outcome: bool) -> str:
    if outcome:
        return FINISHED
    if job.suspend:
        return SUSPENDED
    if view_admission is not None:
        return view_admission.phase
    return QUEUED


def sync(
    parent: Mapping[str, Any],
    children: Mapping[str, Any],
    related: Mapping[str, Any],
    now: datetime,
    config: JobConfig = JobConfig(),
    kind: JobKind = TFJOB,
    memo: Memo = _NO_MEMO,
) -> Decision:
    meta = _metadata(parent)
    status = readable_status(parent.get("status"))
    stamp = format_time(now)
    spec = parent.get("spec")
    if isinstance(spec, Mapping) and managed_elsewhere(spec):
        return Decision([], dict(status))  # MultiKueue's job, valid or not: hands off
    job = parsed_job(parent, kind, memo)
    if isinstance(job, InvalidJob):
        key = f"{meta.namespace}/{meta.name}"
        created = parse_time(meta.creationTimestamp)
        when = format_time(created) if created else None
        return Decision([], invalid(status, kind, key, meta.name, str(job), stamp, when))
    if job.deleting:
        return Decision([], dict(status))  # going away: hands off
    admission = _own_admission(related, job)
    observed = _pods(children, admission, kind, memo)
    stale = admission is not None and any(
        (p.admission_generation or 0) > admission.generation > 0 for p in observed if p.live
    )
    # A pod the job may not have (an index at or above its type's count) is no part of it:
    # it counts for nothing, and leaving it out of the answer deletes it and its Service.
    pods = tuple(p for p in observed if _slot_of(job, p) is not None)
    verdict = assess(job, pods, now)
    phase = _phase(job, admission, verdict.outcome is not None)
    pool = pool_of(spec) if isinstance(spec, Mapping) else "default"
    view = JobView(job, pool, pods, verdict, phase, admission, stale)

    placed = _desired(view)
    pod_objs = []
    for (rtype, index), (node, host) in sorted(placed.items()):
        binding = admission.binding if admission is not None else "affinity"
        generation = admission.generation if admission is not None else 0
        grace = admission.grace_seconds if admission is not None else None
        pod_objs.append(
            render_pod(
                job, rtype, index, node, host, binding, config.cluster_domain, generation, grace
            )
        )
    # A restarting pod keeps its Service: its peers' DNS name never disappears.
    named = set(placed) | {_slot_of(job, p) for p in verdict.restarts} - {None}
    if phase == ADMITTED and admission is not None and not stale:
        named |= {s for s in admission.slots if job.holds(*s)}
    services = [render_service(job, rtype, index) for rtype, index in sorted(named)]

    resumed = cond.is_true(job.status.get("conditions") or [], cond.SUSPENDED) and (
        phase != SUSPENDED
    )
    outcome = verdict.outcome
    succeeded = outcome is not None and outcome.type == cond.SUCCEEDED
    nodes = sorted({n for n, _ in placed.values() if n})
    new_status: dict[str, Any] = {
        **times(view, stamp, resumed),
        "conditions": conditions(view, stamp, resumed),
        "replicaStatuses": replica_statuses(view, succeeded),
        "scheduling": scheduling(view, nodes),
    }
    resync = None
    if verdict.deadline is not None and phase == ADMITTED:
        resync = max(1.0, math.ceil((verdict.deadline - now).total_seconds()))
    return Decision([*pod_objs, *services], new_status, resync)


def _desired(v: JobView) -> dict[tuple[str, int], tuple[str | None, str | None]]:
    """Every pod the job should have now: (type, index) -> (node, hostname).

    Existing pods are facts and stay where they are. Only a fresh Admission may add pods
    (where it places them) or take them away (the ones it no longer lists)."""
    job = v.job
    if v.phase == SUSPENDED:
        return {}
    if v.phase == FINISHED:
        return {s: (p.node, p.node) for s, p in _finished_kept(v).items()}
    omitted = {p.name for p in v.assessment.restarts} | {p.name for p in v.pods if p.stuck}
    existing = {
        slot: p
        for p in v.pods
        if not p.terminating and p.name not in omitted and (slot := _slot_of(job, p))
    }
    admission = v.admission
    if v.phase == QUEUED and admission is not None and admission.preempted and not v.stale:
        return {}  # preempted: every pod goes (with its grace period), the job queues again
    if v.phase != ADMITTED or admission is None or v.stale:
        return {s: (p.node, _host(admission, s, p.node)) for s, p in existing.items()}
    by_name = {p.name: p for p in v.pods}
    out: dict[tuple[str, int], tuple[str | None, str | None]] = {}
    for slot, placement in admission.slots.items():
        if not job.holds(*slot):
            continue  # planned on another spec of the job
        pod = by_name.get(child_name(job, *slot))
        if pod is None:
            out[slot] = (placement.node, placement.host)
        elif slot in existing:
            out[slot] = (pod.node, _host(admission, slot, pod.node))
    return out


def _host(admission: Admission | None, slot: tuple[str, int], node: str | None) -> str | None:
    placement = admission.slots.get(slot) if admission is not None else None
    if placement is not None and placement.node == node:
        return placement.host
    return node


def _finished_kept(v: JobView) -> dict[tuple[str, int], Pod]:
    """What ``cleanPodPolicy`` keeps of a finished job."""
    outcome = v.assessment.outcome
    policy = v.job.clean_pod_policy
    if outcome is None or outcome.deletes_everything or policy == "All":
        return {}
    pods = [p for p in v.pods if not p.terminating]
    if policy == "Running":
        pods = [p for p in pods if p.phase in ("Succeeded", "Failed")]
    return {slot: p for p in pods if (slot := _slot_of(v.job, p))}


def _slot_of(job: Job, pod: Pod) -> tuple[str, int] | None:
    return job.slot(pod.replica_type, pod.index)


def finalize(parent: Mapping[str, Any], children: Mapping[str, Any]) -> tuple[Decision, bool]:
    """On deletion: remove every child; finalized once none is left."""
    _metadata(parent)
    status = readable_status(parent.get("status"))
    remaining = len(objects(children, PODS)) + len(objects(children, SERVICES))
    return Decision(children=[], status=dict(status)), remaining == 0
