"""Admit: a queued job's whole gang, or nothing (and why not).

A job is admitted when its parameter servers, chief/master, evaluator and at least
``min-instances`` workers fit at once in what is free now; it then gets up to
``Worker.replicas`` workers. A job that does not fit is skipped (backfill), but what it was
skipped for is never capacity an older job claimed in this cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from policy.model.jobs import Job
from policy.pool.explain import wait_message, wait_reason
from policy.pool.ledger import Ledger
from policy.pool.placement import (
    Assignment,
    Eligible,
    Free,
    Placed,
    PodRequest,
    required_slots,
    slots,
    unplaced,
)
from policy.pool.rules import Behaviour


@dataclass(frozen=True)
class Admitted:
    placed: Placed
    workers: int


@dataclass(frozen=True)
class Waits:
    reason: str  # a code from policy.pool.explain
    explain: partial[str]  # why it waits, built only when needed


def _place(
    ledger: Ledger,
    required: list[PodRequest],
    workers: list[PodRequest],
    min_workers: int,
    free: Free,
    eligible: Eligible,
    preferred: str | None = None,
) -> Assignment | None:
    """The policy's gang placement (``Rules.place_gang``)."""
    place = ledger.rules.place_gang
    return place(required, workers, min_workers, free, ledger.allocatable, eligible, preferred)


def _gang(job: Job) -> tuple[list[PodRequest], list[PodRequest]]:
    return required_slots(job), slots(job.worker, job.worker.replicas if job.worker else 0)


def gang_fits(ledger: Ledger, job: Job, free: Free) -> bool:
    """Whether the job's whole gang would be placed in ``free`` (nothing is taken)."""
    required, workers = _gang(job)
    eligible = ledger.eligible(job)
    return _place(ledger, required, workers, job.min_workers, free, eligible) is not None


def admit(ledger: Ledger, job: Job) -> Admitted | Waits:
    """Admit a queued job's whole gang, or explain why it waits."""
    if Behaviour.KUBE_SCHEDULER_PLACES in ledger.rules.does:  # no admission: everything, unplaced
        required, workers = _gang(job)
        return Admitted(unplaced([*required, *workers]), len(workers))
    eligible = ledger.eligible(job)
    # Free capacity only shrinks during a cycle, so a gang shape that failed is not tried
    # again (deterministic, and exact but for the placement heuristic's node ordering).
    key = ledger.shape(job)
    if key in ledger.cache.failed:
        return _waits(ledger, job, key, eligible)
    required, workers = _gang(job)
    gang = _place(
        ledger, required, workers, job.min_workers, ledger.free, eligible, job.node_preference
    )
    if gang is not None:
        ledger.take(job.key, gang.free)
        ledger.mark_acted()
        return Admitted(gang.placed(), gang.placed_workers)
    ledger.cache.failed.add(key)
    return _waits(ledger, job, key, eligible, (required, workers))


def _waits(
    ledger: Ledger,
    job: Job,
    key: int,
    eligible: Eligible,
    gang: tuple[list[PodRequest], list[PodRequest]] | None = None,
) -> Waits:
    """Why it waits, as a code now and in words when asked (most queued jobs keep the words
    they had: policy.pool.sync)."""
    reason = ledger.cache.reasons.get(key)
    if reason is None:  # would it fit if nobody ahead claimed anything?
        required, workers = gang or _gang(job)
        ledger.cache.fits_observed[key] = bool(
            ledger.claimed_by
            and _place(ledger, required, workers, job.min_workers, ledger.cluster.free, eligible)
        )
        # ... or in the pool with nothing running at all? (The same nodes answer the same.)
        ledger.cache.fits_empty[key] = ledger.cache.memo.derive(
            "fits-empty",
            ledger.cluster.nodes,
            lambda: (
                _place(ledger, required, workers, job.min_workers, ledger.allocatable, eligible)
                is not None
            ),
            job.gang_shape,
            tuple(sorted(eligible.items())),
            ledger.rules.place_gang,
        )
        reason = ledger.cache.reasons[key] = wait_reason(
            ledger.cluster,
            job.gang_types,
            eligible,
            ledger.cache.fits_observed[key],
            ledger.cache.fits_empty[key],
        )
    return Waits(
        reason,
        partial(
            wait_message,
            job,
            ledger.cluster,
            eligible,
            ledger.allocatable,
            ledger.claimed_by,
            ledger.cache.fits_observed[key],
            ledger.cache.fits_empty[key],
            Behaviour.STATIC in ledger.rules.does,
        ),
    )
