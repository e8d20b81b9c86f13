"""Preempt: stop whole running jobs so that a waiting job's gang fits, when no shrink can.

Kueue's preemption, made checkpoint-aware. A running job may be preempted for a waiting job

* of higher priority (``Behaviour.PREEMPT_PRIORITY``), whether it declares a checkpoint
  interval or not; or
* of the same priority in an earlier least-attained-service queue
  (``Behaviour.PREEMPT_LAS``; or of the same queue and enqueued earlier, with
  ``LAS_LATER_IN_QUEUE``), only if it declares a checkpoint interval
  (``dragonet.io/checkpoint-interval-seconds``), has run at least one interval in this run
  (so it saved its progress at least once), and was preempted for LAS fewer than
  ``max_preemptions`` times (the starvation guard).

Victims are taken least work lost first (units held x seconds since their last checkpoint;
the whole run for a job without an interval), then lowest priority, then namespace/name,
until the gang fits in what is free once they are gone; then the ones it does not need are
dropped again. A victim goes back to the queue as a whole gang: its Admission is Queued
without pods, so its job's sync deletes them all, with their termination grace period
(``preemptionGraceSeconds``) for the training code to checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from policy.model.admission import WAITING_FOR_PREEMPTION
from policy.model.bounds import later
from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.resources import Resources
from policy.pool.attained_service import Attained, attained
from policy.pool.explain import HIGHER_ELSEWHERE, awaited_message, named
from policy.pool.ledger import Ledger, Stopped
from policy.pool.placement import Assignment, place_gang, required_slots, slots, used_per_node
from policy.pool.queue import enqueue_time
from policy.pool.rules import Behaviour, Rules
from policy.pool.running import Running


@dataclass(frozen=True)
class Preempted:
    """The waiting job's room is kept while the victims (if any) terminate."""

    victims: tuple[str, ...]
    explain: partial[str]
    reason: str = WAITING_FOR_PREEMPTION


def _service(r: Running, now: datetime) -> Attained:
    if r.attained is not None:
        return r.attained
    return attained(r.job, r.pods, r.admission, now, (), 0.0)[0]


def _las_reason(r: Running, waiting: Job, queue: int, service: Attained) -> str:
    who = named(waiting.key, r.job.namespace)
    where = (
        f"{who} is in queue {queue}" if service.queue != queue else f"{who} was enqueued before it"
    )
    if service.left is not None:
        rank = (
            f"shortest remaining first: its reports leave it about "
            f"{service.left / 3600:.1f} GPU-h to train (queue {service.queue})"
        )
    else:
        rank = (
            f"least attained service: it attained {service.total / 3600:.1f} GPU-h "
            f"(queue {service.queue})"
        )
    return f"{rank}, {where}; it checkpoints every {r.job.checkpoint_interval:g} s"


def _holding(r: Running) -> list[Pod]:
    leaving = {p.name for p in r.surplus}
    return [p for p in r.pods if p.occupies and not p.terminating and p.name not in leaving]


def preempt(
    ledger: Ledger,
    job: Job,
    prio: int,
    queue: int,
    running: Sequence[Running],
    wakes: list[datetime],
) -> Preempted | None:
    """Reserve room for ``job`` by preempting whole jobs, or None if no allowed set of
    victims makes its gang fit. ``wakes`` gets the times a job becomes preemptible."""
    rules, now = ledger.rules, ledger.now
    eligible = ledger.eligible(job)
    # Capacity only shrinks within a cycle: a shape no preemption could help stays so.
    failed = (ledger.shape(job), prio, queue)
    if failed in ledger.cache.unhelped:
        return None
    required = required_slots(job)
    static = Behaviour.STATIC in rules.does
    count = job.worker.replicas if static and job.worker else job.min_workers
    gang = slots(job.worker, count)

    def fits(extra: Sequence[Pod]) -> Assignment | None:
        future = ledger.future(extra)
        return place_gang(required, gang, len(gang), future, ledger.allocatable, eligible)

    fit = fits(()) if ledger.releasing else None
    candidates: list[tuple[tuple, Running, list[Pod], Stopped]] = []
    if fit is None:
        for r in running:
            key = r.job.key
            if key == job.key or key in ledger.victims or key in ledger.preempted:
                continue
            if r.verdict.outcome is not None:
                continue
            why = _allowed(r, job, prio, queue, rules, now, wakes)
            if why is None:
                continue
            pods = [p for p in _holding(r) if p.node in ledger.free]
            if not pods:
                continue
            lost = _service(r, now).lost_if_stopped(now, r.job.checkpoint_interval)
            order = (lost, r.priority, r.job.namespace, r.job.name)
            candidates.append((order, r, pods, why))
        candidates.sort(key=lambda c: c[0])
        need = Resources.total(s.request for s in [*required, *gang])
        have = Resources.total(ledger.future().values())
        chosen: list[tuple[Running, list[Pod], Stopped]] = []
        for _, r, pods, why in candidates:
            chosen.append((r, pods, why))
            have = have + Resources.total(p.request for p in pods)
            if need.fits_in(have):
                fit = fits([p for _, ps, _ in chosen for p in ps])
                if fit is not None:
                    break
        if fit is None:
            ledger.cache.unhelped[failed] = bool(chosen)
            return None
        for item in reversed(list(chosen)):  # drop the victims it does not need
            trial = [c for c in chosen if c is not item]
            if fits([p for _, ps, _ in trial for p in ps]) is not None:
                chosen = trial
        fit = fits([p for _, ps, _ in chosen for p in ps])
        if fit is None:  # cannot happen: the last trial kept fits
            return None
        for r, pods, why in chosen:
            ledger.stop(r.job.key, why, pods)
        ledger.mark_acted()
        ledger.cache.candidates.clear()  # shrink victims: some jobs are gone now
    used = used_per_node(fit)
    ledger.reserve(used, keep_devices=False)
    awaited = [(k, p) for n in sorted(used) for k, p in ledger.releasing.get(n, ())]
    victims = tuple(sorted(k for k, s in ledger.preempted.items() if s.by == job.key))
    return Preempted(victims, partial(awaited_message, awaited, job.key))


def _allowed(
    r: Running,
    waiting: Job,
    prio: int,
    queue: int,
    rules: Rules,
    now: datetime,
    wakes: list[datetime],
) -> Stopped | None:
    """Why ``r`` may be preempted for ``waiting``, or None."""
    if Behaviour.PREEMPT_PRIORITY in rules.does and r.priority < prio:
        return Stopped(
            waiting.key,
            f"{named(waiting.key, r.job.namespace)} has higher priority ({prio} > {r.priority})",
            las=False,
            shown=named(waiting.key, r.job.namespace, HIGHER_ELSEWHERE),
        )
    if Behaviour.PREEMPT_LAS not in rules.does or r.priority != prio or r.attained is None:
        return None
    interval = r.job.checkpoint_interval
    service = r.attained
    enqueued_after = (
        Behaviour.LAS_LATER_IN_QUEUE in rules.does
        and service.queue == queue
        and enqueue_time(r.job, now) > enqueue_time(waiting, now)
    )
    if interval is None or (service.queue <= queue and not enqueued_after):
        return None
    if service.past.las_preemptions >= rules.max_preemptions:
        return None  # the starvation guard: it runs to the end now
    started = service.run_started
    if started is None:
        return None
    due = later(started, interval)
    if due is None or now < due:
        if due is not None:
            wakes.append(due)  # not one checkpoint yet in this run
        return None
    return Stopped(
        waiting.key,
        _las_reason(r, waiting, queue, service),
        las=True,
        shown=named(waiting.key, r.job.namespace),
    )
