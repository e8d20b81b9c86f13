"""Lower bounds on makespan and average JCT, to report results as a fraction of optimal.

The reference's bounds (performance-anchors §5) for one resource, generalised to several
(docs/traces.md). Job j arrives at ``a_j``, cannot finish sooner than ``d_j`` after it
(its critical path at its best size) and needs ``w_j[r]`` resource-seconds of resource r at
its minimal-work size; the cluster has ``C[r]`` of r. Time 0 is the simulation start.

* Makespan >= max_j (a_j + d_j), and for every resource r and time t,
  makespan >= t + sum_{a_j >= t} w_j[r] / C[r]: the work arriving from t on needs that long.
* Sum of (C_j - a_j) >= sum of d_j (LB1), and for every resource r it is at least the total
  flow time of preemptive SRPT on one machine of speed C[r] with sizes w_j[r] and release
  dates a_j (LB2): optimal for that relaxation, which drops placement and per-job
  parallelism caps. The bound is the larger average.

Resources without capacity, or missing from ``capacity``, constrain nothing here.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BoundJob:
    """What the bounds need of a job: arrival, shortest possible run, least work per resource."""

    arrival_s: float
    min_duration_s: float
    work: Mapping[str, float]  # resource-seconds per resource name at the minimal-work size

    def __post_init__(self) -> None:
        if self.arrival_s < 0 or self.min_duration_s < 0 or any(w < 0 for w in self.work.values()):
            raise ValueError(f"arrival, duration and work must not be negative: {self!r}")


@dataclass(frozen=True)
class LowerBounds:
    makespan_s: float  # from time 0 to the last completion
    avg_jct_s: float


def lower_bounds(jobs: Sequence[BoundJob], capacity: Mapping[str, float]) -> LowerBounds:
    """No schedule of ``jobs`` on ``capacity`` does better than these (0 without jobs)."""
    if not jobs:
        return LowerBounds(0.0, 0.0)
    resources = [r for r, c in capacity.items() if c > 0]
    makespan = max(
        [max(j.arrival_s + j.min_duration_s for j in jobs)]
        + [work_bound(jobs, r, capacity[r]) for r in resources]
    )
    lb1 = sum(j.min_duration_s for j in jobs)
    lb2 = max(
        (
            srpt_flow_time([(j.arrival_s, j.work.get(r, 0.0) / capacity[r]) for j in jobs])
            for r in resources
        ),
        default=0.0,
    )
    return LowerBounds(makespan_s=makespan, avg_jct_s=max(lb1, lb2) / len(jobs))


def work_bound(jobs: Sequence[BoundJob], resource: str, capacity: float) -> float:
    """max over arrival times t of t + (work on ``resource`` arriving at or after t) / capacity."""
    best = 0.0
    suffix = 0.0
    ordered = sorted(jobs, key=lambda j: j.arrival_s, reverse=True)
    for k, j in enumerate(ordered):
        suffix += j.work.get(resource, 0.0) / capacity
        # Evaluate t = a_j only once every job arriving at a_j is in the suffix.
        if k + 1 == len(ordered) or ordered[k + 1].arrival_s < j.arrival_s:
            best = max(best, j.arrival_s + suffix)
    return best


def srpt_flow_time(jobs: Sequence[tuple[float, float]]) -> float:
    """Total flow time of preemptive SRPT on one unit-speed machine; jobs are (release, size).

    SRPT minimises total completion time on one machine with release dates and preemption,
    so this is exact for the relaxation. Zero-size jobs finish at their release.
    """
    pending = sorted(jobs)
    remaining: list[tuple[float, float]] = []  # heap of (remaining size, release)
    now = 0.0
    total = 0.0
    i = 0
    while i < len(pending) or remaining:
        if not remaining:
            now = max(now, pending[i][0])
        while i < len(pending) and pending[i][0] <= now:
            heapq.heappush(remaining, (pending[i][1], pending[i][0]))
            i += 1
        size, release = heapq.heappop(remaining)
        next_release = pending[i][0] if i < len(pending) else float("inf")
        if now + size <= next_release:
            now += size
            total += now - release
        else:
            heapq.heappush(remaining, (size - (next_release - now), release))
            now = next_release
    return total
