"""Attained service and its queues (Tiresias' discretised least attained service), read
from the API in every cycle.

A job's attained service is what its pods received in this run (each running pod's GPUs,
or CPU cores for a pod without GPUs, times the time since it started) plus what its runs
that ended received. A preemption deletes the pods that total could be read from, so it is
kept in the API: the job's Admission (``spec.service``), copied into the job's status
(``status.scheduling.service``) in case the Admission is lost. Nothing lives in the webhook.

Queues: a job that attained less than ``las[0]`` GPU-seconds is in queue 0, less than
``las[1]`` in queue 1, and so on. The starvation guard (Tiresias' promotion): a preempted
job that has waited as long as it ran goes back to queue 0.

Shortest remaining first (``Behaviour.LAS_REMAINING``, ``by_remaining``): a job that reports
how far it is (``policy.model.throughput.Progress``) is queued by the GPU-hours it has
left, on a finer ladder (``REMAINING_LADDER_S``), as SRPT minimises the average completion
time; Optimus (Peng et al., EuroSys'18, §4) orders by remaining time the same way. Its
rank only rises as it trains, so nobody is preempted by a job they used to wait behind. A
job that does not report is placed on the same ladder by what least attained service
assumes of it: in the pool's first queue, ``UNMEASURED_LEFT_S`` (new jobs start before
the long ones they arrive behind, and run until their first reports place them); past a
limit, as much again as the limit it crossed, and at least a rung later per queue (so
the LAS queues keep their order among the jobs that do not report).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from policy.model.admission import Admission, AttainedService
from policy.model.bounds import later
from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.resources import Resources

STATUS_KEY = "service"  # status.scheduling.service: the job's copy of the Admission's
NOTHING_ATTAINED = AttainedService(gpu_seconds=0.0)


def gpus(request: Resources) -> float:
    return sum(v for k, v in request.items() if k.endswith("/gpu")) / 1000


def units(request: Resources, on_gpus: bool = True) -> float:
    """What a pod's share of service is measured in: GPUs for a job that uses GPUs (its
    parameter servers count for nothing, as in Tiresias), else CPU cores."""
    return gpus(request) if on_gpus else request.get("cpu", 0) / 1000


def uses_gpus(job: Job) -> bool:
    """Whether the job's service is measured in GPUs (``Job.uses_gpus``, once per job)."""
    return job.uses_gpus


def recorded(job: Job, admission: Admission | None) -> AttainedService:
    """What earlier runs attained: the Admission's record, else the job status's copy."""
    if admission is not None and admission.service is not None:
        return admission.service
    section = job.status.get("scheduling")
    raw = section.get(STATUS_KEY) if isinstance(section, dict) else None
    return AttainedService.from_json(raw) or NOTHING_ATTAINED


def running_units(
    pods: Iterable[Pod], on_gpus: bool = True
) -> tuple[float, float, datetime | None]:
    """(units held by running pods, the sum of units x start time, the earliest start):
    this run's service at ``t`` is ``units x t - sum``."""
    rate = 0.0
    weighted = 0.0  # sum of units x start timestamp
    first: datetime | None = None
    for p in pods:
        if p.phase != "Running" or p.terminating or not p.live:
            continue
        started = p.started
        if started is None:
            continue
        u = units(p.request, on_gpus)
        rate += u
        weighted += u * started.timestamp()
        first = started if first is None or started < first else first
    return rate, weighted, first


@dataclass(frozen=True)
class Attained:
    """A job's service at ``now``, and what it takes to see it change."""

    past: AttainedService  # earlier runs
    rate: float  # units its running pods hold: service grows this fast
    total: float  # unit-seconds attained, this run included
    queue: int  # its LAS queue (0 first)
    run_started: datetime | None  # its earliest running pod's start (this run)
    left: float | None = None  # unit-seconds left by its progress reports (``by_remaining``)

    def lost_if_stopped(self, now: datetime, interval: float | None) -> float:
        """Unit-seconds of progress a preemption now would throw away: everything since
        its last checkpoint (every ``interval`` seconds of this run; none: the whole run)."""
        if self.run_started is None:
            return 0.0
        run = max((now - self.run_started).total_seconds(), 0.0)
        since = run % interval if interval else run
        return self.rate * since


def attained(
    job: Job,
    pods: Sequence[Pod],
    admission: Admission | None,
    now: datetime,
    las: Sequence[float],
    gang_units: float,
    *,
    promotion: bool = True,
) -> tuple[Attained, datetime | None]:
    """The job's service and queue at ``now``, and when its queue may change next (it
    crosses a limit while running, or a preempted job's promotion comes due; none without
    ``promotion``)."""
    past = recorded(job, admission)
    preempted = admission is not None and admission.preempted
    rate, weighted, first = (0.0, 0.0, None) if preempted else running_units(pods, uses_gpus(job))
    total = _service_at(now, past.gpu_seconds, rate, weighted)
    queue = bisect_right(las, total) if las else 0
    wake: datetime | None = None
    if rate > 0 and queue < len(las):
        wake = _crossing(now, past.gpu_seconds, rate, weighted, las[queue])
    if promotion and preempted and past.last is not None and queue > 0:
        # Tiresias' promotion: waited (since its preemption) as long as it ran.
        due = later(past.last.time, past.gpu_seconds / max(gang_units, 1e-9))
        if due is not None and now >= due:
            queue = 0
        elif due is not None:
            wake = due
    return Attained(past, rate, total, queue, first), wake


