"""Facts become ``events.k8s.io/v1`` Events: one per story, named after it, counted as a
series when it repeats, written within a budget of API writes.

An Event's name is derived from its fact (the object's uid, the reason, the fact's
identity), so the recorder needs no memory of its own: what it wrote is found by name,
in the API server, by a restarted recorder as by the one that wrote it. ``Written`` is
only a cache of that (filled by one list of the recorder's own Events at start, then by
its writes): a fact whose Event exists is written again only if it happened later than
the Event's last observation, as one more in its series (``series.count``), the way
client-go's event recorder counts repeats instead of flooding. A series patch carries only
``series`` (``tools/events/event_broadcaster.go``, ``createPatchBytesForSeries``): the API
server keeps an events.k8s.io/v1 Event's note and reason as they were first written.

Before a write, client-go's correlator (``recorder.correlate``) may fold the fact into its
group's aggregate Event or drop it (its object's budget is spent); the client's own rate
(``TokenBucket``) then paces what is written.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from recorder.correlate import Correlator, combined, is_combined
from recorder.story import CLUSTER_NAMESPACE, Fact
from webhooks.kubeapi import AlreadyExists, ApiError

API_VERSION = "events.k8s.io/v1"
CONTROLLER = "dragonet.io/recorder"  # reportingController: a qualified name, as required
MANAGED_BY = "app.kubernetes.io/managed-by"
LABELS = {MANAGED_BY: "dragonet-recorder"}  # how the recorder lists its own Events
SELECTOR = f"{MANAGED_BY}=dragonet-recorder"
log = logging.getLogger("dragonet.recorder")


class Events(Protocol):
    """What the recorder needs of the API: its own Events, and writing them."""

    def list_ours(self) -> Iterator[Mapping[str, Any]]:
        """Every Event this recorder wrote (by its label), in every namespace."""

    def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """One Event, None if there is none by that name."""

    def create(self, event: Mapping[str, Any]) -> None:
        """Create it; ``AlreadyExists`` if an Event of that name exists."""

    def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """Merge-patch it (its series)."""


def micro_time(at: datetime) -> str:
    """``metav1.MicroTime``, as the API server writes it."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_micro(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def event_name(fact: Fact) -> str:
    """``{object}.{16 hex}``, as Kubernetes names Events: the same for every repeat of a
    story, another for another story."""
    r = fact.regarding
    key = "\x00".join((r.kind, r.namespace, r.name, r.uid, fact.reason, fact.identity))
    return f"{r.name[:200]}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def event_namespace(fact: Fact) -> str:
    return fact.regarding.namespace or CLUSTER_NAMESPACE


def new_event(fact: Fact, instance: str, at: datetime) -> dict[str, Any]:
    """The Event of a fact's first occurrence, at ``at``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Event",
        "metadata": {
            "name": event_name(fact),
            "namespace": event_namespace(fact),
            "labels": dict(LABELS),
        },
        "eventTime": micro_time(at),
        "reportingController": CONTROLLER,
        "reportingInstance": instance[:128],
        "action": fact.action,
        "reason": fact.reason,
        "regarding": fact.regarding.to_json(),
        "note": fact.note,
        "type": fact.type,
    }


@dataclass(frozen=True)
class Seen:
    """An Event as written: how many times its story happened, the last one when."""

    count: int
    last: datetime | None

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> Seen:
        series = event.get("series")
        if isinstance(series, Mapping) and isinstance(series.get("count"), int):
            return cls(series["count"], _parse_micro(series.get("lastObservedTime")))
        return cls(1, _parse_micro(event.get("eventTime")))


class TokenBucket:
    """At most ``qps`` writes a second on average, ``burst`` at once (client-go's
    limiter); ``take`` waits for a token. ``qps`` 0: no limit."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self._clock, self._sleep = clock, sleep
        self._tokens = float(self.burst)
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> None:
        if self.qps <= 0:
            return
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)


@dataclass
class Tally:
    created: int = 0
    counted: int = 0  # series patches
    failed: int = 0
    folded: int = 0  # similar facts written as their group's aggregate Event
    dropped: int = 0  # over their object's budget (the spam filter)


