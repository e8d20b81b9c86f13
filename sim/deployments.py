"""A minimal Deployment controller: what the simulator needs to run a TFJob's TensorBoard.

Kubernetes' Deployment controller goes through a ReplicaSet; here a Deployment owns its
pods directly (the pod's controller ownerReference is the Deployment), which is all a
TensorBoard needs: ``spec.replicas`` pods from ``spec.template``, a pod that ended replaced
once it is gone (``strategy: Recreate``: never more than ``replicas`` at once), and
``status.replicas``/``readyReplicas``. Deleting the Deployment garbage-collects its pods
(the API server's owner index). Updates of the template are not rolled out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sim.apiserver import ApiServer, Obj, object_key

DEPLOYMENTS = "Deployment.apps/v1"
PODS = "Pod.v1"
_DONE = ("Succeeded", "Failed")
Schedule = Callable[[float, Callable[[], None]], None]


def _owner(pod: Obj) -> str | None:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Deployment" and ref.get("controller"):
            return ref.get("uid")
    return None


@dataclass
class Deployments:
    api: ApiServer
    schedule: Schedule
    created: int = 0  # pods made, all Deployments together
    _pods: dict[str, set[str]] = field(default_factory=dict)  # deployment uid -> pod keys
    _keys: dict[str, str] = field(default_factory=dict)  # deployment uid -> its key
    _queued: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.api.watchers.append(self._on_change)

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == DEPLOYMENTS:
            obj = new if new is not None else old
            uid = obj["metadata"]["uid"]
            if new is None:
                self._keys.pop(uid, None)
                return
            self._keys[uid] = object_key(new)
            self._enqueue(uid)
        elif tkey == PODS:
            pod = new if new is not None else old
            uid = _owner(pod)
            if uid is None:
                return
            pods = self._pods.setdefault(uid, set())
            (pods.add if new is not None else pods.discard)(object_key(pod))
            if uid in self._keys:
                self._enqueue(uid)

    def _enqueue(self, uid: str) -> None:
        if uid not in self._queued:
            self._queued.add(uid)
            self.schedule(0.0, lambda: self._reconcile(uid))

    def _reconcile(self, uid: str) -> None:
        self._queued.discard(uid)
        key = self._keys.get(uid)
        d = self.api.get(DEPLOYMENTS, key) if key else None
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        pods = [p for k in sorted(self._pods.get(uid, ())) if (p := self.api.get(PODS, k))]
        for p in pods:  # an ended pod is replaced, once it is gone
            if (p.get("status") or {}).get("phase") in _DONE and not p["metadata"].get(
                "deletionTimestamp"
            ):
                self.api.delete(PODS, object_key(p))
        wanted = int((d.get("spec") or {}).get("replicas", 1))
        for _ in range(wanted - len(pods)):
            self._create(d)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in live if (p.get("status") or {}).get("phase") == "Running")
        status = {"replicas": len(live), "readyReplicas": ready, "availableReplicas": ready}
        status["observedGeneration"] = d["metadata"].get("generation", 1)
        if d.get("status") != status:
            self.api.patch(DEPLOYMENTS, key, status=status)

    def _create(self, d: Obj) -> None:
        self.created += 1
        meta = d["metadata"]
        template = d["spec"]["template"]
        pod_meta = {
            **(template.get("metadata") or {}),
            "name": f"{meta['name']}-{self.created:05d}",
            "namespace": meta.get("namespace") or "default",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        self.api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": pod_meta,
                "spec": dict(template["spec"]),
            }
        )
