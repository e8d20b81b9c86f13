"""A pool with ``decisionIntervalSeconds`` decides at most once per tick of the interval, as
Pollux's simulator re-allocates every 60 s: an event between ticks waits for the next one,
and a sync that comes later than its tick still decides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policy.model.pool import pool_object
from policy.pool.cadence import Cadence, due, next_tick, tick_from
from sim.engine import SimConfig, Simulation
from tests import metacontroller as mc
from tests.conftest import NOW, Clock, Hook
from tests.simkit import first_create, job
from tests.test_preemption import ADMISSIONS, _world

MINUTE = timedelta(seconds=60)
TICK = datetime(2026, 11, 21, 10, 1, 0, tzinfo=UTC)  # a multiple of 60 s since the epoch


def _at(seconds: float) -> datetime:
    return TICK + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("decided", "deferred", "now", "expected"),
    [
        (None, None, 17, True),  # a new pool decides at once
        (0, None, 0, False),  # never twice in one tick
        (0, None, 59, False),
        (0, None, 60, True),  # at the next tick
        (0, None, 75, False),  # an event between ticks waits for the next one
        (0, 75, 75, False),
        (0, 75, 119, False),
        (0, 75, 120, True),
        (0, 75, 131, True),  # a sync later than the tick it was deferred to still decides
        (60, 75, 131, True),
        (60, 30, 131, False),  # a deferral older than the last decision was decided
        (0, 30, 75, True),  # deferred within the tick it was decided in, to the next
        (300, None, 75, True),  # a decision in the future (the clock was set back)
    ],
)
def test_a_decision_is_due_at_each_tick_and_after_a_deferred_one(
    decided: float | None, deferred: float | None, now: float, expected: bool
) -> None:
    cadence = Cadence(
        _at(decided) if decided is not None else None,
        _at(deferred) if deferred is not None else None,
    )
    assert due(cadence, _at(now), MINUTE) is expected
    assert due(cadence, _at(now), timedelta(0))  # no interval: at every event


def test_the_next_tick_is_the_next_multiple_of_the_interval() -> None:
    assert next_tick(_at(0), MINUTE) == _at(60)
    assert next_tick(_at(59), MINUTE) == _at(60)
    assert next_tick(_at(61), timedelta(seconds=300)) == TICK + timedelta(seconds=240)
    assert tick_from(_at(60), MINUTE) == _at(60)  # a wake at a tick is that tick
    assert tick_from(_at(61), MINUTE) == _at(120)


def _request(hook: Hook, w: mc.World, status: dict[str, Any]) -> dict[str, Any]:
    parent = {**hook.pool, "status": status}
    return mc.pool_request(w, hook.admissions.values(), parent)


def test_a_job_submitted_between_ticks_is_admitted_at_the_next_tick() -> None:
    """Through the webhook: "a" is admitted at a tick; "b", submitted 10 s later into free
    room, gets no Admission until the next tick (the answer keeps "a"'s as observed and asks
    to be synced at the tick); at the tick it is admitted."""
    assert NOW == TICK
    clock = Clock(NOW)
    hook = Hook(clock=clock, pool=mc.pool(decisionIntervalSeconds=60))
    nodes = [mc.node("n1", cpu="8", memory="64Gi")]
    a = mc.tfjob(_tfjob("a"), created="2026-11-21T10:00:30Z")
    b = mc.tfjob(_tfjob("b"), created="2026-11-21T10:01:10Z")

    first = hook.pool_sync(_request(hook, mc.world(a, nodes, jobs=[a]), {}))
    assert first["status"]["decidedAt"] == "2026-11-21T10:01:00Z"
    assert [c["spec"]["phase"] for c in first["children"]] == ["Admitted"]

    clock.advance(10)
    held = hook.pool_sync(_request(hook, mc.world(a, nodes, jobs=[a, b]), first["status"]))
    assert [c["spec"]["job"]["name"] for c in held["children"]] == ["a"]
    assert held["children"][0]["spec"] == first["children"][0]["spec"]
    assert held["status"]["decidedAt"] == "2026-11-21T10:01:00Z"
    assert held["status"]["deferredSince"] == "2026-11-21T10:01:10Z"
    assert held["resyncAfterSeconds"] == 50

    clock.advance(50)
    tick = hook.pool_sync(_request(hook, mc.world(a, nodes, jobs=[a, b]), held["status"]))
    phases = {c["spec"]["job"]["name"]: c["spec"]["phase"] for c in tick["children"]}
    assert phases == {"a": "Admitted", "b": "Admitted"}
    assert tick["status"]["decidedAt"] == "2026-11-21T10:02:00Z"


def test_without_an_interval_the_status_says_nothing_of_decisions() -> None:
    hook = Hook()
    nodes = [mc.node("n1", cpu="8", memory="64Gi")]
    a = mc.tfjob(_tfjob("a"))
    body = hook.pool_sync(_request(hook, mc.world(a, nodes, jobs=[a]), {}))
    assert "decidedAt" not in body["status"]
    assert "deferredSince" not in body["status"]


def _tfjob(name: str) -> dict[str, Any]:
    worker = {"containers": [{"name": "tensorflow", "image": "tf", "resources": {}}]}
    for c in worker["containers"]:
        c["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": worker}}}},
    }


def _run(interval: float) -> tuple[Simulation, list[float]]:
    """Two jobs on one 4-GPU node, the second submitted 10 s after the first; the times at
    which any Admission was written."""
    jobs = [job("a", 2, steps=400.0), job("b", 2, arrival=10.0, steps=400.0)]
    pool = pool_object("default", decisionIntervalSeconds=interval)
    sim = Simulation(_world(jobs, pool, gpus_nodes=1), SimConfig().cost_free())
    written: list[float] = []
    sim.api.watchers.append(lambda t, old, new: written.append(sim.now) if t == ADMISSIONS else 0)
    sim.run()
    return sim, written


def test_in_the_simulator_the_pool_decides_only_at_ticks() -> None:
    sim, written = _run(60.0)
    assert written and all(t % 60 < 1.0 for t in written)  # (the hook's own time after it)
    created = first_create(sim, "default/b")
    assert created is not None and 60.0 <= created < 70.0

    at_once, _ = _run(0.0)
    created = first_create(at_once, "default/b")
    assert created is not None and created < 20.0
