"""A job's sync hook as a pure function: the size of a Metacontroller hook.

It reads the job, its own pods and its Admission (never the cluster), so its cost does not
depend on the cluster's size. The finished case first, then the pods the Admission places,
then the status from what was observed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import orjson

from policy.job.kubeshare import as_kubeshare_v2, as_sharepod, binding_for
from policy.job.podgroup import render_pod_group, reported
from policy.job.render import render_pod, render_service
from policy.job.status import conditions, invalid, replica_statuses, scheduling, times
from policy.job.tensorboard import DEPLOYMENTS, board, name_of
from policy.job.view import FINISHED, SUSPENDED, JobSyncView
from policy.memo import Encoded, Memo, content_key
from policy.model import conditions as cond
from policy.model.admission import ADMITTED, QUEUED, Admission, BatchSize, Gang, Placement
from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.cluster import Pod
from policy.model.gpushare import SHAREPODS
from policy.model.jobs import (
    InvalidJob,
    Job,
    JobKind,
    MetadataModel,
    child_name,
    labels_of,
    managed_elsewhere,
    parse_job,
    parse_metadata,
    parsed_job,
    readable_status,
)
from policy.model.kinds import TFJOB
from policy.model.lifecycle import assess
from policy.model.pool import Binding, admission_name, pool_of
from policy.model.request import UNREADABLE, MalformedRequest, objects
from policy.model.slot import Slot
from policy.model.timeutil import format_time
from policy.model.ttl import deletion_note

PODS = "Pod.v1"
SERVICES = "Service.v1"
_NO_MEMO = Memo(limit=0)
# What ``parse_job`` reads of a job's metadata (the model ignores every other field).
_PARSED_METADATA = tuple(MetadataModel.model_fields)


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
        raise MalformedRequest(f"parent.{err}") from err  # "parent.metadata.namespace: ..."


def _parsed_job(
    parent: Mapping[str, Any], kind: JobKind, memo: Memo, status: Mapping[str, Any]
) -> tuple[Job | InvalidJob, object]:
    """The job, and what stands for its metadata and spec in the memo's keys.

    Every sync of a job sees a new version of it (its status and resourceVersion change),
    so the memo keeps the job parsed without its status, keyed by the content of all that
    ``parse_job`` reads but the status: the metadata fields of ``MetadataModel`` and the
    spec. The status is the one thing of a ``Job`` that comes from the status, and
    ``readable_status`` never fails, so the job is that parse with this status: what
    parsing the whole object returns. The parse without status is the same object for as
    long as the memo keeps it, so what is derived from the spec (the pods, the Services)
    is keyed by its identity. ``status``: ``readable_status`` of the parent's (read-only,
    so the job may share it)."""
    if memo.limit <= 0 or type(parent) is not Encoded:  # not JSON bytes: no content key
        job = parsed_job(parent, kind, memo)
        return job, job
    meta = parent.get("metadata")
    spec = {"spec": parent["spec"]} if "spec" in parent else {}
    trimmed = {"metadata": {k: meta[k] for k in _PARSED_METADATA if k in meta}, **spec}
    try:
        key = ("job-spec", orjson.dumps(trimmed), kind.kind)
    except TypeError:  # a value JSON cannot hold (no API server sends one)
        job = parsed_job(parent, kind, memo)
        return job, job
    base = memo.get(key, partial(_parse, trimmed, kind))
    if isinstance(base, InvalidJob):
        return base, base
    return replace(base, status=status), base


def _parse(obj: Mapping[str, Any], kind: JobKind) -> Job | InvalidJob:
    try:
        return parse_job(obj, kind)
    except InvalidJob as err:
        return err


def _own_admission(related: Mapping[str, Any], job: Job, memo: Memo) -> Admission | None:
    key = f"{job.namespace}/{admission_name(job.kind.kind, job.name)}"
    obj = (related.get(ADMISSIONS) or {}).get(key)
    if not isinstance(obj, Mapping):
        return None
    try:
        admission = memo.get(content_key("admission", obj), partial(Admission.from_object, obj))
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
    for obj in [*objects(children, PODS), *objects(children, SHAREPODS)]:
        key = content_key("pod", obj, kind.container)
        try:
            pod = memo.get(key, lambda o=obj: Pod.from_object(o, (kind.container,)))
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
    status = readable_status(parent.get("status"), kind)
    stamp = format_time(now)
    spec = parent.get("spec")
    if isinstance(spec, Mapping) and managed_elsewhere(spec, labels_of(parent)):
        return Decision([], dict(status))  # MultiKueue's or Kubeflow's job, valid or not: hands off
    job, spec_of = _parsed_job(parent, kind, memo, status)
    if isinstance(job, InvalidJob):
        key = f"{meta.namespace}/{meta.name}"
        created = meta.creationTimestamp
        when = format_time(created) if created else None
        failed = invalid(status, kind, key, meta.name, str(job), stamp, when)
        return Decision([], _say_deletion(failed, kind, spec))
    if job.deleting:
        return Decision([], dict(status))  # going away: hands off
    admission = _own_admission(related, job, memo)
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
    gang = admission.gang if admission is not None else None
    said = reported(children, job, gang) if gang is not None else ""
    view = JobSyncView(job, pool, pods, verdict, phase, admission, stale, said)

    placed = _desired(view)
    # Pods and Services are pure functions of the job's metadata and spec and of plain
    # values: with a memo, one rendered before is answered again (the same dict; nothing
    # changes an answer once it is made).
    terms = _pod_terms(admission, config)
    pod_objs = []
    for _, placement in sorted(placed.items()):
        p, t = _rendered(job, admission, placement, terms)
        pod_objs.append(memo.derive("pod", (spec_of,), partial(_render, job, p, t), p, t))
    # A restarting pod keeps its Service: its peers' DNS name never disappears.
    named = {p.slot for p in placed.values()}
    named |= {_slot_of(job, p) for p in verdict.restarts} - {None}
    if phase == ADMITTED and admission is not None and not stale:
        named |= {s for s in admission.slots if job.holds(*s)}
    services = [
        memo.derive("service", (spec_of,), partial(render_service, job, *slot), *slot)
        for slot in sorted(named)
    ]
    groups = _pod_group(view)

    outcome = verdict.outcome
    succeeded = outcome is not None and outcome.type == cond.SUCCEEDED
    nodes = sorted({p.node for p in placed.values() if p.node})
    new_status: dict[str, Any] = {
        **times(view, stamp),
        "conditions": conditions(view, stamp),
        "replicaStatuses": replica_statuses(view, succeeded),
        "scheduling": scheduling(view, nodes),
    }
    if phase == FINISHED:
        _say_deletion(new_status, kind, spec)
    tensorboard = board(view, _deployment(children, job), config.cluster_domain)
    if tensorboard.status is not None:
        new_status["tensorboard"] = tensorboard.status
    resync = None
    if verdict.deadline is not None and phase == ADMITTED:
        resync = max(1.0, math.ceil((verdict.deadline - now).total_seconds()))
    return Decision([*pod_objs, *services, *groups, *tensorboard.children], new_status, resync)


def _say_deletion(status: dict[str, Any], kind: JobKind, spec: Any) -> dict[str, Any]:
    """A finished job with ``ttlSecondsAfterFinished`` says when the reaper deletes it
    (a hook cannot delete its parent: ``policy.model.ttl``)."""
    note = deletion_note(kind.kind, spec, status.get("completionTime"))
    section = status.get("scheduling")
    if note and isinstance(section, dict):
        section["message"] = "; ".join(t for t in (section.get("message"), note) if t)
    return status


def _deployment(children: Mapping[str, Any], job: Job) -> Mapping[str, Any] | None:
    """The job's TensorBoard Deployment, if it exists and is not on its way out."""
    obj = (children.get(DEPLOYMENTS) or {}).get(f"{job.namespace}/{name_of(job)}")
    if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata"), Mapping):
        return None
    return None if obj["metadata"].get("deletionTimestamp") else obj


