"""A TFJob's TensorBoard children: a Deployment of one pod and a Service in front of it.

The pool places the TensorBoard pod like any other (the Admission's ``TensorBoard`` slot);
this module renders it there with the Admission's binding, and says in the job's status
where to reach it. Rules:

* An existing Deployment is a fact: it is answered as it is (the controller updates
  Deployments ``OnDelete``); deleting it applies a changed annotation, and the pool places
  the new pod. It moves only when a fresh Admission places it elsewhere, which the pool
  does only for a TensorBoard whose pod ended or is stuck (a lost or cordoned node).
* Kept while the job exists, as the original operator did (logs are read after training),
  also once the job finished, unless ``cleanPodPolicy`` is ``All`` (or the job's outcome
  deletes everything): then it goes with the job's pods. Removed while the job is
  suspended. Metacontroller deletes both children with the job.
* ``strategy: Recreate``: never two TensorBoard pods at once, since the pool counted one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.job.render import _pin
from policy.job.view import FINISHED, SUSPENDED, JobSyncView
from policy.model.admission import ADMITTED, GENERATION_ANNOTATION
from policy.model.cluster import HOSTNAME, L_INDEX, L_JOB, L_OPERATOR, L_TYPE, OPERATOR_NAME
from policy.model.jobs import Job
from policy.model.pool import Binding
from policy.model.tensorboard import LABEL, PORT, PORT_NAME, SLOT

DEPLOYMENTS = "Deployment.apps/v1"


@dataclass(frozen=True)
class Board:
    """What the job's sync answers for its TensorBoard: children and a status section."""

    children: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] | None = None


def name_of(job: Job) -> str:
    return f"{job.name}-{LABEL}"


def address(job: Job, domain: str = "") -> str:
    host = f"{name_of(job)}.{job.namespace}.svc"
    return f"http://{host}.{domain}:{PORT}" if domain else f"http://{host}:{PORT}"


def selector(job: Job) -> dict[str, str]:
    return {L_OPERATOR: OPERATOR_NAME, L_JOB: job.name, L_TYPE: LABEL}


def board(v: JobSyncView, observed: Mapping[str, Any] | None, domain: str = "") -> Board:
    job = v.job
    if job.tensorboard is None:
        return Board()  # an observed one is left out of the answer: deleted
    section: dict[str, Any] = {"service": name_of(job), "address": address(job, domain)}
    if v.phase == SUSPENDED or (v.phase == FINISHED and not _kept_after(v)):
        why = "suspended" if v.phase == SUSPENDED else "finished (cleanPodPolicy All)"
        return Board([], {**section, "phase": "Removed", "message": f"removed: the job is {why}"})
    placement = v.admission.slots.get(SLOT) if v.admission is not None else None
    if observed is not None:
        seen = _observed(observed)
        if _moved(v, observed, seen.get("node"), placement):
            # Its pod ended or is stuck where it cannot run, and the pool placed it anew:
            # the Deployment goes (the Service stays), and comes back on the new node.
            message = f"moving to {placement.node}" if placement else "moving"
            return Board([render_service(job)], {**section, "phase": "Pending", "message": message})
        deployment = _as_answered(observed)
        return Board([deployment, render_service(job)], {**section, **seen})
    if v.phase == FINISHED:  # it never started, and a finished job is placed nothing
        return Board([], {**section, "phase": "Removed", "message": "not running: the job ended"})
    if v.phase != ADMITTED or v.stale or placement is None:
        waiting = (
            "waiting for room in the pool for the TensorBoard pod (it never holds the "
            "job back; it starts once a node has room for its requests)"
            if v.phase == ADMITTED
            else "starts once the job is admitted"
        )
        return Board([], {**section, "phase": "Pending", "message": waiting})
    binding = v.admission.binding if v.admission is not None else "affinity"
    generation = v.admission.generation if v.admission is not None else 0
    deployment = render_deployment(job, placement.node, placement.host, binding, generation)
    section.update(phase="Starting", message="starting")
    if placement.node:
        section["node"] = placement.node
    return Board([deployment, render_service(job)], section)


def _moved(v: JobSyncView, observed: Mapping[str, Any], node: Any, placement: Any) -> bool:
    """A fresh Admission places the TensorBoard on another node than its Deployment's
    (a Deployment created from a newer Admission than the one read: our view is stale)."""
    if v.phase != ADMITTED or v.stale or v.admission is None or placement is None:
        return False
    if placement.node is None or node is None or placement.host == node:
        return False
    raw = ((observed.get("metadata") or {}).get("annotations") or {}).get(GENERATION_ANNOTATION)
    made_from = int(raw) if isinstance(raw, str) and raw.isdigit() else 0
    return made_from <= v.admission.generation


def _kept_after(v: JobSyncView) -> bool:
    outcome = v.assessment.outcome
    return (
        outcome is not None and not outcome.deletes_everything and (v.job.clean_pod_policy != "All")
    )


def _observed(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    ready = (obj.get("status") or {}).get("readyReplicas") or 0
    out: dict[str, Any] = (
        {"phase": "Ready", "message": "ready"}
        if isinstance(ready, int) and ready >= 1
        else {"phase": "Starting", "message": "starting"}
    )
    node = spec.get("nodeName") or _pinned(spec)
    if isinstance(node, str) and node:
        out["node"] = node
    return out


def _pinned(spec: Mapping[str, Any]) -> str | None:
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in affinity.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == HOSTNAME and len(expr.get("values") or []) == 1:
                return expr["values"][0]
    return None


def _as_answered(observed: Mapping[str, Any]) -> dict[str, Any]:
    """The observed Deployment as the answer gives it back: what we wrote, unchanged."""
    meta = observed.get("metadata") or {}
    out_meta = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": out_meta,
        "spec": observed.get("spec"),
    }


def render_deployment(
    job: Job,
    node: str | None,
    hostname: str | None,
    binding: Binding = "affinity",
    admission_generation: int = 0,
) -> dict[str, Any]:
    tb = job.tensorboard
    assert tb is not None
    spec = {**tb.pod_spec(), **copy.deepcopy(job.tensorboard_constraints)}
    if node is None or hostname is None:
        pass  # the kube-scheduler places it (placement "none")
    elif binding == "nodeName":
        spec["nodeName"] = node
    else:
        _pin(spec, hostname)
    labels = selector(job)
    metadata: dict[str, Any] = {"name": name_of(job), "namespace": job.namespace, "labels": labels}
    if admission_generation:
        metadata["annotations"] = {GENERATION_ANNOTATION: str(admission_generation)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": {**labels, L_INDEX: "0"}, **_template_annotations(metadata)},
                "spec": spec,
            },
        },
    }


def _template_annotations(metadata: Mapping[str, Any]) -> dict[str, Any]:
    annotations = metadata.get("annotations")
    return {"annotations": dict(annotations)} if annotations else {}


def render_service(job: Job) -> dict[str, Any]:
    tb = job.tensorboard
    assert tb is not None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name_of(job), "namespace": job.namespace, "labels": selector(job)},
        "spec": {
            "type": tb.service_type,
            "selector": selector(job),
            "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME}],
        },
    }
