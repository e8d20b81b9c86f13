"""Repair: an admitted job's missing pods claim capacity before any queued job does.

Required pods (PS, chief, evaluator) that are missing or must restart, and workers below
``min-instances``, are placed next to the job's parameter servers, then its other pods.
Workers above ``min-instances`` that the job lost are topped up after admissions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policy.memo import NO_MEMO, Memo
from policy.model.jobs import WORKER, child_name
from policy.pool.ledger import Ledger
from policy.pool.placement import (
    Placed,
    PodRequest,
    place_repairs,
    required_slots,
    slots_at,
    unplaced,
)
from policy.pool.rules import Behaviour
from policy.pool.running import Running


@dataclass(frozen=True)
class Repair:
    placed: Placed  # slots placed now (a restarting pod's slot too)
    top_up: tuple[PodRequest, ...]  # lost workers above min-instances: placed after admissions
    unplaced: tuple[PodRequest, ...]  # slots that found no room (the job's status says so)


@dataclass(frozen=True)
class Needs:
    """What a running job lacks, a function of the job's running state alone."""

    missing: tuple[PodRequest, ...]  # required pods and workers below min-instances: placed first
    top_up: tuple[PodRequest, ...]  # lost workers above min-instances


def place_for(ledger: Ledger, r: Running, wanted: Sequence[PodRequest]) -> Placed:
    """Place pods of a running job next to its parameter servers, then its other pods;
    slots that find no room are left out."""
    if not wanted:
        return {}
    if Behaviour.KUBE_SCHEDULER_PLACES in ledger.rules.does:
        return unplaced(wanted)
    near: dict[str, tuple[int, int]] = {}
    for p in r.pods:
        if p.node and p.live and not p.stuck and p.node in ledger.free:
            req, total = near.get(p.node, (0, 0))
            near[p.node] = (req + (p.replica_type != "worker"), total + 1)
    placed = place_repairs(wanted, near, ledger.free, ledger.eligible(r.job))
    if placed.nodes:
        ledger.take(r.job.key, placed.free)
    return placed.placed()


def repair(ledger: Ledger, r: Running, memo: Memo = NO_MEMO) -> Repair:
    """Place what the job cannot train without."""
    need = memo.derive("needs", (r,), lambda: needs(r))
    placed = place_for(ledger, r, need.missing)
    left = tuple(s for s in need.missing if (s.type, s.index) not in placed)
    return Repair(placed, need.top_up, left)


def needs(r: Running) -> Needs:
    job, pods = r.job, r.pods
    existing = {p.name for p in pods}
    restarting = {p.name for p in r.verdict.restarts} | {p.name for p in pods if p.stuck}
    missing = [
        s
        for s in required_slots(job)
        if child_name(job, s.type, s.index) not in existing
        or child_name(job, s.type, s.index) in restarting
    ]
    for p in r.workers:
        if p.name in restarting and p not in r.surplus:
            missing.append(PodRequest(WORKER, p.index, job.worker))
    deficit = max(0, r.target - len(r.workers))
    new = slots_at(job.worker, r.new_indices(deficit))
    urgent = max(0, job.min_workers - len(r.workers))
    missing += new[:urgent]
    return Needs(tuple(missing), tuple(new[urgent:]))


def new_pods(r: Running, placed: Placed) -> Placed:
    """The placed slots whose pod does not exist yet (a restarting pod is re-created once
    it is gone; until then its room is claimed)."""
    existing = {p.name for p in r.pods}
    return {s: p for s, p in placed.items() if child_name(r.job, *s) not in existing}
