"""Queue order: priority, then enqueue time, then namespace/name (stable keys only)."""

from __future__ import annotations

from datetime import UTC, datetime

from policy.model.jobs import Job
from policy.model.priority import Priorities

NEVER = datetime.max.replace(tzinfo=UTC)
_NO_PRIORITIES = Priorities()


def enqueue_time(job: Job, now: datetime) -> datetime:
    """When the job joined the queue; a job just resumed from suspension joins it now."""
    if job.resumed:
        return now
    return job.enqueued or NEVER


def priority(job: Job, priorities: Priorities) -> int:
    value = priorities.value(job.priority_class)
    return value if value is not None else priorities.default


def queue_key(job: Job, now: datetime, priorities: Priorities = _NO_PRIORITIES) -> tuple:
    return (-priority(job, priorities), enqueue_time(job, now), job.namespace, job.name)
