"""The recorder's loop: one informer (list, then watch) per source, and one writer that
turns each object it hands on into facts and writes what is new.

The informers run in threads and hand objects through a queue; the writer alone touches
what the recorder remembers (``Written``, ``Correlator``), so neither needs a lock.
``record_once`` is one list of every source and its writes: what a started recorder does
first, through its informers, and what the simulator's restarted recorder does.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from policy.pool.observe import KINDS
from recorder.correlate import Correlator
from recorder.informer import Backoff, Cache, Informer
from recorder.kube import ADMISSIONS, POOLS, Objects, Resource, job_resource
from recorder.story import Fact, admission_facts, job_facts, pool_facts
from recorder.write import Events, Tally, TokenBucket, Written, record
from webhooks.kubeapi import ApiError

log = logging.getLogger("dragonet.recorder")
Clock = Callable[[], datetime]
Reader = Callable[[Mapping[str, Any]], list[Fact]]
HOUSEKEEPING_SECONDS = 60.0  # how often what is too old to matter is forgotten


def utc_now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def sources() -> list[tuple[Resource, Reader]]:
    """What the story is read from, and how each object is read."""
    return [
        (ADMISSIONS, admission_facts),
        *((job_resource(k), job_facts) for k in KINDS),
        (POOLS, pool_facts),
    ]


@dataclass(frozen=True)
class Pass:
    tally: Tally
    unlisted: int  # resources that could not be listed


def facts_of(objects: Objects) -> tuple[list[Fact], int]:
    """Every fact the cluster's objects hold now. A resource that cannot be listed (its
    CRD not installed, the API away) is logged and skipped: the others still tell their
    part."""
    facts: list[Fact] = []
    unlisted = 0
    for resource, read in sources():
        try:
            items = objects.list(resource).items
        except ApiError as err:
            unlisted += 1
            log.warning("cannot list %s: %s", resource.plural, err)
            continue
        for obj in items:
            facts += read(obj)
    return facts, unlisted


def _log(tally: Tally) -> None:
    if tally.created or tally.counted or tally.failed or tally.folded or tally.dropped:
        log.info(
            "events: %d written, %d counted again in their series, %d folded into an "
            "aggregate, %d dropped (over their object's budget), %d failed",
            tally.created,
            tally.counted,
            tally.folded,
            tally.dropped,
            tally.failed,
        )


def record_once(
    objects: Objects,
    events: Events,
    written: Written,
    now: datetime,
    instance: str,
    limit: TokenBucket,
    stopping: Callable[[], bool] = lambda: False,
    correlator: Correlator | None = None,
) -> Pass:
    facts, unlisted = facts_of(objects)
    tally = record(facts, events, written, now, instance, limit, stopping, correlator)
    written.forget_older_than(now)
    _log(tally)
    return Pass(tally, unlisted)


@dataclass
class Writer:
    """Turns each object an informer hands on into facts, and writes what is new."""

    events: Events
    written: Written
    instance: str
    limit: TokenBucket
    stop: threading.Event
    clock: Clock = utc_now
    correlator: Correlator | None = None

    def __post_init__(self) -> None:
        self.correlator = self.correlator or Correlator()
        self.readers = {r.kind: read for r, read in sources()}
        self.tally = Tally()
        self.handed = 0  # objects written from
        self._tidied: datetime | None = None

    def write(self, resource: Resource, obj: Mapping[str, Any]) -> Tally:
        now = self.clock()
        self.handed += 1
        facts = self.readers[resource.kind](obj)
        tally = record(
            facts,
            self.events,
            self.written,
            now,
            self.instance,
            self.limit,
            self.stop.is_set,
            self.correlator,
        )
        for name in ("created", "counted", "failed", "folded", "dropped"):
            setattr(self.tally, name, getattr(self.tally, name) + getattr(tally, name))
        _log(tally)
        return tally

    def tidy(self) -> None:
        """Forget what the API server no longer keeps (its ``--event-ttl``)."""
        now = self.clock()
        if self._tidied and (now - self._tidied).total_seconds() < HOUSEKEEPING_SECONDS:
            return
        self._tidied = now
        self.written.forget_older_than(now)
        assert self.correlator is not None
        self.correlator.forget_older_than(now, self.written.max_age)


def caches() -> dict[Resource, Cache]:
    """One informer cache per source (what the pools' metrics read)."""
    return {resource: Cache() for resource, _ in sources()}


def run(
    objects: Objects,
    writer: Writer,
    watch_seconds: float,
    backoff_s: float = 1.0,
    cached: Mapping[Resource, Cache] | None = None,
    tick: Callable[[], None] = lambda: None,
) -> None:
    """Record until ``writer.stop`` is set. First the Events already written are listed
    (by their label): what a restarted recorder finds there it does not write again. Then
    each source is listed and watched (``recorder.informer``), into its cache in
    ``cached`` if given, and each object handed on is written from as it comes. ``tick``
    is called about once a second (the pools' metrics read the caches then)."""
    stop = writer.stop
    while not stop.is_set():
        try:
            writer.written.load(writer.events.list_ours(), writer.clock())
            break
        except ApiError as err:
            log.warning("cannot list the recorder's Events: %s", err)
            stop.wait(5.0)
    handed: queue.Queue[tuple[Resource, Mapping[str, Any]]] = queue.Queue()
    for resource, _ in sources():
        informer = Informer(
            objects,
            resource,
            lambda r, o: handed.put((r, o)),
            stop,
            max(1, int(watch_seconds)),
            Backoff(first=backoff_s),
            cache=(cached or {}).get(resource),
        )
        threading.Thread(target=informer.run, name=f"watch-{resource.plural}", daemon=True).start()
    ticked = 0.0
    while not stop.is_set():
        if time.monotonic() - ticked >= 1.0:
            ticked = time.monotonic()
            try:
                tick()
            except Exception:  # metrics are not worth the Events
                log.exception("refreshing the pools' metrics failed")
        try:
            resource, obj = handed.get(timeout=0.5)
        except queue.Empty:
            writer.tidy()
            continue
        try:
            writer.write(resource, obj)
        except Exception:  # a bug here must not end the recorder: the next change tries again
            log.exception("writing the Events of a %s failed", resource.kind)
