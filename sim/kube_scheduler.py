"""The kube-scheduler's default filters and scores, and the kubelet's admission, written
from the upstream sources: a second implementation next to ``policy/``, sharing no code
with it, so that a bug in a placement filter of the policy shows in simulation the way a
real cluster shows it (a pod Pending with ``FailedScheduling``'s message, or a ``nodeName``
pod Failed by its kubelet).

Followed, in ``kubernetes/kubernetes`` (master, 2026):

* ``pkg/scheduler/apis/config/v1/default_plugins.go``: the filter order (NodeUnschedulable,
  NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit; a node carries the
  reasons of the first filter that rejects it) and the score weights (TaintToleration 3,
  NodeAffinity 2, NodeResourcesFit 1).
* ``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``:
  ``spec.unschedulable`` unless the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``.
* ``pkg/scheduler/framework/plugins/nodename/node_name.go``.
* ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`` and
  ``staging/src/k8s.io/api/core/v1/toleration.go`` (``ToleratesTaint``): NoSchedule and
  NoExecute filter, the first untolerated one named; PreferNoSchedule counted as a score.
* ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`` and
  ``staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go``:
  ``nodeSelector`` ANDed with the required terms, terms ORed, an empty term matches
  nothing, a term that does not parse matches nothing; ``matchFields`` on ``metadata.name``
  (In/NotIn with one value) and the PreFilter that narrows the nodes to those names;
  ``staging/src/k8s.io/apimachinery/pkg/labels/selector.go`` (``Requirement.Matches``, Go's
  ``strconv.ParseInt`` for Gt/Lt).
* ``pkg/scheduler/framework/plugins/nodeports/node_ports.go`` and ``HostPortInfo`` in
  ``pkg/scheduler/framework/types.go``: a host port is taken per protocol, and a host IP of
  0.0.0.0 takes it on every IP; ``pkg/apis/core/v1/defaults.go`` gives a ``hostNetwork``
  pod's container ports their own number as host port.
* ``pkg/scheduler/framework/plugins/noderesources/fit.go``, ``least_allocated.go``,
  ``resource_allocation.go``; ``staging/src/k8s.io/component-helpers/resource/helpers.go``
  (``PodRequests``: containers summed, init containers as a maximum, sidecars added,
  overhead added); ``pkg/apis/core/v1/defaults.go`` (a container's missing request
  defaults to its limit, as the API server stores it); requests that are missing count as
  100m cpu and 200Mi memory when scoring.
* ``pkg/scheduler/framework/types.go`` (``FitError``: "0/N nodes are available: " and the
  sorted histogram of reasons).
* ``pkg/scheduler/scheduler.go``: the scheduler's informer leaves Succeeded and Failed pods
  out, so a node holds its non-terminal bound pods (terminating ones too).
* ``pkg/kubelet/lifecycle/predicate.go``: the kubelet admits a pod against the pods it
  admitted before: resources (extended resources the node does not know are dropped), node
  affinity and selector, node name, host ports, then NoExecute taints only; the first
  failure is the reason (``OutOfcpu``, ``OutOfnvidia.com/gpu``, ``NodeAffinity``,
  ``NodePorts``, ``TaintToleration``).
* ``pkg/controller/nodelifecycle``: the taints a real cluster puts on a cordoned or
  not-Ready node (``node.kubernetes.io/unschedulable``, ``not-ready``, ``unreachable``).

Not modelled: preemption (PostFilter, and its part of the message), inter-pod affinity,
topology spread, volumes, the BalancedAllocation and ImageLocality scores, and the sampling
of nodes above 100. Among nodes of equal score the real scheduler picks at random; this one
takes the first by name, so runs stay reproducible.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kubernetes.utils.quantity import parse_quantity

CPU, MEMORY, EPHEMERAL, PODS = "cpu", "memory", "ephemeral-storage", "pods"
NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
# Requests a container leaves out count as these when scoring (pkg/scheduler/util).
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
MAX_NODE_SCORE = 100
WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1}

# The reasons each filter gives (their ErrReason constants).
UNSCHEDULABLE_REASON = "node(s) were unschedulable"
NODE_NAME_REASON = "node(s) didn't match the requested node name"
AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
AFFINITY_CONFLICT = "pod affinity terms conflict"
PREFILTER_REASON = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
TAINTS_REASON = "node(s) had taints that the pod didn't tolerate"
PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"

Quantities = dict[str, int]


# --- quantities and requests ----------------------------------------------------------


@lru_cache(maxsize=8192)
def quantity(name: str, value: str | int | float) -> int:
    """A quantity as the scheduler counts it: millicores for cpu, else whole units, both
    rounded up (``Quantity.MilliValue``, ``Quantity.Value``)."""
    q = parse_quantity(value)
    return math.ceil(q * 1000) if name == CPU else math.ceil(q)


def _container_requests(container: Mapping[str, Any], non_missing: Quantities) -> Quantities:
    res = container.get("resources") or {}
    # The API server defaults a missing request to the limit (SetDefaults_Pod).
    merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    out = {k: quantity(k, v) for k, v in merged.items() if k != PODS}
    for k, v in non_missing.items():
        out.setdefault(k, v)
    return out


def _add(into: Quantities, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: Quantities, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(spec: Mapping[str, Any], non_missing: Quantities | None = None) -> Quantities:
    """``PodRequests``: regular containers and sidecars (init containers that restart
    ``Always``) run together and add up; each other init container runs alone beside the
    sidecars started before it, so the pod needs the larger of the two; then overhead."""
    nm = non_missing or {}
    reqs: Quantities = {}
    for c in spec.get("containers") or []:
        _add(reqs, _container_requests(c, nm))
    sidecars: Quantities = {}
    init_peak: Quantities = {}
    for c in spec.get("initContainers") or []:
        creq = _container_requests(c, nm)
        if c.get("restartPolicy") == "Always":
            _add(reqs, creq)
            _add(sidecars, creq)
            step = dict(sidecars)
        else:
            step = dict(creq)
            _add(step, sidecars)
        _max(init_peak, step)
    _max(reqs, init_peak)
    for k, v in (spec.get("overhead") or {}).items():
        reqs[k] = reqs.get(k, 0) + quantity(k, v)
    return reqs


HostPort = tuple[str, str, int]  # host IP, protocol, port


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a pod's containers take (``getContainerPorts``): those with a host
    port, which a ``hostNetwork`` pod's ports all have (defaulted to the container port)."""
    out = []
    network = bool(spec.get("hostNetwork"))
    for c in spec.get("containers") or []:
        for p in c.get("ports") or []:
            port = int(p.get("hostPort") or (p.get("containerPort") if network else 0) or 0)
            if port > 0:
                out.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", port))
    return tuple(out)


