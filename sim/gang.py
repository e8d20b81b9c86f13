"""An external gang scheduler (kube-batch, Volcano, scheduler-plugins' coscheduling), as
the simulator runs it for a pool whose ``gangScheduler`` delegates binding to one.

What the three share, and all this models: pods that name the scheduler are bound a
PodGroup at a time. A group is considered once every one of its ``minMember`` pods exists
(fewer: it waits without a word, as Volcano's gang plugin does for a group "not enough
pods"); its pending pods are then placed together on a scratch copy of the free room, each
on the node it prefers most (Dragonet's preferred affinity) when that node takes it, else
on the feasible node the kube-scheduler's scoring likes best; they are bound only if the
group's bound pods plus these reach ``minMember``: all or none. A group that cannot be
placed gets ``PodScheduled=False/Unschedulable`` on its pending pods and is tried again
whenever room frees (Dragonet keeps such pods and their planned room: their node is only
preferred, ``policy.model.cluster.Pod.preferred``). Queues, priorities within the backend,
``minResources`` and timeouts are the backends' own and not modelled: Dragonet's queue
decides what runs.

Like the real backends, it writes the PodGroup's ``status`` (a status update, so the job's
controller re-syncs and the job's status repeats it: ``policy.job.podgroup.reported``), from
what it knows: its members' phases against ``minMember``, their counts, and, from Volcano
and kube-batch, the ``Unschedulable`` condition of a group it could not place at once
(:func:`pod_group_status`). Only a change is written, and a condition's
``lastTransitionTime`` moves only when the condition does, so the status settles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from policy.job.podgroup import API_VERSIONS, GROUP_NAME_ANNOTATION, POD_GROUP_LABEL, TYPE_KEYS
from policy.model.cluster import Node
from policy.model.jobs import pod_request
from policy.model.resources import Resources
from sim.apiserver import ApiServer, Obj, object_key, stamp, type_key

PODS = "Pod.v1"
GroupKey = tuple[str, str]  # (namespace, PodGroup name)
BACKEND_OF = {v: k for k, v in API_VERSIONS.items()}  # PodGroup apiVersion -> backend
# Volcano's gang plugin: the reason of its Unschedulable condition, and of its Scheduled one.
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
GANG_READY = "tasks in gang are ready to be scheduled"


def group_of(pod: Obj) -> GroupKey | None:
    """The PodGroup a pod belongs to: coscheduling's label, else the group annotation."""
    meta = pod["metadata"]
    name = (meta.get("labels") or {}).get(POD_GROUP_LABEL) or (meta.get("annotations") or {}).get(
        GROUP_NAME_ANNOTATION
    )
    return (meta.get("namespace", "default"), name) if isinstance(name, str) and name else None


def group_key(pod_group: Obj) -> GroupKey:
    meta = pod_group["metadata"]
    return (meta.get("namespace", "default"), meta["name"])


