"""Objects as a real API server returns them, so that hook requests have a real cluster's size.

The simulator's own objects hold only what it needs. A real informer holds whole objects
(Metacontroller sets no ``SetTransform``): every object has ``metadata.managedFields`` (one
entry per manager, a ``fieldsV1`` tree mirroring the fields it wrote); a Node's status has
its addresses, conditions with heartbeats, ``daemonEndpoints``, ``nodeInfo`` and up to 50
``images`` (the kubelet's ``--node-status-max-images``); a running Pod has the API server's
spec defaults (the service-account token volume, DNS policy, termination message fields)
and the kubelet's status (IPs, QoS class, four conditions, full container statuses); a job
applied with ``kubectl apply`` carries ``kubectl.kubernetes.io/last-applied-configuration``,
a copy of itself.

Calibrated against public ``kubectl get -o json`` output: a minikube v1.20.2 node (five
managedFields entries: kubeadm, kubectl-label, kube-controller-manager, kubelet with the
whole status, kube-utils; 21 images), whose shape is copied field for field (ours, cut to 21
images, is 8 % smaller pretty-printed), and a running pod listed through the API of a kubeadm
cluster (ours 14 % larger: one more condition, hostIPs, a fuller managedFields entry).

:func:`dress` is the API server's hook: every stored object goes through it. It only adds
fields nobody in the simulator reads (and never changes one that is set), so a run's
decisions are those of minimal objects; only the requests are larger.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from policy.model.kinds import BY_KIND, KINDS

Obj = Mapping[str, Any]
NODE_IMAGES = 50  # the kubelet's --node-status-max-images default
KUBECTL_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Who writes each kind's metadata and spec (its status: the kubelet for nodes and pods, else
# the controller hosting it: Metacontroller).
CREATORS = {
    "Node": "kubelet",
    **{k.kind: "kubectl-client-side-apply" for k in KINDS},
    "TrainingPool": "helm",
    "PriorityClass": "helm",
}
STATUS_WRITERS = {"Node": "kubelet", "Pod": "kubelet"}
# Lists the API server merges by key (managedFields name the item by it: ``k:{...}``).
_LIST_KEYS = ("type", "name", "containerPort", "port", "mountPath", "key", "uid", "ip")
# Lists managedFields treat as one value (the kubelet's: ``"f:containerStatuses": {}``).
_ATOMIC = frozenset({"containerStatuses", "images", "command", "args"})


def fields_v1(value: Any) -> dict[str, Any]:
    """The ``fieldsV1`` set of a value: each map key ``f:key``, each list item of a keyed
    list ``k:{"key":value}``, other lists and scalars as leaves (``{}``)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {".": {}} if value else {}
        for k, v in value.items():
            out[f"f:{k}"] = {} if k in _ATOMIC else fields_v1(v)
        return out
    if isinstance(value, list) and value and all(isinstance(x, Mapping) for x in value):
        key = next((k for k in _LIST_KEYS if all(k in x for x in value)), None)
        if key is not None:
            out = {".": {}}
            for x in value:
                out["k:" + orjson.dumps({key: x[key]}).decode()] = fields_v1(x)
            return out
    return {}


def _entry(manager: str, fields: Mapping[str, Any], when: str, status: bool) -> dict[str, Any]:
    entry = {
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        "manager": manager,
        "operation": "Update",
        "time": when,
    }
    if status:
        entry["subresource"] = "status"
    return entry


