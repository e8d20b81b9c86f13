"""Grow: running jobs take capacity nobody waiting can use, toward ``max-instances``.

New workers go next to the job's parameter servers first, then next to its other pods.
Which job grows first is the policy's strategy (``Rules.grow``): DRAGON's
``grow_oldest_first`` grows each job to its maximum in start order; Dragonet's
``grow_by_gain`` adds one worker at a time to the job whose speed grows most, relatively.
"""

from __future__ import annotations

from collections.abc import Sequence

from policy.pool.ledger import Ledger
from policy.pool.locality import REMOTE
from policy.pool.placement import Placed, slots_at
from policy.pool.repair import new_pods, place_for
from policy.pool.running import Running


def _growable(ledger: Ledger, r: Running) -> bool:
    job = r.job
    if job.worker is None or r.verdict.outcome is not None or r.surplus:
        return False
    if job.key in ledger.victims or job.key in ledger.preempted:
        return False
    if len(r.workers) < r.target or r.verdict.restarts:
        return False
    return r.count < job.max_workers


def _room_anywhere(ledger: Ledger, r: Running, seen: dict[tuple, bool]) -> bool:
    """Some node it may use holds one more worker (free only shrinks within a cycle)."""
    worker = r.job.worker
    if worker is None:
        return False
    ok = ledger.eligible(r.job)[worker.type]
    key = (worker.request, id(ok))
    if key not in seen:
        free = ledger.free
        seen[key] = any(n in free and worker.request.fits_in(free[n]) for n in ok)
    return seen[key]


def grow(ledger: Ledger, running: Sequence[Running]) -> dict[str, Placed]:
    """Workers to add to running jobs, by job."""
    seen: dict[tuple, bool] = {}
    candidates = [
        (order, r)
        for order, r in enumerate(running)
        if _growable(ledger, r) and _room_anywhere(ledger, r, seen)
    ]
    return ledger.rules.grow(ledger, candidates)


def grow_oldest_first(
    ledger: Ledger, candidates: Sequence[tuple[int, Running]]
) -> dict[str, Placed]:
    """DRAGON: each job to its max, oldest first."""
    out: dict[str, Placed] = {}
    for _, r in candidates:
        wanted = slots_at(r.job.worker, r.new_indices(r.job.max_workers - r.count))
        placed = place_for(ledger, r, wanted)
        if placed:
            out[r.job.key] = new_pods(r, placed)
    return out


def grow_by_gain(ledger: Ledger, candidates: Sequence[tuple[int, Running]]) -> dict[str, Placed]:
    """One worker at a time, to the job whose speed grows most, relatively (Optimus-like): a
    worker next to a parameter server counts 1, elsewhere REMOTE (the cross-node penalty of
    comm-heavy models); ties go to the fewest workers per PS."""
    out: dict[str, Placed] = {}
    counts = {r.job.key: r.count for _, r in candidates}
    speed = {r.job.key: _effective_workers(r) for _, r in candidates}
    active = list(candidates)

    def gain(t: tuple[int, Running]) -> tuple:
        order, r = t
        local = room_next_to_ps(ledger, r)
        per_ps = counts[r.job.key] / max(len(r.ps_nodes), 1)
        speedup = -(1.0 if local else REMOTE) / max(speed[r.job.key], REMOTE)
        return (r.queue, speedup, per_ps, order)  # least attained service first (queue 0 if none)

    while active:
        active.sort(key=gain)
        r = active[0][1]
        n = counts[r.job.key]
        index = r.new_indices(n - r.count + 1)[n - r.count :]
        placed = place_for(ledger, r, slots_at(r.job.worker, index)) if index else {}
        if not placed:
            active.pop(0)
            continue
        out.setdefault(r.job.key, {}).update(new_pods(r, placed))
        counts[r.job.key] = n + 1
        node = next(iter(placed.values())).node
        local = not r.ps_nodes or node in r.ps_nodes
        speed[r.job.key] += 1.0 if local else REMOTE
        if n + 1 >= r.job.max_workers:
            active.pop(0)
    return out


def room_next_to_ps(ledger: Ledger, r: Running) -> bool:
    worker = r.job.worker
    if worker is None:
        return False
    if not r.ps_nodes:
        return True
    ok = ledger.eligible(r.job)[worker.type]
    return any(
        n in ok and n in ledger.free and worker.request.fits_in(ledger.free[n]) for n in r.ps_nodes
    )


def _effective_workers(r: Running) -> float:
    """Workers weighted by locality: what the job's speed is roughly proportional to."""
    live = [p for p in r.workers if p.live and p not in r.surplus]
    if not r.ps_nodes:
        return float(len(live))
    return sum(1.0 if p.node in r.ps_nodes else REMOTE for p in live)
