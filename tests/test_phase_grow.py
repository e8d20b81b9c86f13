"""Grow (policy/pool/grow.py): running jobs take idle room toward ``max-instances``.

Two running jobs, each with a parameter server and one worker, on nodes with some room
left; the new workers each policy's strategy (``Rules.grow``) gives them, worked out by
hand: DRAGON grows the job that started first to its maximum (next to its parameter
server, then wherever room is), then the next; Dragonet adds one worker at a time to the
job whose speed grows most (a worker off its parameter server's node counts ``REMOTE``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policy.pool.grow import grow
from tests.poolbuilder import PoolBuilder, nodes_of


@dataclass(frozen=True)
class Row:
    name: str
    policy: str
    grown: dict[str, dict[str, str | None]]  # job -> new worker -> node
    high: int = 3  # max-instances of both jobs


ROWS = [
    Row(
        "dragon grows the oldest job to its maximum first, spilling off its PS node",
        "dragon",
        {"r1": {"Worker-1": "a", "Worker-2": "b"}, "r2": {"Worker-1": "b"}},
    ),
    Row(
        "dragonet adds each worker where it speeds a job up most",
        "dragonet",
        {"r1": {"Worker-1": "a"}, "r2": {"Worker-1": "b", "Worker-2": "b"}},
    ),
    Row("a job at max-instances does not grow", "dragonet", {}, high=1),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_grow(row: Row) -> None:
    b = PoolBuilder(policy=row.policy).node("a", 3).node("b", 4)
    b.running("r1", ("PS-0@a", "Worker-0@a"), ps=1, high=row.high)
    b.running("r2", ("PS-0@b", "Worker-0@b"), ps=1, high=row.high, started="2026-11-21T09:30:00Z")
    view = b.view()
    grown = grow(view.ledger, view.running)
    assert {k.split("/")[1]: nodes_of(v) for k, v in grown.items()} == row.grown


def test_growth_takes_the_room_it_gives() -> None:
    b = PoolBuilder(policy="dragon").node("a", 3).node("b", 4)
    b.running("r1", ("PS-0@a", "Worker-0@a"), ps=1, high=3)
    b.running("r2", ("PS-0@b", "Worker-0@b"), ps=1, high=3, started="2026-11-21T09:30:00Z")
    view = b.view()
    grow(view.ledger, view.running)
    assert view.ledger.free["a"]["cpu"] == 0 and view.ledger.free["b"]["cpu"] == 0
    assert view.ledger.claimed_by == ("default/r1", "default/r2")
    assert grow(view.ledger, view.running) == {}  # nothing left to grow into
