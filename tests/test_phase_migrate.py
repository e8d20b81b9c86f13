"""Migrate (policy/pool/migrate.py): the pool's answer to a Migration request.

Each row: one running job (a parameter server on ``a``, worker 0 there too, worker 1 on
``b``), a request to move one of its pods, and the answer, worked out by hand: only a
running worker moves, never the chief (worker 0 of a job without a Chief), never to a node
without room; the worker goes to the node where it runs fastest (its parameter server's),
make-before-break under a new pod name; a pool with migration off refuses."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policy.model.migration import (
    DISABLED,
    IS_CHIEF,
    MOVING,
    NO_ROOM,
    NOT_A_WORKER,
    PLANNED,
    REFUSED,
    MigrationRequest,
)
from policy.pool.migrate import Move, migrate
from tests.poolbuilder import PoolBuilder


@dataclass(frozen=True)
class Row:
    name: str
    pod: str
    node: str
    phase: str
    reason: str
    a_cpus: int = 8
    enabled: bool = True
    move: Move | None = None


ROWS = [
    Row(
        "a lonely worker moves to its parameter server's node, under a new name",
        "r-worker-1",
        "b",
        MOVING,
        PLANNED,
        move=Move("b", "a", "r-worker-1-m1"),
    ),
    Row("the chief never moves", "r-worker-0", "a", REFUSED, IS_CHIEF),
    Row("a parameter server never moves", "r-ps-0", "a", REFUSED, NOT_A_WORKER),
    Row("no other node has room: refused", "r-worker-1", "b", REFUSED, NO_ROOM, a_cpus=2),
    Row("migration off: refused", "r-worker-1", "b", REFUSED, DISABLED, enabled=False),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_migrate(row: Row) -> None:
    b = PoolBuilder(pool_spec={"migration": {"enabled": row.enabled}})
    b.node("a", row.a_cpus).node("b", 1)
    b.running("r", ("PS-0@a", "Worker-0@a", "Worker-1@b"), ps=1)
    view = b.view()
    asked = MigrationRequest(
        "default", row.pod, "u-1", "2026-11-21T10:00:30Z", row.pod, row.node, "Manual"
    )
    moves = migrate(
        view.ledger, view.running, {"default/r": [asked]}, view.rules.migration, view.now
    )
    (decision,) = moves["default/r"].decisions
    assert (decision.phase, decision.reason) == (row.phase, row.reason)
    moving = dict(moves["default/r"].moving)
    if row.move is None:
        assert moving == {}
        return
    assert moving == {("Worker", 1): row.move}
    assert decision.target == row.move.target and decision.move == 1
    assert view.ledger.claimed_by == ("default/r",)  # the target's room is taken