def _pod_group(v: JobSyncView) -> list[dict[str, Any]]:
    """The gang scheduler's PodGroup while the job may run in a pool that has one (left
    out once it finishes or is suspended, which deletes it, as Kubeflow does)."""
    admission = v.admission
    if admission is None or admission.gang is None or v.phase in (FINISHED, SUSPENDED):
        return []
    group = render_pod_group(v.job, admission, admission.gang)
    return [group] if group is not None else []


@dataclass(frozen=True)
class PodTerms:
    """What every pod of the job is rendered with beyond its own Placement: how it is
    bound, the cluster domain, the Admission's generation, the gang scheduler, the grace
    period, and how a fractional GPU is written ("" none, "v1" SharePod, "v2")."""

    binding: Binding = "affinity"
    domain: str = ""
    generation: int = 0
    gang: Gang | None = None
    grace_seconds: int | None = None
    kubeshare: str = ""
    batch: BatchSize | None = None  # the batch the pool chose (a job that declares a range)


def _pod_terms(admission: Admission | None, config: JobConfig) -> PodTerms:
    if admission is None:
        return PodTerms(domain=config.cluster_domain)
    return PodTerms(
        admission.binding,
        config.cluster_domain,
        admission.generation,
        admission.gang,
        admission.grace_seconds,
        admission.kubeshare,
        admission.batch,
    )


