"""KubeShare, modelled: fractional GPUs on the simulated nodes (docs/kubeshare.md).

* **v1** (``kubeshare.nthu/v1``). A SharePod that names no node or GPUID is placed first,
  as KubeShare's scheduler would (the first node with room, the vGPU there it fills best).
  A SharePod that names its node and ``kubeshare/GPUID`` runs
  as a Pod of the same name on that node (owned by the SharePod, with its labels, so the
  training programs see it), and KubeShare's status mirror (``status.PodStatus``,
  ``BoundDeviceID``) follows the Pod. Each GPUID in use on a node holds one physical GPU,
  as KubeShare's ``kubeshare-vgpu`` pod does (``nvidia.com/gpu: 1`` in ``kube-system``), so
  whole-GPU pods and vGPUs share the kubelet's count. A SharePod whose GPUID would go above
  one whole GPU (or its memory), or that needs a GPU the node no longer has, fails: the
  model checks the pool's device accounting instead of trusting it. A SharePod stays
  (finalizer) until its Pod is gone, so a leaving pod's share still shows.
* **v2** (``sharedgpu/*`` labels, ``schedulerName: kubeshare-scheduler``). The modelled
  kubeshare-scheduler binds such a pod on the node its required affinity names, to the
  opened device it fills best (else an untouched one), and writes ``sharedgpu/gpu_uuid``;
  a pod no device can take stays Pending with ``PodScheduled=False/Unschedulable``.

Device ids and memory come from the node's ``kubeshare/gpu_info`` annotation (``<uuid>:<MiB>``)
when it has one, else ``GPU-<node>-<i>`` with unlimited memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from policy.model.cluster import Node
from policy.model.gpushare import (
    GPU,
    GPU_INFO,
    SHAREPOD_KIND,
    SHAREPODS,
    V1_GPUID,
    V2_SCHEDULER,
    V2_UUID,
    WHOLE,
    device_memory,
    share_of,
)
from policy.model.jobs import pod_request
from sim.apiserver import ApiServer, Obj, object_key
from sim.kube import NODES, PODS, Kube, _condition

Schedule = Callable[[float, Callable[[], None]], None]
FINALIZER = "kubeshare.nthu/pod"
VGPU_NAMESPACE = "kube-system"


def _share(obj: Obj) -> tuple[int, int] | None:
    meta = obj["metadata"]
    share = share_of(meta.get("annotations") or {}, meta.get("labels") or {})
    return (share.request, share.memory) if share else None


def _holds(pod: Obj) -> bool:
    return bool(pod["spec"].get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


@dataclass
class KubeShare:
    api: ApiServer
    schedule: Schedule
    kube: Kube
    failed: int = 0  # SharePods refused for an over-committed GPU
    _retry: bool = False
    _vgpus: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, GPUID) -> pod

    def __post_init__(self) -> None:
        self.api.watchers.append(self._on_change)

    # --- devices -----------------------------------------------------------------------

    def _devices(self, node: str) -> list[str]:
        obj = self.api.get(NODES, node) or {}
        info = ((obj.get("metadata") or {}).get("annotations") or {}).get(GPU_INFO) or ""
        ids = [part.split(":")[0] for part in info.split(",") if ":" in part]
        count = Node.from_object(obj).allocatable[GPU] // 1000 if obj else 0
        return ids[:count] if len(ids) >= count else [f"GPU-{node}-{i}" for i in range(count)]

    def _memory(self, node: str) -> int | None:
        obj = self.api.get(NODES, node) or {}
        return device_memory((obj.get("metadata") or {}).get("annotations") or {})

    def _use(self, node: str, device_key: str) -> dict[str, tuple[int, int]]:
        """device -> (thousandths, bytes) held there by the pods on ``node``."""
        out: dict[str, tuple[int, int]] = {}
        for pod in self.api.list(PODS):
            if pod["spec"].get("nodeName") != node or not _holds(pod):
                continue
            device = (pod["metadata"].get("annotations") or {}).get(device_key)
            share = _share(pod)
            if device and share:
                r, m = out.get(device, (0, 0))
                out[device] = (r + share[0], m + share[1])
        return out

    # --- watch -----------------------------------------------------------------------

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == SHAREPODS:
            if new is not None and old is None:
                key, uid = object_key(new), new["metadata"]["uid"]
                self.schedule(0.0, lambda: self._run_sharepod(key, uid))
            elif new is not None and new["metadata"].get("deletionTimestamp"):
                key = object_key(new)
                if self.api.get(PODS, key) is not None:
                    self.api.delete(PODS, key)
                else:
                    self.schedule(0.0, lambda: self._release(key))
            return
        if tkey != PODS:
            return
        pod = new or old
        if _sharepod_owner(pod) is not None:
            key = object_key(pod)
            self.schedule(0.0, lambda: self._mirror(key))
        if new is None or (old is not None and _holds(old) and not _holds(new)):
            self._retry_soon()
        if new is not None and old is None and _is_v2(new):
            self.schedule(0.0, self._schedule_v2)

    # --- v1 --------------------------------------------------------------------------

    def _fail(self, key: str, reason: str, message: str) -> None:
        self.failed += 1
        status = {"PodStatus": {"phase": "Failed", "reason": reason, "message": message}}
        self.api.patch(SHAREPODS, key, status=status)

    def _run_sharepod(self, key: str, uid: str) -> None:
        sp = self.api.get(SHAREPODS, key)
        if sp is None or sp["metadata"]["uid"] != uid or sp["metadata"].get("deletionTimestamp"):
            return
        meta, spec = sp["metadata"], sp["spec"]
        node = spec.get("nodeName")
        gpuid = (meta.get("annotations") or {}).get(V1_GPUID)
        share = _share(sp)
        if share is None:
            self._fail(key, "NoShare", "a SharePod without kubeshare/gpu_request")
            return
        if not node or not gpuid:
            placed = self._schedule_v1(sp, share)
            if placed is None:
                self.schedule(5.0, lambda: self._run_sharepod(key, uid))  # retried later
                return
            sp = placed
            meta, spec = sp["metadata"], sp["spec"]
            node, gpuid = spec["nodeName"], meta["annotations"][V1_GPUID]
        used = self._use(node, V1_GPUID)
        r, m = used.get(gpuid, (0, 0))
        memory = self._memory(node)
        if r + share[0] > WHOLE or (memory is not None and m + share[1] > memory):
            self._fail(key, "GPUOverCommitted", f"GPU {gpuid} on {node} has no room for it")
            return
        if (node, gpuid) not in self._vgpus:
            if node not in self.kube.nodes or self.kube.free(node)[GPU] < 1000:
                self._fail(key, "NoGPU", f"{node} has no free GPU for vGPU {gpuid}")
                return
            name = f"kubeshare-vgpu-{node}-{gpuid}".lower()
            self.api.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": VGPU_NAMESPACE, "labels": {}},
                    "spec": {
                        "nodeName": node,
                        "containers": [
                            {
                                "name": "vgpu",
                                "image": "busybox",
                                "resources": {"limits": {GPU: "1"}},
                            }
                        ],
                    },
                }
            )
            self._vgpus[(node, gpuid)] = name
        self.api.update({**sp, "metadata": {**meta, "finalizers": [FINALIZER]}}, status_only=True)
        owner = {
            "apiVersion": sp["apiVersion"],
            "kind": SHAREPOD_KIND,
            "name": meta["name"],
            "uid": uid,
            "controller": True,
        }
        pod_meta = {
            "name": meta["name"],
            "namespace": meta.get("namespace") or "default",
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [owner],
        }
        self.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})

    def _schedule_v1(self, sp: Obj, share: tuple[int, int]) -> Obj | None:
        """KubeShare v1's scheduler, for a SharePod that names no node or GPUID (what the
        ``kube-default`` baseline writes): the first node with room, the vGPU there it
        fills best, else a new one."""
        request = pod_request(sp["spec"])
        for name in sorted(self.kube.nodes):
            if not self.kube.scheduler.allows(sp["spec"], name):
                continue
            if not request.fits_in(self.kube.free(name)):
                continue
            used = self._use(name, V1_GPUID)
            memory = self._memory(name)
            fits = [
                (WHOLE - r, d)
                for d, (r, m) in used.items()
                if r + share[0] <= WHOLE and (memory is None or m + share[1] <= memory)
            ]
            if fits:
                gpuid = min(fits)[1]
            elif self.kube.free(name)[GPU] >= 1000:
                gpuid = f"sim{len(self._vgpus):05d}"
            else:
                continue
            annotations = {**(sp["metadata"].get("annotations") or {}), V1_GPUID: gpuid}
            return self.api.update(
                {
                    **sp,
                    "metadata": {**sp["metadata"], "annotations": annotations},
                    "spec": {**sp["spec"], "nodeName": name},
                }
            )
        return None

    def _mirror(self, key: str) -> None:
        """KubeShare copies its Pod's status into the SharePod; the SharePod goes once its
        Pod is gone."""
        sp = self.api.get(SHAREPODS, key)
        if sp is None:
            return
        pod = self.api.get(PODS, key)
        if pod is None:
            self._release(key)
            return
        gpuid = (sp["metadata"].get("annotations") or {}).get(V1_GPUID, "")
        status = {"PodStatus": pod.get("status") or {}, "BoundDeviceID": gpuid}
        if sp.get("status") != status:
            self.api.patch(SHAREPODS, key, status=status)

    def _release(self, key: str) -> None:
        sp = self.api.get(SHAREPODS, key)
        if sp is not None and sp["metadata"].get("deletionTimestamp"):
            node = sp["spec"].get("nodeName")
            gpuid = (sp["metadata"].get("annotations") or {}).get(V1_GPUID)
            meta = {**sp["metadata"], "finalizers": []}
            self.api.update({**sp, "metadata": meta}, status_only=True)
            self.api.remove(SHAREPODS, key)
            if node and gpuid and not self._use(node, V1_GPUID).get(gpuid):
                name = self._vgpus.pop((node, gpuid), None)
                if name is not None:
                    self.api.remove(PODS, f"{VGPU_NAMESPACE}/{name}")

    # --- v2 --------------------------------------------------------------------------

    def _retry_soon(self) -> None:
        if not self._retry:
            self._retry = True
            self.schedule(0.0, self._schedule_v2)

    def _schedule_v2(self) -> None:
        self._retry = False
        pending = [
            p
            for p in self.api.list(PODS)
            if _is_v2(p)
            and not p["spec"].get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
        ]
        pending.sort(key=lambda p: (int(p["metadata"]["resourceVersion"]), object_key(p)))
        for pod in pending:
            self._bind_v2(pod)

    def _bind_v2(self, pod: Obj) -> None:
        share = _share(pod)
        request = pod_request(pod["spec"])
        key = object_key(pod)
        for name in sorted(self.kube.nodes):
            if not self.kube.scheduler.allows(pod["spec"], name):
                continue
            if share is None or not request.fits_in(self.kube.free(name)):
                continue
            device = self._device_for(name, share)
            if device is None:
                continue
            annotations = {**(pod["metadata"].get("annotations") or {}), V2_UUID: device}
            status = {
                **(pod.get("status") or {}),
                "phase": "Pending",
                "conditions": [_condition("PodScheduled", "True")],
            }
            bound = self.api.update(
                {
                    **pod,
                    "metadata": {**pod["metadata"], "annotations": annotations},
                    "spec": {**pod["spec"], "nodeName": name},
                    "status": status,
                },
                status_only=True,
            )
            self.kube._start(bound)
            return
        conds = (pod.get("status") or {}).get("conditions") or []
        if not any(c.get("reason") == "Unschedulable" for c in conds):
            msg = "kubeshare-scheduler: no GPU on the pod's node has room for its share"
            status = {
                **(pod.get("status") or {}),
                "phase": "Pending",
                "conditions": [_condition("PodScheduled", "False", "Unschedulable", msg)],
            }
            self.api.patch(PODS, key, status=status)

    def _device_for(self, node: str, share: tuple[int, int]) -> str | None:
        """The opened device the share fills best, else an untouched one (if a GPU is free:
        whole-GPU pods hold theirs)."""
        used = self._use(node, V2_UUID)
        memory = self._memory(node)
        fits = [
            (WHOLE - r, d)
            for d, (r, m) in used.items()
            if r + share[0] <= WHOLE and (memory is None or m + share[1] <= memory)
        ]
        if fits:
            return min(fits)[1]
        whole_free = self.kube.free(node)[GPU] // 1000 - len(used)
        if whole_free <= 0 or (memory is not None and share[1] > memory):
            return None
        return next((d for d in self._devices(node) if d not in used), None)


def _is_v2(pod: Obj) -> bool:
    return pod["spec"].get("schedulerName") == V2_SCHEDULER


def _sharepod_owner(pod: Obj) -> str | None:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == SHAREPOD_KIND:
            return str(ref.get("uid"))
    return None
