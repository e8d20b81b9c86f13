"""Events under a flood: client-go's correlator in the recorder (``recorder.correlate``).
One job that emits hundreds of facts has them folded into one aggregate Event and capped
at its own budget (25 at once, one more every 5 minutes); jobs that emit a few each have
every one written, and are not made to wait behind the noisy one's writes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from recorder.correlate import COMBINED, Correlator
from recorder.story import Fact, Regarding
from recorder.write import Tally, TokenBucket, Written, record

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Events:
    """``recorder.write.Events`` in memory, with the time (on the budget's clock) of each
    Event's creation."""

    def __init__(self, clock: list[float] | None = None) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0
        self.created_at: dict[tuple[str, str], float] = {}  # name -> lag, s
        self._clock = clock

    def list_ours(self) -> Iterator[Mapping[str, Any]]:
        return iter([dict(e) for e in self.events.values()])

    def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.events.get((namespace, name))

    def create(self, event: Mapping[str, Any]) -> None:
        from webhooks.kubeapi import AlreadyExists

        key = (event["metadata"]["namespace"], event["metadata"]["name"])
        if key in self.events:
            raise AlreadyExists("409", 409)
        self.writes += 1
        self.events[key] = dict(event)
        # How long after its fact it was written (on the budget's clock).
        happened = datetime.fromisoformat(event["eventTime"]) - T0
        lag = (self._clock[0] if self._clock else 0.0) - happened.total_seconds()
        self.created_at[key] = lag

    def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self.writes += 1
        self.events[(namespace, name)].update(body)

    def of(self, job: str) -> list[dict[str, Any]]:
        return [e for e in self.events.values() if e["regarding"]["name"] == job]


def _job(name: str) -> Regarding:
    return Regarding("kubeflow.org/v1", "TFJob", "team", name, f"uid-{name}")


def shrunk(job: str, at: datetime, note: str) -> Fact:
    return Fact(_job(job), "Normal", "Shrunk", "Scale", note, at, note)


def _add(total: Tally, one: Tally) -> None:
    for name in ("created", "counted", "failed", "folded", "dropped"):
        setattr(total, name, getattr(total, name) + getattr(one, name))


def flood(
    seconds: int,
    rate: int,
    quiet_jobs: int,
    limit: TokenBucket,
    clock: list[float] | None = None,
    correlator: Correlator | None = None,
) -> tuple[Events, Tally, Tally]:
    """Job ``noisy`` shrinks ``rate`` times a second for ``seconds`` (each time from and
    to other numbers); ``quiet_jobs`` jobs shrink three times each, spread over the same
    time; each fact is recorded as it comes (as the watch hands it on). Returns the Events
    and the noisy and quiet jobs' tallies."""
    api, written = Events(clock), Written(timedelta(hours=1))
    correlator = correlator or Correlator()
    loud, calm = Tally(), Tally()
    quiet_at = {i * seconds // (3 * quiet_jobs + 1): i for i in range(1, 3 * quiet_jobs + 1)}
    for second in range(seconds):
        now = T0 + timedelta(seconds=second)
        if clock is not None:  # the budget's clock runs with the facts
            clock[0] = max(clock[0], float(second))
        for k in range(rate):
            n = second * rate + k
            fact = shrunk("noisy", now, f"workers from {n + 2} to {n + 1}: flapping")
            _add(loud, record([fact], api, written, now, "r", limit, correlator=correlator))
        if second in quiet_at:
            i = quiet_at[second] - 1
            job, n = f"quiet-{i % quiet_jobs}", i // quiet_jobs
            fact = shrunk(job, now, f"workers from {n + 5} to {n + 4}: for another")
            _add(calm, record([fact], api, written, now, "r", limit, correlator=correlator))
    return api, loud, calm


def test_one_job_flooding_is_folded_and_capped_while_every_quiet_jobs_event_is_written() -> None:
    api, loud, calm = flood(100, 4, 20, TokenBucket(0, 1))
    # Every quiet job's three shrinks: an Event each, as they were.
    assert (calm.created, calm.folded, calm.dropped) == (60, 0, 0)
    for i in range(20):
        notes = sorted(e["note"] for e in api.of(f"quiet-{i}"))
        assert notes == [f"workers from {n + 5} to {n + 4}: for another" for n in range(3)]
    # The noisy job's 400: nine Events of their own, then the tenth similar one within 10
    # minutes is the aggregate Event, and each later one is counted in its series, until
    # the job's 25 tokens are spent; in 100 s it earns a third of one more: the rest are
    # dropped.
    mine = api.of("noisy")
    combined = [e for e in mine if e["note"].startswith(COMBINED)]
    assert len(mine) == 10 and len(combined) == 1
    assert combined[0]["note"] == COMBINED + "workers from 11 to 10: flapping"
    assert combined[0]["series"]["count"] == 16  # the aggregate and 15 more
    assert (loud.created, loud.counted, loud.folded, loud.dropped) == (10, 15, 16, 375)
    assert api.writes == 60 + 25


def _budget() -> tuple[list[float], TokenBucket]:
    """The client's write budget (2 a second, 10 at once) on a clock of its own."""
    clock = [0.0]

    def sleep(s: float) -> None:
        clock[0] += s

    return clock, TokenBucket(2.0, 10, clock=lambda: clock[0], sleep=sleep)


def test_the_noisy_job_does_not_make_the_others_wait_behind_its_writes() -> None:
    """With the client's write budget, the quiet jobs' Events are written as their facts
    happen: the noisy job spends only its own 25 writes."""
    clock, limit = _budget()
    api, _, _ = flood(100, 4, 20, limit, clock)
    lags = {k: t for k, t in api.created_at.items() if not k[1].startswith("noisy")}
    assert len(lags) == 60 and max(lags.values()) <= 5.0, max(lags.values())


def test_without_a_budget_per_object_the_flood_delays_everyone() -> None:
    """The same flood, with the per-object budget and the aggregation turned off (the
    recorder before client-go's rules): the quiet jobs' Events wait behind the noisy
    job's 400 writes, the last one more than a minute."""
    clock, limit = _budget()
    unlimited = Correlator(burst=10**6, max_similar=10**6)
    api, loud, _ = flood(100, 4, 20, limit, clock, unlimited)
    lags = [t for k, t in api.created_at.items() if not k[1].startswith("noisy")]
    assert loud.created == 400 and len(lags) == 60 and max(lags) > 60.0, max(lags)


def test_the_same_story_repeating_counts_in_its_series_within_the_objects_budget() -> None:
    api, written, correlator = Events(), Written(timedelta(hours=1)), Correlator()
    tally = Tally()
    for minute in range(40):  # the same shrink, once a minute for 40 minutes
        now = T0 + timedelta(minutes=minute)
        fact = shrunk("a", now, "workers from 4 to 2: for b")
        _add(
            tally, record([fact], api, written, now, "r", TokenBucket(0, 1), correlator=correlator)
        )
    [event] = api.events.values()
    # 25 at once and a fifth of one more a minute: minutes 0-30 spend them (25 + 6),
    # then one more every 5 minutes (minute 35); the rest are dropped.
    assert (tally.created, tally.counted, tally.dropped) == (1, 31, 8)
    assert event["series"]["count"] == 32
    assert event["series"]["lastObservedTime"] == "2026-01-01T00:35:00.000000Z"


def test_similar_facts_more_than_ten_minutes_apart_are_each_their_own_event() -> None:
    api, written, correlator = Events(), Written(timedelta(days=1)), Correlator()
    for i in range(12):
        now = T0 + timedelta(minutes=11 * i)
        fact = shrunk("a", now, f"workers from {i + 2} to {i + 1}")
        record([fact], api, written, now, "r", TokenBucket(0, 1), correlator=correlator)
    assert len(api.events) == 12
    assert not any(e["note"].startswith(COMBINED) for e in api.events.values())


def test_a_folded_or_dropped_fact_is_not_emitted_again_when_its_object_changes() -> None:
    """The watch hands on an object at each change, and each time its facts are derived
    again: what was folded or dropped stays so, and costs no write and no token."""
    api, written, correlator = Events(), Written(timedelta(hours=1)), Correlator()
    now = T0 + timedelta(minutes=1)
    facts = [
        shrunk("a", T0 + timedelta(seconds=s), f"workers from {s + 2} to {s + 1}")
        for s in range(40)
    ]
    first = record(facts, api, written, now, "r", TokenBucket(0, 1), correlator=correlator)
    assert (first.created, first.folded, first.dropped) == (10, 16, 15)
    writes = api.writes
    again = record(facts, api, written, now, "r", TokenBucket(0, 1), correlator=correlator)
    assert again == Tally() and api.writes == writes


def test_a_restarted_recorder_counts_on_in_the_aggregate_event_it_finds() -> None:
    api, written = Events(), Written(timedelta(hours=1))
    facts = [
        shrunk("a", T0 + timedelta(seconds=s), f"workers from {s + 2} to {s + 1}")
        for s in range(12)
    ]
    record(
        facts,
        api,
        written,
        T0 + timedelta(seconds=12),
        "r",
        TokenBucket(0, 1),
        correlator=Correlator(),
    )
    [aggregate] = [e for e in api.events.values() if e["note"].startswith(COMBINED)]
    assert aggregate["series"]["count"] == 3  # the 10th, 11th and 12th
    # A new process: it lists its Events; its correlator starts empty (client-go's too).
    later = T0 + timedelta(seconds=20)
    again = Written(timedelta(hours=1))
    again.load(api.list_ours(), later)
    more = [
        shrunk("a", T0 + timedelta(seconds=s), f"workers from {s + 2} to {s + 1}")
        for s in range(12, 22)
    ]
    tally = record(
        [*facts, *more], api, again, later, "r", TokenBucket(0, 1), correlator=Correlator()
    )
    # What was written is not written again; the new facts' tenth similar one in this
    # process is counted on in the aggregate Event found by its name.
    names = [e["metadata"]["name"] for e in api.events.values()]
    assert len(names) == len(set(names))
    assert [e for e in api.events.values() if e["note"].startswith(COMBINED)] == [aggregate]
    assert aggregate["series"]["count"] == 4 and tally.folded == 1
