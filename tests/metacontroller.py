"""Objects as the API server stores them and hook requests as Metacontroller sends them.

Shapes follow reference/metacontroller-contract.md §2 (v2 sync request: ``controller``,
``parent``, ``children`` and ``related`` maps keyed ``Kind.group/version`` ->
``namespace/name``, ``finalizing``) and the Kubernetes API: Metacontroller adds the
``controller-uid`` label and a controller ownerReference to every child it creates.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "tests" / "fixtures" / "compat"  # the manifests of ../shared/compat
CONTROLLER_YAML = ROOT / "metacontroller" / "tfjob-controller.yaml"
T0 = "2026-11-21T10:00:00Z"

CHILD_TYPES = ["Pod.v1", "Service.v1"]
RELATED_TYPES = ["Node.v1", "Pod.v1", "TFJob.kubeflow.org/v1"]


def _uid(*parts: str) -> str:
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def controller() -> dict[str, Any]:
    """The CompositeController as Metacontroller passes it (our own manifest, as stored)."""
    obj = yaml.safe_load(CONTROLLER_YAML.read_text())
    obj["metadata"].update(
        uid=_uid("cc", obj["metadata"]["name"]),
        resourceVersion="101",
        generation=1,
        creationTimestamp="2026-11-01T00:00:00Z",
    )
    obj.setdefault("status", {})
    return obj


def node(
    name: str,
    cpu: str = "8",
    memory: str = "32Gi",
    gpu: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    pods: str = "110",
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    if gpu:
        alloc["nvidia.com/gpu"] = str(gpu)
    spec: dict[str, Any] = {"podCIDR": "10.244.0.0/24"}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", name),
            "resourceVersion": "500",
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": dict(alloc),
            "allocatable": dict(alloc),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastHeartbeatTime": T0,
                    "lastTransitionTime": "2026-11-01T00:00:00Z",
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "operatingSystem": "linux"},
        },
    }


def compat(name: str) -> dict[str, Any]:
    return yaml.safe_load((COMPAT / name).read_text())


def tfjob(
    manifest: dict[str, Any] | str,
    name: str | None = None,
    namespace: str = "default",
    created: str = T0,
    status: dict[str, Any] | None = None,
    generation: int = 1,
) -> dict[str, Any]:
    """A TFJob as the API server returns it: the user's manifest plus server metadata."""
    obj = copy.deepcopy(compat(manifest) if isinstance(manifest, str) else manifest)
    meta = obj.setdefault("metadata", {})
    if name:
        meta["name"] = name
    meta.update(
        namespace=namespace,
        uid=_uid("tfjob", namespace, meta["name"], created),
        resourceVersion="1000",
        generation=generation,
        creationTimestamp=created,
        finalizers=["metacontroller.io/compositecontroller-dragonet-tfjobs"],
    )
    if status is not None:
        obj["status"] = status
    return obj


def observed_pod(
    parent: dict[str, Any],
    child: dict[str, Any],
    phase: str = "Running",
    exit_code: int | None = None,
    restarts: int = 0,
    bound: bool = True,
    terminating: bool = False,
) -> dict[str, Any]:
    """A pod we asked for, as the API server and kubelet report it later."""
    pod = copy.deepcopy(child)
    meta = pod["metadata"]
    meta["labels"]["controller-uid"] = parent["metadata"]["uid"]
    meta.update(
        uid=_uid("pod", meta["namespace"], meta["name"]),
        resourceVersion="2000",
        creationTimestamp=T0,
        ownerReferences=[
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "name": parent["metadata"]["name"],
                "uid": parent["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    if terminating:
        meta["deletionTimestamp"] = T0
        meta["deletionGracePeriodSeconds"] = 30
    spec = pod["spec"]
    host = _pinned(spec)
    if bound and host and "nodeName" not in spec:
        spec["nodeName"] = host
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    main = spec["containers"][0]["name"]
    if phase in ("Succeeded", "Failed"):
        state = {
            "terminated": {
                "exitCode": exit_code
                if exit_code is not None
                else (0 if phase == "Succeeded" else 1),
                "reason": "Completed" if phase == "Succeeded" else "Error",
                "startedAt": T0,
                "finishedAt": T0,
            }
        }
    elif phase == "Running":
        state = {"running": {"startedAt": T0}}
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    pod["status"] = {
        "phase": phase,
        "hostIP": "192.168.0.10" if bound else None,
        "containerStatuses": [
            {
                "name": main,
                "ready": phase == "Running",
                "restartCount": restarts,
                "image": spec["containers"][0]["image"],
                "imageID": "",
                "state": state,
            }
        ],
    }
    if not bound:
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False"}],
        }
    return pod


def _pinned(spec: dict[str, Any]) -> str | None:
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    for term in terms["nodeSelectorTerms"]:
        for expr in term.get("matchExpressions", []):
            if expr["key"] == "kubernetes.io/hostname":
                return expr["values"][0]
    return None


def observed_service(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    svc = copy.deepcopy(child)
    svc["metadata"]["labels"]["controller-uid"] = parent["metadata"]["uid"]
    svc["metadata"].update(uid=_uid("svc", svc["metadata"]["name"]), resourceVersion="2001")
    return svc


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _group(objs: list[dict[str, Any]], types: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {t: {} for t in types}
    for o in objs:
        out.setdefault(f"{o['kind']}.{o['apiVersion']}", {})[_key(o)] = o
    return out


def sync_request(
    parent: dict[str, Any],
    nodes: list[dict[str, Any]],
    jobs: list[dict[str, Any]] | None = None,
    pods: list[dict[str, Any]] | None = None,
    services: list[dict[str, Any]] | None = None,
    finalizing: bool = False,
) -> dict[str, Any]:
    """The v2 sync request for ``parent``: its own pods and services as children; every
    Dragonet pod, every pool node and every TFJob (the parent included) as related."""
    jobs = jobs if jobs is not None else [parent]
    pods = pods or []
    uid = parent["metadata"]["uid"]
    own = [p for p in pods if p["metadata"]["labels"].get("controller-uid") == uid]
    own_svcs = [s for s in services or [] if s["metadata"]["labels"].get("controller-uid") == uid]
    return {
        "controller": controller(),
        "parent": parent,
        "children": _group([*own, *own_svcs], CHILD_TYPES),
        "related": _group([*nodes, *pods, *jobs], RELATED_TYPES),
        "finalizing": finalizing,
    }
