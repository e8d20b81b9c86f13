"""Preempt (policy/pool/preempt.py): whole running jobs of lower priority go back to the
queue when no shrink makes room for a waiting job.

Each row: running jobs (priority class, workers, all on one full node), a waiting job,
and the jobs preempted for it, worked out by hand: only jobs of lower priority; the
fewest that make its gang fit (a victim whose room it does not need is spared)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policy.model.admission import WAITING_FOR_PREEMPTION
from policy.pool.preempt import Preempted, preempt
from policy.pool.queue import priority
from tests.poolbuilder import PoolBuilder


@dataclass(frozen=True)
class Row:
    name: str
    running: tuple[tuple[str, str, int], ...]  # (job, priority class, workers)
    waiting: tuple[str, int]  # (priority class, workers)
    preempted: tuple[str, ...]  # expected


ROWS = [
    Row(
        "a job of lower priority is preempted for a higher one",
        (("r1", "low", 2), ("r2", "high", 2)),
        ("high", 2),
        ("default/r1",),
    ),
    Row(
        "a job of equal priority is never preempted",
        (("r1", "low", 2), ("r2", "high", 2)),
        ("low", 2),
        (),
    ),
    Row(
        "the fewest victims: a job whose room the waiting gang does not need is spared",
        (("r1", "low", 1), ("r3", "low", 3)),
        ("high", 3),
        ("default/r3",),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_preempt(row: Row) -> None:
    b = PoolBuilder().node("a", 4).priority_class("low", 10).priority_class("high", 1000)
    for name, klass, n in row.running:
        where = tuple(f"Worker-{i}@a" for i in range(n))
        b.running(name, where, priority_class=klass)
    b.queued("q", workers=row.waiting[1], priority_class=row.waiting[0])
    view = b.view()
    q = view.job("q")
    got = preempt(view.ledger, q, priority(q, view.priorities), 0, view.running, [])
    if not row.preempted:
        assert got is None
        assert not view.ledger.preempted
        return
    assert isinstance(got, Preempted) and got.reason == WAITING_FOR_PREEMPTION
    assert got.victims == row.preempted
    for key in row.preempted:
        stopped = view.ledger.preempted[key]
        assert stopped.by == "default/q"
        assert stopped.reason == "default/q has higher priority (1000 > 10)"