def _rendered(
    job: Job, admission: Admission | None, placement: Placement, terms: PodTerms
) -> tuple[Placement, PodTerms]:
    """A pod's Placement and terms as its render reads them (with the job's metadata and
    spec, they key the memo's rendered pods): a pod without a fractional GPU is written
    plainly, and a KubeShare v1 pod names its device."""
    if job.replicas[placement.type].gpu_share is None:
        return placement, replace(terms, kubeshare="") if terms.kubeshare else terms
    if not terms.kubeshare:
        return placement, terms
    terms = replace(terms, binding=binding_for(terms.kubeshare, terms.binding))
    gpu = None
    if terms.kubeshare == "v1" and admission is not None:
        planned = admission.slots.get(placement.slot)
        # The slot's device is on the slot's node: a worker moving away keeps its own
        # SharePod as it is (OnDelete), never named after a device of its target.
        gpu = planned.gpu if planned is not None and planned.node == placement.node else None
    if gpu != placement.gpu:
        placement = replace(placement, gpu=gpu)
    return placement, terms


def _render(job: Job, placement: Placement, terms: PodTerms) -> dict[str, Any]:
    """The pod, or for a fractional GPU in a KubeShare pool its SharePod (v1) or its pod
    for kubeshare-scheduler (v2)."""
    pod = render_pod(
        job,
        placement,
        terms.binding,
        terms.domain,
        terms.generation,
        gang=terms.gang,
        grace_seconds=terms.grace_seconds,
        batch=terms.batch,
    )
    share = job.replicas[placement.type].gpu_share
    if terms.kubeshare == "v1" and share is not None:
        return as_sharepod(pod, share, placement.gpu)
    if terms.kubeshare == "v2" and share is not None:
        return as_kubeshare_v2(pod, share)
    return pod


Desired = dict[str, Placement]  # pod name -> where it is or goes


def _at(slot: Slot, name: str, node: str | None, host: str | None) -> Placement:
    """The pod ``name`` of ``slot`` on ``node`` (``host``: its kubernetes.io/hostname)."""
    return Placement(
        type=slot[0], index=slot[1], node=node, hostname=host if host != node else None, pod=name
    )