def ports_conflict(wanted: Iterable[HostPort], taken: Iterable[HostPort]) -> bool:
    """``HostPortInfo.CheckConflict``: one protocol and port, and either IP is 0.0.0.0 or
    both are the same."""
    taken = list(taken)
    return any(
        proto == p and port == q and ("0.0.0.0" in (ip, i) or ip == i)
        for ip, proto, port in wanted
        for i, p, q in taken
    )


def is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: a domain-prefixed name outside ``kubernetes.io``."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


# --- selectors --------------------------------------------------------------------------

_INT64 = re.compile(r"[+-]?[0-9]+")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _valid_key(key: Any) -> bool:
    """A label key (``IsQualifiedName``): an optional DNS-subdomain prefix and a name."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if "/" in key and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and bool(_NAME.fullmatch(name))


def _valid_value(value: Any) -> bool:
    """A label value (``IsValidLabelValue``): empty, or a name of at most 63 characters."""
    return isinstance(value, str) and (
        value == "" or (len(value) <= 63 and bool(_NAME.fullmatch(value)))
    )


def _parse_int64(text: Any) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: a sign and decimal digits, nothing else."""
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` entry, as ``labels.NewRequirement`` accepts it."""

    key: str
    operator: str
    values: tuple[str, ...]

    @staticmethod
    def parse(expr: Mapping[str, Any]) -> Requirement:
        op, values = expr.get("operator"), tuple(expr.get("values") or ())
        key = expr.get("key")
        if not _valid_key(key):
            raise ValueError(f"invalid label key {key!r}")
        if not all(_valid_value(v) for v in values):
            raise ValueError(f"invalid label value in {values!r}")
        if op in ("In", "NotIn"):
            if not values:
                raise ValueError(f"{op} needs values")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                raise ValueError(f"{op} takes no values")
        elif op in ("Gt", "Lt"):
            if len(values) != 1 or _parse_int64(values[0]) is None:
                raise ValueError(f"{op} needs one integer value")
        else:
            raise ValueError(f"{op!r} is not a valid node selector operator")
        return Requirement(key, op, values)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, has = self.operator, self.key in labels
        if op == "In":
            return has and labels[self.key] in self.values
        if op == "NotIn":
            return not has or labels[self.key] not in self.values
        if op == "Exists":
            return has
        if op == "DoesNotExist":
            return not has
        have = _parse_int64(labels[self.key]) if has else None
        if have is None:
            return False
        want = _parse_int64(self.values[0])
        assert want is not None  # checked in parse
        return have > want if op == "Gt" else have < want


@dataclass(frozen=True)
class FieldRequirement:
    """One ``matchFields`` entry: only In and NotIn with exactly one value parse."""

    key: str
    value: str
    equal: bool

    @staticmethod
    def parse(expr: Mapping[str, Any]) -> FieldRequirement:
        op, values = expr.get("operator"), expr.get("values") or []
        if op not in ("In", "NotIn"):
            raise ValueError(f"{op!r} is not a valid node field selector operator")
        if len(values) != 1:
            raise ValueError(f"{op} on a field needs exactly one value")
        return FieldRequirement(str(expr.get("key")), str(values[0]), op == "In")

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.key, "") == self.value) == self.equal


@dataclass(frozen=True)
class Term:
    """A ``nodeSelectorTerm``: its expressions and fields ANDed. A term that did not parse
    (``ok`` False) matches no node."""

    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()
    ok: bool = True

    @staticmethod
    def parse(term: Mapping[str, Any] | None) -> Term | None:
        """None for an empty term: it selects nothing and is left out."""
        term = term or {}
        exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not fields:
            return None
        try:
            return Term(
                tuple(Requirement.parse(e) for e in exprs),
                tuple(FieldRequirement.parse(f) for f in fields),
            )
        except (ValueError, AttributeError, TypeError):
            return Term(ok=False)

    def matches(self, node: NodeView) -> bool:
        if not self.ok:
            return False
        fields = {"metadata.name": node.name}
        return all(r.matches(node.labels) for r in self.labels) and all(
            f.matches(fields) for f in self.fields
        )


# --- taints and tolerations -------------------------------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    @staticmethod
    def parse(tol: Mapping[str, Any]) -> Toleration:
        return Toleration(
            str(tol.get("key") or ""),
            str(tol.get("operator") or ""),
            str(tol.get("value") or ""),
            str(tol.get("effect") or ""),
        )

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint``: an empty effect matches every effect, an empty
        key (with Exists) every key; Equal (or no operator) compares values; Gt and Lt
        compare them as integers."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        if self.operator == "Exists":
            return True
        if self.operator in ("Gt", "Lt"):
            mine, theirs = _parse_int64(self.value), _parse_int64(taint.value)
            if mine is None or theirs is None:
                return False
            return theirs > mine if self.operator == "Gt" else theirs < mine
        return False


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def untolerated(
    taints: Iterable[Taint], tolerations: tuple[Toleration, ...], effects: tuple[str, ...]
) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first taint of ``effects`` not tolerated."""
    return next((t for t in taints if t.effect in effects and not tolerated(tolerations, t)), None)


# --- the objects as the scheduler sees them --------------------------------------------


@dataclass(frozen=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Quantities

    @staticmethod
    def parse(obj: Mapping[str, Any]) -> NodeView:
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        taints = [
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
            for t in spec.get("taints") or []
        ]
        # What the node lifecycle controller adds (TaintNodesByCondition), if not there yet.
        implied = []
        if spec.get("unschedulable"):
            implied.append(Taint(UNSCHEDULABLE_TAINT, "", NO_SCHEDULE))
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is not None and ready.get("status") == "False":
            implied.append(Taint(NOT_READY_TAINT, "", NO_SCHEDULE))
        elif ready is not None and ready.get("status") != "True":
            implied.append(Taint(UNREACHABLE_TAINT, "", NO_SCHEDULE))
        known = {(t.key, t.effect) for t in taints}
        taints += [t for t in implied if (t.key, t.effect) not in known]
        alloc = status.get("allocatable") or status.get("capacity") or {}
        return NodeView(
            name=meta["name"],
            labels=dict(meta.get("labels") or {}),
            taints=tuple(taints),
            unschedulable=bool(spec.get("unschedulable")),
            allocatable={k: quantity(k, v) for k, v in alloc.items()},
        )


@dataclass(frozen=True)
class PodView:
    """What the plugins read of a pod spec, parsed once."""

    requests: Quantities
    nonzero: tuple[int, int]  # cpu, memory with missing requests defaulted (scoring)
    node_name: str
    node_selector: Mapping[str, str] | None
    required: tuple[Term, ...] | None  # None: no required node affinity
    prefilter_names: frozenset[str] | None  # metadata.name In ...: only these nodes
    preferred: tuple[tuple[int, Term], ...]
    tolerations: tuple[Toleration, ...]
    ports: tuple[HostPort, ...] = ()

    @staticmethod
    def parse(spec: Mapping[str, Any]) -> PodView:
        affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required_obj = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        required = None
        names: frozenset[str] | None = None
        if required_obj is not None:
            raw = required_obj.get("nodeSelectorTerms") or []
            required = tuple(t for t in map(Term.parse, raw) if t is not None)
            names = _prefilter_names(raw)
        preferred = []
        for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
            term = Term.parse(p.get("preference"))
            if int(p.get("weight") or 0) and term is not None and term.ok:
                preferred.append((int(p["weight"]), term))
        nonzero = pod_requests(spec, {CPU: DEFAULT_MILLI_CPU, MEMORY: DEFAULT_MEMORY})
        selector = spec.get("nodeSelector")
        return PodView(
            requests=pod_requests(spec),
            nonzero=(nonzero.get(CPU, 0), nonzero.get(MEMORY, 0)),
            node_name=spec.get("nodeName") or "",
            node_selector=dict(selector) if selector is not None else None,
            required=required,
            prefilter_names=names,
            preferred=tuple(preferred),
            tolerations=tuple(Toleration.parse(t) for t in spec.get("tolerations") or []),
            ports=host_ports(spec),
        )

    def matches_affinity(self, node: NodeView) -> bool:
        """``RequiredNodeAffinity.Match``: the node selector, then the terms (ORed)."""
        if self.node_selector is not None and any(
            node.labels.get(k) != v for k, v in self.node_selector.items()
        ):
            return False
        if self.required is not None:
            return any(t.matches(node) for t in self.required)
        return True


def _prefilter_names(terms: list[Mapping[str, Any]]) -> frozenset[str] | None:
    """NodeAffinity's PreFilter: when every term names its nodes (``metadata.name In``,
    intersected within a term), only the union of those is tried (None: every node)."""
    if not terms:
        return None
    union: set[str] = set()
    for term in terms:
        names: set[str] | None = None
        for f in (term or {}).get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                values = set(f.get("values") or [])
                names = values if names is None else names & values
        if names is None:
            return None
        union |= names
    return frozenset(union)


# --- a node's pods ----------------------------------------------------------------------


@dataclass
class NodeState:
    """A node and what its pods request (``NodeInfo``): every non-terminal pod bound to it
    as the scheduler counts them, and the pods its kubelet admitted."""

    view: NodeView
    pods: dict[str, PodView] = field(default_factory=dict)  # uid -> pod
    requested: Quantities = field(default_factory=dict)
    nonzero: list[int] = field(default_factory=lambda: [0, 0])
    admitted: dict[str, PodView] = field(default_factory=dict)  # the kubelet's own view
    admitted_requested: Quantities = field(default_factory=dict)

    def add(self, uid: str, pod: PodView) -> None:
        if uid in self.pods:
            return
        self.pods[uid] = pod
        _add(self.requested, pod.requests)
        self.nonzero[0] += pod.nonzero[0]
        self.nonzero[1] += pod.nonzero[1]

    def remove(self, uid: str) -> None:
        pod = self.pods.pop(uid, None)
        if pod is not None:
            _add(self.requested, {k: -v for k, v in pod.requests.items()})
            self.nonzero[0] -= pod.nonzero[0]
            self.nonzero[1] -= pod.nonzero[1]
        pod = self.admitted.pop(uid, None)
        if pod is not None:
            _add(self.admitted_requested, {k: -v for k, v in pod.requests.items()})

    def admit(self, uid: str, pod: PodView) -> None:
        if uid not in self.admitted:
            self.admitted[uid] = pod
            _add(self.admitted_requested, pod.requests)


@dataclass(frozen=True)
class Shortage:
    """``InsufficientResource``: one resource a pod does not fit in."""

    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def reason(self) -> str:
        return TOO_MANY_PODS if self.resource == PODS else f"Insufficient {self.resource}"


def shortages(
    pod: Quantities, node: NodeView, used: Mapping[str, int], pod_count: int
) -> list[Shortage]:
    """``fitsRequest``: the pod count first, then cpu, memory, ephemeral storage and every
    other resource the pod asks a non-zero amount of (by name; Go's map order is random)."""
    out = []
    allowed = node.allocatable.get(PODS, 0)
    if pod_count + 1 > allowed:
        out.append(Shortage(PODS, 1, pod_count, allowed))
    rest = sorted(k for k in pod if k not in (CPU, MEMORY, EPHEMERAL))
    for name in (CPU, MEMORY, EPHEMERAL, *rest):
        want = pod.get(name, 0)
        if want > 0 and want > node.allocatable.get(name, 0) - used.get(name, 0):
            out.append(Shortage(name, want, used.get(name, 0), node.allocatable.get(name, 0)))
    return out


# --- the scheduler ----------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleResult:
    """A node for the pod, or why none: the message of ``FailedScheduling``."""

    node: str | None
    message: str = ""


@dataclass(frozen=True)
class Rejection:
    """The kubelet refuses a pod: its ``status.reason`` and ``status.message``."""

    reason: str
    message: str


@dataclass
class KubeScheduler:
    """The nodes and their pods, as the scheduler's cache and the kubelets hold them.
    The caller reports nodes (``set_node``, ``remove_node``) and pods that are bound and
    not finished (``bind``, ``unbind``); it asks where a pod goes (``schedule``) and whether
    a node's kubelet runs a pod bound to it (``admit``)."""

    nodes: dict[str, NodeState] = field(default_factory=dict)
    _views: dict[int, tuple[Mapping[str, Any], PodView]] = field(default_factory=dict)

    def view(self, spec: Mapping[str, Any]) -> PodView:
        """The parsed spec, once per spec object (a pod's status writes keep it)."""
        hit = self._views.get(id(spec))
        if hit is None or hit[0] is not spec:
            hit = self._views[id(spec)] = (spec, PodView.parse(spec))
        return hit[1]

    def forget(self, spec: Mapping[str, Any]) -> None:
        hit = self._views.get(id(spec))
        if hit is not None and hit[0] is spec:
            del self._views[id(spec)]

    # --- what the informers report --------------------------------------------------

    def set_node(self, obj: Mapping[str, Any]) -> None:
        view = NodeView.parse(obj)
        state = self.nodes.get(view.name)
        if state is None:
            self.nodes[view.name] = NodeState(view)
        else:
            state.view = view

    def remove_node(self, name: str) -> None:
        self.nodes.pop(name, None)

    def bind(self, uid: str, node: str, spec: Mapping[str, Any]) -> None:
        state = self.nodes.get(node)
        if state is not None:
            state.add(uid, self.view(spec))

    def unbind(self, uid: str, node: str) -> None:
        state = self.nodes.get(node)
        if state is not None:
            state.remove(uid)

    # --- the scheduling cycle -------------------------------------------------------

    def filter(self, pod: PodView, state: NodeState) -> list[str]:
        """The reasons of the first filter that rejects the node (none: it fits)."""
        if why := constraints(pod, state.view):
            return why
        if pod.ports and ports_conflict(
            pod.ports, (q for p in state.pods.values() for q in p.ports)
        ):
            return [PORTS_REASON]
        return [
            s.reason for s in shortages(pod.requests, state.view, state.requested, len(state.pods))
        ]

    def allows(self, spec: Mapping[str, Any], node: str) -> bool:
        """The filters a pod's own constraints decide (all but NodeResourcesFit), for
        schedulers that count room their own way (sim/gang.py, sim/kubeshare.py)."""
        state = self.nodes.get(node)
        return state is not None and not constraints(self.view(spec), state.view)

    def schedule(self, spec: Mapping[str, Any]) -> ScheduleResult:
        """Filter every node, score the feasible ones, take the best (ties: by name)."""
        pod = self.view(spec)
        total = len(self.nodes)
        if pod.prefilter_names is not None and not pod.prefilter_names:
            return ScheduleResult(None, f"0/{total} nodes are available: {AFFINITY_CONFLICT}.")
        reasons: dict[str, int] = {}
        feasible: list[NodeState] = []
        for name in sorted(self.nodes):
            state = self.nodes[name]
            if pod.prefilter_names is not None and name not in pod.prefilter_names:
                why = [PREFILTER_REASON]
            else:
                why = self.filter(pod, state)
            if not why:
                feasible.append(state)
            for r in why:
                reasons[r] = reasons.get(r, 0) + 1
        if not feasible:
            histogram = sorted(f"{n} {r}" for r, n in reasons.items())
            message = f"0/{total} nodes are available"
            return ScheduleResult(
                None, message + (": " + ", ".join(histogram) + "." if histogram else ".")
            )
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].view.name)
        scores = self.scores(pod, feasible)
        best = max(range(len(feasible)), key=lambda i: (scores[i], -i))
        return ScheduleResult(feasible[best].view.name)

    def scores(self, pod: PodView, feasible: list[NodeState]) -> list[int]:
        """Each feasible node's weighted sum of the plugins' normalized scores."""
        fit = [least_allocated(pod, s) for s in feasible]
        affinity = affinity_scores(pod, [s.view for s in feasible])
        taints = taint_scores(pod, [s.view for s in feasible])
        w = WEIGHTS
        return [
            f * w["NodeResourcesFit"] + a * w["NodeAffinity"] + t * w["TaintToleration"]
            for f, a, t in zip(fit, affinity, taints, strict=True)
        ]

    # --- the kubelet ----------------------------------------------------------------

    def admit(self, uid: str, spec: Mapping[str, Any], node: str) -> Rejection | None:
        """The node's kubelet admits the pod, or says why not (its first failure). An
        admitted pod counts against the pods admitted after it."""
        state = self.nodes[node]
        pod = self.view(spec)
        known = state.view.allocatable
        requests = {k: v for k, v in pod.requests.items() if not is_extended(k) or k in known}
        others = len(state.admitted) - (uid in state.admitted)
        used = dict(state.admitted_requested)
        if uid in state.admitted:
            _add(used, {k: -v for k, v in state.admitted[uid].requests.items()})
        short = shortages(requests, state.view, used, others)
        if short:
            s = short[0]
            return Rejection(
                f"OutOf{s.resource}",
                f"Node didn't have enough resource: {s.resource}, requested: {s.requested}, "
                f"used: {s.used}, capacity: {s.capacity}",
            )
        if not pod.matches_affinity(state.view):
            return Rejection("NodeAffinity", f"Predicate NodeAffinity failed: {AFFINITY_REASON}")
        if pod.node_name and pod.node_name != node:
            return Rejection("NodeName", f"Predicate NodeName failed: {NODE_NAME_REASON}")
        if pod.ports and ports_conflict(
            pod.ports, (q for u, p in state.admitted.items() if u != uid for q in p.ports)
        ):
            return Rejection("NodePorts", f"Predicate NodePorts failed: {PORTS_REASON}")
        if untolerated(state.view.taints, pod.tolerations, (NO_EXECUTE,)) is not None:
            return Rejection(
                "TaintToleration", f"Predicate TaintToleration failed: {TAINTS_REASON}"
            )
        state.admit(uid, pod)
        return None


def constraints(pod: PodView, node: NodeView) -> list[str]:
    """NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, in this order: the reason
    of the first that rejects the node."""
    if node.unschedulable and not tolerated(
        pod.tolerations, Taint(UNSCHEDULABLE_TAINT, "", NO_SCHEDULE)
    ):
        return [UNSCHEDULABLE_REASON]
    if pod.node_name and pod.node_name != node.name:
        return [NODE_NAME_REASON]
    taint = untolerated(node.taints, pod.tolerations, (NO_SCHEDULE, NO_EXECUTE))
    if taint is not None:
        return [f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"]
    if not pod.matches_affinity(node):
        return [AFFINITY_REASON]
    return []


def least_allocated(pod: PodView, state: NodeState) -> int:
    """NodeResourcesFit's default score: the share of cpu and memory left once the pod is
    on the node (missing requests counted as the defaults), 0..100, weighted alike."""
    total = weights = 0
    for i, name in enumerate((CPU, MEMORY)):
        capacity = state.view.allocatable.get(name, 0)
        if capacity == 0:
            continue
        requested = state.nonzero[i] + pod.nonzero[i]
        score = 0 if requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity
        total += score
        weights += 1
    return total // weights if weights else 0


def affinity_scores(pod: PodView, nodes: list[NodeView]) -> list[int]:
    """NodeAffinity's score: the weights of the preferred terms a node matches, scaled so
    the best node has 100."""
    return _normalize([sum(w for w, t in pod.preferred if t.matches(n)) for n in nodes], False)


def taint_scores(pod: PodView, nodes: list[NodeView]) -> list[int]:
    """TaintToleration's score: fewer untolerated PreferNoSchedule taints, higher score
    (tolerations with no effect count too)."""
    prefer = [t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    counts = [
        sum(1 for t in n.taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(prefer, t))
        for n in nodes
    ]
    return _normalize(counts, True)


def _normalize(scores: list[int], reverse: bool) -> list[int]:
    """``DefaultNormalizeScore``: scale to 0..100 by the highest; ``reverse`` flips it."""
    top = max(scores, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0 for _ in scores]
    out = [MAX_NODE_SCORE * s // top for s in scores]
    return [MAX_NODE_SCORE - s for s in out] if reverse else out
