"""Where a moved worker goes: the two target scores, as pure functions of the node loads.

``dragon`` is DRAGON's (container-migration's ``MigrateTask``, §7.3) without its bugs: the
lowest limits-based load wins, the source scored as if the pod had gone, no move when the
source is among the best, ties to the first name (DRAGON chose at random among them). The
caller offers only nodes with room (DRAGON charged the target without checking).

``dragonet`` is the worker's expected speed there: 1 next to one of its parameter servers,
``REMOTE`` elsewhere, times the share of its CPU limit it would get, as CFS would give it:
the parameter servers there take their requests, and the workers split the rest of the
allocatable CPU in proportion to their requests. A requested move must gain ``minGain``;
a ``Manual`` one need not.

The pool's rules choose one of them once (``policy.pool.rules``), so the phase never
checks a policy's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from policy.model.cluster import Pod
from policy.model.migration import NO_GAIN, SAME_NODE
from policy.model.resources import Resources
from policy.pool.locality import REMOTE

_CPU, _MEM = "cpu", "memory"
_SERVERS = ("ps", "server", "scheduler")


@dataclass(frozen=True)
class MoveRefused:
    """No move: the score finds no better node for the worker (a reason code of
    ``policy.model.migration`` and its words). Not ``policy.model.admission.Refusal``, a
    node that refused a job's pods."""

    reason: str
    message: str


# (loads, the pod, nodes with room (sorted), its job's PS nodes, minGain, manual) -> node
TargetChooser = Callable[
    ["NodeLoad", Pod, Sequence[str], frozenset[str], float, bool], "str | MoveRefused"
]


@dataclass
class NodeLoad:
    """Per node: the CPU and memory the pods on it may use (their limits), and allocatable."""

    limits: dict[str, Resources]  # DRAGON's load: every pod at its limits
    busy: dict[str, Resources]  # what computes: workers at their limits, servers requests
    alloc: Mapping[str, Resources]
    serving: dict[str, Resources] = field(default_factory=dict)  # the servers' requests
    weights: dict[str, Resources] = field(default_factory=dict)  # the workers' requests

    @classmethod
    def of(cls, pods: Iterable[Pod], nodes: Mapping[str, Resources]) -> NodeLoad:
        """From the pods that hold room (assumed ones too) and each node's allocatable."""
        limits: dict[str, dict[str, int]] = {}
        busy: dict[str, dict[str, int]] = {}
        serving: dict[str, dict[str, int]] = {}
        weights: dict[str, dict[str, int]] = {}
        for p in pods:
            if p.occupies and p.node in nodes:
                _limits(p).add_to(limits.setdefault(p.node, {}))
                _busy(p).add_to(busy.setdefault(p.node, {}))
                _serving(p).add_to(serving.setdefault(p.node, {}))
                _weight(p).add_to(weights.setdefault(p.node, {}))
        return cls(
            {n: Resources(limits.get(n)) for n in nodes},
            {n: Resources(busy.get(n)) for n in nodes},
            nodes,
            {n: Resources(serving.get(n)) for n in nodes},
            {n: Resources(weights.get(n)) for n in nodes},
        )

    def move(self, pod: Pod, source: str, target: str) -> None:
        for used, u in (
            (self.limits, _limits(pod)),
            (self.busy, _busy(pod)),
            (self.serving, _serving(pod)),
            (self.weights, _weight(pod)),
        ):
            used[source] = used[source] - u
            used[target] = used[target] + u

    def dragon(self, node: str) -> float:
        """DRAGON's score (§7.3): 0.5 cpu limits/allocatable + 0.5 memory; lower is better."""
        a, u = self.alloc[node], self.limits[node]
        return 0.5 * u[_CPU] / max(a[_CPU], 1) + 0.5 * u[_MEM] / max(a[_MEM], 1)

    def share(self, node: str, pod: Pod, joining: bool = False) -> float:
        """The share of its CPU limit a worker gets there (``joining``: if it moved there).
        The parameter servers, which mostly wait on the network, get their requests first
        (CFS gives a pod that wants less than its part all it wants); the workers, which
        compute up to their limits, split the rest in proportion to their requests (CFS's
        weights). Where every worker fits its limit, 1."""
        joins = _busy(pod) if joining else Resources({})
        computing = (self.busy[node] + joins)[_CPU] - self.serving.get(node, Resources({}))[_CPU]
        left = max(self.alloc[node][_CPU] - self.serving.get(node, Resources({}))[_CPU], 0)
        if computing <= left:
            return 1.0
        weight = self.weights.get(node, Resources({})) + _weight(pod if joining else None)
        mine, limit = max(pod.request[_CPU], 1), _limits(pod)[_CPU]
        return min(1.0, left * mine / max(weight[_CPU], mine) / limit) if limit else 1.0

    def idle(self, node: str) -> int:
        """CPU (millicores) no pod there would use: what the servers' requests and the
        workers' limits leave of the allocatable CPU."""
        return self.alloc[node][_CPU] - self.busy[node][_CPU]

    def full_without(self, node: str, pod: Pod) -> bool:
        """The other workers there would still use all the CPU the servers leave."""
        return self.idle(node) + _busy(pod)[_CPU] <= 0


