"""Take back: admitted gangs whose pods over-commit the nodes, so that one of them completes.

The pool admits on the view it has. When that view is stale, two gangs may be admitted
into the same room; their pods are written one request at a time (Metacontroller's
client-side rate limit), interleave, and the kube-scheduler (or, with ``binding:
nodeName``, the kubelet) places part of each. Each gang then holds room it cannot train
with while waiting for room the other holds: nothing ends, and no other rule takes an
admission back. The kube-scheduler is the final arbiter, and its facts (pods it could not
place, room the other gang's pods hold) beat the plan.

A *stalled* gang is an admitted job that holds room yet lacks pods it cannot train without
(its repair found no room for them). Stalled gangs are kept in order (policy ``keep``):
under a policy that preempts for priority, higher priority first; otherwise the one
admitted first (the later admission was made on a view that missed the earlier one's
pods), then higher priority, then namespace/name. Going from the last, the room of stalled
gangs is pooled until it lets an earlier stalled gang place all it lacks; those later gangs
are taken back as a preemption would (their pods all go, they queue again as whole gangs,
their statuses say for whom and why). A gang that only waits behind a job that trains is
not stalled by another stalled gang and is left alone, and a take-back happens only when
it lets another gang complete, so nothing churns: the next plan, once the pods are gone,
places the kept gang's missing pods first (repair).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from policy.model.cluster import Pod
from policy.model.resources import Resources
from policy.pool.explain import named
from policy.pool.ledger import Ledger, Stopped
from policy.pool.placement import Free, place_repairs
from policy.pool.queue import NEVER
from policy.pool.repair import Repair
from policy.pool.rules import Behaviour
from policy.pool.running import Running


def holding(r: Running) -> list[Pod]:
    """The job's pods that hold their node's room and are not on their way out."""
    leaving = {p.name for p in r.surplus}
    return [p for p in r.pods if p.occupies and not p.terminating and p.name not in leaving]


def keep_order(r: Running, by_priority: bool) -> tuple:
    """Which stalled gang keeps its admission first (see the module's docstring)."""
    admitted = r.admission.admitted_at if r.admission is not None else None
    started = admitted or r.job.started_at or NEVER
    if by_priority:
        return (-r.priority, started, r.job.namespace, r.job.name)
    return (started, -r.priority, r.job.namespace, r.job.name)


def take_back(
    ledger: Ledger, running: Sequence[Running], repairs: Mapping[str, Repair]
) -> dict[str, Stopped]:
    """The stalled gangs to take back (job key -> for whom and why), recorded in
    ``ledger.preempted`` with their room releasing."""
    stalled = [
        r
        for r in running
        if repairs[r.job.key].unplaced and r.verdict.outcome is None and holding(r)
    ]
    if len(stalled) < 2:
        return {}
    by_priority = Behaviour.PREEMPT_PRIORITY in ledger.rules.does
    stalled.sort(key=lambda r: keep_order(r, by_priority))
    free: Free = dict(ledger.free)
    pooled: list[Running] = []
    for i in range(len(stalled) - 1, 0, -1):
        pooled.append(stalled[i])
        for node, request in _room(stalled[i], repairs[stalled[i].job.key]):
            if node in free:
                free[node] = free[node] + request
        kept = next(
            (x for x in stalled[:i] if _completes(ledger, x, repairs[x.job.key], free)), None
        )
        if kept is None:
            continue
        out = {r.job.key: _why(r, kept, by_priority) for r in pooled}
        for r in pooled:
            ledger.stop(r.job.key, out[r.job.key], holding(r))
        ledger.mark_acted()
        ledger.cache.candidates.clear()  # shrink victims: some jobs are gone now
        return out
    return {}


def _room(r: Running, repaired: Repair) -> list[tuple[str, Resources]]:
    """What taking the job back gives: the room its pods hold, and what its repair took
    in this cycle (it runs before the keep order is known)."""
    out = [(p.node, p.request) for p in holding(r) if p.node]
    out += [(p.node, r.job.replicas[p.type].request) for p in repaired.placed.values() if p.node]
    return out


def _completes(ledger: Ledger, r: Running, repaired: Repair, free: Free) -> bool:
    """Whether every pod the job lacks would be placed in ``free``."""
    near: dict[str, tuple[int, int]] = {}
    for p in r.pods:
        if p.node and p.live and not p.stuck and p.node in free:
            req, total = near.get(p.node, (0, 0))
            near[p.node] = (req + (p.replica_type != "worker"), total + 1)
    wanted = list(repaired.unplaced)
    placed = place_repairs(wanted, near, free, ledger.eligible(r.job))
    return len(placed.nodes) == len(wanted)


def _why(r: Running, kept: Running, by_priority: bool) -> Stopped:
    who = named(kept.job.key, r.job.namespace)  # what the stopped job's tenant reads
    if by_priority and kept.priority > r.priority:
        first = f"{who} has higher priority ({kept.priority} > {r.priority})"
    else:
        first = f"{who} was admitted first"
    return Stopped(
        kept.job.key,
        "the two gangs were admitted into the same room (a stale view) and the "
        f"kube-scheduler could place only part of each; {first}",
        las=False,
        shown=who,
    )
