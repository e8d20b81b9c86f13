"""Is this node overloaded against its pool? The Container Monitor's imbalance test
(container-migration ``controller/node.go: IsOverload``), with the standard deviation
computed right, and each node's load taken from what the cluster reports.

**The test.** A node is overloaded when its load exceeds the pool's mean by more than
``threshold`` population standard deviations. The reference summed only the *last*
deviation (``sum = dx*dx``), so its "std" was one node's distance from the mean.

**The load** of a node is, for cpu and memory, the larger of what its pods *request*
(the pool's published allocation, ``TrainingPool.status.nodeAllocation``) and what they
*use* (the kubelet's resource metrics through ``metrics.k8s.io``, where a metrics-server
serves them), as a share of its allocatable; the node's load is the mean of the two
shares. Requests say what the scheduler promised; usage catches pods that run far above
their requests (DRAGON's examples request 250m and burst to 4 CPUs, which is why the
reference used limits). DRAGON's ``/cluster-info`` is not used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import InvalidOperation
from typing import Any

from kubernetes.utils.quantity import parse_quantity

RESOURCES = ("cpu", "memory")  # the reference's score: 0.5·cpu share + 0.5·memory share
_EPSILON = 1e-9  # loads closer than this to the mean are at the mean (float rounding)


def overloaded(node_load: float, loads: Sequence[float], threshold: float) -> bool:
    """``node_load - mean(loads) > threshold · pstdev(loads)``. ``loads`` are every pool
    node's, this one's included. Fewer than two nodes, or all alike: never overloaded."""
    if len(loads) < 2:
        return False
    mean = statistics.fmean(loads)
    excess = node_load - mean
    return excess > _EPSILON and excess > threshold * statistics.pstdev(loads, mean)


@dataclass(frozen=True)
class NodeLoad:
    """One node's allocatable, requested and (if known) used amounts, in plain units
    (cores, bytes)."""

    name: str
    allocatable: Mapping[str, float]
    requested: Mapping[str, float] = field(default_factory=dict)
    used: Mapping[str, float] | None = None

    @property
    def load(self) -> float:
        shares = []
        for r in RESOURCES:
            total = self.allocatable.get(r, 0.0)
            if total <= 0:
                continue
            taken = max(self.requested.get(r, 0.0), (self.used or {}).get(r, 0.0))
            shares.append(taken / total)
        return statistics.fmean(shares) if shares else 0.0


@dataclass(frozen=True)
class PoolLoads:
    """What the monitor read of its pool at one time: every node's load, and what it
    could not read (said in logs and /readyz)."""

    nodes: Mapping[str, NodeLoad]
    metrics: bool  # usage from metrics.k8s.io was available
    problems: tuple[str, ...] = ()

    def loads(self) -> list[float]:
        return [n.load for n in self.nodes.values()]

    def verdict(self, node: str, threshold: float) -> Verdict | None:
        """This node against the pool; None when the pool does not list the node."""
        me = self.nodes.get(node)
        if me is None:
            return None
        loads = self.loads()
        mean = statistics.fmean(loads)
        std = statistics.pstdev(loads, mean) if len(loads) > 1 else 0.0
        return Verdict(me.load, mean, std, overloaded(me.load, loads, threshold))


@dataclass(frozen=True)
class Verdict:
    load: float
    mean: float
    std: float
    overloaded: bool


def amount(quantity: Any) -> float:
    """A Kubernetes quantity (``"250m"``, ``"16Gi"``, ``4``) in plain units; ValueError
    for anything else."""
    if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
        raise ValueError(f"not a quantity: {quantity!r}")
    try:
        value = float(parse_quantity(quantity))
    except (ValueError, InvalidOperation, TypeError) as err:
        raise ValueError(f"not a quantity: {quantity!r}") from err
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a quantity: {quantity!r}")
    return value


def _amounts(values: Any) -> dict[str, float]:
    if not isinstance(values, Mapping):
        raise ValueError("not a map of quantities")
    return {k: amount(v) for k, v in values.items() if k in RESOURCES}


def pool_loads(status: Any, node_metrics: Iterable[Any] | None) -> PoolLoads:
    """Each node's load from a TrainingPool's ``status.nodeAllocation`` and, when given, the
    ``items`` of a ``metrics.k8s.io/v1beta1`` NodeMetricsList. A row that cannot be read is
    left out and named in ``problems``; one bad node never hides the others."""
    problems: list[str] = []
    usage: dict[str, dict[str, float]] = {}
    for item in node_metrics or ():
        try:
            name = item["metadata"]["name"]
            usage[str(name)] = _amounts(item.get("usage"))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            problems.append(f"node metrics item unreadable: {err}")
    rows = status.get("nodeAllocation") if isinstance(status, Mapping) else None
    if not isinstance(rows, list):
        rows = []
        problems.append(
            "the TrainingPool's status has no nodeAllocation (a Dragonet older than the monitor?)"
        )
    nodes: dict[str, NodeLoad] = {}
    for row in rows:
        try:
            name = row["name"]
            if not isinstance(name, str):
                raise ValueError("name is not a string")
            nodes[name] = NodeLoad(
                name,
                _amounts(row.get("allocatable", {})),
                _amounts(row.get("allocated", {})),
                usage.get(name),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            problems.append(f"nodeAllocation row unreadable: {err}")
    return PoolLoads(nodes, metrics=node_metrics is not None, problems=tuple(problems))