def _limits(p: Pod) -> Resources:
    """What a pod may use: its limits, at least its requests (cpu and memory)."""
    return Resources({k: max(p.limits[k], p.request[k]) for k in (_CPU, _MEM)})


_SERVERS = ("ps", "server", "scheduler")


def _serving(p: Pod) -> Resources:
    """A server's CPU request (what it takes before the workers); nothing for a worker."""
    return Resources({_CPU: p.request[_CPU]}) if p.replica_type in _SERVERS else Resources({})


def _weight(p: Pod | None) -> Resources:
    """A computing pod's CPU request (its CFS weight); nothing for a server."""
    if p is None or p.replica_type in _SERVERS:
        return Resources({})
    return Resources({_CPU: max(p.request[_CPU], 1)})


def _busy(p: Pod) -> Resources:
    """What a pod computes with: a worker (or chief) its limits, a server its requests."""
    return (
        Resources({k: p.request[k] for k in (_CPU, _MEM)})
        if p.replica_type in _SERVERS
        else _limits(p)
    )


def dragon_target(
    load: NodeLoad,
    pod: Pod,
    roomy: Sequence[str],
    ps_nodes: frozenset[str],
    min_gain: float,
    manual: bool,
) -> str | MoveRefused:
    """The least loaded node by DRAGON's score, unless the source is among the least."""
    source = pod.node or ""
    usage = _limits(pod)
    load.limits[source] = load.limits[source] - usage  # as if gone (DRAGON's scratch)
    try:
        here = load.dragon(source)
        best = min(roomy, key=lambda n: (load.dragon(n), n))
        if load.dragon(best) >= here:
            return MoveRefused(SAME_NODE, f"{source} is already among the least loaded nodes")
        return best
    finally:
        load.limits[source] = load.limits[source] + usage


def dragonet_target(
    load: NodeLoad,
    pod: Pod,
    roomy: Sequence[str],
    ps_nodes: frozenset[str],
    min_gain: float,
    manual: bool,
) -> str | MoveRefused:
    """The node where the worker would run fastest (its PS's node, then the least DRAGON
    load, then the first name on ties), if that pays ``min_gain`` (or it is asked by hand)."""
    source = pod.node or ""

    def speed(n: str, joining: bool) -> float:
        near = 1.0 if not ps_nodes or n in ps_nodes else REMOTE
        return near * load.share(n, pod, joining)

    here = speed(source, False)
    best = max(roomy, key=lambda n: (speed(n, True), n in ps_nodes, -load.dragon(n), _neg(n)))
    gain = speed(best, True) / here - 1.0 if here > 0 else float("inf")
    if gain <= 0 and not manual:
        return MoveRefused(SAME_NODE, f"no node would run {pod.name} faster than {source}")
    if gain < min_gain and not manual:
        return MoveRefused(
            NO_GAIN,
            f"the best node, {best}, would make {pod.name} only {gain:.0%} faster "
            f"(the pool moves for at least {min_gain:.0%})",
        )
    return best


def _neg(name: str) -> tuple[int, ...]:
    """Sorts names in reverse, so ``max`` prefers the first name on ties."""
    return tuple(-ord(c) for c in name)


TARGETS: Mapping[str, TargetChooser] = {"dragon": dragon_target, "dragonet": dragonet_target}
