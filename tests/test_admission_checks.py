"""The admission checks (policy/pool/admission_checks.py): each queued job meets the pool's
rules in one order, and each rule says its own reason code and words.

Each row: a small pool, one queued job, and which check decides for it (by the reason code
only that check gives), with a phrase of its words worked out from the rule. A row runs the
whole list, so it also pins that no earlier check decides first. The last test registers a
new rule in one place (the list) and finds it in the job's Admission."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from policy.model.admission import (
    BLOCKED_BEHIND_HEAD,
    NO_SHRINK_HELPS,
    POOL_HELD,
    PREEMPTED,
    TOO_LARGE,
    WAITING_FOR_CAPACITY,
    WAITING_FOR_PREEMPTION,
    WAITING_FOR_SHRINK,
)
from policy.model.timeutil import parse_time
from policy.pool import admission_checks
from policy.pool.admission_checks import CHECKS
from policy.pool.checks import Admit, Check, QueueCycle, Turn, Wait, run
from policy.pool.sync import sync
from tests.conftest import NOW
from tests.poolbuilder import PoolBuilder, nodes_of

FRESH = "2026-11-21T10:00:50Z"  # ten seconds before the tests' now: not starving (30 s)


def _fresh_pool() -> PoolBuilder:
    """A node full of a job that may not shrink, and a job that has waited 10 s."""
    b = PoolBuilder().node("a", 4)
    b.running("r", ("Worker-0@a", "Worker-1@a", "Worker-2@a", "Worker-3@a"), low=4)
    return b.queued("q", workers=2, created=FRESH)


def _blocked_pool() -> PoolBuilder:
    """DRAGON: a starving head h no shrink helps (r may not shrink), and q behind it,
    which would fit on b."""
    b = PoolBuilder(policy="dragon").node("a", 4).node("b", 1)
    b.running("r", ("Worker-0@a", "Worker-1@a", "Worker-2@a", "Worker-3@a"), low=4)
    return b.queued("h", workers=2).queued("q", workers=1)


def _shrinkable(low: int) -> PoolBuilder:
    """DRAGON: a node full of r (a PS and 3 workers, ``low`` of them at least)."""
    b = PoolBuilder(policy="dragon").node("a", 4)
    b.running("r", ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"), ps=1, low=low)
    return b


def _high_priority_waits() -> PoolBuilder:
    b = PoolBuilder().priority_class("high", 1000).node("a", 4)
    b.running("r", ("Worker-0@a", "Worker-1@a", "Worker-2@a", "Worker-3@a"), low=4)
    return b.queued("q", workers=2, priority_class="high")


@dataclass(frozen=True)
class Row:
    name: str
    pool: Callable[[], PoolBuilder]
    check: str  # the check whose reason the job waits with ("": admitted)
    reason: str = ""
    says: str = ""  # a phrase of its words
    stopping: bool = False  # the job was preempted and its pods still terminate
    job: str = "q"
    placed: dict[str, str | None] = field(default_factory=dict)  # if admitted


ROWS = [
    Row(
        "a preempted job whose pods still terminate waits for them, though its gang fits",
        lambda: PoolBuilder().node("a", 8).queued("q", workers=2),
        "Stopping",
        PREEMPTED,
        "preempted: waiting for its pods to terminate before it queues again as a whole",
        stopping=True,
    ),
    Row(
        "a held pool admits nothing, though the gang fits",
        lambda: PoolBuilder(pool_spec={"stopPolicy": "Hold"}).node("a", 8).queued("q"),
        "PoolHeld",
        POOL_HELD,
        "TrainingPool default is held (spec.stopPolicy: Hold), so it admits no job",
    ),
    Row(
        "dragon admits no one behind a starving head nothing can help, though it fits",
        _blocked_pool,
        "BehindHead",
        BLOCKED_BEHIND_HEAD,
        "waiting behind default/h, which has waited longest",
    ),
    Row(
        "a gang that fits is admitted whole",
        lambda: PoolBuilder().node("a", 8).queued("q", ps=1, workers=2),
        "GangFits",
        placed={"PS-0": "a", "Worker-0": "a", "Worker-1": "a"},
    ),
    Row(
        "a gang larger than the empty pool is too large",
        lambda: PoolBuilder().node("a", 2).queued("q", workers=3),
        "GangFits",
        TOO_LARGE,
        "more than the pool's nodes hold even when empty",
    ),
    Row(
        "a gang that fits the empty pool waits for capacity running jobs hold",
        _fresh_pool,
        "GangFits",
        WAITING_FOR_CAPACITY,
        "more than is free now",
    ),
    Row(
        "a starving job shrinks a running job of its priority and waits for its workers",
        lambda: _shrinkable(low=1).queued("q", workers=2),
        "MakeRoom",
        WAITING_FOR_SHRINK,
        "waiting for 2 workers of default/r to terminate",
    ),
    Row(
        "a starving job no shrink it may cause helps says so",
        lambda: _shrinkable(low=2).queued("q", workers=3),
        "MakeRoom",
        NO_SHRINK_HELPS,
        "no shrink of the running jobs it may shrink would make room either",
    ),
    Row(
        "a job of higher priority no shrink helps preempts a whole running job",
        _high_priority_waits,
        "Preempt",
        WAITING_FOR_PREEMPTION,
        "waiting for 4 workers of default/r to terminate",
    ),
]


def _outcome(b: PoolBuilder, name: str, stopping: bool = False) -> Admit | Wait:
    """The check list's outcome for queued job ``name``, after the jobs queued before it."""
    view = b.view()
    cycle = QueueCycle(view.ledger, view.running, view.priorities, "default", [])
    for q in view.assessed.queued:
        turn = Turn(q.job, NOW, view.rules.starvation, q.queue, stopping and q.job.name == name)
        got = run(CHECKS, turn, cycle)
        if q.job.name == name:
            return got
    raise AssertionError(f"{name} is not queued")


