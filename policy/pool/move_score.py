"""Where a moved worker goes: the two target scores, as pure functions of the node loads.

``dragon`` is DRAGON's (container-migration's ``MigrateTask``, §7.3) without its bugs: the
lowest limits-based load wins, the source scored as if the pod had gone, no move when the
source is among the best, ties to the first name (DRAGON chose at random among them). The
caller offers only nodes with room (DRAGON charged the target without checking).

``dragonet`` is the worker's expected speed there: 1 next to one of its parameter servers,
``REMOTE`` elsewhere, times the CPU share it would get (allocatable CPU over what the pods
there compute with). A requested move must gain ``minGain``; a ``Manual`` one need not.

The pool's rules choose one of them once (``policy.pool.rules``), so the phase never
checks a policy's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from policy.model.cluster import Pod
from policy.model.migration import NO_GAIN, SAME_NODE
from policy.model.resources import Resources

_CPU, _MEM = "cpu", "memory"
_SERVERS = ("ps", "server", "scheduler")


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str


# (loads, the pod, nodes with room (sorted), its job's PS nodes, minGain, manual) -> node
TargetChooser = Callable[
    ["NodeLoad", Pod, Sequence[str], frozenset[str], float, bool], "str | Refusal"
]


@dataclass
class NodeLoad:
    """Per node: the CPU and memory the pods on it may use (their limits), and allocatable."""

    limits: dict[str, Resources]  # DRAGON's load: every pod at its limits
    busy: dict[str, Resources]  # what computes: workers at their limits, servers requests
    alloc: Mapping[str, Resources]

    @classmethod
    def of(cls, pods: Iterable[Pod], nodes: Mapping[str, Resources]) -> NodeLoad:
        """From the pods that hold room (assumed ones too) and each node's allocatable."""
        limits: dict[str, dict[str, int]] = {}
        busy: dict[str, dict[str, int]] = {}
        for p in pods:
            if p.occupies and p.node in nodes:
                _limits(p).add_to(limits.setdefault(p.node, {}))
                _busy(p).add_to(busy.setdefault(p.node, {}))
        return cls(
            {n: Resources(limits.get(n)) for n in nodes},
            {n: Resources(busy.get(n)) for n in nodes},
            nodes,
        )

    def move(self, pod: Pod, source: str, target: str) -> None:
        for used, u in ((self.limits, _limits(pod)), (self.busy, _busy(pod))):
            used[source] = used[source] - u
            used[target] = used[target] + u

    def dragon(self, node: str) -> float:
        """DRAGON's score (§7.3): 0.5 cpu limits/allocatable + 0.5 memory; lower is better."""
        a, u = self.alloc[node], self.limits[node]
        return 0.5 * u[_CPU] / max(a[_CPU], 1) + 0.5 * u[_MEM] / max(a[_MEM], 1)

    def share(self, node: str, extra: Resources | None = None) -> float:
        """The CPU share a computing pod gets there: allocatable cpu over what the pods
        there compute with (workers up to their limits; parameter servers, which mostly
        wait on the network, at their requests)."""
        used = self.busy[node] + extra if extra is not None else self.busy[node]
        return min(1.0, self.alloc[node][_CPU] / used[_CPU]) if used[_CPU] > 0 else 1.0


def _limits(p: Pod) -> Resources:
    """What a pod may use: its limits, at least its requests (cpu and memory)."""
    return Resources({k: max(p.limits[k], p.request[k]) for k in (_CPU, _MEM)})


_SERVERS = ("ps", "server", "scheduler")


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
) -> str | Refusal:
    """The least loaded node by DRAGON's score, unless the source is among the least."""
    source = pod.node or ""
    usage = _limits(pod)
    load.limits[source] = load.limits[source] - usage  # as if gone (DRAGON's scratch)
    try:
        here = load.dragon(source)
        best = min(roomy, key=lambda n: (load.dragon(n), n))
        if load.dragon(best) >= here:
            return Refusal(SAME_NODE, f"{source} is already among the least loaded nodes")
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
) -> str | Refusal:
    """The node where the worker would run fastest (its PS's node, then the least DRAGON
    load, then the first name on ties), if that pays ``min_gain`` (or it is asked by hand)."""
    from policy.pool.grow import REMOTE  # (grow imports the ledger, which imports us)

    source = pod.node or ""

    def speed(n: str, extra: Resources | None) -> float:
        near = 1.0 if not ps_nodes or n in ps_nodes else REMOTE
        return near * load.share(n, extra)

    here = speed(source, None)
    busy = _busy(pod)
    best = max(roomy, key=lambda n: (speed(n, busy), n in ps_nodes, -load.dragon(n), _neg(n)))
    gain = speed(best, busy) / here - 1.0 if here > 0 else float("inf")
    if gain <= 0 and not manual:
        return Refusal(SAME_NODE, f"no node would run {pod.name} faster than {source}")
    if gain < min_gain and not manual:
        return Refusal(
            NO_GAIN,
            f"the best node, {best}, would make {pod.name} only {gain:.0%} faster "
            f"(the pool moves for at least {min_gain:.0%})",
        )
    return best


def _neg(name: str) -> tuple[int, ...]:
    """Sorts names in reverse, so ``max`` prefers the first name on ties."""
    return tuple(-ord(c) for c in name)


TARGETS: Mapping[str, TargetChooser] = {"dragon": dragon_target, "dragonet": dragonet_target}
