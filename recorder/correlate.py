"""client-go's EventCorrelator for the recorder's facts: similar facts about one object are
folded into one Event, and no object may flood its namespace's Events.

The rules are client-go's (``k8s.io/client-go/tools/record/events_cache.go``, which every
controller's ``EventRecorder`` runs before it writes), applied in its order
(``EventCorrelate``: aggregate, observe, then filter):

* **Aggregation** (``EventAggregator.EventAggregate``, with ``EventAggregatorByReasonFunc``):
  facts about one object with the same type and reason but different notes are *similar*.
  A group remembers the distinct notes it saw and when its last one came; a fact more than
  10 minutes (``defaultAggregateIntervalInSeconds``) after the group's last starts it anew.
  When a group holds 10 distinct notes (``defaultAggregateMaxEvents``), the fact is written
  as the group's one aggregate Event, its note prefixed ``(combined from similar events): ``
  (``EventAggregatorByReasonMessageFunc``), and every later similar fact is one more in that
  Event's series. Go pops an arbitrary note to keep the set under the bound (``PopAny``);
  here the oldest goes, so a run decides the same way twice.
* **Spam filter** (``EventSourceObjectSpamFilter``, ``getSpamKey``): a token bucket per
  source, object and type, 25 at once (``defaultSpamBurst``) and one more every 5 minutes
  (``defaultSpamQPS``). A write (an Event or a series count) without a token is dropped:
  one noisy job spends its own budget, never another's.
* Both remember at most 4,096 groups and objects, least recently used first out
  (``maxLruCacheEntries``).

client-go reads the wall clock as it records; the recorder reads each fact's own time (when
it happened, or when it was first seen), so the simulator and a recorder that lists the
same objects again decide alike. Like client-go's, this memory is the process's: a
restarted recorder starts with full buckets and empty groups (what it wrote it finds by
name, ``recorder.write``). A fact that was folded or dropped is remembered as handled
(``handled``), so seeing its object again does not emit it again.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from recorder.story import Fact, _note

SPAM_BURST = 25  # defaultSpamBurst
SPAM_QPS = 1.0 / 300.0  # defaultSpamQPS: one every 5 minutes
AGGREGATE_MAX = 10  # defaultAggregateMaxEvents
AGGREGATE_WINDOW = timedelta(seconds=600)  # defaultAggregateIntervalInSeconds
LRU_ENTRIES = 4096  # maxLruCacheEntries
COMBINED = "(combined from similar events): "  # EventAggregatorByReasonMessageFunc
_COMBINED_ID = "\x00combined"

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """``k8s.io/utils/lru``: at most ``size`` entries, the least recently used evicted."""

    def __init__(self, size: int = LRU_ENTRIES) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def add(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class Bucket:
    """``flowcontrol.NewTokenBucketPassiveRateLimiterWithClock``: ``TryAccept`` at a time."""

    tokens: float
    at: datetime | None = None

    def try_accept(self, now: datetime, qps: float, burst: int) -> bool:
        if self.at is not None and now > self.at:
            self.tokens = min(burst, self.tokens + (now - self.at).total_seconds() * qps)
        if self.at is None or now > self.at:
            self.at = now
        if self.tokens < 1 - 1e-9:  # five refills of a fifth are one token, in floats too
            return False
        self.tokens -= 1
        return True


def spam_key(fact: Fact) -> tuple[str, ...]:
    """``getSpamKey``: the object and the type (the source is this recorder's, always)."""
    r = fact.regarding
    return (r.kind, r.namespace, r.name, r.uid, r.api_version, fact.type)


def aggregate_key(fact: Fact) -> tuple[str, ...]:
    """``EventAggregatorByReasonFunc``'s aggregate key: the object, type and reason."""
    return (*spam_key(fact), fact.reason)


@dataclass
class _Group:
    """``aggregateRecord``: the distinct notes seen (oldest first) and the last one's time."""

    notes: dict[str, None] = field(default_factory=dict)
    last: datetime | None = None


def combined(fact: Fact) -> Fact:
    """The group's aggregate fact: one Event per object, type and reason."""
    return replace(fact, note=_note(COMBINED + fact.note), identity=_COMBINED_ID + fact.type)


def is_combined(fact: Fact) -> bool:
    return fact.identity.startswith(_COMBINED_ID)


@dataclass
class Correlator:
    """What client-go's EventCorrelator remembers, for one recorder process."""

    burst: int = SPAM_BURST
    qps: float = SPAM_QPS
    max_similar: int = AGGREGATE_MAX
    window: timedelta = AGGREGATE_WINDOW
    _groups: Lru[tuple[str, ...], _Group] = field(default_factory=Lru)
    _buckets: Lru[tuple[str, ...], Bucket] = field(default_factory=Lru)
    # Facts folded or dropped, by Event key: the latest time handled (None: no time).
    _handled: dict[tuple[str, str], tuple[datetime | None, datetime]] = field(default_factory=dict)

    def aggregate(self, fact: Fact, now: datetime) -> Fact:
        """The fact to write: itself, or its group's aggregate once the group holds
        ``max_similar`` distinct notes (``EventAggregate``)."""
        key = aggregate_key(fact)
        group = self._groups.get(key)
        if group is None or group.last is None or now - group.last > self.window:
            group = _Group()
        group.notes[fact.note] = None  # a note seen before keeps its place
        group.last = now
        self._groups.add(key, group)
        if len(group.notes) < self.max_similar:
            return fact
        del group.notes[next(iter(group.notes))]  # PopAny: the oldest, deterministically
        return combined(fact)

    def grouped(self, fact: Fact) -> bool:
        """Whether this process has seen facts similar to this one."""
        return self._groups.get(aggregate_key(fact)) is not None

    def allow(self, fact: Fact, now: datetime) -> bool:
        """Whether the object has a token left for this write (``Filter``, negated)."""
        key = spam_key(fact)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = Bucket(float(self.burst))
            self._buckets.add(key, bucket)
        return bucket.try_accept(now, self.qps, self.burst)

    def handled(self, key: tuple[str, str], at: datetime | None) -> bool:
        """Whether this fact was folded or dropped already (not to be emitted again)."""
        seen = self._handled.get(key)
        if seen is None:
            return False
        last = seen[0]
        return at is None or (last is not None and at <= last)

    def remember(self, key: tuple[str, str], at: datetime | None, now: datetime) -> None:
        seen = self._handled.get(key)
        if seen is not None and seen[0] is not None and (at is None or at < seen[0]):
            at = seen[0]
        self._handled[key] = (at, now)

    def forget_older_than(self, now: datetime, max_age: timedelta) -> None:
        old = [k for k, (_, when) in self._handled.items() if now - when > max_age]
        for k in old:
            del self._handled[k]
