"""The pool's queue in its status (``status.queue``): who waits, in the order the pool
admits them, so a job's position is one read of its pool, not a write to every job.

A pure function of what the pool's cycle already decided (which jobs stay queued and why)
and of the keys the cycle sorts by (policy/pool/queue.py; under least attained service,
the job's queue from policy/pool/attained_service.py). Every value is one that changes only when
the queue does (no "waited N seconds"): Metacontroller re-syncs the pool on every change
of its status (DESIGN §2.7).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

from policy.model.admission import QUEUED
from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.priority import Priorities
from policy.model.speedup import Speedup
from policy.model.timeutil import format_time
from policy.pool.attained_service import service_of
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


def queue_status(
    plans: Iterable[PlannedJob],
    now: datetime,
    rules: Rules,
    priorities: Priorities,
    admissions: Mapping[str, Any],
    pods: Iterable[Pod],
    waiting_elsewhere: Iterable[tuple[Job, str]] = (),
    limit: int = MAX_LISTED,
    speedups: Mapping[str, Speedup] | None = None,
) -> list[dict[str, Any]]:
    """The first ``limit`` queued jobs in admission order, one entry each: ``position``
    (1 is next), ``job`` (namespace/name), ``kind``, ``priority``, ``lasQueue`` (least
    attained service only), ``enqueued`` (absent for a job that resumed just now: its own
    sync records it) and ``reason`` (the code its status and Admission carry).

    ``waiting_elsewhere`` are jobs that wait outside the plan (a pool that does not exist,
    no KubeShare), with their reason code: listed after the planned queue, by name, since
    nothing the pool does admits them."""
    queued = [jp for jp in plans if jp.phase == QUEUED]
    queues = _las_queues([jp.job for jp in queued], now, rules, admissions, pods, speedups or {})

    def order(jp: PlannedJob) -> tuple:
        key = queue_key(jp.job, now, priorities)
        return (key[0], queues.get(jp.job.key, 0), *key[1:])

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


def _las_queues(
    jobs: list[Job],
    now: datetime,
    rules: Rules,
    admissions: Mapping[str, Any],
    pods: Iterable[Pod],
    speedups: Mapping[str, Speedup],
) -> dict[str, int]:
    """Each queued job's least-attained-service queue, as the cycle computes it."""
    if not rules.las or not jobs:
        return {}
    keys = {j.key for j in jobs}
    by_job: dict[str, list[Pod]] = {}
    for p in pods:
        if p.job in keys:
            by_job.setdefault(p.job, []).append(p)
    out = {}
    for job in jobs:
        model = speedups.get(job.key)
        got, _ = service_of(
            job,
            by_job.get(job.key, ()),
            admissions.get(job.key),
            now,
            rules.las,
            promotion=rules.las_promotion,
            remaining=rules.las_remaining,
            left_worker_s=model.left_worker_s if model is not None else None,
        )
        out[job.key] = got.queue
    return out
