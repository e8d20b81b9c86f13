"""The observed cluster as immutable views: Nodes, Pods and free capacity.

Everything here is a fact from the hook request. A pod that is bound (``spec.nodeName``)
or pinned by our required node affinity occupies its node until it has Succeeded or
Failed; a terminating pod still occupies it (DESIGN §2.4).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from policy.memo import NO_MEMO, Memo
from policy.model.admission import GENERATION_ANNOTATION
from policy.model.batch import BATCH_PER_REPLICA_ENV
from policy.model.gpushare import (
    GPU,
    V1_REQUEST,
    V2_REQUEST,
    VGPU_POD,
    BadShare,
    DeviceFree,
    GpuShare,
    device_memory,
    device_of,
    observe_devices,
    share_of,
)
from policy.model.gpushare import (
    SHAREPOD_KIND as SHAREPOD,
)
from policy.model.hashed import HashedTuple
from policy.model.once import cached_property
from policy.model.podspec import pod_needs
from policy.model.resources import Resources
from policy.model.slot import Slot
from policy.model.timeutil import parse_time

HOSTNAME = "kubernetes.io/hostname"
OPERATOR_NAME = "dragonet"
L_OPERATOR = "training.kubeflow.org/operator-name"
L_JOB = "training.kubeflow.org/job-name"
L_TYPE = "training.kubeflow.org/replica-type"
L_INDEX = "training.kubeflow.org/replica-index"
L_ROLE = "training.kubeflow.org/job-role"
TERMINAL_PHASES = ("Succeeded", "Failed")


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, not {value!r}")
    return value


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Node:
    name: str
    hostname: str
    labels: Mapping[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...]
    unschedulable_reason: str | None  # cordoned or not Ready: takes no new pods
    gpu_memory: int | None = None  # bytes per GPU, from KubeShare's kubeshare/gpu_info

    @cached_property
    def plan_key(self) -> tuple:
        """Everything of the node a plan reads, by value."""
        labels = tuple(sorted(self.labels.items()))
        return HashedTuple(
            (
                self.name,
                self.hostname,
                labels,
                self.allocatable,
                self.taints,
                self.unschedulable_reason,
                self.gpu_memory,
            )
        )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Node:
        meta, spec, status = _parts(obj, "Node")
        labels = _labels(meta)
        name = _name(meta.get("name"), "Node metadata.name")
        reason = None
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if spec.get("unschedulable"):
            reason = "cordoned"
        elif ready is not None and ready.get("status") != "True":
            reason = "not Ready"
        taints = tuple(
            Taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""))
            for t in spec.get("taints") or []
        )
        return cls(
            name=name,
            hostname=labels.get(HOSTNAME, name),
            labels=MappingProxyType(labels),
            allocatable=Resources.parse(status.get("allocatable") or status.get("capacity")),
            taints=taints,
            unschedulable_reason=reason,
            gpu_memory=device_memory(meta.get("annotations") or {}),
        )


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    labels: Mapping[str, str]
    node: str | None  # bound node, or the node our affinity pins it to
    phase: str
    terminating: bool
    request: Resources
    exit_code: int | None  # of the main container's last termination
    restarts: int
    bound: bool = False  # spec.nodeName is set (by us or by the kube-scheduler)
    # Its times, parsed once here (None: absent or not a timestamp).
    created: datetime | None = None  # metadata.creationTimestamp
    started: datetime | None = None  # the main container's running.startedAt (or status.startTime)
    finished: datetime | None = None  # the main container's terminated.finishedAt
    scheduler: str = ""  # spec.schedulerName
    # The kube-scheduler found no room on the node it is pinned to (a plan made from a
    # stale view): it holds nothing, and its job re-places it.
    unschedulable: bool = False
    # The generation of the Admission the pod was created from (annotation), if any.
    admission_generation: int | None = None
    # Not created yet: an Admission places it and its job's sync has not created it. It
    # holds its node's room like a pod that exists (kube-scheduler's assumed pods).
    assumed: bool = False
    # Its node is only preferred (a gang scheduler binds it, docs/gang-schedulers.md):
    # "unschedulable" then means its gang does not fit yet, and the backend binds it when
    # it does, so it keeps its room and is not placed again.
    preferred: bool = False
    # What it may use (limits; a request where no limit is set): migration's load score.
    limits: Resources = field(default_factory=lambda: Resources({}))
    # Its main container's share of a declaring job's batch, as it read it at start
    # (``DRAGONET_BATCH_SIZE_PER_REPLICA``, policy.model.batch); None: it was given none.
    batch_share: int | None = None

    # Derived once (read many times per cycle):
    occupies: bool = field(init=False, compare=False, repr=False)  # holds its node's room
    live: bool = field(init=False, compare=False, repr=False)  # not finished, not leaving
    # Pinned to a node that cannot take it: delete it so it can be placed again.
    stuck: bool = field(init=False, compare=False, repr=False)
    job: str | None = field(init=False, compare=False, repr=False)  # "namespace/name"
    replica_type: str = field(init=False, compare=False, repr=False)  # lower-case label
    index: int = field(init=False, compare=False, repr=False)  # -1 if unreadable

    @cached_property
    def plan_key(self) -> tuple:
        """Everything of the pod a plan reads, by value (not when it started or ended)."""
        return HashedTuple(
            (
                self.namespace,
                self.name,
                self.job,
                self.replica_type,
                self.index,
                self.node,
                self.phase,
                self.terminating,
                self.request,
                self.exit_code,
                self.restarts,
                self.bound,
                self.unschedulable,
                self.admission_generation,
                self.assumed,
                self.preferred,
            )
        )

    def __post_init__(self) -> None:
        terminal = self.phase in TERMINAL_PHASES
        labels = self.labels
        set_ = object.__setattr__
        waits = self.unschedulable and not self.preferred  # a gang's pod waits for its gang
        set_(self, "occupies", self.node is not None and not terminal and not waits)
        set_(self, "live", not terminal and not self.terminating)
        set_(self, "stuck", waits and not self.bound and self.node is not None)
        ours = labels.get(L_OPERATOR) == OPERATOR_NAME and L_JOB in labels
        set_(self, "job", f"{self.namespace}/{labels[L_JOB]}" if ours else None)
        set_(self, "replica_type", labels.get(L_TYPE, ""))
        raw = labels.get(L_INDEX, "-1")
        set_(self, "index", int(raw) if isinstance(raw, str) and raw.isdigit() else -1)

    @classmethod
    def from_object(
        cls, obj: Mapping[str, Any], main: Collection[str], shares: bool = False
    ) -> Pod:
        """``node`` is the bound node, else the hostname its affinity pins it to (see
        ``on_nodes`` for clusters whose hostnames are not their node names). With
        ``shares`` (a KubeShare pool's view), a fractional GPU joins its request. ``main``:
        the names its main container may have (whose exit code, start and batch share are
        the pod's): its job kind's, or every kind's where pods of all kinds are read."""
        meta, spec, status = _parts(obj, "Pod")
        if obj.get("kind") == SHAREPOD:  # KubeShare v1: the pod's status is nested
            status = status.get("PodStatus") or {}
            if not isinstance(status, Mapping):
                raise ValueError("SharePod status.PodStatus is not an object")
        bound_to = _optional_text(spec.get("nodeName"), "spec.nodeName")
        required = _required_host(spec)
        node = bound_to or required or _preferred_host(spec)
        exit_code = None
        restarts = 0
        started = status.get("startTime")
        finished = None
        for cs in status.get("containerStatuses") or []:
            restarts += int(cs.get("restartCount") or 0)
            if cs.get("name") in main:
                started = ((cs.get("state") or {}).get("running") or {}).get("startedAt") or started
                term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get(
                    "terminated"
                )
                if term and "exitCode" in term:
                    exit_code = int(term["exitCode"])
                    finished = term.get("finishedAt")
        for cs in status.get("initContainerStatuses") or []:
            restarts += int(cs.get("restartCount") or 0)
        request, limits = pod_needs(spec)
        return cls(
            namespace=_name(meta.get("namespace", "default"), "Pod metadata.namespace"),
            name=_name(meta.get("name"), "Pod metadata.name"),
            labels=MappingProxyType(_labels(meta)),
            node=node,
            phase=status.get("phase") or "Pending",
            terminating=meta.get("deletionTimestamp") is not None,
            request=_with_share(request, meta) if shares else request,
            exit_code=exit_code,
            restarts=restarts,
            bound=bool(spec.get("nodeName")),
            created=parse_time(meta.get("creationTimestamp")),
            started=parse_time(started),
            finished=parse_time(finished),
            scheduler=_text(spec.get("schedulerName")) or "",
            unschedulable=_unschedulable(status),
            preferred=node is not None and not bound_to and not required,
            admission_generation=_generation(meta.get("annotations")),
            limits=limits,
            batch_share=_batch_share(spec, main),
        )

    @classmethod
    def in_pool(
        cls, obj: Mapping[str, Any], main: Collection[str], kubeshare: str = "none"
    ) -> Pod | None:
        """The pod as a pool reads it (``kubeshare``: the pool's mode). With KubeShare a
        fractional GPU joins its request; None for the Pod KubeShare v1 runs for a SharePod
        (the SharePod is counted) and for its ``kubeshare-vgpu`` pods (seen with
        ``watchAllPods``), as DRAGON skipped both."""
        if kubeshare == "none":
            return cls.from_object(obj, main)
        if kubeshare == "v1" and obj.get("kind") != SHAREPOD:
            meta = obj.get("metadata") or {}
            owners = meta.get("ownerReferences") or ()
            if any(isinstance(o, Mapping) and o.get("kind") == SHAREPOD for o in owners):
                return None
            if str(meta.get("name", "")).startswith(VGPU_POD):
                return None  # its GPU is the vGPU the SharePods on it account for
        return cls.from_object(obj, main, shares=True)

    def on_nodes(self, node_of_host: Mapping[str, str]) -> Pod:
        """The pod with a pinned hostname read as that node's name."""
        if self.bound or self.node is None or node_of_host.get(self.node, self.node) == self.node:
            return self
        return replace(self, node=node_of_host[self.node])

    @classmethod
    def assume(
        cls,
        namespace: str,
        job: str,
        slot: Slot,
        node: str | None,
        request: Resources,
        name: str | None = None,
        limits: Resources | None = None,
    ) -> Pod:
        """A pod an Admission places that its job has not created yet (``name``: a moved
        worker's replacement, when not ``{job}-{type}-{index}``)."""
        rtype, index = slot
        labels = {L_OPERATOR: OPERATOR_NAME, L_JOB: job, L_TYPE: rtype.lower(), L_INDEX: str(index)}
        return cls(
            namespace=namespace,
            name=name or f"{job}-{rtype.lower()}-{index}",
            labels=MappingProxyType(labels),
            node=node,
            phase="Pending",
            terminating=False,
            request=request,
            exit_code=None,
            restarts=0,
            assumed=True,
            limits=limits if limits is not None else request,
        )


def _with_share(request: Resources, meta: Mapping[str, Any]) -> Resources:
    """A KubeShare pod's fractional GPU (and the device it is on, once known) joins its request.
    (A pod without a share request is the common case: two look-ups, no scan.)"""
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    if not isinstance(annotations, Mapping):
        return request
    if V1_REQUEST not in annotations and V2_REQUEST not in labels:
        return request
    try:
        share: GpuShare | None = share_of(annotations, labels)
    except BadShare as err:
        raise ValueError(str(err)) from err
    if share is None:
        return request
    return request + Resources(share.vector(device_of(annotations)))


def _parts(obj: Mapping[str, Any], kind: str) -> tuple[Mapping, Mapping, Mapping]:
    """metadata, spec and status, each an object (absent: empty). (Read for every pod of
    a pool at every cold sync: no loop, no list.)"""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    if type(meta) is dict and type(spec) is dict and type(status) is dict:
        return meta, spec, status
    for part, value in (("metadata", meta), ("spec", spec), ("status", status)):
        if not isinstance(value, Mapping):
            raise ValueError(f"{kind} {part} is not an object")
    return meta, spec, status


def _labels(meta: Mapping[str, Any]) -> dict[str, str]:
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ValueError("metadata.labels must map strings to strings")
    for k, v in labels.items():
        if not (isinstance(k, str) and isinstance(v, str)):
            raise ValueError("metadata.labels must map strings to strings")
    return dict(labels)


def _optional_text(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string, not {type(value).__name__}")
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _generation(annotations: Any) -> int | None:
    raw = annotations.get(GENERATION_ANNOTATION) if isinstance(annotations, Mapping) else None
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def _batch_share(spec: Mapping[str, Any], main: Collection[str]) -> int | None:
    """The per-replica batch in the main container's environment, if a whole number."""
    for c in spec.get("containers") or ():
        if isinstance(c, Mapping) and c.get("name") in main:
            for e in c.get("env") or ():
                if isinstance(e, Mapping) and e.get("name") == BATCH_PER_REPLICA_ENV:
                    raw = e.get("value")
                    return int(raw) if isinstance(raw, str) and raw.isdigit() else None
    return None


def _unschedulable(status: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    )


def _required_host(spec: Mapping[str, Any]) -> str | None:
    """The hostname a pod is pinned to by a single-valued required affinity term."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return _single_host(required.get("nodeSelectorTerms") or [])


def _preferred_host(spec: Mapping[str, Any]) -> str | None:
    """The hostname a gang-scheduled pod prefers most (Dragonet's weight-100 preference,
    policy/job/render.py): where the pool planned it, until its gang scheduler binds it."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    preferred = [
        p.get("preference") or {}
        for p in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if isinstance(p, Mapping) and p.get("weight") == 100
    ]
    return _single_host(preferred)


def _single_host(terms: Any) -> str | None:
    hosts = set()
    for term in terms:
        for expr in term.get("matchExpressions") or []:
            values = expr.get("values") or []
            if (
                expr.get("key") == HOSTNAME
                and expr.get("operator") == "In"
                and len(values) == 1
                and isinstance(values[0], str)
            ):
                hosts.add(values[0])
    return hosts.pop() if len(hosts) == 1 else None


_BY_NAME = attrgetter("name")
_BY_KEY = attrgetter("namespace", "name")


def _free(node: Node, pods: Iterable[Pod]) -> Resources:
    return node.allocatable - Resources.total(p.request for p in pods)


@dataclass(frozen=True)
class Cluster:
    """Nodes (sorted by name), pods, and what is free on each node right now."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    free: Mapping[str, Resources] = field(default_factory=dict)
    by_name: Mapping[str, Node] = field(default_factory=dict)

    @classmethod
    def observe(
        cls,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        shared_gpus: bool = False,
        memo: Memo = NO_MEMO,
    ) -> Cluster:
        """``shared_gpus``: a KubeShare pool, whose GPU nodes are accounted device by device.
        ``memo``: a node whose pods are the very objects of an earlier sync (``policy.memo``)
        has the free room it had then."""
        nodes = tuple(sorted(nodes, key=_BY_NAME))
        pods = tuple(sorted(pods, key=_BY_KEY))
        if shared_gpus:
            return cls._observe_devices(nodes, pods)
        on_node: dict[str | None, list[Pod]] = {}
        for p in pods:
            if p.occupies:
                on_node.setdefault(p.node, []).append(p)
        free = {}
        for n in nodes:
            mine = on_node.get(n.name, ())
            free[n.name] = memo.derive("free", (n, *mine), lambda n=n, m=mine: _free(n, m))
        by_name = MappingProxyType({n.name: n for n in nodes})
        return cls(nodes=nodes, pods=pods, free=MappingProxyType(free), by_name=by_name)

    @classmethod
    def _observe_devices(cls, nodes: tuple[Node, ...], pods: tuple[Pod, ...]) -> Cluster:
        """GPU nodes get ``DeviceFree`` capacity: each device shared by fractional pods, whole
        devices for whole-GPU pods (``policy.model.gpushare``)."""
        on_node: dict[str, list[Resources]] = {}
        for p in pods:
            if p.occupies:
                on_node.setdefault(p.node, []).append(p.request)  # type: ignore[arg-type]
        shared: list[Node] = []
        free: dict[str, Resources] = {}
        for n in nodes:
            requests = on_node.get(n.name, [])
            if n.allocatable[GPU] > 0:
                empty = DeviceFree.empty(n.name, n.allocatable, n.gpu_memory)
                n = replace(n, allocatable=empty)
                free[n.name] = observe_devices(n.name, empty, n.gpu_memory, requests)
            else:
                free[n.name] = n.allocatable - Resources.total(requests)
            shared.append(n)
        by_name = MappingProxyType({n.name: n for n in shared})
        return cls(nodes=tuple(shared), pods=pods, free=MappingProxyType(free), by_name=by_name)