class Written:
    """The recorder's Events by name (a cache of the API's: see the module's docstring).
    Entries older than ``max_age`` go: the API server has deleted them by then (its
    ``--event-ttl``, 1 h by default) and facts that old are not written again."""

    def __init__(self, max_age: timedelta) -> None:
        self.max_age = max_age
        self._seen: dict[tuple[str, str], Seen] = {}
        self._at: dict[tuple[str, str], datetime] = {}

    def load(self, events: Iterable[Mapping[str, Any]], now: datetime) -> None:
        for e in events:
            meta = e.get("metadata")
            if not isinstance(meta, Mapping):
                continue
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            self.put(key, Seen.of(e), now)

    def get(self, key: tuple[str, str]) -> Seen | None:
        return self._seen.get(key)

    def put(self, key: tuple[str, str], seen: Seen, now: datetime) -> None:
        self._seen[key] = seen
        self._at[key] = now

    def forget_older_than(self, now: datetime) -> None:
        old = [k for k, at in self._at.items() if now - at > self.max_age]
        for k in old:
            del self._seen[k], self._at[k]

    def __len__(self) -> int:
        return len(self._seen)


def record(
    facts: Iterable[Fact],
    api: Events,
    written: Written,
    now: datetime,
    instance: str,
    limit: TokenBucket,
    stopping: Callable[[], bool] = lambda: False,
    correlator: Correlator | None = None,
) -> Tally:
    """Write what is new in ``facts``: an Event for a story not written yet, one more in
    the series of a story that happened again (a later ``at``), nothing for the rest.
    What is new goes through ``correlator`` first, client-go's rules
    (``recorder.correlate``): a tenth similar fact about an object within 10 minutes is
    folded into the aggregate Event, and a write beyond the object's budget is dropped.
    A fact older than ``written.max_age`` is history the API server no longer keeps: not
    written. Each write takes a token of ``limit`` (the client's own rate); once
    ``stopping`` says so, nothing more is written (what is left is found again by the
    next recorder)."""
    correlator = correlator if correlator is not None else Correlator()
    tally = Tally()
    for fact in sorted(facts, key=lambda f: (f.at or now, event_name(f))):
        if stopping():
            break
        if fact.at is not None and now - fact.at > written.max_age:
            continue
        key = (event_namespace(fact), event_name(fact))
        seen = written.get(key)
        if seen is not None and not _later(fact, seen):
            continue  # written already
        if correlator.handled(key, fact.at):
            continue  # folded or dropped already
        if seen is None and not correlator.grouped(fact) and _in_aggregate(fact, written):
            continue  # folded by an earlier recorder (whose memory is gone)
        when = fact.at or now
        target = correlator.aggregate(fact, when)
        if not correlator.allow(target, when):
            correlator.remember(key, fact.at, now)
            tally.dropped += 1
            continue
        try:
            if target is fact:
                _write(fact, key, seen, api, written, now, instance, limit, tally)
            else:
                folded = (event_namespace(target), event_name(target))
                _write(
                    target, folded, written.get(folded), api, written, now, instance, limit, tally
                )
                correlator.remember(key, fact.at, now)
                tally.folded += 1
        except ApiError as err:  # the other facts are still written; seen again, retried
            log.warning("cannot write Event %s/%s: %s", key[0], key[1], err)
            tally.failed += 1
    return tally


def _in_aggregate(fact: Fact, written: Written) -> bool:
    """Whether an aggregate Event of its object and reason was observed at or after the
    fact: a fact with no Event of its own that old was folded into it (or dropped)."""
    if fact.at is None:
        return False
    found = written.get((event_namespace(fact), event_name(combined(fact))))
    return found is not None and found.last is not None and fact.at <= found.last


def _later(fact: Fact, seen: Seen) -> bool:
    """Whether the fact happened again after its Event's last observation."""
    return fact.at is not None and seen.last is not None and fact.at > seen.last


def _write(
    fact: Fact,
    key: tuple[str, str],
    seen: Seen | None,
    api: Events,
    written: Written,
    now: datetime,
    instance: str,
    limit: TokenBucket,
    tally: Tally,
) -> None:
    """Create the fact's Event, or count it once more in its series. An aggregate fact
    (``recorder.correlate``) counts each time it comes, whatever its time."""
    again = is_combined(fact)
    if seen is None:
        limit.take()
        try:
            api.create(new_event(fact, instance, fact.at or now))
        except AlreadyExists:  # written by an earlier recorder since it listed
            found = api.read(*key)
            seen = Seen.of(found) if found is not None else Seen(1, fact.at)
            written.put(key, seen, now)
        else:
            written.put(key, Seen(1, fact.at or now), now)
            tally.created += 1
            return
        if not again and not _later(fact, seen):
            return
    at = fact.at or now
    if seen.last is not None and at < seen.last:
        at = seen.last
    limit.take()
    count = seen.count + 1
    series = {"count": count, "lastObservedTime": micro_time(at)}
    api.patch(key[0], key[1], {"series": series})
    written.put(key, Seen(count, at), now)
    tally.counted += 1