def _owned_fields(obj: Obj) -> dict[str, Any]:
    """What the creator of ``obj`` wrote: its metadata's own fields and its spec."""
    meta = obj["metadata"]
    mine = {
        k: meta[k] for k in ("labels", "annotations", "ownerReferences", "finalizers") if k in meta
    }
    fields: dict[str, Any] = {"f:metadata": fields_v1(mine)}
    for top in ("spec", "data", "value", "description"):
        if top in obj:
            part = fields_v1(obj[top])
            part.pop(".", None)  # a top-level field is nobody's own map
            fields[f"f:{top}"] = part
    return fields


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def node_status(name: str, status: Obj, when: str, images: int = NODE_IMAGES) -> dict[str, Any]:
    """A Node's status as its kubelet reports it, around the simulator's allocatable."""
    d = _digest("node", name)
    ip = f"10.{int(d[0:2], 16)}.{int(d[2:4], 16)}.{int(d[4:6], 16) % 250 + 2}"
    conditions = [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    # Its own conditions first, as they were (with the kubelet's fields), then the others.
    own = list(status.get("conditions") or ())
    known = {c[0]: c for c in conditions}
    have = {c.get("type") for c in own}

    def full(ctype: str, state: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "lastHeartbeatTime": when,
            "lastTransitionTime": when,
            "message": message,
            "reason": reason,
            "status": state,
            "type": ctype,
        }

    every = [{**full(*known[c["type"]]), **c} if c.get("type") in known else c for c in own]
    every += [full(*c) for c in conditions if c[0] not in have]
    capacity = {
        "ephemeral-storage": "507944172Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        **(status.get("capacity") or status.get("allocatable") or {}),
    }
    allocatable = {
        "ephemeral-storage": "468125130866",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        **(status.get("allocatable") or {}),
    }
    return {
        **status,
        "addresses": [{"address": ip, "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
        "allocatable": allocatable,
        "capacity": capacity,
        "conditions": every,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": [_image(i) for i in range(images)],
        "nodeInfo": {
            "architecture": "amd64",
            "bootID": f"{d[8:16]}-{d[16:20]}-{d[20:24]}-{d[24:28]}-{d[28:40]}",
            "containerRuntimeVersion": "containerd://1.7.22",
            "kernelVersion": "5.15.0-1071-gcp",
            "kubeProxyVersion": "v1.30.5",
            "kubeletVersion": "v1.30.5",
            "machineID": d[40:72],
            "operatingSystem": "linux",
            "osImage": "Ubuntu 22.04.5 LTS",
            "systemUUID": f"{d[0:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}",
        },
    }


def _image(i: int) -> dict[str, Any]:
    """One of the training cluster's images: a repository digest and a tag."""
    repo = f"registry.example.com/ml/training-image-{i:02d}"
    sha = _digest("image", str(i))
    return {"names": [f"{repo}@sha256:{sha}", f"{repo}:v{i % 7}.{i % 5}"], "sizeBytes": 10**9 + i}


NODE_LABELS = {
    "beta.kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
    "node.kubernetes.io/instance-type": "a2-highgpu-8g",
    "topology.kubernetes.io/region": "us-central1",
    "topology.kubernetes.io/zone": "us-central1-a",
}
NODE_ANNOTATIONS = {
    "node.alpha.kubernetes.io/ttl": "0",
    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    "csi.volume.kubernetes.io/nodeid": '{"pd.csi.storage.gke.io":"projects/p/zones/z/instances/n"}',
}


def _pod_spec(spec: Obj, name: str) -> dict[str, Any]:
    """The API server's defaults (and the service-account admission's token volume)."""
    volume = f"kube-api-access-{_digest('pod', name)[:5]}"
    mount = {
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "name": volume,
        "readOnly": True,
    }
    containers = [
        {
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            **c,
            "volumeMounts": [*(c.get("volumeMounts") or ()), mount],
        }
        for c in spec.get("containers") or ()
    ]
    token = {
        "name": volume,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        "name": "kube-root-ca.crt",
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                "path": "namespace",
                            }
                        ]
                    }
                },
            ],
        },
    }
    return {
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": f"node.kubernetes.io/{t}",
                "operator": "Exists",
                "tolerationSeconds": 300,
            }
            for t in ("not-ready", "unreachable")
        ],
        **spec,
        "containers": containers,
        "volumes": [*(spec.get("volumes") or ()), token],
    }


