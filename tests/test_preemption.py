"""Preemption of whole jobs (issue 16): for a job of higher priority, and for least attained
service, end to end through the simulator and the real webhook.

A preempted job goes back to the queue as a whole gang: every pod of it is deleted, its
Admission is Queued with what it attained so far, and its status says by whom and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from policy.model.jobs import CHECKPOINT_ANNOTATION
from policy.model.pool import pool_object
from sim.apiserver import Obj, object_key
from sim.engine import Scenario, SimConfig, Simulation
from tests.simkit import TFJOBS, CapacityProbe, comparable, gpu_nodes, job, scenario

PODS = "Pod.v1"
ADMISSIONS = "Admission.dragonet.io/v1alpha1"


@dataclass
class Watch:
    """Pods created and deleted, and every status and Admission each job had."""

    sim: Simulation
    created: dict[str, list[float]] = field(default_factory=dict)  # pod name -> times
    deleted: dict[str, list[float]] = field(default_factory=dict)  # deletionTimestamp set
    statuses: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    admissions: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sim.api.watchers.append(self._on_change)

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            return
        if tkey == PODS:
            name = new["metadata"]["name"]
            if old is None:
                self.created.setdefault(name, []).append(self.sim.now)
            elif new["metadata"].get("deletionTimestamp") and not old["metadata"].get(
                "deletionTimestamp"
            ):
                self.deleted.setdefault(name, []).append(self.sim.now)
        elif tkey == TFJOBS and new.get("status"):
            self.statuses.setdefault(new["metadata"]["name"], []).append(new["status"])
        elif tkey == ADMISSIONS:
            self.admissions.setdefault(object_key(new), []).append(new["spec"])

    def pods(self, job: str) -> list[str]:
        return sorted(n for n in self.created if n.startswith(f"{job}-"))

    def services(self, job: str) -> list[Mapping[str, Any]]:
        """Each distinct ``status.scheduling.service`` the job's status showed, in order."""
        out: list[Mapping[str, Any]] = []
        for s in self.statuses.get(job, ()):
            got = (s.get("scheduling") or {}).get("service")
            if got and got not in out:
                out.append(got)
        return out


def _priority(spec, name: str):
    spec.manifest["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": name}}
    return spec


def _checkpointed(spec, seconds: float = 60.0):
    spec.manifest["metadata"]["annotations"] = {CHECKPOINT_ANNOTATION: f"{seconds:g}"}
    return spec


def _world(jobs, *objects: Mapping[str, Any], gpus_nodes: int = 2) -> Scenario:
    base = scenario(gpu_nodes(gpus_nodes), jobs)
    return Scenario(base.name, base.nodes, base.jobs, tuple(objects))


HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def _run(
    world: Scenario, cost_free: bool = False, **config: Any
) -> tuple[Mapping[str, Any], Watch]:
    """The run's summary, and what the watch saw (``cost_free``: Metacontroller's writes
    free and instant, for a test that pins when a decision's writes land)."""
    run_config = SimConfig(delete_finished_after_s=None, **config)
    sim = Simulation(world, run_config.cost_free() if cost_free else run_config)
    watch = Watch(sim)
    return sim.run().summary, watch


# --- priority -----------------------------------------------------------------------------


