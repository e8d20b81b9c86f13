"""Which pod, if any, to ask Dragonet to move, after a report (DRAGON's rule, pure).

* The reporting pod has **converged**: move it (its node's room is better spent on a task
  that still learns; it goes on learning wherever it lands).
* Else this node is **overloaded** against its pool: move the **heaviest** worker that
  reports on this node (the most cpu and memory requested, as a share of the node), not
  whichever pod happened to report, as the reference did. Ties go to the name first in
  order, so the choice is the same on every report.
* Only workers are moved (the parameter servers, with the chief inside them, stay put).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from monitor.convergence import Category
from monitor.imbalance import RESOURCES
from monitor.kube import PodInfo

Reason = Literal["Converged", "Overloaded"]


@dataclass(frozen=True)
class Move:
    pod: PodInfo
    reason: Reason


def weight(pod: PodInfo, allocatable: Mapping[str, float]) -> float:
    """The pod's cpu and memory requests as the mean share of the node's allocatable."""
    shares = [pod.requests.get(r, 0.0) / allocatable[r] for r in RESOURCES if allocatable.get(r)]
    return sum(shares) / len(shares) if shares else 0.0


def choose(
    reporter: PodInfo,
    category: Category,
    overloaded: bool,
    workers_here: Iterable[PodInfo],
    allocatable: Mapping[str, float],
) -> Move | None:
    if category == Category.CONVERGED and reporter.is_worker:
        return Move(reporter, "Converged")
    if not overloaded:
        return None
    candidates = [p for p in workers_here if p.is_worker]
    if not candidates:
        return None
    heaviest = min(candidates, key=lambda p: (-weight(p, allocatable), p.namespace, p.name))
    return Move(heaviest, "Overloaded")
