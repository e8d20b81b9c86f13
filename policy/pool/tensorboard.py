"""TensorBoards: one pod per TFJob that asks for one, counted and placed like any pod.

A TensorBoard is no part of a job's gang: the job is admitted on its replicas alone, and
its TensorBoard takes room that is free once admissions, repairs and top-ups have taken
theirs (before growth into idle capacity). One that does not fit waits, and never shrinks
anyone or holds a gang back. An existing TensorBoard pod is a fact: it stays on its node.
"""

from __future__ import annotations

from collections.abc import Sequence

from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.tensorboard import LABEL
from policy.pool.ledger import Ledger
from policy.pool.rules import Behaviour


def is_tensorboard(pod: Pod) -> bool:
    return pod.replica_type == LABEL


def placed_at(ledger: Ledger, job: Job, boards: Sequence[Pod], near: Sequence[str | None]):
    """Where the job's TensorBoard is or goes: ``(True, node)`` for a pod that runs (or
    that an Admission placed), or one placed now; ``(False, None)`` while it waits for
    room (or for its old pod to go). ``near``: the nodes of the job's pods, PS
    first; the first that fits takes it, else the first node by name."""
    tb = job.tensorboard
    request = job.tensorboard_request
    if tb is None or request is None:
        return False, None
    live = [p for p in boards if p.live and not p.stuck]
    if live:
        return True, live[0].node
    if any(p.terminating for p in boards):
        return False, None  # the old pod is on its way out: its room is not free yet
    # None yet, or one that ended or is stuck on a node that cannot take it (a lost node,
    # a stale plan): placed (again) where there is room; the job's sync moves it there.
    if Behaviour.KUBE_SCHEDULER_PLACES in ledger.rules.does:
        return True, None  # the kube-scheduler places it
    eligible = ledger.eligible_for(job.tensorboard_constraints)
    shape = ("tensorboard", request, eligible)
    if shape in ledger.cache.failed:
        return False, None  # free room only shrinks within a cycle: no need to look again
    for name in dict.fromkeys([*(n for n in near if n in eligible), *sorted(eligible)]):
        free = ledger.free.get(name)
        if free is not None and request.fits_in(free):
            ledger.take(job.key, {**ledger.free, name: free - request})
            return True, name
    ledger.cache.failed.add(shape)
    return False, None


def near_nodes(pods: Sequence[tuple[bool, str | None]]) -> list[str | None]:
    """The nodes of the job's pods, ``(not a worker, node)``: its parameter servers' and
    chief's first (TensorBoard reads what they write, often on a node-local or shared
    volume), then its workers'."""
    return [n for first, n in pods if first] + [n for first, n in pods if not first]
