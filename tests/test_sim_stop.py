"""A pool's ``spec.stopPolicy`` end to end, through the simulator: the pool is held or
drained mid-run by a write of its spec (what ``kubectl dragonet hold|drain`` sends), and
released later.

One 4-GPU node. Hold: ``early`` (2 workers) runs; ``late`` (2 workers) arrives while the
pool is held, and though the room is free it waits, saying why, until the release; ``early``
runs to completion untouched. HoldAndDrain: ``trainer`` (4 workers) is preempted, its pods
all go, it waits with the pool's reason, and after the release it runs again and
finishes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policy.model.admission import POOL_HELD, PREEMPTED
from policy.model.admission import TYPE_KEY as ADMISSIONS
from sim.engine import SimConfig, Simulation
from tests.simkit import PODS, gpu_nodes, job, scenario

POOLS = "TrainingPool.dragonet.io/v1alpha1"


def _set_stop(sim: Simulation, value: str) -> Callable[[], None]:
    def write() -> None:
        pool = sim.api.get(POOLS, "default")
        assert pool is not None
        sim.api.update({**pool, "spec": {**pool["spec"], "stopPolicy": value}})

    return write


def _look(sim: Simulation, seen: dict[str, Any], job_name: str) -> Callable[[], None]:
    """What the pool and a job's Admission say, and the job's pods, at that moment."""

    def probe() -> None:
        admission = sim.api.get(ADMISSIONS, f"default/tfjob-{job_name}") or {}
        pool = sim.api.get(POOLS, "default") or {}
        seen["admission"] = admission.get("spec") or {}
        seen["active"] = next(
            c for c in pool["status"].get("conditions", ()) if c["type"] == "Active"
        )
        seen["queue"] = pool["status"].get("queue", [])
        seen["pods"] = [
            p["metadata"]["name"]
            for p in sim.api.list(PODS)
            if p["metadata"]["name"].startswith(f"{job_name}-")
        ]

    return probe


def test_a_held_pool_admits_nothing_until_released_and_its_running_job_finishes() -> None:
    early = job("early", 2, min_workers=2, max_workers=2, steps=200)
    late = job("late", 2, min_workers=2, max_workers=2, arrival=40, steps=60)
    sim = Simulation(
        scenario(gpu_nodes(1), [early, late]), SimConfig(policy="dragonet", max_time_s=3600)
    )
    seen: dict[str, Any] = {}
    sim.schedule(20, _set_stop(sim, "Hold"))
    sim.schedule(120, _look(sim, seen, "late"))
    sim.schedule(900, _set_stop(sim, "None"))
    result = sim.run()
    records = {r.key: r for r in result.jobs}
    first, second = records["default/early"], records["default/late"]

    # While held: the room is free (2 of 4 GPUs), and still the late job waits, saying why.
    assert seen["admission"]["phase"] == "Queued"
    assert seen["admission"]["reason"] == POOL_HELD
    assert "TrainingPool default is held" in seen["admission"]["message"]
    assert [e["reason"] for e in seen["queue"]] == [POOL_HELD]
    assert (seen["active"]["status"], seen["active"]["reason"]) == ("False", "Stopped")
    assert seen["pods"] == []

    # The admitted job ran to completion, never stopped; the late one only after release.
    assert first.finish_s is not None and first.preemptions == ()
    assert first.finish_s < 900
    assert second.admitted_s is not None and second.admitted_s >= 900
    assert second.finish_s is not None


def test_a_drained_pool_preempts_its_jobs_which_run_again_once_released() -> None:
    trainer = job("trainer", 4, min_workers=4, max_workers=4, steps=400)
    sim = Simulation(scenario(gpu_nodes(1), [trainer]), SimConfig(policy="dragonet"))
    seen: dict[str, Any] = {}
    sim.schedule(60, _set_stop(sim, "HoldAndDrain"))
    sim.schedule(200, _look(sim, seen, "trainer"))
    sim.schedule(300, _set_stop(sim, "None"))
    result = sim.run()
    (record,) = result.jobs

    # Drained: every pod gone, queued again as a whole gang, waiting for the release.
    assert seen["pods"] == []
    assert seen["admission"]["phase"] == "Queued"
    assert seen["admission"]["reason"] == POOL_HELD
    last = seen["admission"]["service"]["lastPreemption"]
    assert last["by"] == "TrainingPool default"
    assert last["reason"] == "the pool is drained: spec.stopPolicy is HoldAndDrain"
    assert seen["active"]["message"].endswith("its admitted jobs are preempted")

    # One preemption, by the pool; then admitted again after the release, and done.
    assert [(p.by, p.reason) for p in record.preemptions] == [
        ("TrainingPool default", "the pool is drained: spec.stopPolicy is HoldAndDrain")
    ]
    assert 60 <= record.preemptions[0].t_s < 200
    assert record.finish_s is not None and record.finish_s > 300
    assert PREEMPTED not in record.reason


def test_the_recorder_tells_the_drain_on_the_job_and_the_hold_on_the_pool() -> None:
    """``kubectl describe``: the job was preempted by its pool and waited because the pool
    was drained; the pool was stopped, at the time it was."""
    from sim.recorder import EVENTS, attach

    trainer = job("trainer", 4, min_workers=4, max_workers=4, steps=400)
    sim = Simulation(
        scenario(gpu_nodes(1), [trainer]),
        SimConfig(policy="dragonet", delete_finished_after_s=None),
    )
    attach(sim)
    sim.schedule(60, _set_stop(sim, "HoldAndDrain"))
    sim.schedule(300, _set_stop(sim, "None"))
    sim.run()
    events = sorted(sim.api.list(EVENTS), key=lambda e: (e["eventTime"], e["reason"]))
    story = [(e["reason"], e["note"]) for e in events if e["regarding"]["name"] == "trainer"]
    assert [r for r, _ in story] == [
        "Admitted",
        "Preempted",
        "PoolHeld",
        "Admitted",
        "TFJobSucceeded",
    ]
    assert story[1][1].startswith(
        "preempted: by TrainingPool default: the pool is drained: spec.stopPolicy is HoldAndDrain"
    )
    assert "TrainingPool default is drained" in story[2][1]
    (held,) = [e for e in events if e["regarding"]["kind"] == "TrainingPool"]
    assert held["reason"] == "Stopped" and held["note"].endswith("its admitted jobs are preempted")
    assert held["eventTime"].startswith("2026-01-01T00:01:00")  # the drain, 60 s in