def _service_at(t: datetime, past: float, rate: float, weighted: float) -> float:
    """Unit-seconds attained at ``t``: the one formula both the queue and its wake use."""
    return past + (rate * t.timestamp() - weighted)


_TICK = timedelta(microseconds=1)  # a datetime's resolution


def _crossing(
    now: datetime, past: float, rate: float, weighted: float, limit: float
) -> datetime | None:
    """The first instant after ``now`` (to a datetime's microsecond) at which the service
    ``_service_at`` computes reaches ``limit``: from then on ``bisect_right`` puts the job
    past it, and at every instant before, not. A wake any later (the 1 ms this once added)
    lets a process that answered just before the crossing give that answer again at the
    crossing itself, where a fresh process already counts the job as past it (issue 36).

    The arithmetic ``(limit - total) / rate`` lands within a microsecond or two of the
    instant; the instant itself is found with the very formula the queue is read with
    (monotone in time), so no rounding can put the wake on either side of it."""
    guess = later(now, (limit - _service_at(now, past, rate, weighted)) / rate)
    if guess is None:
        return None

    def reached(t: datetime) -> bool:
        return _service_at(t, past, rate, weighted) >= limit

    lo, hi = now, max(guess, now + _TICK)
    if reached(hi) and (hi - _TICK <= lo or not reached(hi - _TICK)):
        return hi  # (almost always: the arithmetic is off by less than a microsecond)
    # Bracket the instant: ``lo`` not reached (``now`` is not), ``hi`` reached.
    step = _TICK
    while not reached(hi):
        lo, hi, step = hi, hi + step, step * 2
    step = _TICK
    while hi - step > lo and reached(hi - step):
        hi, step = hi - step, step * 2
    lo = max(lo, hi - step)
    while hi - lo > _TICK:  # bisect on whole microseconds
        mid = lo + (hi - lo) // 2
        if reached(mid):
            hi = mid
        else:
            lo = mid
    return hi


# Shortest remaining first: the queues' limits in GPU-seconds left (15 minutes to 128 hours,
# doubling: a job's rank is off by at most a factor of two between its progress writes).
REMAINING_LADDER_S: tuple[float, ...] = tuple(
    h * 3600.0 for h in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128)
)
# What a job in the pool's first LAS queue that has not said how far it is counts as
# having left: a new job preempts only jobs with more than this left, and its first
# reports then rank it (measured on Pollux's workloads 2 and 3 at 1 and 4 GPU-h within
# 2 %: benchmarks/README.md).
UNMEASURED_LEFT_S = 2 * 3600.0


def by_remaining(
    got: Attained, left_worker_s: float | None, per_worker: float, las: Sequence[float]
) -> Attained:
    """``got`` queued on ``REMAINING_LADDER_S`` by the unit-seconds it has left:
    ``left_worker_s`` (its reports) times ``per_worker`` (each worker's units), else what
    least attained service assumes (module docstring)."""
    if left_worker_s is not None:
        left = left_worker_s * per_worker
    elif got.queue == 0 or not las:
        left = UNMEASURED_LEFT_S
    else:  # a rung later per queue at least: the LAS queues keep their order
        left = max(las[min(got.queue, len(las)) - 1], UNMEASURED_LEFT_S * 2**got.queue)
    known = left if left_worker_s is not None else None
    return replace(got, queue=bisect_right(REMAINING_LADDER_S, left), left=known)


def service_of(
    job: Job,
    pods: Sequence[Pod],
    admission: Admission | None,
    now: datetime,
    las: Sequence[float],
    *,
    promotion: bool,
    remaining: bool,
    left_worker_s: float | None,
) -> tuple[Attained, datetime | None]:
    """The job's service and queue as the cycle ranks it: least attained service, or
    (``remaining``) shortest remaining first."""
    got, wake = attained(job, pods, admission, now, las, gang_units(job), promotion=promotion)
    if remaining:
        on_gpus = uses_gpus(job)
        per_worker = units(job.worker.request, on_gpus) if job.worker is not None else 1.0
        got = by_remaining(got, left_worker_s, per_worker or 1.0, las)
    return got, wake


def gang_units(job: Job) -> float:
    """Units of the job's gang (required types and min-instances workers)."""
    on_gpus = uses_gpus(job)
    total = sum(units(r.request, on_gpus) * r.replicas for r in job.required())
    if job.worker is not None:
        total += units(job.worker.request, on_gpus) * max(job.min_workers, 1)
    return total