def _pod_status(pod: Obj, when: str) -> dict[str, Any]:
    """The kubelet's status of a started pod, around what the simulator wrote."""
    status = dict(pod.get("status") or {})
    spec, name = pod["spec"], pod["metadata"]["name"]
    d = _digest("pod", pod["metadata"].get("namespace") or "", name)
    node_ip = f"10.{int(d[0:2], 16)}.{int(d[2:4], 16)}.{int(d[4:6], 16) % 250 + 2}"
    pod_ip = f"10.{int(d[6:8], 16) % 64 + 64}.{int(d[8:10], 16)}.{int(d[10:12], 16) % 250 + 2}"
    status.setdefault("hostIP", node_ip)
    status.setdefault("hostIPs", [{"ip": node_ip}])
    status.setdefault("podIP", pod_ip)
    status.setdefault("podIPs", [{"ip": pod_ip}])
    status.setdefault("qosClass", "Burstable")
    status.setdefault("startTime", when)
    have = {c.get("type") for c in status.get("conditions") or ()}
    extra = [
        {"lastProbeTime": None, "lastTransitionTime": when, "status": "True", "type": t}
        for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady")
        if t not in have
    ]
    status["conditions"] = [
        {"lastProbeTime": None, "lastTransitionTime": when, **c}
        for c in [*(status.get("conditions") or ()), *extra]
    ]
    images = {c.get("name"): c.get("image", "") for c in spec.get("containers") or ()}
    statuses = status.get("containerStatuses") or []
    if not statuses and status.get("phase") == "Running":
        statuses = [
            {"name": n, "ready": True, "restartCount": 0, "state": {"running": {"startedAt": when}}}
            for n in images
        ]
    if not statuses:
        return status
    status["containerStatuses"] = [
        {
            "containerID": "containerd://" + _digest("container", d, str(cs.get("name"))),
            "image": images.get(cs.get("name"), ""),
            "imageID": f"{images.get(cs.get('name'), '')}@sha256:{_digest('id', d)}",
            "lastState": {},
            "started": bool((cs.get("state") or {}).get("running")),
            **cs,
        }
        for cs in statuses
    ]
    return status


def dress(old: Obj | None, new: dict[str, Any], when: str, ssa: bool = False) -> dict[str, Any]:
    """``new`` as a real API server stores it (``old``: the version it replaces, if any).
    Work done for ``old`` is reused when the part it came from is the same object."""
    kind = new.get("kind")
    meta = dict(new["metadata"])
    if old is None:
        if kind == "Node":
            meta["labels"] = {**NODE_LABELS, **(meta.get("labels") or {})}
            meta["annotations"] = {**NODE_ANNOTATIONS, **(meta.get("annotations") or {})}
            new = {**new, "status": node_status(meta["name"], new.get("status") or {}, when)}
        elif kind == "Pod":
            new = {**new, "spec": _pod_spec(new.get("spec") or {}, meta["name"])}
        elif kind in BY_KIND and KUBECTL_LAST_APPLIED not in (meta.get("annotations") or {}):
            applied = {k: v for k, v in new.items() if k != "status"}
            applied["metadata"] = {
                k: v
                for k, v in new["metadata"].items()
                if k in ("name", "namespace", "labels", "annotations")
            }
            meta["annotations"] = {
                **(meta.get("annotations") or {}),
                KUBECTL_LAST_APPLIED: orjson.dumps(applied, option=orjson.OPT_SORT_KEYS).decode()
                + "\n",
            }
    started = (new.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")
    if kind == "Pod" and started and (old is None or new.get("status") is not old.get("status")):
        new = {**new, "status": _pod_status(new, when)}
    meta["managedFields"] = _managed(old, new, meta, when, ssa)
    return {**new, "metadata": meta}


def _managed(
    old: Obj | None, new: Obj, meta: dict[str, Any], when: str, ssa: bool
) -> list[dict[str, Any]]:
    kind = str(new.get("kind"))
    before = list((old or {}).get("metadata", {}).get("managedFields") or ())
    main = before[0] if before else None
    same_meta = old is not None and all(
        meta.get(k) is old["metadata"].get(k)
        for k in ("labels", "annotations", "ownerReferences", "finalizers")
    )
    if main is None or not same_meta or new.get("spec") is not old.get("spec"):  # type: ignore[union-attr]
        manager = CREATORS.get(kind, "metacontroller")
        main = _entry(manager, _owned_fields({**new, "metadata": meta}), when, False)
        if ssa and manager == "metacontroller":
            main["operation"] = "Apply"
    entries = [main]
    status = new.get("status")
    if status:
        last = before[1] if len(before) > 1 else None
        if last is None or old is None or status is not old.get("status"):
            writer = STATUS_WRITERS.get(kind, "metacontroller")
            written = fields_v1(status)
            written.pop(".", None)
            last = _entry(writer, {"f:status": written}, when, True)
        entries.append(last)
    return entries
