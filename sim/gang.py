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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from policy.job.podgroup import GROUP_NAME_ANNOTATION, POD_GROUP_LABEL, TYPE_KEYS
from policy.model.cluster import Node
from policy.model.jobs import pod_request
from policy.model.resources import Resources
from policy.pool.filters import rejection
from sim.apiserver import ApiServer, Obj, object_key

PODS = "Pod.v1"
GroupKey = tuple[str, str]  # (namespace, PodGroup name)


def group_of(pod: Obj) -> GroupKey | None:
    """The PodGroup a pod belongs to: coscheduling's label, else the group annotation."""
    meta = pod["metadata"]
    name = (meta.get("labels") or {}).get(POD_GROUP_LABEL) or (meta.get("annotations") or {}).get(
        GROUP_NAME_ANNOTATION
    )
    return (meta.get("namespace", "default"), name) if isinstance(name, str) and name else None


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


class GangScheduler:
    """Binds PodGroups of the pods whose ``schedulerName`` is one of ``names``."""

    def __init__(
        self,
        api: ApiServer,
        names: Iterable[str],
        nodes: Callable[[], Mapping[str, Node]],
        free: Callable[[str], Resources],
        score: Callable[[str, Resources], tuple[float, str]],
        bind: Callable[[Obj, str], None],
        unschedulable: Callable[[Obj, str], None],
    ) -> None:
        self.api = api
        self.names = frozenset(names)
        self._nodes, self._free, self._score = nodes, free, score
        self._bind, self._unschedulable = bind, unschedulable
        self.groups_bound = 0  # groups bound (in full or a further member of a bound one)

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

    def min_member(self, key: GroupKey) -> int | None:
        """The group's minMember; None while its PodGroup does not exist."""
        namespace, name = key
        for tkey in TYPE_KEYS:
            group = self.api.get(tkey, f"{namespace}/{name}")
            if group is not None:
                return int((group.get("spec") or {}).get("minMember") or 1)
        return None

    def try_group(self, key: GroupKey) -> None:
        minimum = self.min_member(key)
        if minimum is None:
            return  # the backend binds no pod of a group it does not know
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
            return
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
            fits = [
                n
                for n, node in sorted(nodes.items())
                if rejection(node, spec) is None and req.fits_in(free[n])
            ]
            if not fits:
                continue
            prefer = preferences(spec)
            node = min(fits, key=lambda n: (-prefer.get(nodes[n].hostname, 0), self._score(n, req)))
            free[node] = free[node] - req
            placed.append((pod, node))
        return placed
