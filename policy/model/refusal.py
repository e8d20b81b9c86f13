"""Nodes the kube-scheduler refused a job's pods on although the pool saw room (issue 25).

A pool with ``watchAllPods: false`` (the default) does not see other tenants' pods, so it
may pin a pod (required node affinity) to a node they fill. The real kube-scheduler then
leaves the pod Pending with the condition ``PodScheduled=False``, reason ``Unschedulable``,
and records a ``FailedScheduling`` event ("0/2 nodes are available: 1 Insufficient cpu,
1 node(s) didn't match Pod's node affinity/selector."). It retries such a pod on cluster
events and at least every ``podMaxInUnschedulablePodsDuration`` (5 min), but only ever on
that one node: the affinity allows no other. Deleting the pod and pinning it there again
is a loop without backoff (each pod: create, refuse, delete, every few seconds).

So the pool records each refusal it cannot explain from what it sees in the job's
Admission (``Admission.refused``): the node, the pod, when, how many in a row, and until
when it avoids the node for the job (``policy.pool.refusals``). A pod counts as refused
once it has stayed stuck for ``GRACE`` while the pool saw room for it: longer than the
kube-scheduler's longest pod backoff (``podMaxBackoffSeconds``, 10 s), after which it has
tried the pod again since the room freed. The wait is 30 s, doubling with each refusal in
a row, at most 10 min. The record outlives the pod: the job's sync deletes a stuck pod
only once its Admission places the pod's slot elsewhere (or nowhere), which the pool does
only after recording the refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from policy.model.admission import Refusal
from policy.model.timeutil import format_time

GRACE: Final = timedelta(seconds=15)
BACKOFF: Final = timedelta(seconds=30)
MAX_BACKOFF: Final = timedelta(minutes=10)
HINT: Final = (
    "pods the pool does not see fill it, such as other tenants' "
    "(watchAllPods: true in the TrainingPool lets the pool see them)"
)


def _written(t: datetime | None) -> str:
    """A time as the Admission writes it."""
    return format_time(t) if t is not None else str(t)


def backoff(count: int) -> timedelta:
    """How long a node is avoided after ``count`` refusals in a row: 30 s, 60 s, 120 s, ...,
    at most 10 min."""
    return min(BACKOFF * 2 ** max(0, min(count - 1, 16)), MAX_BACKOFF)


def refused_note(refused: Sequence[Refusal]) -> str:
    """The counted refusals in words, as the job's status says them (the same words while
    the refusals are the same: nothing of ``now`` in them)."""
    return "; ".join(
        f"the kube-scheduler refused {r.pod or 'a pod'} on {r.node} at {_written(r.time)} "
        f"({_nth(r.count)} time in a row) though the pool saw room there: {HINT}; "
        f"the job's pods avoid {r.node} until {_written(r.until)}"
        for r in refused
        if r.counted
    )


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