def test_a_higher_priority_job_preempts_a_whole_fixed_size_job_and_it_runs_again_whole() -> None:
    # a (1 PS + 8 workers, fixed size) holds all 8 GPUs; no shrink can free any (min = 8).
    a = job("a", 8, ps=1, min_workers=8, max_workers=8, steps=2000)
    b = _priority(job("b", 8, ps=1, min_workers=8, max_workers=8, arrival=100.0, steps=200), "high")
    summary, watch = _run(_world([a, b], HIGH), policy="dragonet", cost_free=True)

    # Every pod of a (its PS too) is deleted at once, when b arrives...
    a_pods = watch.pods("a")
    assert a_pods == ["a-ps-0", *(f"a-worker-{i}" for i in range(8))]
    first_deletion = [watch.deleted[p][0] for p in a_pods]
    assert max(first_deletion) - min(first_deletion) < 1.0
    assert min(first_deletion) == pytest.approx(100.0, abs=2.0)
    # ... b runs in the room, and a comes back as the same whole gang once b is done.
    b_start = min(watch.created["b-ps-0"])
    assert b_start < min(first_deletion) + 15.0
    for p in a_pods:
        assert len(watch.created[p]) == 2  # created again, every one of them
        assert watch.created[p][1] > b_start

    service = watch.services("a")[-1]
    assert service["preemptions"] == 1 and service["lasPreemptions"] == 0
    assert service["lastPreemption"]["by"] == "default/b"
    assert "higher priority (1000 > 0)" in service["lastPreemption"]["reason"]
    assert service["gpuSeconds"] > 0
    # Its status said so while it waited, and that it is preemptible only by priority.
    waiting = [s for s in watch.statuses["a"] if s["scheduling"]["phase"] == "Queued"]
    assert any("preempted by default/b" in s["scheduling"]["message"] for s in waiting)
    assert any(
        c["type"] == "Running" and c["status"] == "False" and c["reason"] == "TFJobPreempted"
        for s in waiting
        for c in s["conditions"]
    )
    final = watch.statuses["a"][-1]
    assert "only by a job of higher priority" in final["scheduling"]["preemptible"]
    assert any(c["type"] == "Succeeded" for c in final["conditions"])
    # The simulated training lost a's progress (it declares no checkpoints) and paid for it.
    assert summary["state_losses"] == 1 and summary["lost_gpu_s"] > 8 * 80
    assert summary["jobs_finished"] == 2


def test_shrinking_comes_before_preempting() -> None:
    # a may shrink from 8 to 4 workers: that is enough for b (4 GPUs), so nothing is preempted.
    a = job("a", 8, ps=1, min_workers=4, max_workers=8, steps=2000)
    b = _priority(job("b", 4, ps=1, min_workers=4, max_workers=4, arrival=100.0, steps=200), "high")
    summary, watch = _run(_world([a, b], HIGH), policy="dragonet")
    assert watch.services("a") == []
    assert summary["state_losses"] == 0
    assert "a-ps-0" not in watch.deleted or watch.deleted["a-ps-0"][0] > 300.0


def test_a_preemption_planned_on_a_stale_view_never_overcommits_a_node() -> None:
    """The pool's view lags 2 s: it preempts x for the higher-priority y while it cannot
    see all of x's pods yet. The kube-scheduler stays the arbiter; both jobs finish, y
    first, and no node ever holds more than it has."""
    x = job("x", 4, steps=60)
    y = _priority(job("y", 4, arrival=0.5, steps=60), "high")
    sim = Simulation(
        _world([x, y], HIGH, gpus_nodes=1),
        SimConfig(view_delay_s=2.0, delete_finished_after_s=5.0),
    )
    capacity = CapacityProbe(sim)
    result = sim.run()
    assert capacity.overcommits == []
    records = {r.key: r for r in result.jobs}
    assert result.summary["jobs_finished"] == 2
    assert records["default/y"].finish_s < records["default/x"].finish_s


# --- least attained service ---------------------------------------------------------------


def _las_pool(**spec: Any) -> dict[str, Any]:
    # 0.01 and 0.05 GPU-h = 36 and 180 GPU-seconds: a 4-GPU job passes them after 9 s and
    # 45 s; dragonet-las preempts only a job two queues later than the waiting one.
    return pool_object("default", policy="dragonet-las", lasThresholdsGPUHours=[0.01, 0.05], **spec)


def _las_jobs(checkpoint: float | None = 60.0):
    """One long fixed-size job holding the single node, then three short ones."""
    long = job("long", 4, ps=1, min_workers=4, max_workers=4, steps=3000)
    if checkpoint is not None:
        long = _checkpointed(long, checkpoint)
    shorts = [
        job(f"s{i}", 4, ps=1, min_workers=4, max_workers=4, arrival=200.0 * i, steps=150)
        for i in (1, 2, 3)
    ]
    return [long, *shorts]


