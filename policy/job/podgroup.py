"""An external gang scheduler's side of a job: its PodGroup, and the marks on its pods.

A pool whose ``gangScheduler`` is kube-batch, Volcano or scheduler-plugins' coscheduling
delegates the final binding to that scheduler; Dragonet still decides what runs and where
it should go. The PodGroup is what Kubeflow's training-operator writes for the same backend
(``pkg/controller.v1/common/job.go``, ``control/podgroup_control.go``; tf-operator v1.0 for
kube-batch): named after the job, in its namespace, owned by it (Metacontroller sets the
owner). Its ``minMember`` is the number of pods the job's Admission places, so the backend
binds exactly the gang Dragonet admitted, all or none: it follows an elastic job's worker
target as the pool grows or shrinks it (docs/gang-schedulers.md argues why).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model.admission import Admission, Gang
from policy.model.cluster import L_JOB, L_OPERATOR, OPERATOR_NAME
from policy.model.jobs import Job
from policy.model.resources import HOST_PORT, PODS, Resources, format_quantity
from policy.model.slot import Slot

API_VERSIONS: Mapping[str, str] = {
    "kube-batch": "scheduling.incubator.k8s.io/v1alpha1",
    "volcano": "scheduling.volcano.sh/v1beta1",
    "coscheduling": "scheduling.x-k8s.io/v1alpha1",
}
KIND = "PodGroup"
# Metacontroller's v2 map keys of the three PodGroup kinds (children of a job).
TYPE_KEYS = tuple(f"{KIND}.{v}" for v in API_VERSIONS.values())
# kube-batch and Volcano find a pod's group by this annotation (volcano.sh/apis
# KubeGroupNameAnnotationKey); Volcano's job plugins read the task from task-spec.
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
# scheduler-plugins' coscheduling finds it by this label (apis/scheduling PodGroupLabel).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
_SAID = 300  # characters of a backend's message a job's status repeats
_COUNTS = ("running", "succeeded", "failed")  # a PodGroup status's pod counts


def pod_group_child(backend: str) -> dict[str, Any]:
    """The job controllers' ``childResources`` entry for a backend's PodGroups (in place:
    minMember follows an elastic job's worker target)."""
    return {
        "apiVersion": API_VERSIONS[backend],
        "resource": "podgroups",
        "updateStrategy": {"method": "InPlace"},
    }


def pod_group_name(job: Job) -> str:
    """Kubeflow's: the job's name (so a TFJob and an MXJob of one name would share it)."""
    return job.name


def decorate(pod: dict[str, Any], job: Job, rtype: str, gang: Gang) -> None:
    """Mark a rendered pod for the gang scheduler, as Kubeflow does: its schedulerName when
    the template names none (one the template names is kept), and the group marker."""
    spec, meta = pod["spec"], pod["metadata"]
    if not spec.get("schedulerName"):
        spec["schedulerName"] = gang.scheduler_name
    group = pod_group_name(job)
    if gang.scheduler == "coscheduling":
        meta["labels"][POD_GROUP_LABEL] = group
        return
    annotations = meta.setdefault("annotations", {})
    annotations[GROUP_NAME_ANNOTATION] = group
    if gang.scheduler == "volcano":
        annotations[TASK_SPEC_ANNOTATION] = rtype.lower()


def members(job: Job, admission: Admission) -> list[Slot]:
    """The pods the Admission places that the job may have: the gang the pool admitted."""
    return [p.slot for p in admission.pods if job.holds(*p.slot)]


def min_member(job: Job, admission: Admission) -> int:
    """Every pod the Admission places (an elastic job's worker target included), or
    ``schedulingPolicy.minAvailable`` when the user asks for fewer."""
    n = len(members(job, admission))
    wanted = job.scheduling_policy.minAvailable if job.scheduling_policy else None
    return min(n, wanted) if wanted is not None and wanted > 0 else n


def min_resources(job: Job, admission: Admission, count: int) -> dict[str, str]:
    """``schedulingPolicy.minResources`` as given, else what the first ``count`` pods of
    the gang request (parameter servers and chief first, as the Admission lists them)."""
    given = job.scheduling_policy.minResources if job.scheduling_policy else None
    if given:
        return {k: str(v) for k, v in sorted(given.items())}
    slots = members(job, admission)[:count]
    total = Resources.total(job.replicas[t].request for t, _ in slots)
    # Host ports are our bookkeeping (policy.model.hostports), not resources a node reports.
    return {
        k: format_quantity(k, total[k])
        for k in sorted(total)
        if k != PODS and total[k] and not k.startswith(HOST_PORT)
    }


def reported(children: Mapping[str, Any], job: Job, gang: Gang) -> str:
    """What the backend says of the job's PodGroup, in a few words ("" if nothing yet): its
    phase and counts ("Inqueue, 0/3 running"), and why it cannot schedule the gang when it
    says so. All three write ``status.phase`` and ``running``/``succeeded``/``failed``
    (left out when zero); Volcano and kube-batch also an ``Unschedulable`` condition with a
    message, which they keep once the gang is bound: a ``Scheduled`` condition written
    after it (Volcano's) says the message is old."""
    group = (children.get(f"{KIND}.{API_VERSIONS.get(gang.scheduler, '')}") or {}).get(
        f"{job.namespace}/{pod_group_name(job)}"
    )
    status = group.get("status") if isinstance(group, Mapping) else None
    if not isinstance(status, Mapping):
        return ""
    phase = status.get("phase")
    words = [phase] if isinstance(phase, str) and phase else []
    if words or any(k in status for k in _COUNTS):
        words += _counts(status, (group.get("spec") or {}).get("minMember"))
    said = ", ".join(words)
    message = _unschedulable(status.get("conditions"))
    return f"{said}: {message}" if said and message else said or message


def _counts(status: Mapping[str, Any], min_member: Any) -> list[str]:
    """``3/4 running`` (of ``minMember``), then succeeded and failed pods when there are."""
    n = {k: status.get(k) for k in _COUNTS}
    n = {k: v if isinstance(v, int) and v > 0 else 0 for k, v in n.items()}
    of = f"/{min_member}" if isinstance(min_member, int) and min_member > 0 else ""
    return [f"{n['running']}{of} running"] + [f"{n[k]} {k}" for k in _COUNTS[1:] if n[k]]


def _unschedulable(conditions: Any) -> str:
    """The message of the last true ``Unschedulable`` condition, unless a true
    ``Scheduled`` one is newer (RFC 3339 times compare as strings)."""
    found: Mapping[str, Any] | None = None
    scheduled = ""
    for c in conditions if isinstance(conditions, list) else ():
        if not isinstance(c, Mapping) or c.get("status") != "True":
            continue
        if c.get("type") == "Unschedulable" and isinstance(c.get("message"), str) and c["message"]:
            found = c
        elif c.get("type") == "Scheduled" and isinstance(c.get("lastTransitionTime"), str):
            scheduled = max(scheduled, c["lastTransitionTime"])
    if found is None:
        return ""
    since = found.get("lastTransitionTime")
    if scheduled and isinstance(since, str) and scheduled > since:
        return ""
    return found["message"][:_SAID]


def render_pod_group(job: Job, admission: Admission, gang: Gang) -> dict[str, Any] | None:
    """The backend's PodGroup for an admitted job; None when it places no pod."""
    count = min_member(job, admission)
    if count == 0:
        return None
    policy = job.scheduling_policy
    spec: dict[str, Any] = {"minMember": count}
    if gang.scheduler == "volcano":
        # Kubeflow's queue is schedulingPolicy.queue, else "default": the name that picks
        # the job's TrainingPool here, so a Volcano Queue named like the pool serves it.
        spec["queue"] = job.pool
        if policy and policy.priorityClass:
            spec["priorityClassName"] = policy.priorityClass
        spec["minResources"] = min_resources(job, admission, count)
    elif gang.scheduler == "coscheduling":
        spec["minResources"] = min_resources(job, admission, count)
        if policy and policy.scheduleTimeoutSeconds is not None:
            spec["scheduleTimeoutSeconds"] = policy.scheduleTimeoutSeconds
    return {
        "apiVersion": API_VERSIONS[gang.scheduler],
        "kind": KIND,
        "metadata": {
            "name": pod_group_name(job),
            "namespace": job.namespace,
            "labels": {L_OPERATOR: OPERATOR_NAME, L_JOB: job.name},
        },
        "spec": spec,
    }
