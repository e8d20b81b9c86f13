"""When a pool with ``decisionIntervalSeconds`` may decide: at most once per tick of the
interval, the ticks counted from the Unix epoch, as Pollux's simulator re-allocates every
60 s (its ``Cluster.step``) and Optimus every scheduling interval.

A decision made at a tick sees everything that happened since the last one; a sync between
ticks (an event: a job submitted, a pod gone) changes nothing and asks to be synced again
at the next tick. The webhook keeps nothing, so the pool's status carries the two times
this needs: ``decidedAt``, the last decision, and ``deferredSince``, the first event that
found no decision due (so that a sync that comes later than the tick, as a real
Metacontroller's may, still decides; it never waits more than one tick).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from policy.model.timeutil import parse_time

DECIDED_AT = "decidedAt"
DEFERRED_SINCE = "deferredSince"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Cadence:
    """What the pool's status says of its last decision (read from the parent)."""

    decided_at: datetime | None = None
    deferred_since: datetime | None = None

    @classmethod
    def of(cls, parent: Mapping[str, Any]) -> Cadence:
        status = parent.get("status")
        if not isinstance(status, Mapping):
            return cls()
        return cls(parse_time(status.get(DECIDED_AT)), parse_time(status.get(DEFERRED_SINCE)))

    def deferral(self, now: datetime) -> datetime | None:
        """The event that waits for a tick since the last decision (None: none does; one
        before that decision was decided by it)."""
        deferred, decided = self.deferred_since, self.decided_at
        if deferred is None or decided is None or not decided <= deferred <= now:
            return None
        return deferred


def tick_of(t: datetime, interval: timedelta) -> int:
    return math.floor((t - _EPOCH) / interval)


def _start(tick: int, interval: timedelta) -> datetime:
    return _EPOCH + interval * tick


def next_tick(now: datetime, interval: timedelta) -> datetime:
    """The first tick after ``now``."""
    return _start(tick_of(now, interval) + 1, interval)


def tick_from(t: datetime, interval: timedelta) -> datetime:
    """The first tick at or after ``t``."""
    tick = tick_of(t, interval)
    return t if _start(tick, interval) == t else _start(tick + 1, interval)


def due(cadence: Cadence, now: datetime, interval: timedelta) -> bool:
    """Whether a sync at ``now`` decides: at a tick itself, or later than a tick that an
    earlier event was deferred to; never twice in one tick. Without a decision on record
    (a new pool) or with one in the future (a clock set back), at once."""
    decided = cadence.decided_at
    if interval <= timedelta(0) or decided is None or decided > now:
        return True
    tick = tick_of(now, interval)
    if tick_of(decided, interval) >= tick:
        return False  # decided in this tick already
    if now == _start(tick, interval):
        return True  # at the tick itself
    deferred = cadence.deferral(now)
    return deferred is not None and tick_of(deferred, interval) < tick
