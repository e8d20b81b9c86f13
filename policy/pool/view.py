"""What one cycle reads of each job before it decides anything, kept across syncs.

A pool of hundreds of running jobs plans again on every event, yet between two events
almost every job, its pods and its Admission are the very objects the last sync parsed
(``policy.memo``). What the cycle derives from them alone (its own pods, its verdict,
its running state, what it must repair, its plan when nothing touches it) is therefore
looked up, not derived again. Nothing here decides: each function returns what the
cycle computed before it was cached, and a sync without a memo computes it afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from policy.memo import Memo
from policy.model.admission import Admission
from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.lifecycle import Assessment, assess
from policy.pool.attained_service import Attained
from policy.pool.running import Running
from policy.pool.tensorboard import is_tensorboard


@dataclass(frozen=True)
class JobView:
    job: Job
    pods: tuple[Pod, ...]  # its own pods (not its TensorBoard's, not strays)
    boards: tuple[Pod, ...]  # its TensorBoard pods: no part of its gang
    strays: tuple[Pod, ...]  # pods its sync deletes and that are not terminating yet
    verdict: Assessment


def job_view(
    job: Job, mine: Sequence[Pod], admission: Admission | None, now: datetime, memo: Memo
) -> JobView:
    """The job's view; ``now`` matters only to a job with a deadline (its verdict)."""
    when = now if job.active_deadline_seconds is not None else None
    return memo.derive("job-view", (job, admission, *mine), lambda: _view(job, mine, now), when)


def _view(job: Job, mine: Sequence[Pod], now: datetime) -> JobView:
    boards = tuple(p for p in mine if is_tensorboard(p))
    pods, stray = own(job, [p for p in mine if not is_tensorboard(p)])
    strays = []
    if job.tensorboard is None:  # asked for no more: its sync deletes it
        strays += [p for p in boards if not p.terminating]
    strays += [p for p in stray if not p.terminating]
    return JobView(job, pods, boards, tuple(strays), assess(job, pods, now))


def own(job: Job, pods: Sequence[Pod]) -> tuple[tuple[Pod, ...], list[Pod]]:
    """The job's pods, and those it may not have (``Job.holds``: an index at or above its
    type's count). Its sync deletes those, so they count for nothing in the job and are
    never listed in its Admission; their room frees once they are gone, as a shrink's."""
    kept: list[Pod] = []
    stray: list[Pod] = []
    for p in pods:
        (kept if job.slot(p.replica_type, p.index) is not None else stray).append(p)
    return tuple(kept), stray


def running_of(
    view: JobView, prio: int, admission: Admission | None, got: Attained | None, memo: Memo
) -> Running:
    """An admitted job's running state (under least attained service, with its service,
    computed each cycle; what it is without is derived once, as without)."""
    base = memo.derive(
        "running",
        (view, admission),
        lambda: Running.of(view.job, view.pods, view.verdict, prio, admission),
        prio,
    )
    return base if got is None else base.ranked(got)
