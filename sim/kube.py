"""Nodes, the kube-scheduler and the kubelets, acting on the API server's truth.

* The kube-scheduler binds pods that have no ``spec.nodeName`` (and the default scheduler
  name), one at a time in creation order, with the default plugins' filters and scores
  (``sim.kube_scheduler``: written from upstream, sharing no code with ``policy/``). A pod
  that fits nowhere gets ``PodScheduled=False/Unschedulable`` with upstream's message
  ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated
  taint {...}.") and is retried when room frees up or a node changes.
* A kubelet admits a bound pod as the real one does (resources against the pods it admitted
  before, node affinity and selector, NoExecute taints); a pod it refuses fails with its
  reason (``OutOfnvidia.com/gpu``, ``NodeAffinity``, ``TaintToleration``). It starts an
  admitted pod after a start delay and removes a deleted pod after its grace period.

``used`` and ``free`` (the policy's resource vectors) serve the simulated gang schedulers,
KubeShare and the run's measurements; what the kube-scheduler and kubelets decide never
reads them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.job.podgroup import TYPE_KEYS as POD_GROUPS
from policy.model.cluster import Node
from policy.model.jobs import pod_request
from policy.model.resources import Resources
from sim.apiserver import ApiServer, Obj, object_key, stamp
from sim.gang import GangScheduler, group_key, group_of
from sim.kube_scheduler import KubeScheduler

PODS = "Pod.v1"
NODES = "Node.v1"
DEFAULT_SCHEDULERS = ("", "default-scheduler")
Schedule = Callable[[float, Callable[[], None]], None]  # (delay, action)


def node_object(name: str, allocatable: dict[str, str], labels: dict[str, str] | None = None):
    labels = {"kubernetes.io/hostname": name, **(labels or {})}
    alloc = {**allocatable}
    alloc.setdefault("pods", "110")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _condition(ctype: str, status: str, reason: str = "", message: str = "") -> dict:
    c = {"type": ctype, "status": status}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _main_container(pod: Obj) -> str:
    return pod["spec"]["containers"][0]["name"]


@dataclass
class Kube:
    api: ApiServer
    schedule: Schedule
    rng: random.Random
    start_delay_s: tuple[float, float] = (3.0, 7.0)  # uniform; K8s SLO: p99 <= 5 s
    grace_s: float = 2.0  # a TF process stops quickly on SIGTERM
    used: dict[str, Resources] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    rejected: int = 0  # pods a kubelet refused for lack of room
    _batches: dict[str, tuple[float, float]] = field(default_factory=dict)
    _pending_retry: bool = False
    gang: GangScheduler | None = None  # a gang-backend pool's scheduler (sim/gang.py)
    _used_total: Resources | None = None  # ``used`` added up (None: changed since)
    _requests: dict[int, tuple[Mapping[str, Any], Resources]] = field(default_factory=dict)
    # The default scheduler's cache and the kubelets' admitted pods (sim/kube_scheduler.py).
    scheduler: KubeScheduler = field(default_factory=KubeScheduler)

    def __post_init__(self) -> None:
        self.api.watchers.append(self._on_change)

    def run_gang_scheduler(self, names: set[str]) -> None:
        """Also run an external gang scheduler for pods naming one of ``names``."""
        self.gang = GangScheduler(
            self.api,
            names,
            lambda: self.nodes,
            self.free,
            self._score,
            self.scheduler.allows,
            self._bind,
            self._mark_unschedulable,
            lambda action: self.schedule(0.0, action),
        )

    # --- accounting ------------------------------------------------------------------

    @staticmethod
    def holds(pod: Obj | None) -> bool:
        """Bound and not finished: what the node reserves (terminating pods too)."""
        return (
            pod is not None
            and bool(pod["spec"].get("nodeName"))
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )

    def request(self, pod_spec: Mapping[str, Any]) -> Resources:
        """``pod_request``, once per spec: a pod's versions share their spec object (status
        writes keep it), and every pod event asks for it."""
        hit = self._requests.get(id(pod_spec))
        if hit is None or hit[0] is not pod_spec:
            hit = self._requests[id(pod_spec)] = (pod_spec, pod_request(pod_spec))
        return hit[1]

    def used_total(self) -> Resources:
        """What bound pods hold on all nodes together: read at every step of the run, so
        added up again only after a change."""
        if self._used_total is None:
            self._used_total = Resources.total(self.used.values())
        return self._used_total

    def free(self, node: str) -> Resources:
        return self.nodes[node].allocatable - self.used.get(node, Resources({}))

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == NODES:
            if new is None:
                self.nodes.pop(old["metadata"]["name"], None)
                self.scheduler.remove_node(old["metadata"]["name"])
            else:
                self.nodes[new["metadata"]["name"]] = Node.from_object(new)
                self.scheduler.set_node(new)
            self._retry_soon()
            return
        if tkey in POD_GROUPS:
            if old is None or new is None or old.get("spec") != new.get("spec"):
                self._retry_soon()  # a group's minMember may now be met
                if self.gang is not None:
                    self.gang.changed(group_key(new if new is not None else old))
            return
        if tkey != PODS:
            return
        if self.gang is not None:
            self._gang_member_changed(old, new)
        for pod, sign in ((old, -1), (new, 1)):
            if self.holds(pod):
                n = pod["spec"]["nodeName"]
                req = self.request(pod["spec"])
                cur = self.used.get(n, Resources({}))
                self.used[n] = cur + req if sign > 0 else cur - req
                self._used_total = None
        held, holds = self.holds(old), self.holds(new)
        if held and not holds:
            self.scheduler.unbind(old["metadata"]["uid"], old["spec"]["nodeName"])
        elif holds and not held:
            self.scheduler.bind(new["metadata"]["uid"], new["spec"]["nodeName"], new["spec"])
        if old is not None and (new is None or new["spec"] is not old["spec"]):
            self._requests.pop(id(old["spec"]), None)  # gone, or bound: a new spec
            self.scheduler.forget(old["spec"])
        if new is None or (self.holds(old) and not self.holds(new)):
            self._retry_soon()  # room freed
        if new is not None and old is None:
            key, uid = object_key(new), new["metadata"]["uid"]
            self.schedule(0.0, lambda: self._admit(key, uid))
        elif (
            new is not None
            and new["metadata"].get("deletionTimestamp")
            and not (old or {}).get("metadata", {}).get("deletionTimestamp")
        ):
            self._stop(new)

    def _gang_member_changed(self, old: Obj | None, new: Obj | None) -> None:
        """A pod of a PodGroup was created, bound, deleted or removed, or its phase moved:
        the counts and phase of the group's status may change."""
        pod = new if new is not None else old
        group = group_of(pod) if pod is not None else None
        if group is None or self.gang is None:
            return
        if old is not None and new is not None:
            om, nm = old["metadata"], new["metadata"]
            if (
                old["spec"].get("nodeName") == new["spec"].get("nodeName")
                and (old.get("status") or {}).get("phase") == (new.get("status") or {}).get("phase")
                and bool(om.get("deletionTimestamp")) == bool(nm.get("deletionTimestamp"))
            ):
                return
        self.gang.changed(group)

    # --- kube-scheduler --------------------------------------------------------------

    def _retry_soon(self) -> None:
        if not self._pending_retry:
            self._pending_retry = True
            self.schedule(0.0, self._schedule_pending)

    def _schedulable(self, pod: Obj) -> bool:
        return (
            not pod["spec"].get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
            and pod["spec"].get("schedulerName", "") in DEFAULT_SCHEDULERS
        )

    def _schedule_pending(self) -> None:
        self._pending_retry = False
        pending = [p for p in self.api.list(PODS) if self._schedulable(p)]
        pending.sort(key=lambda p: (int(p["metadata"]["resourceVersion"]), object_key(p)))
        for pod in pending:
            self._try_bind(pod)
        if self.gang is not None:
            waiting = [p for p in self.api.list(PODS) if self.gang.handles(p)]
            waiting.sort(key=lambda p: (int(p["metadata"]["resourceVersion"]), object_key(p)))
            self.gang.schedule(waiting)

    def _score(self, node: str, req: Resources) -> tuple[float, str]:
        left = self.free(node) - req
        alloc = self.nodes[node].allocatable
        frac = [left[k] / alloc[k] for k in ("cpu", "memory") if alloc[k] > 0]
        return (-(sum(frac) / len(frac)) if frac else 0.0, node)

    def _try_bind(self, pod: Obj) -> None:
        decision = self.scheduler.schedule(pod["spec"])
        if decision.node is None:
            self._mark_unschedulable(pod, decision.message)
        else:
            self._bind(pod, decision.node)

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        """The scheduler writes the condition when it or its message changes."""
        conds = (pod.get("status") or {}).get("conditions") or []
        if not any(
            c.get("reason") == "Unschedulable" and c.get("message") == message for c in conds
        ):
            status = {
                **(pod.get("status") or {}),
                "phase": "Pending",
                "conditions": [_condition("PodScheduled", "False", "Unschedulable", message)],
            }
            self.api.patch(PODS, object_key(pod), status=status)

    def _bind(self, pod: Obj, node: str) -> None:
        spec = {**pod["spec"], "nodeName": node}
        status = {
            **(pod.get("status") or {}),
            "phase": "Pending",
            "conditions": [_condition("PodScheduled", "True")],
        }
        bound = self.api.update({**pod, "spec": spec, "status": status}, status_only=True)
        self._start(bound)

    # --- kubelets --------------------------------------------------------------------

    def _admit(self, key: str, uid: str) -> None:
        pod = self._current(key, uid)
        if pod is None or (pod.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        if pod["spec"].get("nodeName"):
            self._start(pod)
        elif self._schedulable(pod):
            self._try_bind(pod)
        elif self.gang is not None and self.gang.handles(pod) and (group := group_of(pod)):
            self.gang.try_group(group)

    def _start(self, pod: Obj) -> None:
        """The node's kubelet admits the pod (or fails it, as a real one does), then
        starts it."""
        node = pod["spec"]["nodeName"]
        key, uid = object_key(pod), pod["metadata"]["uid"]
        if node not in self.nodes:
            refused = ("NodeLost", f"rejected by {node}")
        elif rejection := self.scheduler.admit(uid, pod["spec"], node):
            refused = (rejection.reason, rejection.message)
        else:
            refused = None
        if refused is not None:
            self.rejected += 1
            status = {"phase": "Failed", "reason": refused[0], "message": refused[1]}
            self.api.patch(PODS, key, status=status)
            return
        self.schedule(self._start_delay(node), lambda: self._run(key, uid))

    def _start_delay(self, node: str) -> float:
        """Pods bound to one node at one instant start together (one image pull)."""
        now = self.api.clock()
        batch = self._batches.get(node)
        if batch is None or batch[0] != now:
            batch = (now, self.rng.uniform(*self.start_delay_s))
            self._batches[node] = batch
        return batch[1]

    def _current(self, key: str, uid: str) -> Obj | None:
        pod = self.api.get(PODS, key)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return None
        return pod

    def _run(self, key: str, uid: str) -> None:
        pod = self._current(key, uid)
        if pod is None or (pod.get("status") or {}).get("phase") != "Pending":
            return
        now = stamp(self.api.clock())
        status = {
            "phase": "Running",
            "startTime": now,
            "conditions": [_condition("PodScheduled", "True"), _condition("Ready", "True")],
            "containerStatuses": [
                {
                    "name": _main_container(pod),
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        self.api.patch(PODS, key, status=status)

    def exit(self, key: str, code: int) -> None:
        """The main container exits; ``OnFailure``/``Always`` restart it in place."""
        pod = self.api.get(PODS, key)
        if pod is None or (pod.get("status") or {}).get("phase") != "Running":
            return
        policy = pod["spec"].get("restartPolicy", "Always")
        old = (pod["status"].get("containerStatuses") or [{}])[0]
        term = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "finishedAt": stamp(self.api.clock()),
        }
        if code != 0 and policy in ("OnFailure", "Always"):
            cs = {
                **old,
                "restartCount": int(old.get("restartCount", 0)) + 1,
                "lastState": {"terminated": term},
                "state": {"running": {"startedAt": stamp(self.api.clock())}},
            }
            self.api.patch(PODS, key, status={**pod["status"], "containerStatuses": [cs]})
            return
        phase = "Succeeded" if code == 0 else "Failed"
        cs = {**old, "ready": False, "state": {"terminated": term}}
        self.api.patch(
            PODS, key, status={**pod["status"], "phase": phase, "containerStatuses": [cs]}
        )

    def evict(self, key: str) -> None:
        pod = self.api.get(PODS, key)
        if pod is None or not self.holds(pod):
            return
        status = {**pod["status"], "phase": "Failed", "reason": "Evicted"}
        status["message"] = "The node was low on resources."
        self.api.patch(PODS, key, status=status)

    def _stop(self, pod: Obj) -> None:
        """A pod got its deletionTimestamp: stop it, then remove it."""
        key, uid = object_key(pod), pod["metadata"]["uid"]
        running = self.holds(pod) and (pod.get("status") or {}).get("phase") == "Running"
        delay = self.grace_s if running else 0.0

        def gone() -> None:
            cur = self.api.get(PODS, key)
            if cur is not None and cur["metadata"]["uid"] == uid:
                self.api.remove(PODS, key)

        self.schedule(delay, gone)

    def lose_node(self, name: str) -> None:
        """The node disappears; the pod garbage collector deletes its pods."""
        self.api.remove(NODES, name)
        for pod in list(self.api.list(PODS)):
            if pod["spec"].get("nodeName") == name:
                self.api.remove(PODS, object_key(pod))
