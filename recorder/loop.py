"""One pass of the recorder, and the loop that repeats it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from policy.pool.observe import KINDS
from recorder.kube import ADMISSIONS, POOLS, Objects, Resource, job_resource
from recorder.story import Fact, admission_facts, job_facts, pool_facts
from recorder.write import Events, Tally, TokenBucket, Written, record
from webhooks.kubeapi import ApiError

log = logging.getLogger("dragonet.recorder")
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass(frozen=True)
class Pass:
    tally: Tally
    unlisted: int  # resources that could not be listed


def facts_of(objects: Objects) -> tuple[list[Fact], int]:
    """Every fact the cluster's objects hold at ``now``. A resource that cannot be listed
    (its CRD not installed, the API away) is logged and skipped: the others still tell
    their part."""
    facts: list[Fact] = []
    unlisted = 0
    sources: Iterable[tuple[Resource, Callable[[Mapping[str, Any]], list[Fact]]]] = (
        (ADMISSIONS, admission_facts),
        *((job_resource(k), job_facts) for k in KINDS),
        (POOLS, pool_facts),
    )
    for resource, read in sources:
        try:
            items = list(objects.list(resource))
        except ApiError as err:
            unlisted += 1
            log.warning("cannot list %s: %s", resource.plural, err)
            continue
        for obj in items:
            facts += read(obj)
    return facts, unlisted


def record_once(
    objects: Objects,
    events: Events,
    written: Written,
    now: datetime,
    instance: str,
    limit: TokenBucket,
    stopping: Callable[[], bool] = lambda: False,
) -> Pass:
    facts, unlisted = facts_of(objects)
    tally = record(facts, events, written, now, instance, limit, stopping)
    written.forget_older_than(now)
    if tally.created or tally.counted or tally.failed:
        log.info(
            "events: %d written, %d counted again in their series, %d failed",
            tally.created,
            tally.counted,
            tally.failed,
        )
    return Pass(tally, unlisted)


def run(
    objects: Objects,
    events: Events,
    written: Written,
    instance: str,
    limit: TokenBucket,
    interval: float,
    stop: threading.Event,
    clock: Clock = utc_now,
) -> None:
    """Record until ``stop`` is set. First the Events already written are listed (by their
    label): what a restarted recorder finds there it does not write again."""
    loaded = False
    while not stop.is_set():
        now = clock()
        try:
            if not loaded:
                written.load(events.list_ours(), now)
                loaded = True
            record_once(objects, events, written, now, instance, limit, stop.is_set)
        except ApiError as err:
            log.warning("cannot list the recorder's Events: %s", err)
        except Exception:  # a bug here must not end the recorder: the next pass tries again
            log.exception("a recorder pass failed")
        stop.wait(interval)
