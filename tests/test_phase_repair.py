"""Repair (policy/pool/repair.py): an admitted job's missing pods claim room first.

Each row: a running job that lacks a pod, and what repair does (by hand): a missing
parameter server or a worker below ``min-instances`` is placed now, next to the job's
parameter servers and then its other pods; a lost worker above ``min-instances`` waits
for the top-up after admissions; a pod that finds no room is said to wait."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from policy.pool.repair import repair
from tests.poolbuilder import PoolBuilder, nodes_of


@dataclass(frozen=True)
class Row:
    name: str
    where: tuple[str, ...]
    workers: int
    low: int
    target: int | None = None
    b_cpus: int = 4
    placed: dict[str, str | None] = field(default_factory=dict)
    top_up: tuple[str, ...] = ()
    unplaced: tuple[str, ...] = ()


ROWS = [
    Row(
        "a missing parameter server goes next to the job's workers",
        ("Worker-0@b", "Worker-1@b"),
        2,
        1,
        placed={"PS-0": "b"},
    ),
    Row(
        "a worker below min-instances is placed now, next to the parameter server",
        ("PS-0@b", "Worker-0@b", "Worker-1@b"),
        3,
        3,
        placed={"Worker-2": "b"},
    ),
    Row(
        "a lost worker above min-instances waits for the top-up",
        ("PS-0@b", "Worker-0@b", "Worker-1@b"),
        3,
        1,
        target=3,
        top_up=("Worker-2",),
    ),
    Row(
        "a missing pod with no room anywhere waits, and says so",
        ("Worker-0@b", "Worker-1@b"),
        2,
        1,
        b_cpus=2,
        unplaced=("PS-0",),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_repair(row: Row) -> None:
    b = PoolBuilder().node("a", 2).node("b", row.b_cpus)
    if row.b_cpus <= 2:
        b.running("other", ("Worker-0@a", "Worker-1@a"))  # a is full too
    b.running("r", row.where, ps=1, workers=row.workers, low=row.low, high=3, target=row.target)
    view = b.view()
    fixed = repair(view.ledger, view.run("r"))
    assert nodes_of(fixed.placed) == row.placed
    assert tuple(f"{s.type}-{s.index}" for s in fixed.top_up) == row.top_up
    assert tuple(f"{s.type}-{s.index}" for s in fixed.unplaced) == row.unplaced
