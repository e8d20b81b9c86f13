"""Shrink (policy/pool/shrink.py): make room for the first job that waits.

Each row: a node full of one running job's pods, a queued job, and the workers a shrink
takes (worked out by hand): never below ``min-instances``, never a parameter server or the
chief (worker 0 of a job without a Chief); lonely workers first, then the highest index;
equal priority only once the waiting job starves (DRAGON), borrowed workers at once
(Dragonet's ``Behaviour.RECLAIM_BORROWED``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policy.pool.queue import enqueue_time
from policy.pool.shrink import Reserved, Unresolvable, make_room
from tests.poolbuilder import PoolBuilder

STARVING = "2026-11-21T09:59:00Z"  # two minutes before the tests' now: past 30 s
FRESH = "2026-11-21T10:00:50Z"  # ten seconds before it


@dataclass(frozen=True)
class Row:
    name: str
    policy: str
    where: tuple[str, ...]  # the running job's pods
    workers: int  # its Worker.replicas
    low: int  # its min-instances
    queued_at: str
    taken: tuple[str, ...]  # expected victims' pod names, in the order taken
    target: int | None = None  # the running job's new worker target
    why: str = ""  # what the running job's status says of the waiting job


ROWS = [
    Row(
        "a starving job takes the highest indices, never the chief",
        "dragon",
        ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"),
        3,
        1,
        STARVING,
        ("r-worker-2", "r-worker-1"),
        1,
        "to make room for default/q, which waited 120 s",
    ),
    Row(
        "lonely workers (off the parameter server's node) go first",
        "dragon",
        ("PS-0@a", "Worker-0@a", "Worker-1@b", "Worker-2@a"),
        3,
        1,
        STARVING,
        ("r-worker-1",),
        2,
    ),
    Row(
        "a job that has not starved yet takes nothing from a job of its priority",
        "dragon",
        ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"),
        3,
        1,
        FRESH,
        (),
    ),
    Row(
        "never below min-instances",
        "dragon",
        ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"),
        3,
        3,
        STARVING,
        (),
    ),
    Row(
        "dragonet takes borrowed workers (above Worker.replicas) at once",
        "dragonet",
        ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"),
        1,
        1,
        FRESH,
        ("r-worker-2", "r-worker-1"),
        1,
        # not "higher priority": both jobs have priority 0
        "which needs the workers borrowed beyond Worker.replicas (1)",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_make_room(row: Row) -> None:
    b = PoolBuilder(policy=row.policy).node("a", 4)
    if any(w.endswith("@b") for w in row.where):
        b.node("b", 1)
    b.running("r", row.where, ps=1, workers=row.workers, low=row.low, high=3)
    b.queued("q", workers=2, low=2, created=row.queued_at)
    view = b.view()
    q = view.job("q")
    room = make_room(view.ledger, q, 0, enqueue_time(q, view.now), view.running)
    taken = tuple(p.name for p in view.ledger.victims.get("default/r", ()))
    if not row.taken:
        assert isinstance(room, Unresolvable), room
        assert taken == ()
        return
    assert isinstance(room, Reserved), room
    assert taken == row.taken
    assert view.ledger.scales["default/r"].after == row.target
    assert row.why in view.ledger.scales["default/r"].reason
    assert "default/r" in room.explain()  # says whose workers it waits for


def test_the_room_a_shrink_makes_is_kept_from_younger_jobs() -> None:
    b = PoolBuilder(policy="dragon").node("a", 4)
    b.running("r", ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"), ps=1, workers=3, low=1)
    view = b.queued("q", workers=2, low=2, created=STARVING).view()
    q = view.job("q")
    assert isinstance(
        make_room(view.ledger, q, 0, enqueue_time(q, view.now), view.running), Reserved
    )
    assert view.ledger.free["a"]["cpu"] == 0  # the two cpus freeing are q's, nobody else's
