"""Stop (policy/pool/stop.py): a pool's ``spec.stopPolicy``, Kueue's ClusterQueue rule.

Each row: one pool (node ``a``, 8 cpu) with an elastic job ``r`` running 2 of up to 4
workers and a job ``q`` of one worker waiting, planned under one stop policy, and what
each job gets, worked out from the rule: None admits ``q`` and lets ``r`` grow into the
idle room; Hold admits nothing and grows nobody, while ``r`` keeps its two workers;
HoldAndDrain also preempts ``r``, which queues again as a whole gang. The pool's status
says it is held (its ``Active`` condition), and a misspelt value is refused, naming the
field."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from policy.memo import Memo
from policy.model.admission import ADMITTED, POOL_HELD, PREEMPTED, QUEUED
from policy.model.timeutil import format_time
from policy.pool.cycle import Plan, plan
from policy.pool.observe import observe
from policy.pool.policies import rules_for
from policy.pool.sync import sync
from tests import metacontroller as mc
from tests.conftest import NOW
from tests.kube_schema import validate_custom, validate_pool_status
from tests.poolbuilder import PoolBuilder


def _pool(stop: str, **more: Any) -> PoolBuilder:
    spec = {"stopPolicy": stop} if stop != "None" else {}
    b = PoolBuilder(pool_spec={**spec, **more}).node("a", 8)
    b.running("r", ("Worker-0@a", "Worker-1@a"), low=1, high=4)
    return b.queued("q", workers=1)


def _plan(b: PoolBuilder) -> Plan:
    """The whole cycle, as the pool's sync runs it."""
    request = b.request()
    snap = observe(request["parent"], request["children"], request["related"], Memo(limit=0))
    return plan(snap, NOW, rules_for(snap.spec))


@dataclass(frozen=True)
class Row:
    stop: str
    r_phase: str  # the running job's
    r_workers: str  # its worker target: "2" (kept) or ">2" (grown)
    q_phase: str
    q_reason: str  # "" when admitted


ROWS = [
    Row("None", ADMITTED, ">2", ADMITTED, ""),
    Row("Hold", ADMITTED, "2", QUEUED, POOL_HELD),
    Row("HoldAndDrain", QUEUED, "0", QUEUED, POOL_HELD),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.stop)
def test_stop_policy(row: Row) -> None:
    got = _plan(_pool(row.stop)).jobs
    r, q = got["default/r"], got["default/q"]
    assert (r.phase, q.phase, q.reason) == (row.r_phase, row.q_phase, row.q_reason)
    if row.r_workers == ">2":
        assert r.workers_target > 2  # idle room, and growth allowed
        assert r.scale is not None and r.scale.after == r.workers_target
    else:
        assert r.workers_target == int(row.r_workers)
    if row.stop == "Hold":  # admitted jobs run on, as they were
        assert r.scale is None and not r.remove and r.service is None
        assert {s: p.node for s, p in r.placements.items()} == {
            ("Worker", 0): "a",
            ("Worker", 1): "a",
        }
    if row.stop == "HoldAndDrain":  # a preemption, with its reason
        assert r.reason == PREEMPTED and not r.placements
        assert r.service is not None and r.service.last is not None
        assert r.service.last.by == "TrainingPool default"
        assert r.service.last.reason == "the pool is drained: spec.stopPolicy is HoldAndDrain"
        assert r.service.preemptions == 1
        assert "preempted by TrainingPool default" in r.message
    if row.q_reason == POOL_HELD:
        what = "drained" if row.stop == "HoldAndDrain" else "held"
        assert q.message == (
            f"waiting: TrainingPool default is {what} (spec.stopPolicy: {row.stop}), so it "
            "admits no job; it admits its queue again once released (kubectl dragonet "
            "release default)"
        )
        assert not q.placements and q.wake_at is None


def test_a_held_pool_repairs_its_admitted_jobs_as_an_active_one_does() -> None:
    """Hold keeps what admitted jobs were admitted with: a missing parameter server is
    placed again, and a lost worker is replaced up to the job's worker target."""
    plans = {}
    for stop in ("None", "Hold"):
        b = PoolBuilder(pool_spec={"stopPolicy": stop}).node("a", 2).node("b", 4)
        where = ("Worker-0@b", "Worker-1@b")
        b.running("r", where, ps=1, workers=3, low=1, high=3, target=3)
        plans[stop] = _plan(b).jobs["default/r"]
    held, active = plans["Hold"], plans["None"]
    assert held.phase == ADMITTED and held.workers_target == 3
    assert {("PS", 0), ("Worker", 2)} <= set(held.placements)
    assert held.placements == active.placements


