"""One pass of the reaper, and the loop that repeats it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from policy.model.jobs import JobKind
from policy.model.kinds import KINDS
from policy.model.timeutil import format_time
from policy.model.ttl import sweep
from reaper.kube import Jobs
from webhooks.kubeapi import ApiError

log = logging.getLogger("dragonet.reaper")
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass(frozen=True)
class Pass:
    deleted: tuple[str, ...]  # "Kind namespace/name" of each job deleted
    failed: int  # kinds that could not be listed, deletions that failed
    next_at: datetime | None  # the soonest expiry still to come


def reap_once(jobs: Jobs, now: datetime, kinds: tuple[JobKind, ...] = KINDS) -> Pass:
    """List every kind, delete what has expired. A kind that cannot be listed (its CRD
    not installed, the API away) is logged and skipped: the others are still reaped."""
    deleted: list[str] = []
    failed = 0
    soonest: list[datetime] = []
    for kind in kinds:
        try:
            found = sweep(jobs.list(kind), now)
        except ApiError as err:
            failed += 1
            log.warning("cannot list %ss: %s", kind.kind, err)
            continue
        if found.next_at is not None:
            soonest.append(found.next_at)
        for e in found.due:
            try:
                gone = jobs.delete(kind, e.namespace, e.name, e.uid)
            except ApiError as err:
                failed += 1
                log.warning("cannot delete %s %s: %s", kind.kind, e.key, err)
                continue
            if gone:
                deleted.append(f"{kind.kind} {e.key}")
                log.info(
                    "deleted %s %s: its ttlSecondsAfterFinished ended at %s",
                    kind.kind,
                    e.key,
                    format_time(e.at),
                )
    return Pass(tuple(deleted), failed, min(soonest) if soonest else None)


def wait_seconds(done: Pass, now: datetime, interval: float) -> float:
    """Until the next list: the interval, or the next known expiry if that is sooner (at
    least a second, so a clock that lags the API server's cannot spin the loop)."""
    if done.next_at is None:
        return interval
    return max(1.0, min(interval, (done.next_at - now).total_seconds()))


def run(
    jobs: Jobs,
    interval: float,
    stop: threading.Event,
    clock: Clock = utc_now,
) -> None:
    """Reap until ``stop`` is set. Nothing is kept between passes."""
    while not stop.is_set():
        now = clock()
        try:
            done = reap_once(jobs, now)
        except Exception:  # a bug here must not end the reaper: the next pass tries again
            log.exception("a reaper pass failed")
            done = Pass((), 1, None)
        stop.wait(wait_seconds(done, now, interval))