def test_las_preempts_a_long_job_for_short_ones_and_counts_its_service() -> None:
    summary, watch = _run(_world(_las_jobs(), _las_pool(), gpus_nodes=1))
    services = watch.services("long")
    assert [s["lasPreemptions"] for s in services] == [1, 2, 3]
    last = services[-1]["lastPreemption"]
    assert last["by"] == "default/s3"
    assert "least attained service" in last["reason"] and "every 60 s" in last["reason"]
    # Each short job started right away instead of after the long one.
    for i in (1, 2, 3):
        assert min(watch.created[f"s{i}-ps-0"]) < 200.0 * i + 20.0
    # Attained service only grows, and survives the deleted pods.
    totals = [s["gpuSeconds"] for s in services]
    assert totals == sorted(totals) and totals[0] >= 4 * 60
    assert summary["jobs_finished"] == 4 and summary["state_losses"] == 3


def test_no_job_is_preempted_for_las_more_often_than_the_guard_allows() -> None:
    _, watch = _run(_world(_las_jobs(), _las_pool(maxPreemptions=1), gpus_nodes=1))
    services = watch.services("long")
    assert max(s["lasPreemptions"] for s in services) == 1
    assert len(watch.created["long-ps-0"]) == 2  # stopped once, then ran to the end
    # s2 arrived while the long job, preempted once already, ran: it waited.
    long_back = watch.created["long-ps-0"][1]
    assert min(watch.created["s2-ps-0"]) > long_back + 60.0


def test_a_job_without_a_checkpoint_interval_is_never_preempted_for_las() -> None:
    summary, watch = _run(_world(_las_jobs(checkpoint=None), _las_pool(), gpus_nodes=1))
    assert watch.services("long") == []
    assert len(watch.created["long-ps-0"]) == 1  # never stopped: the short jobs waited
    assert min(watch.created["s1-ps-0"]) > max(watch.created["long-ps-0"]) + 600.0
    assert summary["state_losses"] == 0
    status = watch.statuses["long"][-1]["scheduling"]
    assert "service" not in status


def test_a_webhook_restart_changes_no_preemption_decision() -> None:
    world = _world(_las_jobs(), _las_pool(), gpus_nodes=1)
    calm, calm_watch = _run(world)
    restarts = (150.0, 200.5, 260.0, 401.0, 600.2, 700.0)
    again, again_watch = _run(world, webhook_restarts_s=restarts)
    assert calm["state_losses"] == 3
    assert calm_watch.services("long") == again_watch.services("long")
    assert calm_watch.created == again_watch.created
    assert comparable(calm) == comparable(again)


# --- the simulated training program ---------------------------------------------------------


def test_the_simulated_job_falls_back_to_its_last_checkpoint_and_pays_the_restore() -> None:
    from policy.model.resources import Resources
    from sim.training import Training

    spec = _checkpointed(job("t", 2, steps=1000), 10.0)
    t = Training.of(spec, 0.0)
    t.rate, t.held = 1.0, Resources({"nvidia.com/gpu": 2000})
    t.advance(25.0)  # checkpoints at 10 s and 20 s of training
    assert t.progress == pytest.approx(25.0) and t.saved == pytest.approx(20.0)
    t.lose_state()
    assert t.progress == pytest.approx(20.0)
    restore = spec.profile.restore_s
    assert t.lost_gpu_s == pytest.approx(2 * 5.0 + 2 * restore)  # 5 s of 2 GPUs, and a restore
    never = Training.of(job("n", 2, steps=1000), 0.0)  # no interval: it never checkpoints
    never.rate, never.held = 1.0, Resources({"nvidia.com/gpu": 2000})
    never.advance(25.0)
    never.lose_state()
    assert never.progress == 0.0


def test_a_checkpointing_victim_loses_only_what_it_did_since_its_last_checkpoint() -> None:
    def run(checkpoint: float | None) -> Mapping[str, Any]:
        a = job("a", 8, ps=1, min_workers=8, max_workers=8, steps=2000)
        if checkpoint is not None:
            a = _checkpointed(a, checkpoint)
        b = job("b", 8, ps=1, min_workers=8, max_workers=8, arrival=100.0, steps=200)
        summary, _ = _run(_world([a, _priority(b, "high")], HIGH), policy="dragonet")
        return summary

    with_checkpoints, without = run(30.0), run(None)
    assert with_checkpoints["state_losses"] == without["state_losses"] == 1
    restore = 8 * 2.0  # 8 GPUs restore for 2 s (the quick profile)
    assert without["lost_gpu_s"] > 8 * 80  # about 90 s of training, all of it lost
    assert with_checkpoints["lost_gpu_s"] <= 8 * 30 + restore + 1e-6
    assert with_checkpoints["avg_jct_s"] < without["avg_jct_s"]


