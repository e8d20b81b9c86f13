"""Admit (policy/pool/admit.py): a queued job's whole gang, or nothing, and why.

Each row: a small pool, what runs in it, one queued job, and the outcome worked out by hand
from the rule: the whole gang on the tightest node that holds it, else spilled from the
node that holds most of it (parameter servers first); at least ``min-instances`` workers,
then as many as fit; the policy's own placement (static sizes, binpacking, none)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from policy.model.admission import TOO_LARGE, WAITING_FOR_CAPACITY
from policy.pool.admit import Admitted, Waits, admit
from tests.poolbuilder import PoolBuilder, nodes_of


@dataclass(frozen=True)
class Row:
    name: str
    nodes: tuple[tuple[str, int], ...]  # (name, cpus)
    job: dict  # the queued job's shape: ps, workers, low, high, cpu
    policy: str = "dragonet"
    running: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (job, where its pods are)
    placed: dict[str, str | None] = field(default_factory=dict)  # expected, if admitted
    workers: int = 0
    waits: str = ""  # expected reason code, if it waits
    running_on_host: bool = False  # the running jobs' pods on the host network (port 2222)
    says: str = ""  # a phrase the waiting job's message holds


ROWS = [
    Row(
        "the whole job goes to the tightest node that holds it",
        (("big", 16), ("small", 4)),
        {"ps": 1, "workers": 2},
        placed={"PS-0": "small", "Worker-0": "small", "Worker-1": "small"},
        workers=2,
    ),
    Row(
        "a job no node holds spills from the node that holds most, PS first",
        (("a", 2), ("b", 3)),
        {"ps": 1, "workers": 3, "low": 1},
        placed={"PS-0": "b", "Worker-0": "b", "Worker-1": "b", "Worker-2": "a"},
        workers=3,
    ),
    Row(
        "an elastic job is admitted with the workers that fit, at least min-instances",
        (("a", 3),),
        {"ps": 1, "workers": 4, "low": 1},
        placed={"PS-0": "a", "Worker-0": "a", "Worker-1": "a"},
        workers=2,
    ),
    Row(
        "fewer than min-instances workers fit: the job waits for capacity held by others",
        (("a", 4),),
        {"ps": 1, "workers": 3, "low": 3},
        running=(("r", ("Worker-0@a", "Worker-1@a")),),
        waits=WAITING_FOR_CAPACITY,
    ),
    Row(
        "a gang larger than the empty pool is too large",
        (("a", 2), ("b", 2)),
        {"ps": 1, "workers": 4, "low": 4},
        waits=TOO_LARGE,
    ),
    Row(
        "a pod larger than every node is too large, though the pool's total holds it",
        (("a", 2), ("b", 2)),
        {"workers": 1, "cpu": "3"},
        waits=TOO_LARGE,
    ),
    Row(
        "a static-size policy (tiresias) admits every worker or none",
        (("a", 6),),
        {"ps": 1, "workers": 4, "low": 1},
        policy="tiresias",
        running=(("r", ("Worker-0@a", "Worker-1@a")),),
        waits=WAITING_FOR_CAPACITY,
        # its message names the gang the policy admits (all 4 workers), not min-instances
        says="1 parameter server plus 4 workers at once",
    ),
    Row(
        "a static-size policy (gang-fifo): every worker larger than the empty pool is too large",
        (("a", 4),),
        {"ps": 1, "workers": 4, "low": 1},
        policy="gang-fifo",
        waits=TOO_LARGE,
        says="1 parameter server plus 4 workers at once, more than the pool's nodes hold",
    ),
    Row(
        "... where an elastic policy admits the same job with the workers that fit",
        (("a", 6),),
        {"ps": 1, "workers": 4, "low": 1},
        running=(("r", ("Worker-0@a", "Worker-1@a")),),
        placed={"PS-0": "a", "Worker-0": "a", "Worker-1": "a", "Worker-2": "a"},
        workers=3,
    ),
    Row(
        "gang-fifo binpacks each pod on the fullest node that takes it",
        (("a", 8), ("b", 4)),
        {"ps": 1, "workers": 2},
        policy="gang-fifo",
        running=(("r", ("Worker-0@b", "Worker-1@b")),),
        placed={"PS-0": "b", "Worker-0": "b", "Worker-1": "a"},
        workers=2,
    ),
    Row(
        "... where dragonet keeps the same gang together on the node that holds it whole",
        (("a", 8), ("b", 4)),
        {"ps": 1, "workers": 2},
        running=(("r", ("Worker-0@b", "Worker-1@b")),),
        placed={"PS-0": "a", "Worker-0": "a", "Worker-1": "a"},
        workers=2,
    ),
    Row(
        "kube-default admits everything unplaced: the kube-scheduler places each pod",
        (("a", 1),),
        {"ps": 1, "workers": 3},
        policy="kube-default",
        placed={"PS-0": None, "Worker-0": None, "Worker-1": None, "Worker-2": None},
        workers=3,
    ),
    # Host ports (kube-scheduler's NodePorts): a node has each port once.
    Row(
        "on the host network each pod takes port 2222: one pod per node, though one holds all",
        (("a", 16), ("b", 16), ("c", 16)),
        {"ps": 1, "workers": 2, "host_network": True},
        placed={"PS-0": "a", "Worker-0": "b", "Worker-1": "c"},
        workers=2,
    ),
    Row(
        "... an elastic one gets as many workers as nodes with the port free",
        (("a", 16), ("b", 16), ("c", 16)),
        {"ps": 1, "workers": 4, "low": 1, "host_network": True},
        placed={"PS-0": "a", "Worker-0": "b", "Worker-1": "c"},
        workers=2,
    ),
    Row(
        "... a node whose running pod holds the port takes none: the gang waits for it",
        (("a", 16), ("b", 16), ("c", 16)),
        {"ps": 1, "workers": 2, "host_network": True},
        running=(("r", ("Worker-0@a",)),),
        running_on_host=True,
        waits=WAITING_FOR_CAPACITY,
        says="3 x host port TCP/2222",
    ),
    Row(
        "... the same running pod off the host network leaves the port free",
        (("a", 16), ("b", 16), ("c", 16)),
        {"ps": 1, "workers": 2, "host_network": True},
        running=(("r", ("Worker-0@a",)),),
        placed={"PS-0": "a", "Worker-0": "b", "Worker-1": "c"},
        workers=2,
    ),
    Row(
        "... more such pods than nodes: too large, and the message says why",
        (("a", 16), ("b", 16)),
        {"ps": 1, "workers": 2, "host_network": True},
        waits=TOO_LARGE,
        says="one such pod per node",
    ),
    Row(
        "... a job off the host network beside a host-network one shares its node",
        (("a", 16),),
        {"ps": 1, "workers": 2},
        running=(("r", ("Worker-0@a",)),),
        running_on_host=True,
        placed={"PS-0": "a", "Worker-0": "a", "Worker-1": "a"},
        workers=2,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_admit(row: Row) -> None:
    b = PoolBuilder(policy=row.policy)
    for name, cpus in row.nodes:
        b.node(name, cpus)
    for name, where in row.running:
        b.running(name, where, host_network=row.running_on_host)
    b.queued("q", **row.job)
    view = b.view()
    decided = admit(view.ledger, view.job("q"))
    if row.waits:
        assert isinstance(decided, Waits), decided
        assert decided.reason == row.waits
        assert row.says in decided.explain()
        assert "q" not in view.ledger.claimed_by
    else:
        assert isinstance(decided, Admitted), decided
        assert nodes_of(decided.placed) == row.placed
        assert decided.workers == row.workers


def test_an_admitted_gang_takes_its_room_from_the_ledger() -> None:
    view = PoolBuilder().node("a", 4).queued("q", ps=1, workers=2).queued("r", workers=2).view()
    first = admit(view.ledger, view.job("q"))
    assert isinstance(first, Admitted)
    assert view.ledger.claimed_by == ("default/q",)
    second = admit(view.ledger, view.job("r"))  # 1 cpu left: r's 2 workers do not fit
    assert isinstance(second, Waits) and second.reason == WAITING_FOR_CAPACITY
