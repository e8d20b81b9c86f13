"""Make room: for the first job that waits, reserve room on its way out, or shrink running
jobs to make it (DRAGON's starvation rule, with the parameter servers counted).

Victims come from running jobs of the waiting job's priority or lower (lower at once; equal
once it has waited ``starvation``, or at once if in a later least-attained-service queue;
borrowed workers at once under ``Behaviour.RECLAIM_BORROWED``),
never below ``min-instances``, never a PS or the chief; lonely workers first. The choice is
greedy until the gang fits, then pruned of victims whose room it does not need. The room
is kept from younger jobs while the victims terminate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from policy.model.admission import WAITING_FOR_SHRINK
from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.resources import Resources
from policy.model.speedup import PRIOR, Speedup
from policy.model.throughput import Config
from policy.pool.explain import awaited_message, named
from policy.pool.ledger import Ledger, Scale
from policy.pool.placement import (
    Eligible,
    PodRequest,
    place_gang,
    required_slots,
    slots,
    used_per_node,
)
from policy.pool.rules import Behaviour
from policy.pool.running import Running, shrinkable, waited

Victim = tuple[Running, Pod]  # a worker a shrink takes, and its job


@dataclass(frozen=True)
class Reserved:
    """The waiting job's room is kept (it frees as pods terminate)."""

    explain: partial[str]
    reason: str = WAITING_FOR_SHRINK


@dataclass(frozen=True)
class Unresolvable:
    """No shrink this policy allows would make room; ``could_shrink``: there were workers
    to take, they were just not enough."""

    could_shrink: bool


def make_room(
    ledger: Ledger,
    job: Job,
    prio: int,
    since: datetime,
    running: Sequence[Running],
    queue: int = 0,
) -> Reserved | Unresolvable:
    eligible = ledger.eligible(job)
    starving = ledger.now - since >= ledger.rules.starvation
    # Capacity only shrinks within a cycle: a shape no shrink could help stays unhelped.
    key = (ledger.shape(job), prio, starving, queue)
    if key in ledger.cache.unhelped:
        return Unresolvable(ledger.cache.unhelped[key])
    required = required_slots(job)
    gang = slots(job.worker, job.min_workers)
    candidates = ledger.cache.candidates.get((prio, starving, queue))
    if candidates is None:  # the same for every waiting job until one reserves room
        candidates = _candidates(ledger, prio, starving, running, queue)
        ledger.cache.candidates[(prio, starving, queue)] = candidates
    if not candidates and not ledger.releasing:
        # Nothing is on its way out and nothing may be taken: what admission found no
        # room for now finds none here either.
        ledger.cache.unhelped[key] = False
        return Unresolvable(False)
    future = ledger.future()
    fit = None
    if ledger.releasing:
        fit = place_gang(required, gang, len(gang), future, ledger.allocatable, eligible)
    chosen: list[Victim] = []
    if fit is None:
        need = Resources.total(s.request for s in [*required, *gang])
        have = Resources.total(future.values())
        for r, pod in candidates:
            chosen.append((r, pod))
            future[pod.node] = future[pod.node] + pod.request
            have = have + pod.request
            if need.fits_in(have):  # placing is dearer than adding: only once it may fit
                fit = place_gang(required, gang, len(gang), future, ledger.allocatable, eligible)
                if fit is not None:
                    break
        if fit is None:
            ledger.cache.unhelped[key] = bool(chosen)
            return Unresolvable(bool(chosen))
        pruned = _prune(ledger, chosen, required, gang, eligible)
        future = ledger.future([p for _, p in pruned])
        tight = place_gang(required, gang, len(gang), future, ledger.allocatable, eligible)
        if tight is not None:
            chosen, fit = pruned, tight
        _record(ledger, job, chosen, _Claim(prio, queue, starving, since))
    ledger.cache.candidates.clear()  # victims and free capacity changed
    # Keep the room from younger jobs: they get only what this job will not need.
    used = used_per_node(fit)
    ledger.reserve(used)
    if chosen:
        ledger.mark_acted()
    awaited = [(k, p) for n in sorted(used) for k, p in ledger.releasing.get(n, ())]
    return Reserved(partial(awaited_message, awaited, job.key))


def _candidates(
    ledger: Ledger, prio: int, starving: bool, running: Sequence[Running], queue: int = 0
) -> list[Victim]:
    """Workers a shrink may take for a job of priority ``prio`` (in LAS queue ``queue``),
    in the order taken. Under least attained service a job of its priority in a later
    queue gives workers up at once: a worker taken from a PS job loses no progress."""
    pool: list[tuple[tuple, Running, Pod]] = []
    for order, r in enumerate(running):
        if r.job.worker is None or r.verdict.outcome is not None or r.job.key in ledger.preempted:
            continue
        taken = len(ledger.victims.get(r.job.key, ()))
        keep = r.count - taken
        later = bool(ledger.rules.las) and r.priority == prio and r.queue > queue
        if r.priority < prio or (starving and r.priority == prio) or later:
            floor = r.job.min_workers
        elif Behaviour.RECLAIM_BORROWED in ledger.rules.does and r.priority <= prio:
            floor = max(r.job.min_workers, r.job.worker.replicas)
        else:
            continue
        if keep <= floor:
            continue  # nothing to give up (checked before sorting its workers)
        leaving = {p.name for p in (*r.surplus, *ledger.victims.get(r.job.key, ()))}
        candidates = [p for p in shrinkable(r.job, r.workers, r.ps_nodes) if p.name not in leaving]
        # A silent job among reporting ones counts as scaling linearly (PRIOR); in a pool
        # where nobody reports, the order is the policy's own (model None).
        model = ledger.speedups.get(r.job.key, PRIOR) if ledger.speedups else None
        for rank, pod in enumerate(candidates[: max(0, keep - floor)]):
            if pod.node is None or not pod.occupies or pod.node not in ledger.free:
                continue
            key = ledger.rules.victim_order(r, pod, order, rank, keep, model)
            pool.append((key, r, pod))
    pool.sort(key=lambda t: t[0])
    return [(r, p) for _, r, p in pool]


