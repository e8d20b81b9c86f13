"""The pool's queue in its status (``status.queue``): who waits, in the order the pool
admits them, so a job's position is one read of its pool, not a write to every job.

A pure function of what the pool's cycle already decided (which jobs stay queued and why,
and each one's queue: policy/pool/attained_service.py) and of the keys the cycle sorts by
(policy/pool/queue.py). Every value is one that changes only when
the queue does (no "waited N seconds"): Metacontroller re-syncs the pool on every change
of its status (DESIGN §2.7).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from policy.model.admission import QUEUED
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


def queue_status(
    plans: Iterable[PlannedJob],
    now: datetime,
    rules: Rules,
    priorities: Priorities,
    waiting_elsewhere: Iterable[tuple[Job, str]] = (),
    limit: int = MAX_LISTED,
) -> list[dict[str, Any]]:
    """The first ``limit`` queued jobs in admission order, one entry each: ``position``
    (1 is next), ``job`` (namespace/name), ``kind``, ``priority``, ``lasQueue`` (least
    attained service only), ``enqueued`` (absent for a job that resumed just now: its own
    sync records it) and ``reason`` (the code its status and Admission carry).

    ``waiting_elsewhere`` are jobs that wait outside the plan (a pool that does not exist,
    no KubeShare), with their reason code: listed after the planned queue, by name, since
    nothing the pool does admits them."""
    queued = [jp for jp in plans if jp.phase == QUEUED]
    queues = {jp.job.key: jp.queue for jp in queued}

    def order(jp: PlannedJob) -> tuple:
        key = queue_key(jp.job, now, priorities)
        return (key[0], jp.queue, *key[1:])

    ranked = [(jp.job, jp.reason) for jp in sorted(queued, key=order)]
    ranked += sorted(waiting_elsewhere, key=lambda jr: (jr[0].namespace, jr[0].name))
    out = []
    for position, (job, reason) in enumerate(ranked[:limit], start=1):
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