def _desired(v: JobSyncView) -> Desired:
    """Every pod the job should have now: name -> its Placement.

    Existing pods are facts and stay where they are. Only a fresh Admission may add pods
    (where it places them) or take them away (the ones it no longer lists). A worker the
    Admission moves (a new pod name and ``source``) is make-before-break: its replacement
    is created on the target, and its old pod is kept until the replacement runs."""
    job = v.job
    if v.phase == SUSPENDED:
        return {}
    if v.phase == FINISHED:
        return {p.name: _at(s, p.name, p.node, p.node) for s, p in _finished_kept(v).items()}
    held = _held_stuck(v)
    omitted = (
        {p.name for p in v.assessment.restarts}
        | {p.name for p in v.pods if p.stuck and p.name not in held}
        | _batch_changed(v)
    )
    existing = {
        p.name: (slot, p)
        for p in v.pods
        if not p.terminating and p.name not in omitted and (slot := _slot_of(job, p))
    }
    admission = v.admission
    if v.phase == QUEUED and admission is not None and admission.preempted and not v.stale:
        return {}  # preempted: every pod goes (with its grace period), the job queues again
    if v.phase != ADMITTED or admission is None or v.stale:
        return {n: _at(s, n, p.node, _host(admission, s, p.node)) for n, (s, p) in existing.items()}
    out: Desired = {}
    for slot, placement in admission.slots.items():
        if not job.holds(*slot):
            continue  # planned on another spec of the job
        name = placement.pod or child_name(job, *slot)
        if placement.pod is None and placement.source is None and name not in existing:
            # An Admission that does not name a moved worker's pod: the pod is the fact.
            name = next((n for n, (s, _) in existing.items() if s == slot), name)
        pod = existing[name][1] if name in existing else None
        if name not in {p.name for p in v.pods}:
            out[name] = _at(slot, name, placement.node, placement.host)
        elif pod is not None:
            out[name] = _at(slot, name, pod.node, _host(admission, slot, pod.node))
        if placement.source is None or (pod is not None and pod.phase == "Running"):
            continue  # no move, or the replacement runs: the old pod goes
        for n, (s, old) in existing.items():
            if s == slot and n != name:
                out[n] = _at(slot, n, old.node, old.node)  # runs until its replacement does
    return out


# The replicas that train (and so read the batch): a parameter server or scheduler holds
# no batch, and keeps running while the workers take a new one.
_TRAINING_ROLES = frozenset({"worker", "chief", "master"})


def _batch_changed(v: JobSyncView) -> frozenset[str]:
    """The training pods of a declaring job started with another share of the batch than
    its Admission now gives (``policy.pool.batch``): they restart to read the new one (the
    pod goes now; the next sync creates it again, as after a failure)."""
    admission = v.admission
    if v.phase != ADMITTED or admission is None or v.stale or admission.batch is None:
        return frozenset()
    share = admission.batch.per_replica
    return frozenset(
        p.name
        for p in v.pods
        if p.live
        and p.batch_share is not None
        and p.batch_share != share
        and p.replica_type in _TRAINING_ROLES
    )


def _held_stuck(v: JobSyncView) -> frozenset[str]:
    """Stuck pods (the kube-scheduler refused them where they are pinned) that the job's
    Admission still places where they are: kept until the pool has seen the refusal and
    placed the slot elsewhere, or nowhere (``policy.model.refusal``). Deleted at once, the
    pod would take the refusal with it, and the pool would pin it there again. Any other
    stuck pod goes at once, so its slot can be placed anew."""
    admission = v.admission
    if v.phase != ADMITTED or admission is None or v.stale:
        return frozenset()
    held = set()
    for p in v.pods:
        if not p.stuck or (slot := _slot_of(v.job, p)) is None:
            continue
        placement = admission.slots.get(slot)
        if (
            placement is not None
            and placement.source is None
            and placement.node == p.node
            and (placement.pod or child_name(v.job, *slot)) == p.name
        ):
            held.add(p.name)
    return frozenset(held)


def _host(admission: Admission | None, slot: Slot, node: str | None) -> str | None:
    placement = admission.slots.get(slot) if admission is not None else None
    if placement is not None and placement.node == node:
        return placement.host
    return node


def _finished_kept(v: JobSyncView) -> dict[Slot, Pod]:
    """What ``cleanPodPolicy`` keeps of a finished job."""
    outcome = v.assessment.outcome
    policy = v.job.clean_pod_policy
    if outcome is None or outcome.deletes_everything or policy == "All":
        return {}
    pods = [p for p in v.pods if not p.terminating]
    if policy == "Running":
        pods = [p for p in pods if p.phase in ("Succeeded", "Failed")]
    return {slot: p for p in pods if (slot := _slot_of(v.job, p))}


def _slot_of(job: Job, pod: Pod) -> Slot | None:
    return job.slot(pod.replica_type, pod.index)


def finalize(
    parent: Mapping[str, Any], children: Mapping[str, Any], kind: JobKind = TFJOB
) -> tuple[Decision, bool]:
    """On deletion: remove every child; finalized once none is left."""
    _metadata(parent)
    status = readable_status(parent.get("status"), kind)
    remaining = sum(len(objects(children, t)) for t in (PODS, SHAREPODS, SERVICES, DEPLOYMENTS))
    return Decision(children=[], status=dict(status)), remaining == 0