def _prune(
    ledger: Ledger,
    chosen: list[Victim],
    required: list[PodRequest],
    gang: list[PodRequest],
    eligible: Eligible,
) -> list[Victim]:
    """Drop victims whose room the waiting job does not need (last taken first)."""
    kept = list(chosen)
    for item in reversed(chosen):
        trial = [c for c in kept if c is not item]
        future = ledger.future([p for _, p in trial])
        if place_gang(required, gang, len(gang), future, ledger.allocatable, eligible):
            kept = trial
    return kept


@dataclass(frozen=True)
class _Claim:
    """What entitles the waiting job to take workers (``_candidates``' rules)."""

    priority: int
    queue: int
    starving: bool
    since: datetime

    def over(self, r: Running, now: datetime) -> str:
        """Why it may take ``r``'s workers, in the words of the victim's status."""
        if r.priority < self.priority:
            return f"has higher priority ({self.priority} > {r.priority})"
        if self.starving:
            return f"waited {waited(self.since, now)}"
        if r.queue > self.queue:
            return (
                f"has attained less service (least-attained-service queue {self.queue}, "
                f"this job's {r.queue})"
            )
        assert r.job.worker is not None
        return f"needs the workers borrowed beyond Worker.replicas ({r.job.worker.replicas})"


def _record(ledger: Ledger, waiting: Job, chosen: list[Victim], claim: _Claim) -> None:
    """The victims' jobs' new targets, and why (for their statuses)."""
    by_job: dict[str, list[Pod]] = {}
    runs: dict[str, Running] = {}
    for r, pod in chosen:
        by_job.setdefault(r.job.key, []).append(pod)
        runs[r.job.key] = r
    for key, pods in by_job.items():
        r = runs[key]
        before = r.target
        after = r.count - len(ledger.victims.get(key, ())) - len(pods)
        why = claim.over(r, ledger.now)
        ledger.shrink(
            key,
            pods,
            Scale(
                before,
                after,
                f"shrunk from {before} to {after} workers to make room for "
                f"{named(waiting.key, r.job.namespace)}, which {why}",
            ),
        )


def victims_oldest_first(
    r: Running, pod: Pod, order: int, rank: int, keep: int, model: Speedup | None = None
) -> tuple:
    """DRAGON: job by job, the lowest priority first, then the job that started first;
    within a job, its workers in ``shrinkable``'s order (``rank``)."""
    return (r.priority, order, rank)


def victims_borrowed_first(
    r: Running, pod: Pod, order: int, rank: int, keep: int, model: Speedup | None = None
) -> tuple:
    """Dragonet: the lowest priority first, then (least attained service) the most attained
    service; borrowed workers first, then those off the parameter servers' node, then from
    the jobs with the most workers per parameter server. ``keep``: the workers the job
    keeps before this one is taken."""
    assert r.job.worker is not None  # (only jobs with workers give any up)
    borrowed = keep - rank > r.job.worker.replicas
    per_ps = (keep - rank) / max(len(r.ps_nodes), 1)
    return (
        r.priority,
        -r.queue,  # most attained service first (least attained service)
        not borrowed,
        pod.node in r.ps_nodes,
        -per_ps,
        order,
        rank,
    )


def victims_least_loss(
    r: Running, pod: Pod, order: int, rank: int, keep: int, model: Speedup | None = None
) -> tuple:
    """The allocation rule's order (``policy.pool.goodput``): the lowest priority first,
    then the most attained service, borrowed workers first, then the worker whose job
    slows least, relatively, without it, as the job's reports say (a silent job as if it
    scaled linearly: one of many workers loses least by one). In a pool where no job
    reports (``model`` None), Dragonet's ``victims_borrowed_first``."""
    if model is None:
        return victims_borrowed_first(r, pod, order, rank, keep)
    assert r.job.worker is not None  # (only jobs with workers give any up)
    left = keep - rank  # the workers the job has before this one goes
    borrowed = left > r.job.worker.replicas
    return (r.priority, -r.queue, not borrowed, loss(model, left, len(r.ps_nodes)), order, rank)


def loss(model: Speedup, workers: int, ps: int) -> float:
    """How much slower a job of ``workers`` packed workers is with one fewer (0.25: its
    remaining time grows by a quarter)."""
    if workers <= 1:
        return float("inf")
    if not model.informed:
        return 1.0 / (workers - 1)
    got = model.relative_gain(Config(workers - 1, ps), Config(workers, ps))
    return got if got is not None else float("inf")
