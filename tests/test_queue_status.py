"""The queue in the open: the pool's status lists who waits in the order it admits them
(``policy/pool/queue_status.py``), bounded, so a job's position is one read of its pool."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from policy.pool.attained_service import REMAINING_LADDER_S, UNMEASURED_LEFT_S
from tests import metacontroller as mc
from tests.conftest import Hook

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers of 4 cpu, 8Gi each
ONE_NODE = [mc.node("n-1", cpu="24", memory="64Gi")]  # one job at a time


def _job(name: str, second: int, **spec: Any) -> dict[str, Any]:
    manifest = mc.compat(JOB)
    manifest["spec"]["min-instances"] = 4  # the whole node: one job at a time
    manifest["spec"].update(spec)
    return mc.tfjob(manifest, name=name, created=f"2026-11-21T09:00:{second:02d}Z")


def _queue(hook: Hook, jobs: list[dict], pool: dict | None = None, **kw: Any) -> dict:
    hook.pool_sync(mc.pool_request(mc.world(jobs[0], ONE_NODE, jobs=jobs, **kw), parent=pool))
    return hook.last_pool["status"]


def test_a_higher_priority_comes_first_then_the_longest_waiting(hook: Hook) -> None:
    urgent = {"runPolicy": {"schedulingPolicy": {"priorityClass": "urgent"}}}
    jobs = [_job("a", 0), _job("b", 1), _job("late", 2, **urgent), _job("later", 3, **urgent)]
    arrival_order = mc.pool(policy="dragonet")  # no least-attained-service queue to list
    status = _queue(hook, jobs, arrival_order, priority_classes=[mc.priority_class("urgent", 100)])
    # late is admitted first (it holds the node); later waits ahead of the older a and b.
    assert [(e["position"], e["job"], e["priority"]) for e in status["queue"]] == [
        (1, "default/later", 100),
        (2, "default/a", 0),
        (3, "default/b", 0),
    ]
    assert [e["enqueued"] for e in status["queue"]] == [
        "2026-11-21T09:00:03Z",
        "2026-11-21T09:00:00Z",
        "2026-11-21T09:00:01Z",
    ]
    assert {e["reason"] for e in status["queue"]} == {"WaitingForCapacity"}
    assert all("lasQueue" not in e for e in status["queue"])
    assert status["queued"] == 3


def test_the_list_is_bounded_and_the_count_is_not(hook: Hook) -> None:
    jobs = [_job(f"j{i:03d}", i % 60) for i in range(105)]
    status = _queue(hook, jobs)
    assert status["queued"] == 104
    assert len(status["queue"]) == 100
    assert [e["position"] for e in status["queue"]] == list(range(1, 101))


def test_least_attained_service_lists_each_jobs_queue(hook: Hook) -> None:
    pool = mc.pool(policy="dragonet-las", lasByRemaining=False)
    status = _queue(hook, [_job("a", 0), _job("b", 1)], pool)
    assert [(e["job"], e["lasQueue"]) for e in status["queue"]] == [("default/b", 0)]


def test_shortest_remaining_first_lists_the_rung_a_new_job_is_assumed_on(hook: Hook) -> None:
    """Under the default (``lasByRemaining``) a job that has not said how far it is stands
    on the rung of the remaining-GPU-time ladder where a new job is assumed to be."""
    status = _queue(hook, [_job("a", 0), _job("b", 1)], mc.pool(policy="dragonet-las"))
    rung = bisect_right(REMAINING_LADDER_S, UNMEASURED_LEFT_S)
    assert rung > 0
    assert [(e["job"], e["lasQueue"]) for e in status["queue"]] == [("default/b", rung)]


def test_a_job_naming_a_missing_pool_waits_at_the_end_and_says_why(hook: Hook) -> None:
    lost = _job("lost", 0, runPolicy={"schedulingPolicy": {"queue": "gpu"}})
    status = _queue(hook, [_job("a", 1), _job("b", 2), lost])
    assert [(e["job"], e["reason"]) for e in status["queue"]] == [
        ("default/b", "WaitingForCapacity"),
        ("default/lost", "NoSuchPool"),
    ]


def test_the_same_input_gives_the_same_status(hook: Hook) -> None:
    """No "waited N seconds": a status that changed with the clock would re-sync the pool
    for ever (DESIGN §2.7)."""
    jobs = [_job("a", 0), _job("b", 1)]
    request = mc.pool_request(mc.world(jobs[0], ONE_NODE, jobs=jobs))
    first = hook.pool_sync(request)["status"]
    hook.clock.advance(10)  # (within the starvation time: no shrink, the same plan)
    assert hook.pool_sync(request)["status"]["queue"] == first["queue"]
