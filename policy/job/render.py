"""Children: the Pods and headless Services of a job, with Kubeflow v1 names and labels,
and the cluster spec in its environment (each kind's ``JobKind.configure_pod``, in its module
under ``policy/model/kinds/``).

A pod is a pure function of (job spec, replica type, index, node, the Admission's
generation), and with ``OnDelete`` an existing pod is never changed in place.
"""

from __future__ import annotations

from typing import Any

import orjson

from policy.job.podgroup import decorate
from policy.model.admission import GENERATION_ANNOTATION, BatchSize, Gang, Placement
from policy.model.batch import BATCH_ENV, BATCH_PER_REPLICA_ENV
from policy.model.cluster import HOSTNAME, L_INDEX, L_JOB, L_OPERATOR, L_ROLE, L_TYPE, OPERATOR_NAME
from policy.model.jobs import WORKER, Job, child_name
from policy.model.kinds.pods import append_env
from policy.model.migration import MOVE_ANNOTATION, move_of
from policy.model.pool import Binding


def labels(job: Job, rtype: str, index: int) -> dict[str, str]:
    return {
        L_OPERATOR: OPERATOR_NAME,
        L_JOB: job.name,
        L_TYPE: rtype.lower(),
        L_INDEX: str(index),
    }


def _is_master_role(job: Job, rtype: str, index: int) -> bool:
    if job.kind.master_role_type:
        return rtype == job.kind.master_role_type
    chief = job.chief_type
    return rtype == chief if chief else (rtype == WORKER and index == 0)


def _field(parent: dict[str, Any], key: str, empty: Any) -> Any:
    """``parent[key]``, created when absent or null (YAML's ``ports:`` with no items)."""
    if parent.get(key) is None:
        parent[key] = empty
    return parent[key]


def _pin(spec: dict[str, Any], hostname: str) -> None:
    """Add ``hostname In [host]`` to every required node-affinity term (terms are ORed, so
    each must carry it), keeping the user's own terms."""
    expr = {"key": HOSTNAME, "operator": "In", "values": [hostname]}
    node_affinity = _field(_field(spec, "affinity", {}), "nodeAffinity", {})
    required = _field(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchExpressions"] = [*(term.get("matchExpressions") or []), expr]
    required["nodeSelectorTerms"] = terms


# The weight of the planned node among a gang-scheduled pod's preferences: the most a
# preference may weigh, so the planned node wins wherever it fits.
PREFERRED_WEIGHT = 100


def _prefer(spec: dict[str, Any], hostname: str) -> None:
    """Prefer the planned node, keeping the user's own preferences and requirements: an
    external gang scheduler must stay free to bind the gang elsewhere when it must."""
    node_affinity = _field(_field(spec, "affinity", {}), "nodeAffinity", {})
    preferred = _field(node_affinity, "preferredDuringSchedulingIgnoredDuringExecution", [])
    expr = {"key": HOSTNAME, "operator": "In", "values": [hostname]}
    preferred.append({"weight": PREFERRED_WEIGHT, "preference": {"matchExpressions": [expr]}})


def render_pod(
    job: Job,
    placement: Placement,
    binding: Binding = "affinity",
    domain: str = "",
    admission_generation: int = 0,
    gang: Gang | None = None,
    grace_seconds: int | None = None,
    batch: BatchSize | None = None,
) -> dict[str, Any]:
    """The pod of ``placement``'s slot on its node. Its ``pod`` name, when set, may be a
    moved worker's replacement (``...-m<n>``, policy.model.migration); it keeps the replica
    index labels, so its Service and TF_CONFIG entry stay the same."""
    rtype, index, node, hostname = placement.type, placement.index, placement.node, placement.host
    name = placement.pod
    replica = job.replicas[rtype]
    # A deep copy (the template is plain JSON: a round trip through orjson is the fast way).
    template = orjson.loads(orjson.dumps(dict(replica.template)))
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    pod_labels = {**(meta.get("labels") or {}), **labels(job, rtype, index)}
    if _is_master_role(job, rtype, index):
        pod_labels[L_ROLE] = "master"
    metadata: dict[str, Any] = {
        "name": name or child_name(job, rtype, index),
        "namespace": job.namespace,
        "labels": pod_labels,
    }
    annotations = dict(meta.get("annotations") or {})
    if admission_generation:
        annotations[GENERATION_ANNOTATION] = str(admission_generation)
    if name and (move := move_of(name)):
        annotations[MOVE_ANNOTATION] = str(move)
    if annotations:
        metadata["annotations"] = annotations

    if grace_seconds is not None:  # the pool's; the template's own wins
        spec.setdefault("terminationGracePeriodSeconds", grace_seconds)
    spec["restartPolicy"] = (
        "Never" if replica.restart_policy == "ExitCode" else replica.restart_policy
    )
    main = next(c for c in spec["containers"] if c.get("name") == job.kind.container)
    ports = _field(main, "ports", [])
    if not any(p.get("name") == job.kind.port_name for p in ports):
        ports.append({"name": job.kind.port_name, "containerPort": job.kind.default_port})
    job.kind.configure_pod(spec, job, rtype, index, domain)
    if batch is not None:  # the batch the pool chose, read by the program at start
        append_env({"containers": [main]}, batch_env(batch))
    if node is None or hostname is None:
        pass  # placed by the kube-scheduler (the kube-default baseline)
    elif gang is not None:
        _prefer(spec, hostname)
    elif binding == "nodeName":
        spec["nodeName"] = node
    else:
        _pin(spec, hostname)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if gang is not None:
        decorate(pod, job, rtype, gang)
    return pod


def batch_env(batch: BatchSize) -> list[dict[str, str]]:
    """The global batch the pool chose and each worker's share (docs/speedup.md)."""
    return [
        {"name": BATCH_ENV, "value": str(batch.size)},
        {"name": BATCH_PER_REPLICA_ENV, "value": str(batch.per_replica)},
    ]


def render_service(job: Job, rtype: str, index: int) -> dict[str, Any]:
    """One headless Service per pod, same name, so every TF_CONFIG address resolves."""
    replica = job.replicas[rtype]
    main = next(
        c
        for c in (replica.template.get("spec") or {}).get("containers", [])
        if c.get("name") == job.kind.container
    )
    # One entry per port number: the API server refuses a Service that lists one twice
    # (a template's port 2222 named "grpc", and the tfjob-port Dragonet would add).
    ports: list[dict[str, Any]] = []
    for p in main.get("ports") or []:
        if p.get("name") and p.get("containerPort") and not _listed(ports, p["containerPort"]):
            ports.append({"name": p["name"], "port": p["containerPort"]})
    if not any(p["name"] == job.kind.port_name for p in ports) and not _listed(ports, replica.port):
        ports.append({"name": job.kind.port_name, "port": replica.port})
    selector = labels(job, rtype, index)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": child_name(job, rtype, index),
            "namespace": job.namespace,
            "labels": dict(selector),
        },
        "spec": {"clusterIP": "None", "selector": selector, "ports": ports},
    }


def _listed(ports: list[dict[str, Any]], number: int) -> bool:
    return any(p["port"] == number for p in ports)
