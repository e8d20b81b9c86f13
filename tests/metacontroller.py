"""Objects as the API server stores them and hook requests as Metacontroller sends them.

Shapes follow reference/metacontroller-contract.md §2 (v2 sync request: ``controller``,
``parent``, ``children`` and ``related`` maps keyed ``Kind.group/version`` ->
``namespace/name``, ``finalizing``) and the Kubernetes API: Metacontroller adds the
``controller-uid`` label and a controller ownerReference to every child it creates.

Two controllers call the webhook (docs/architecture.md): the pool's (parent: a TrainingPool;
children: Admissions; related: Nodes, Dragonet's Pods, TFJobs, PriorityClasses) and each
job's (parent: a TFJob; children: its Pods and Services; related: its own Admission).
A ``World`` is what a test sets up (a job and the cluster around it); ``pool_request`` and
``job_request`` are what Metacontroller sends each controller for it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from policy.model.pool import pool_object
from policy.model.request import object_map

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "tests" / "fixtures" / "compat"  # the manifests of ../shared/compat
CONTROLLER_YAML = ROOT / "metacontroller" / "tfjob-controller.yaml"
MX_CONTROLLER_YAML = ROOT / "metacontroller" / "mxjob-controller.yaml"
POOL_CONTROLLER_YAML = ROOT / "metacontroller" / "pool-controller.yaml"
T0 = "2026-11-21T10:00:00Z"

CHILD_TYPES = ["Pod.v1", "Service.v1"]
DEPLOYMENTS = "Deployment.apps/v1"  # a TFJob's TensorBoard (its controller's third child type)
TF_CHILD_TYPES = [*CHILD_TYPES, DEPLOYMENTS]
ADMISSIONS = "Admission.dragonet.io/v1alpha1"
POOLS = "TrainingPool.dragonet.io/v1alpha1"
PRIORITY_CLASSES = "PriorityClass.scheduling.k8s.io/v1"
POOL_RELATED_TYPES = [
    "Node.v1",
    "Pod.v1",
    "TFJob.kubeflow.org/v1",
    "MXJob.kubeflow.org/v1",
    "PyTorchJob.kubeflow.org/v1",
    PRIORITY_CLASSES,
]


def _uid(*parts: str) -> str:
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def controller(path: Path = CONTROLLER_YAML) -> dict[str, Any]:
    """A CompositeController as Metacontroller passes it (our own manifest, as stored)."""
    obj = yaml.safe_load(path.read_text())
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
    """A TFJob (or MXJob) as the API server returns it: the user's manifest plus server
    metadata."""
    obj = copy.deepcopy(compat(manifest) if isinstance(manifest, str) else manifest)
    plural = obj.get("kind", "TFJob").lower() + "s"
    meta = obj.setdefault("metadata", {})
    if name:
        meta["name"] = name
    meta.update(
        namespace=namespace,
        uid=_uid(plural[:-1], namespace, meta["name"], created),
        resourceVersion="1000",
        generation=generation,
        creationTimestamp=created,
        finalizers=[f"metacontroller.io/compositecontroller-dragonet-{plural}"],
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
                "kind": parent.get("kind", "TFJob"),
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
    """The node a pod lands on: its nodeName, its required hostname, or (bound by a gang
    scheduler) the hostname it prefers."""
    if spec.get("nodeName"):
        return spec["nodeName"]
    affinity = spec["affinity"]["nodeAffinity"]
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {
        "nodeSelectorTerms": [
            p["preference"] for p in affinity["preferredDuringSchedulingIgnoredDuringExecution"]
        ]
    }
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


def pool(name: str = "default", **spec: Any) -> dict[str, Any]:
    """A TrainingPool as the API server returns it (the chart's default pool, by default)."""
    obj = pool_object(name, **spec)
    obj["metadata"].update(
        uid=_uid("pool", name),
        resourceVersion="700",
        generation=1,
        creationTimestamp="2026-11-01T00:00:00Z",
    )
    obj["status"] = {}
    return obj


def priority_class(name: str, value: int, default: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": _uid("pc", name), "resourceVersion": "90"},
        "value": value,
    }
    if default:
        obj["globalDefault"] = True
    return obj


@dataclass
class World:
    """A job and the cluster around it, as a test sets them up."""

    parent: dict[str, Any]
    nodes: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    pods: list[dict[str, Any]] = field(default_factory=list)
    services: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    pools: list[dict[str, Any]] = field(default_factory=list)  # other TrainingPools
    finalizing: bool = False
    pod_groups: list[dict[str, Any]] = field(default_factory=list)  # every job's PodGroups
    deployments: list[dict[str, Any]] = field(default_factory=list)  # TensorBoards

    def own(self, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        uid = self.parent["metadata"]["uid"]
        return [o for o in objs if o["metadata"]["labels"].get("controller-uid") == uid]


def world(
    parent: dict[str, Any],
    nodes: Iterable[dict[str, Any]],
    jobs: list[dict[str, Any]] | None = None,
    pods: list[dict[str, Any]] | None = None,
    services: list[dict[str, Any]] | None = None,
    finalizing: bool = False,
    priority_classes: list[dict[str, Any]] | None = None,
) -> World:
    """``parent`` among ``jobs`` (default: alone) on ``nodes``, with the pods and services
    the cluster reports (every job's; each job's own are those with its controller-uid)."""
    return World(
        parent,
        list(nodes),
        jobs if jobs is not None else [parent],
        list(pods or []),
        list(services or []),
        list(priority_classes or []),
        finalizing=finalizing,
    )


def pool_request(
    w: World, admissions: Iterable[dict[str, Any]] = (), parent: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The v2 sync request of the pool: its Admissions as children; the pool's nodes, every
    Dragonet pod, every TFJob and the PriorityClasses (and, for the default pool, the other
    pools) as related."""
    pool_obj = parent or pool()
    related = object_map([*w.nodes, *w.pods, *w.jobs, *w.priority_classes], POOL_RELATED_TYPES)
    if pool_obj["metadata"]["name"] == "default":
        related[POOLS] = {p["metadata"]["name"]: p for p in w.pools}
    return {
        "controller": controller(POOL_CONTROLLER_YAML),
        "parent": pool_obj,
        "children": object_map(list(admissions), [ADMISSIONS]),
        "related": related,
        "finalizing": False,
    }


POD_GROUP_API_VERSIONS = {
    "kube-batch": "scheduling.incubator.k8s.io/v1alpha1",
    "volcano": "scheduling.volcano.sh/v1beta1",
    "coscheduling": "scheduling.x-k8s.io/v1alpha1",
}


def gang_controller(path: Path, backends: Iterable[str]) -> dict[str, Any]:
    """A job controller that also owns the backends' PodGroups (the chart's
    ``scheduling.gangSchedulers``; metacontroller/README.md), as Metacontroller passes it."""
    obj = controller(path)
    obj["spec"]["childResources"] += [
        {
            "apiVersion": POD_GROUP_API_VERSIONS[b],
            "resource": "podgroups",
            "updateStrategy": {"method": "InPlace"},
        }
        for b in backends
    ]
    return obj


def job_request(
    w: World, admission: dict[str, Any] | None, gang: Iterable[str] = ()
) -> dict[str, Any]:
    """The v2 sync request of ``w.parent``: its own pods and services (and PodGroups, when
    its controller owns the ``gang`` backends' ones) as children, its own Admission (if the
    pool wrote one) as related."""
    kind = w.parent.get("kind", "TFJob")
    path = ROOT / "metacontroller" / f"{kind.lower()}-controller.yaml"
    mx = kind != "TFJob"  # only a TFJob's controller owns Deployments (its TensorBoard)
    backends = list(gang)
    base = CHILD_TYPES if mx else TF_CHILD_TYPES
    types = [*base, *(f"PodGroup.{POD_GROUP_API_VERSIONS[b]}" for b in backends)]
    return {
        "controller": gang_controller(path, backends) if backends else controller(path),
        "parent": w.parent,
        "children": object_map(
            [
                *w.own(w.pods),
                *w.own(w.services),
                *([] if mx else w.own(w.deployments)),
                *w.own(w.pod_groups),
            ],
            types,
        ),
        "related": object_map([admission] if admission else [], [ADMISSIONS]),
        "finalizing": w.finalizing,
    }


def stored_admission(
    pool_obj: dict[str, Any], child: dict[str, Any], previous: dict[str, Any] | None
) -> dict[str, Any]:
    """An Admission the pool answered, as the API server stores it after Metacontroller
    applied it (``InPlace``): created with generation 1, or updated with a new generation
    when its spec changed."""
    obj = copy.deepcopy(child)
    meta = obj["metadata"]
    meta["labels"]["controller-uid"] = pool_obj["metadata"]["uid"]
    if previous is not None and previous["spec"] == obj["spec"]:
        return previous
    generation = previous["metadata"]["generation"] + 1 if previous else 1
    meta.update(
        uid=previous["metadata"]["uid"]
        if previous
        else _uid("adm", meta["namespace"], meta["name"]),
        resourceVersion=str(3000 + generation),
        generation=generation,
        creationTimestamp=T0,
        ownerReferences=[
            {
                "apiVersion": pool_obj["apiVersion"],
                "kind": pool_obj["kind"],
                "name": pool_obj["metadata"]["name"],
                "uid": pool_obj["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    return obj


def admission(
    job: dict[str, Any],
    pods: Iterable[tuple[str, int, str | None]] = (),
    workers: int = 0,
    phase: str = "Admitted",
    message: str = "",
    generation: int = 1,
    pool_name: str = "default",
    binding: str = "affinity",
    gang: tuple[str, str] | None = None,
    gang_note: str = "",
) -> dict[str, Any]:
    """An Admission as the API server stores it, written out by a test: the contract a
    job's sync reads, independent of the pool's code."""
    meta = job["metadata"]
    entries = [{"type": t, "index": i, **({"node": n} if n else {})} for t, i, n in pods]
    return {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "Admission",
        "metadata": {
            "name": f"{job.get('kind', 'TFJob').lower()}-{meta['name']}",
            "namespace": meta["namespace"],
            "uid": _uid("adm", meta["namespace"], meta["name"]),
            "resourceVersion": str(3000 + generation),
            "generation": generation,
            "creationTimestamp": T0,
            "labels": {
                "dragonet.io/pool": pool_name,
                "dragonet.io/job-name": meta["name"],
                "controller-uid": _uid("pool", pool_name),
            },
        },
        "spec": {
            "pool": pool_name,
            "job": {
                "apiVersion": "kubeflow.org/v1",
                "kind": job.get("kind", "TFJob"),
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "phase": phase,
            "message": message,
            "binding": binding,
            "workers": workers,
            "pods": entries,
            **({"gang": {"scheduler": gang[0], "schedulerName": gang[1]}} if gang else {}),
            **({"gangNote": gang_note} if gang_note else {}),
        },
    }


def observed_deployment(
    parent: dict[str, Any], child: dict[str, Any], ready: bool = True
) -> dict[str, Any]:
    """A TensorBoard Deployment we asked for, as the API server stores it later (owned by
    the job, defaulted, with the Deployment controller's status)."""
    obj = copy.deepcopy(child)
    meta = obj["metadata"]
    meta["labels"]["controller-uid"] = parent["metadata"]["uid"]
    meta.update(
        uid=_uid("deploy", meta["namespace"], meta["name"]),
        resourceVersion="2100",
        generation=1,
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
    obj["spec"].setdefault("revisionHistoryLimit", 10)
    obj["spec"].setdefault("progressDeadlineSeconds", 600)
    n = 1 if ready else 0
    obj["status"] = {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": n,
        "availableReplicas": n,
    }
    if not ready:
        del obj["status"]["readyReplicas"]
        del obj["status"]["availableReplicas"]
    return obj


def tensorboard_pod(
    deployment: dict[str, Any], phase: str = "Running", terminating: bool = False
) -> dict[str, Any]:
    """The pod a TensorBoard Deployment made (through its ReplicaSet), as the pool sees it
    among the related Pods: the template's labels, a generated name, bound."""
    template = copy.deepcopy(deployment["spec"]["template"])
    meta = template["metadata"]
    name = f"{deployment['metadata']['name']}-7d9f8b6c4d-x2k9p"
    ns = deployment["metadata"]["namespace"]
    meta["labels"]["pod-template-hash"] = "7d9f8b6c4d"
    meta.update(
        name=name,
        namespace=ns,
        uid=_uid("pod", ns, name),
        resourceVersion="2200",
        creationTimestamp=T0,
        ownerReferences=[
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{deployment['metadata']['name']}-7d9f8b6c4d",
                "uid": _uid("rs", ns, name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    if terminating:
        meta["deletionTimestamp"] = T0
    spec = template["spec"]
    host = _pinned(spec)
    if host and "nodeName" not in spec:
        spec["nodeName"] = host
    spec.setdefault("schedulerName", "default-scheduler")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase, "startTime": T0},
    }


def with_tensorboard(job: dict[str, Any], **board: Any) -> dict[str, Any]:
    """The job asking for a TensorBoard (annotation ``dragonet.io/tensorboard``)."""
    out = copy.deepcopy(job)
    annotations = out["metadata"].setdefault("annotations", {})
    annotations["dragonet.io/tensorboard"] = json.dumps({"logDir": "/logs", **board})
    return out
