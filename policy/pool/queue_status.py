"""The pool's queue: who waits, in the order the pool admits them. Listed in the pool's
status (``status.queue``, the first 100, for admins: it names every tenant's jobs), and
each waiting job's own place in its Admission (``places``), which its sync copies into its
status, so a tenant reads its place with access to its own namespace alone.

A pure function of what the pool's cycle already decided (which jobs stay queued and why,
and each one's queue: policy/pool/attained_service.py) and of the keys the cycle sorts by
(policy/pool/queue.py). Every value is one that changes only when
the queue does (no "waited N seconds"): Metacontroller re-syncs the pool on every change
of its status (DESIGN §2.7).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from policy.model.admission import QUEUED, QueuePlace
from policy.model.bounds import MAX_QUEUE
from policy.model.jobs import Job
from policy.model.priority import Priorities
from policy.model.timeutil import format_time
from policy.pool.queue import queue_key
from policy.pool.rules import Rules

# The status lists at most this many waiting jobs (``status.queued`` counts them all): a
# pool's status is read by every pool sync, and the head of the queue is what anyone asks.
MAX_LISTED = 100


class PlannedJob(Protocol):
    """What this module reads of a job's plan (``policy.pool.cycle.JobPlan``)."""

    @property
    def job(self) -> Job: ...
    @property
    def phase(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def queue(self) -> int: ...


def ranked(plans: Iterable[PlannedJob], now: datetime, priorities: Priorities) -> list[PlannedJob]:
    """The queued jobs of a plan in the order the pool admits them: priority, then the
    LAS queue, then the rest of the cycle's queue key (enqueue time, namespace/name)."""

    def order(jp: PlannedJob) -> tuple:
        key = queue_key(jp.job, now, priorities)
        return (key[0], jp.queue, *key[1:])

    return sorted((jp for jp in plans if jp.phase == QUEUED), key=order)


def queue_status(
    queued: Sequence[PlannedJob],
    now: datetime,
    rules: Rules,
    priorities: Priorities,
    waiting_elsewhere: Iterable[tuple[Job, str]] = (),
    limit: int = MAX_LISTED,
) -> list[dict[str, Any]]:
    """The first ``limit`` queued jobs (``queued``: in admission order, ``ranked``), one
    entry each: ``position`` (1 is next), ``job`` (namespace/name), ``kind``,
    ``priority``, ``lasQueue`` (least attained service only), ``enqueued`` (absent for a
    job that resumed just now: its own sync records it) and ``reason`` (the code its
    status and Admission carry). For admins: the pool is cluster-scoped, and it names
    every tenant's jobs (a tenant reads its own place in its job's status: ``places``).

    ``waiting_elsewhere`` are jobs that wait outside the plan (a pool that does not exist,
    no KubeShare), with their reason code: listed after the planned queue, by name, since
    nothing the pool does admits them."""
    queues = {jp.job.key: jp.queue for jp in queued}
    ranked_jobs = [(jp.job, jp.reason) for jp in queued]
    ranked_jobs += sorted(waiting_elsewhere, key=lambda jr: (jr[0].namespace, jr[0].name))
    out = []
    for position, (job, reason) in enumerate(ranked_jobs[:limit], start=1):
        entry: dict[str, Any] = {
            "position": position,
            "job": job.key,
            "kind": job.kind.kind,
            "priority": -queue_key(job, now, priorities)[0],
        }
        if rules.las:
            entry["lasQueue"] = queues.get(job.key, 0)
        if not job.resumed and job.enqueued is not None:
            entry["enqueued"] = format_time(job.enqueued)
        if reason:
            entry["reason"] = reason
        out.append(entry)
    return out


# Places up to this one are written exactly; later ones as a range of the 1-2-5 series
# (11-20, 21-50, 51-100, 101-200, ...): a job's written place then changes about twice per
# tenfold of its distance from the head, not with every job admitted ahead of it.
EXACT_UP_TO = 10


def rounded(n: int) -> tuple[int, int | None]:
    """``n`` as written: itself up to ``EXACT_UP_TO``, else the range of the 1-2-5 series
    it falls in, as (first, last)."""
    if n <= EXACT_UP_TO:
        return n, None
    low, bound = EXACT_UP_TO, EXACT_UP_TO
    steps = (2, 5 / 2, 2)  # 10 -> 20 -> 50 -> 100 -> 200 -> 500 -> ...
    i = 0
    while n > bound:
        low, bound = bound, round(bound * steps[i % 3])
        i += 1
    return low + 1, min(bound, MAX_QUEUE)


def places(queued: Sequence[PlannedJob]) -> dict[str, QueuePlace]:
    """Each queued job's place (``queued`` in admission order): in the pool's queue and
    among the waiting jobs of its namespace, with both lengths, each ``rounded``."""
    per_namespace: dict[str, int] = {}
    among: list[int] = []
    for jp in queued:
        n = per_namespace[jp.job.namespace] = per_namespace.get(jp.job.namespace, 0) + 1
        among.append(n)
    length = rounded(len(queued))
    out = {}
    for i, (jp, mine) in enumerate(zip(queued, among, strict=True), start=1):
        position = rounded(i)
        in_namespace = rounded(mine)
        namespace_length = rounded(per_namespace[jp.job.namespace])
        out[jp.job.key] = QueuePlace(
            position=position[0],
            position_max=position[1],
            length=length[0],
            length_max=length[1],
            in_namespace=in_namespace[0],
            in_namespace_max=in_namespace[1],
            namespace_length=namespace_length[0],
            namespace_length_max=namespace_length[1],
        )
    return out