def test_dragonet_las_preempts_the_next_queue_as_tiresias_does() -> None:
    """With one limit (two queues) the long job is one queue later than the short ones:
    both LAS policies preempt it. (dragonet-las once waited for two queues later: measured
    with Pollux's jobs sized right, that let a long job hold the cluster for hours:
    benchmarks/README.md.)"""
    one_limit = {"lasThresholdsGPUHours": [0.05]}
    for policy in ("dragonet-las", "tiresias"):
        pool = pool_object("default", policy=policy, **one_limit)
        _, watch = _run(_world(_las_jobs(), pool, gpus_nodes=1))
        assert watch.services("long")[0]["lastPreemption"]["by"] == "default/s1", policy


def _arrival_order_jobs():
    """On one 4-GPU node: "first" (2 GPUs) runs, "big" (4) arrives and waits, "later" (2)
    arrives after it and is backfilled into the 2 free GPUs; then "first" finishes."""
    first = job("first", 2, ps=1, min_workers=2, max_workers=2, steps=300)
    big = job("big", 4, ps=1, min_workers=4, max_workers=4, arrival=10.0, steps=100)
    later = job("later", 2, ps=1, min_workers=2, max_workers=2, arrival=20.0, steps=3000)
    return [first, _checkpointed(big), _checkpointed(later)]


def test_pollux_tiresias_preempts_a_later_arrival_of_the_same_queue() -> None:
    """Pollux's Tiresias re-admits in (queue, arrival) order every minute: once "first" is
    done, "big" (enqueued earlier) takes the node back from "later". Without the setting,
    a job in the same queue is never a victim: "big" waits for "later" to finish."""
    same_queue = {"policy": "tiresias", "lasThresholdsGPUHours": [16]}
    fifo = pool_object("default", **same_queue, lasPreemptLaterInQueue=True)
    _, watch = _run(_world(_arrival_order_jobs(), fifo, gpus_nodes=1))
    last = watch.services("later")[-1]["lastPreemption"]
    assert last["by"] == "default/big" and "was enqueued before it" in last["reason"]
    big_start = min(watch.created["big-ps-0"])
    assert big_start < max(watch.created["later-ps-0"])  # big ran, then later came back
    assert watch.services("first") == [] and watch.services("big") == []

    plain = pool_object("default", **same_queue, lasPreemptLaterInQueue=False)
    _, watch = _run(_world(_arrival_order_jobs(), plain, gpus_nodes=1))
    assert watch.services("later") == []
    assert min(watch.created["big-ps-0"]) > max(watch.created["later-ps-0"]) + 1000.0


def test_without_promotion_a_preempted_job_stays_behind_the_first_queue() -> None:
    """The job "long" passes the 0.01 GPU-h limit, "s1" preempts it and runs ~1,000 s; "s2"
    arrives meanwhile. Tiresias' promotion puts "long", which has waited as long as it ran,
    back in queue 0 ahead of "s2" (it arrived first); Pollux's Tiresias never promotes."""
    long = _checkpointed(job("long", 4, ps=1, min_workers=4, max_workers=4, steps=3000))
    s1 = job("s1", 4, ps=1, min_workers=4, max_workers=4, arrival=100.0, steps=3500)
    s2 = job("s2", 4, ps=1, min_workers=4, max_workers=4, arrival=300.0, steps=100)
    order = {}
    for promotion in (True, False):
        pool = pool_object(
            "default", policy="tiresias", lasThresholdsGPUHours=[0.01], lasPromotion=promotion
        )
        _, watch = _run(_world([long, s1, s2], pool, gpus_nodes=1))
        assert watch.services("long")[0]["lastPreemption"]["by"] == "default/s1"
        back = watch.created["long-ps-0"][1]  # long's second start
        order[promotion] = "long" if back < min(watch.created["s2-ps-0"]) else "s2"
    assert order == {True: "long", False: "s2"}