def test_a_drained_job_queues_again_once_its_pods_are_gone_and_waits_for_the_release() -> None:
    """After the drain: its pods terminating, it says it was preempted; gone, that the pool
    is drained; released, it is admitted again as a whole gang."""
    b = _pool("HoldAndDrain")
    request = b.request()
    first = sync(request["parent"], request["children"], request["related"], NOW)
    drained = {c["spec"]["job"]["name"]: c for c in first.children}
    assert drained["r"]["spec"]["phase"] == QUEUED
    assert drained["r"]["spec"]["service"]["lastPreemption"]["by"] == "TrainingPool default"

    b.admissions = [drained["r"]]
    b.pods = []  # its job's sync deleted them
    request = b.request()
    later = NOW + timedelta(seconds=40)
    second = sync(request["parent"], request["children"], request["related"], later)
    reasons = {c["spec"]["job"]["name"]: c["spec"]["reason"] for c in second.children}
    assert reasons == {"r": POOL_HELD, "q": POOL_HELD}

    b.pool_spec = {}  # released
    request = b.request()
    third = sync(request["parent"], request["children"], request["related"], later)
    phases = {c["spec"]["job"]["name"]: c["spec"]["phase"] for c in third.children}
    assert phases == {"r": ADMITTED, "q": ADMITTED}


def _active(status: dict[str, Any]) -> dict[str, Any]:
    (condition,) = [c for c in status["conditions"] if c["type"] == "Active"]
    return condition


def test_the_pools_status_says_it_is_held_and_keeps_the_transition_time() -> None:
    b = _pool("None")
    request = b.request()
    active = sync(request["parent"], request["children"], request["related"], NOW).status
    cond = _active(active)
    assert (cond["status"], cond["reason"]) == ("True", "Ready")
    assert cond["lastTransitionTime"] == format_time(NOW)

    b.pool_spec = {"stopPolicy": "Hold"}
    request = b.request()
    request["parent"]["status"] = active
    later = NOW + timedelta(seconds=5)
    held = sync(request["parent"], request["children"], request["related"], later).status
    cond = _active(held)
    assert (cond["status"], cond["reason"]) == ("False", "Stopped")
    assert cond["message"] == (
        "Can't admit new jobs: spec.stopPolicy is Hold; its admitted jobs run to completion"
    )
    assert cond["lastTransitionTime"] == format_time(later)
    assert "TrainingPool default is held" in held["message"]
    assert [e["reason"] for e in held["queue"]] == [POOL_HELD]

    request["parent"]["status"] = held  # synced again later: the same condition
    again = sync(
        request["parent"], request["children"], request["related"], later + timedelta(minutes=5)
    )
    assert _active(again.status) == cond


def test_a_misspelt_stop_policy_is_refused_naming_the_field_and_nothing_is_lost() -> None:
    b = _pool("None")
    request = b.request()
    request["parent"]["spec"]["stopPolicy"] = "Hld"
    got = sync(request["parent"], request["children"], request["related"], NOW)
    assert got.status["message"].startswith("the pool's spec.stopPolicy is invalid: ")
    assert "'None', 'Hold' or 'HoldAndDrain'" in got.status["message"]
    cond = _active(got.status)
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
    kept = {c["metadata"]["name"] for c in got.children}
    assert kept == {a["metadata"]["name"] for a in b.admissions}  # r's Admission, unchanged


def test_the_crd_refuses_a_misspelt_stop_policy_and_the_statuses_are_its_own() -> None:
    held = mc.pool(stopPolicy="Hold")
    validate_custom(held)
    misspelt = mc.pool()
    misspelt["spec"]["stopPolicy"] = "Hld"
    with pytest.raises(AssertionError, match="stopPolicy"):
        validate_custom(misspelt)
    for stop in ("None", "Hold", "HoldAndDrain"):
        request = _pool(stop).request()
        got = sync(request["parent"], request["children"], request["related"], NOW)
        validate_pool_status(got.status)