def _check(name: str) -> Check:
    return next(c for c in CHECKS if c.name == name)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_each_check_says_its_reason_in_its_words(row: Row) -> None:
    got = _outcome(row.pool(), row.job, row.stopping)
    if not row.reason:
        assert isinstance(got, Admit), got
        assert nodes_of(got.placed) == row.placed
        return
    assert isinstance(got, Wait), got
    assert got.reason == row.reason
    assert got.reason in _check(row.check).reasons
    assert row.says in got.explain()


def test_the_checks_run_in_this_order() -> None:
    assert [c.name for c in CHECKS] == [
        "Stopping",
        "PoolHeld",
        "BehindHead",
        "GangFits",
        "MakeRoom",
        "Preempt",
        "StarvationWake",
        "UnknownPriorityClass",
    ]


def test_each_reason_code_belongs_to_one_check() -> None:
    codes = [code for c in CHECKS for code in c.reasons]
    assert len(codes) == len(set(codes))


def test_a_job_that_does_not_starve_yet_is_planned_again_when_it_will() -> None:
    got = _outcome(_fresh_pool(), "q")
    assert isinstance(got, Wait) and got.reason == WAITING_FOR_CAPACITY
    assert got.wake_at == parse_time(FRESH) + timedelta(seconds=30)


def test_a_starving_job_has_no_starvation_wake() -> None:
    b = PoolBuilder().node("a", 4)
    b.running("r", ("Worker-0@a", "Worker-1@a", "Worker-2@a", "Worker-3@a"), low=4)
    got = _outcome(b.queued("q", workers=2), "q")
    assert isinstance(got, Wait) and got.wake_at is None


def test_a_job_of_an_unknown_priority_class_is_told_after_its_reason() -> None:
    b = PoolBuilder().node("a", 2).queued("q", workers=3, priority_class="gold")
    got = _outcome(b, "q")
    assert isinstance(got, Wait) and got.reason == TOO_LARGE
    words = got.explain()
    assert "more than the pool's nodes hold even when empty" in words
    assert words.endswith(
        "PriorityClass 'gold' does not exist, so the job is queued with the default priority 0"
    )


def test_a_final_wait_ends_the_turn() -> None:
    """Behind a final wait no later check runs: a held pool's job gets no starvation wake
    and no note of its unknown PriorityClass."""
    b = PoolBuilder(pool_spec={"stopPolicy": "Hold"}).node("a", 1)
    got = _outcome(b.queued("q", workers=3, priority_class="gold", created=FRESH), "q")
    assert isinstance(got, Wait) and got.reason == POOL_HELD and got.final
    assert got.wake_at is None and "gold" not in got.explain()


def _over_quota(turn: Turn, cycle: QueueCycle) -> Wait | None:
    if turn.job.name.startswith("big"):
        return Wait("OverQuota", lambda: "its namespace has used its quota", final=True)
    return None


def test_a_new_check_registered_in_the_list_decides_in_the_pools_answer(monkeypatch) -> None:
    """A new rule is a check and its place in ``CHECKS``: nothing else changes for the
    pool's sync to answer it, reason and words, in the job's Admission."""
    quota = Check("Quota", ("OverQuota",), _over_quota)
    position = [c.name for c in CHECKS].index("GangFits")
    monkeypatch.setattr(admission_checks, "CHECKS", (*CHECKS[:position], quota, *CHECKS[position:]))
    request = PoolBuilder().node("a", 8).queued("big-q").queued("small-q").request()
    answer = sync(request["parent"], request["children"], request["related"], NOW)
    specs = {a["metadata"]["name"]: a["spec"] for a in answer.children}
    assert specs["tfjob-big-q"]["phase"] == "Queued"
    assert specs["tfjob-big-q"]["reason"] == "OverQuota"
    assert specs["tfjob-big-q"]["message"] == "waiting: its namespace has used its quota"
    assert specs["tfjob-small-q"]["phase"] == "Admitted"