def preferences(spec: Mapping[str, Any]) -> dict[str, int]:
    """Hostname -> weight of the pod's preferred node-affinity terms on the hostname."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    out: dict[str, int] = {}
    for term in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        for expr in (term.get("preference") or {}).get("matchExpressions") or []:
            if expr.get("key") == "kubernetes.io/hostname" and expr.get("operator") == "In":
                for host in expr.get("values") or []:
                    out[host] = out.get(host, 0) + int(term.get("weight") or 0)
    return out


def _min_member(pod_group: Obj) -> int:
    return int((pod_group.get("spec") or {}).get("minMember") or 1)


def _phase_of(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def counts(pods: Sequence[Obj]) -> dict[str, int]:
    """The status counts the three backends write (``omitempty``: zero is left out)."""
    out = {"running": 0, "succeeded": 0, "failed": 0}
    for pod in pods:
        phase = _phase_of(pod)
        if phase in ("Running", "Succeeded", "Failed"):
            out[phase.lower()] += 1
    return {k: v for k, v in out.items() if v}


def unschedulable_message(
    backend: str, minimum: int, pods: Sequence[Obj], placed: Sequence[Obj]
) -> str:
    """Volcano's gang plugin's message for a group it cannot place at once (kube-batch's
    has the same start): how many of ``minMember`` lack a place, of how many tasks, then
    the tasks' histogram; Volcano adds why its pending tasks wait (``Schedulable``: it
    found the task a node, but not the gang)."""
    hist: dict[str, int] = {}
    for pod in pods:
        phase = _phase_of(pod)
        status = phase if phase != "Pending" or not pod["spec"].get("nodeName") else "Bound"
        hist[status] = hist.get(status, 0) + 1
    ready = sum(n for s, n in hist.items() if s in ("Bound", "Running", "Succeeded"))
    words = sorted([f"{n} {s}" for s, n in hist.items()] + [f"{minimum} minAvailable"])
    msg = (
        f"{minimum - ready - len(placed)}/{len(pods)} tasks in gang unschedulable: "
        f"pod group is not ready, {', '.join(words)}"
    )
    pending = hist.get("Pending", 0)
    if backend != "volcano" or not pending:
        return msg + "."
    why = {"Schedulable": len(placed), "Unschedulable": pending - len(placed)}
    return msg + "; Pending: " + ", ".join(sorted(f"{n} {r}" for r, n in why.items() if n))


def pod_group_status(
    backend: str,
    old: Mapping[str, Any],
    minimum: int,
    pods: Sequence[Obj],
    unschedulable: str | None,
    now: str,
) -> dict[str, Any]:
    """The PodGroup status the backend writes for its (not deleted) member ``pods``.

    Volcano and kube-batch (their sessions' ``jobStatus``): ``Running`` once ``minMember``
    are bound (Volcano: ``Completed`` when every bound one is done), ``Unknown`` when some
    run while the rest cannot be placed, else ``Inqueue`` (the simulator enqueues a group at
    once: Dragonet already admitted it, and queues are not modelled); the gang plugin's
    ``Unschedulable`` condition while the last try failed, and Volcano's ``Scheduled`` once
    the gang is bound (a condition is replaced by type, and the old one stays: so they do).
    Coscheduling (its PodGroup controller): ``Pending`` with fewer pods than ``minMember``,
    then ``Scheduling``, ``Running`` once that many run or succeeded, ``Failed``,
    ``Finished``; no conditions."""
    count = counts(pods)
    running, succeeded, failed = (count.get(k, 0) for k in ("running", "succeeded", "failed"))
    if backend == "coscheduling":
        if len(pods) < minimum:
            phase = "Pending"
        elif succeeded >= minimum:
            phase = "Finished"
        elif failed and failed + running + succeeded >= minimum:
            phase = "Failed"
        elif running + succeeded >= minimum:
            phase = "Running"
        else:
            phase = "Scheduling"
        return {"phase": phase, **count}
    bound = [p for p in pods if p["spec"].get("nodeName") and _phase_of(p) != "Failed"]
    if running and unschedulable is not None:
        phase = "Unknown"
    elif len(bound) >= minimum:
        done = backend == "volcano" and all(_phase_of(p) == "Succeeded" for p in bound)
        phase = "Completed" if done else "Running"
    else:
        phase = "Inqueue"
    conditions = [dict(c) for c in old.get("conditions") or () if isinstance(c, Mapping)]
    if unschedulable is not None:
        new = {"type": "Unschedulable", "reason": NOT_ENOUGH_RESOURCES, "message": unschedulable}
        _set_condition(conditions, {**new, "status": "True"}, now)
    elif backend == "volcano" and len(bound) >= minimum:
        scheduled = {"type": "Scheduled", "status": "True", "reason": GANG_READY}
        _set_condition(conditions, scheduled, now)
    status: dict[str, Any] = {"phase": phase}
    if conditions:
        status["conditions"] = conditions
    return {**status, **count}


def _set_condition(conditions: list[dict[str, Any]], new: dict[str, Any], now: str) -> None:
    """Replace the condition of ``new``'s type (Volcano's ``UpdatePodGroupCondition``); its
    time moves only when something else of it does (Volcano writes no change but time)."""
    for i, c in enumerate(conditions):
        if c.get("type") == new["type"]:
            if {k: v for k, v in c.items() if k != "lastTransitionTime"} != new:
                conditions[i] = {**new, "lastTransitionTime": now}
            return
    conditions.append({**new, "lastTransitionTime": now})


class GangScheduler:
    """Binds PodGroups of the pods whose ``schedulerName`` is one of ``names``."""

    def __init__(
        self,
        api: ApiServer,
        names: Iterable[str],
        nodes: Callable[[], Mapping[str, Node]],
        free: Callable[[str], Resources],
        score: Callable[[str, Resources], tuple[float, str]],
        allows: Callable[[Mapping[str, Any], str], bool],
        bind: Callable[[Obj, str], None],
        unschedulable: Callable[[Obj, str], None],
        soon: Callable[[Callable[[], None]], None],
    ) -> None:
        """``soon`` runs an action later at the same instant: status writes are not made
        from inside a watcher (every watcher sees one change before the next)."""
        self.api = api
        self.names = frozenset(names)
        self._nodes, self._free, self._score, self._allows = nodes, free, score, allows
        self._bind, self._unschedulable, self._soon = bind, unschedulable, soon
        self.groups_bound = 0  # groups bound (in full or a further member of a bound one)
        self.status_writes = 0  # PodGroup status updates
        # Why the last try of a group failed (Volcano's gang message); none once it fits.
        self._why: dict[GroupKey, str] = {}
        self._stale: set[GroupKey] = set()  # groups whose status is to be written again

    def handles(self, pod: Obj) -> bool:
        return (
            bool(self.names)
            and not pod["spec"].get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
            and pod["spec"].get("schedulerName", "") in self.names
        )

    def schedule(self, pending: Iterable[Obj]) -> None:
        """Try every group that has a pending pod, in the order of its oldest pod."""
        for key in dict.fromkeys(g for p in pending if self.handles(p) and (g := group_of(p))):
            self.try_group(key)

    def pod_group(self, key: GroupKey) -> Obj | None:
        """The group's PodGroup, of whichever backend; None while it does not exist."""
        namespace, name = key
        for tkey in TYPE_KEYS:
            group = self.api.get(tkey, f"{namespace}/{name}")
            if group is not None:
                return group
        return None

    def pods_of(self, key: GroupKey) -> list[Obj]:
        """The group's pods not being deleted (finished ones too: the backends count them)."""
        pods = [
            p
            for p in self.api.list(PODS)
            if group_of(p) == key and not p["metadata"].get("deletionTimestamp")
        ]
        return sorted(pods, key=object_key)

    def changed(self, key: GroupKey) -> None:
        """A member or the PodGroup changed: its status is written again (if it differs)."""
        if not self._stale:
            self._soon(self._write_statuses)
        self._stale.add(key)

    def _write_statuses(self) -> None:
        stale, self._stale = sorted(self._stale), set()
        for key in stale:
            self.write_status(key)

    def write_status(self, key: GroupKey) -> None:
        """Write the PodGroup's status as its backend would, when it differs."""
        group = self.pod_group(key)
        if group is None:
            self._why.pop(key, None)
            return
        pods = self.pods_of(key)
        old = group.get("status") or {}
        minimum = _min_member(group)
        backend = BACKEND_OF[group["apiVersion"]]
        now = stamp(self.api.clock())
        status = pod_group_status(backend, old, minimum, pods, self._why.get(key), now)
        if status != old:
            self.status_writes += 1
            self.api.patch(type_key(group), object_key(group), status=status)

    def try_group(self, key: GroupKey) -> None:
        group = self.pod_group(key)
        if group is None:
            return  # the backend binds no pod of a group it does not know
        minimum = _min_member(group)
        members = [
            p
            for p in self.api.list(PODS)
            if group_of(p) == key
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        pending = [p for p in members if self.handles(p)]
        if not pending or len(members) < minimum:
            return
        bound = len(members) - len(pending)
        pending.sort(key=lambda p: (int(p["metadata"]["resourceVersion"]), object_key(p)))
        placed = self._place(pending)
        if bound + len(placed) < minimum:
            why = f"{bound + len(placed)}/{minimum} pods of PodGroup {key[1]} can be placed at once"
            for pod in pending:
                self._unschedulable(pod, why)
            backend = BACKEND_OF[group["apiVersion"]]
            if backend in ("volcano", "kube-batch"):
                tasks = self.pods_of(key)
                message = unschedulable_message(backend, minimum, tasks, [p for p, _ in placed])
                if self._why.get(key) != message:
                    self._why[key] = message
                    self.changed(key)
            return
        if self._why.pop(key, None) is not None:
            self.changed(key)
        self.groups_bound += 1
        for pod, node in placed:
            self._bind(pod, node)
        for pod in pending:
            if all(pod is not p for p, _ in placed):
                self._unschedulable(pod, "no node has room for it")

    def _place(self, pending: list[Obj]) -> list[tuple[Obj, str]]:
        nodes = self._nodes()
        free = {n: self._free(n) for n in nodes}
        placed = []
        for pod in pending:
            spec = pod["spec"]
            req = pod_request(spec)
            fits = [n for n in sorted(nodes) if self._allows(spec, n) and req.fits_in(free[n])]
            if not fits:
                continue
            prefer = preferences(spec)
            node = min(fits, key=lambda n: (-prefer.get(nodes[n].hostname, 0), self._score(n, req)))
            free[node] = free[node] - req
            placed.append((pod, node))
        return placed
