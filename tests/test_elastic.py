"""Elastic scheduling, end to end through the simulator: DRAGON's starvation shrink and idle
growth (policy ``dragon``), Dragonet's reclaim of borrowed workers, and priority classes.

Two 4-GPU nodes; each worker takes one GPU, parameter servers only cpu. Job ``a`` has 6
workers (min 2): its PS and workers 0-3 fill gpu-1, workers 4 and 5 sit on gpu-2 "lonely",
away from their PS. A second job then needs more GPUs than are free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from sim.apiserver import Obj, object_key
from sim.engine import SimConfig, Simulation
from tests.simkit import TFJOBS, CapacityProbe, comparable, gpu_nodes, job, scenario

PODS = "Pod.v1"
LONG = 3000.0  # steps: job a outlives everything the tests look at


@dataclass
class Pods:
    """Every pod's life as the API server saw it: created, marked for deletion, gone."""

    sim: Simulation
    created: dict[str, list[tuple[float, str]]] = field(default_factory=dict)  # pod -> (t, uid)
    nodes: dict[str, str] = field(default_factory=dict)
    terminating: dict[str, list[float]] = field(default_factory=dict)
    restarts: int = 0

    def __post_init__(self) -> None:
        self.sim.api.watchers.append(self._on_change)

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey != PODS or new is None:
            return
        name = object_key(new).split("/", 1)[1]
        if old is None:
            self.created.setdefault(name, []).append((self.sim.now, new["metadata"]["uid"]))
        if new["spec"].get("nodeName"):
            self.nodes[name] = new["spec"]["nodeName"]
        if new["metadata"].get("deletionTimestamp") and not old["metadata"].get(
            "deletionTimestamp"
        ):
            self.terminating.setdefault(name, []).append(self.sim.now)
        counts = [
            int(cs.get("restartCount") or 0)
            for cs in (new.get("status") or {}).get("containerStatuses") or ()
        ]
        self.restarts = max(self.restarts, sum(counts))

    def of(self, job: str) -> list[str]:
        return sorted(n for n in self.created if n.startswith(f"{job}-"))

    def first_created(self, job: str) -> float:
        return min(t for n in self.of(job) for t, _ in self.created[n])

    def shrunk(self, job: str, before: float) -> list[str]:
        """Workers of ``job`` deleted while the job still ran (before ``before``)."""
        return sorted(
            n
            for n, times in self.terminating.items()
            if n.startswith(f"{job}-worker-") and min(times) < before
        )


@dataclass
class Statuses:
    """Each job's scheduling status every time it changed."""

    sim: Simulation
    seen: dict[str, list[tuple[float, Mapping[str, Any]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sim.api.watchers.append(self._on_change)

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey != TFJOBS or new is None:
            return
        sched = (new.get("status") or {}).get("scheduling")
        if sched and (old is None or (old.get("status") or {}).get("scheduling") != sched):
            self.seen.setdefault(object_key(new), []).append((self.sim.now, sched))

    def messages(self, key: str) -> list[str]:
        return [s.get("message", "") for _, s in self.seen.get(key, [])]

    def targets(self, key: str) -> list[int]:
        """The worker targets the job went through, without repeats."""
        out: list[int] = []
        for _, s in self.seen.get(key, []):
            t = (s.get("workers") or {}).get("target")
            if t and (not out or out[-1] != t):
                out.append(t)
        return out

    def last_scale(self, key: str) -> list[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for _, s in self.seen.get(key, []):
            scale = s.get("lastScale")
            if scale and (not out or out[-1] != scale):
                out.append(scale)
        return out


def _run(jobs, cost_free: bool = False, **config: Any) -> tuple[Simulation, Pods, Statuses]:
    """``cost_free``: Metacontroller's writes free and instant, for a test that pins the
    second a decision's pods appear (sim/metacontroller.py ``COST_FREE``)."""
    run_config = SimConfig(**config)
    sim = Simulation(
        scenario(gpu_nodes(2), jobs), run_config.cost_free() if cost_free else run_config
    )
    pods, statuses = Pods(sim), Statuses(sim)
    sim.run()
    return sim, pods, statuses


def _borrow_then_wait(policy: str, a_steps: float = LONG):
    """a asks for 4 workers (min 2, max 6) and may grow to 6; b then needs 4 GPUs."""
    return _run(
        [
            job("a", 4, min_workers=2, max_workers=6, steps=a_steps),
            job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200),
        ],
        policy=policy,
    )


def _big_a(**kw: Any):
    return job("a", 6, min_workers=2, max_workers=6, steps=LONG, **kw)


# --- starvation: shrink for the head of the queue ------------------------------------


def test_a_starving_job_gets_room_from_lonely_workers_after_30_seconds() -> None:
    _sim, pods, statuses = _run(
        [_big_a(), job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200)],
        policy="dragon",
    )
    b_starts = pods.first_created("b")
    # Not before b waited 30 s; then a gives up exactly its two workers on gpu-2.
    assert pods.shrunk("a", before=b_starts) == ["a-worker-4", "a-worker-5"]
    assert min(pods.terminating["a-worker-4"]) == pytest.approx(130.0, abs=1.0)
    assert pods.nodes["a-worker-4"] == pods.nodes["a-worker-5"] != pods.nodes["a-ps-0"]
    assert {pods.nodes[n] for n in pods.of("b")} == {pods.nodes["a-worker-4"]}
    # Both sides say why.
    assert "waiting for 2 workers of default/a to terminate" in statuses.messages("default/b")
    reason = statuses.last_scale("default/a")[0]
    assert (reason["from"], reason["to"]) == (6, 4)
    assert "to make room for default/b, which waited 30 s" in reason["reason"]


def test_a_shrink_takes_lonely_workers_first_then_the_highest_index_never_the_chief() -> None:
    _, pods, _ = _run(
        [_big_a(), job("b", 5, ps=0, min_workers=5, max_workers=5, arrival=100.0, steps=200)],
        policy="dragon",
    )
    # b needs 5 GPUs: gpu-2's two lonely workers, then worker 3 on the PS's node.
    assert pods.shrunk("a", before=pods.first_created("b")) == [
        "a-worker-3",
        "a-worker-4",
        "a-worker-5",
    ]
    assert len(pods.created["a-ps-0"]) == len(pods.created["a-worker-0"]) == 1


def test_no_shrink_when_even_min_instances_would_not_make_room() -> None:
    # b needs 7 GPUs; a can give back 4 of its 6 at most (min-instances 2): never shrink.
    _, pods, statuses = _run(
        [_big_a(), job("b", 7, ps=0, min_workers=7, max_workers=7, arrival=100.0, steps=50)],
        policy="dragon",
    )
    assert pods.shrunk("a", before=pods.first_created("b")) == []
    assert statuses.targets("default/a") == [6]
    assert any("no shrink of the running jobs" in m for m in statuses.messages("default/b"))


def test_the_starvation_threshold_comes_from_the_configuration() -> None:
    _, pods, _ = _run(
        [_big_a(), job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200)],
        policy="dragon",
        starvation_seconds=90.0,
    )
    assert min(pods.terminating["a-worker-4"]) == pytest.approx(190.0, abs=1.0)


def test_dragonet_takes_back_borrowed_workers_at_once() -> None:
    # a asked for 4 workers and grew to 6 into idle room: a waiting job gets those two back
    # without waiting 30 s; a's 4 requested workers stay.
    _, pods, statuses = _borrow_then_wait("dragonet")
    assert pods.shrunk("a", before=pods.first_created("b")) == ["a-worker-4", "a-worker-5"]
    assert min(pods.terminating["a-worker-4"]) == pytest.approx(100.0, abs=1.0)
    assert statuses.targets("default/a")[:3] == [4, 6, 4]


# --- idle: grow toward max-instances ---------------------------------------------------


def test_idle_growth_goes_to_the_ps_node_and_stops_at_max_instances() -> None:
    # a (PS + 2 workers, max 3) fits gpu-1; gpu-2 is emptier, but growth goes next to the PS.
    _, pods, statuses = _run(
        [job("a", 2, min_workers=1, max_workers=3, steps=600)], policy="dragon"
    )
    assert pods.of("a") == ["a-ps-0", "a-worker-0", "a-worker-1", "a-worker-2"]
    ((when, _),) = pods.created["a-worker-2"]
    assert when == pytest.approx(60.0, abs=1.0)
    assert pods.nodes["a-worker-2"] == pods.nodes["a-ps-0"]
    assert statuses.targets("default/a") == [2, 3]
    assert "into idle capacity" in statuses.last_scale("default/a")[0]["reason"]


def test_growth_spills_to_other_nodes_but_never_past_max_instances() -> None:
    # 3 workers, max 8: the PS node takes one more, the other node three; then a stops.
    _, pods, statuses = _run(
        [job("a", 3, min_workers=1, max_workers=7, steps=900)], policy="dragon"
    )
    workers = [n for n in pods.of("a") if "-worker-" in n]
    assert len(workers) == 7
    assert statuses.targets("default/a") == [3, 7]
    by_node: dict[str, int] = {}
    for n in workers:
        by_node[pods.nodes[n]] = by_node.get(pods.nodes[n], 0) + 1
    assert by_node[pods.nodes["a-ps-0"]] == 4


def test_the_idle_threshold_comes_from_the_configuration() -> None:
    _, pods, _ = _run(
        [job("a", 2, min_workers=1, max_workers=3, steps=600)], policy="dragon", idle_seconds=150.0
    )
    ((when, _),) = pods.created["a-worker-2"]
    assert when == pytest.approx(150.0, abs=1.0)


@pytest.mark.parametrize("policy", ["dragon", "dragonet"])
def test_scaling_never_restarts_a_running_worker(policy: str) -> None:
    sim, pods, _ = _borrow_then_wait(policy)
    assert sim.programs.scale_actions >= 2
    # The workers a shrink did not take were created once and ran on, never restarted.
    shrunk = pods.shrunk("a", before=pods.first_created("b"))
    kept = [n for n in pods.of("a") if n not in shrunk]
    assert shrunk and kept
    assert all(len(pods.created[n]) == 1 for n in kept)
    finished = sim.programs.jobs["default/a"].finished_s
    assert finished is not None
    assert all(min(pods.terminating.get(n, [finished])) >= finished for n in kept)
    assert pods.restarts == 0
    assert sim.programs.restarts == 0  # a worker grown back where a shrink took one is no restart


# --- robustness -----------------------------------------------------------------------


def test_a_webhook_restart_between_decision_and_action_changes_nothing() -> None:
    jobs = [_big_a(), job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200)]
    plain = Simulation(scenario(gpu_nodes(2), jobs), SimConfig(policy="dragon"))
    plain_result = plain.run()
    # 130 s: a's sync decides the shrink; 131 s: its workers are terminating, b waits.
    restarted = Simulation(
        scenario(gpu_nodes(2), jobs),
        SimConfig(policy="dragon", webhook_restarts_s=(130.5, 131.0, 131.5)),
    )
    result = restarted.run()
    assert restarted.log == plain.log
    assert comparable(result.summary) == comparable(plain_result.summary)


@pytest.mark.parametrize("policy", ["dragon", "dragonet"])
def test_no_flapping_while_nothing_else_changes(policy: str) -> None:
    # b holds its room until it ends; a is shrunk once for it and grown once after it.
    sim, _, statuses = _borrow_then_wait(policy)
    assert sim.programs.jobs["default/b"].finished_s is not None
    assert statuses.targets("default/a") == [4, 6, 4, 6]
    assert len(statuses.last_scale("default/a")) == 3


@pytest.mark.parametrize("policy", ["gang-fifo", "kube-default"])
def test_static_policies_never_scale(policy: str) -> None:
    sim, _pods, statuses = _borrow_then_wait(policy, a_steps=LONG / 3)
    assert sim.programs.scale_actions == 0
    assert statuses.targets("default/a") == [4]


# --- priority ---------------------------------------------------------------------------


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _with_priority(spec, name: str):
    manifest = spec.manifest
    manifest["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": name}}
    return spec


def _run_with_classes(jobs, **config: Any) -> tuple[Simulation, Pods, Statuses]:
    base = scenario(gpu_nodes(2), jobs)
    classes = (_priority_class("high", 1000), _priority_class("low", -10))
    world = type(base)(base.name, base.nodes, base.jobs, classes)
    sim = Simulation(world, SimConfig(**config))
    pods, statuses = Pods(sim), Statuses(sim)
    sim.run()
    return sim, pods, statuses


@pytest.mark.parametrize("policy", ["dragon", "dragonet"])
def test_a_high_priority_job_shrinks_lower_ones_without_waiting(policy: str) -> None:
    b = _with_priority(job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200), "high")
    _, pods, statuses = _run_with_classes([_big_a(), b], policy=policy)
    assert min(pods.terminating["a-worker-4"]) == pytest.approx(100.0, abs=1.0)
    assert "which has higher priority" in statuses.last_scale("default/a")[0]["reason"]


def test_priority_orders_the_queue_before_enqueue_time() -> None:
    # While a holds everything, e (no class), c (low) and d (high) queue, in that order.
    a = job("a", 8, ps=0, steps=300)
    e = job("e", 8, ps=0, arrival=5.0, steps=50)
    c = _with_priority(job("c", 8, ps=0, arrival=10.0, steps=50), "low")
    d = _with_priority(job("d", 8, ps=0, arrival=20.0, steps=50), "high")
    _, pods, _ = _run_with_classes([a, c, d, e], policy="dragon")
    assert pods.first_created("d") < pods.first_created("e") < pods.first_created("c")


def test_a_head_no_shrink_can_help_blocks_dragon_but_not_dragonet() -> None:
    # a (asked for 4, min 2) has grown to all 8 GPUs. h needs 7 at once: a can give 6 at most,
    # so nothing helps h until a ends. s (2 GPUs) arrives behind h.
    def jobs():
        return [
            job("a", 4, ps=0, min_workers=2, max_workers=8, steps=LONG),
            job("h", 7, ps=0, arrival=100.0, steps=100),
            job("s", 2, ps=0, arrival=200.0, steps=100),
        ]

    sim, pods, _ = _run(jobs(), policy="dragonet", cost_free=True)
    assert pods.first_created("s") <= 203.0  # once two of a's borrowed workers are gone
    assert pods.first_created("s") < pods.first_created("h")
    sim, pods, statuses = _run(jobs(), policy="dragon")
    a_done = sim.programs.jobs["default/a"].finished_s
    assert a_done is not None and pods.first_created("s") >= a_done
    assert any(m.startswith("waiting behind default/h") for m in statuses.messages("default/s"))


@pytest.mark.parametrize("policy", ["dragon", "dragonet"])
def test_stale_parallel_syncs_never_overcommit_a_node_while_jobs_scale(policy: str) -> None:
    jobs = [
        job(
            f"j{i}",
            1 + i % 3,
            min_workers=1,
            max_workers=4,
            arrival=float(20 * (i // 3)),
            steps=60 + 20 * (i % 4),
        )
        for i in range(9)
    ]
    sim = Simulation(
        scenario(gpu_nodes(2), jobs), SimConfig(policy=policy, mc_workers=5, view_delay_s=2.0)
    )
    probe = CapacityProbe(sim)
    result = sim.run()
    assert probe.overcommits == []
    assert result.summary["jobs_finished"] == len(jobs)
    assert result.summary["scale_actions"] > 0


def test_the_elastic_example_scales_and_dragonet_finishes_jobs_soonest() -> None:
    from pathlib import Path

    from sim.scenario import load_scenario

    example = load_scenario(Path(__file__).parents[1] / "examples" / "elastic.yaml")
    runs = {
        p: Simulation(example, SimConfig(policy=p)).run().summary
        for p in ("dragonet", "dragon", "gang-fifo")
    }
    assert all(s["jobs_finished"] == 3 for s in runs.values())
    assert runs["dragonet"]["scale_actions"] > 0 and runs["dragon"]["scale_actions"] > 0
    assert runs["gang-fifo"]["scale_actions"] == 0
    jct = {p: s["avg_jct_s"] for p, s in runs.items()}
    assert jct["dragonet"] < jct["dragon"] < jct["gang-fifo"]


def test_a_job_naming_a_missing_priority_class_says_so_and_queues_at_default_priority() -> None:
    a = job("a", 8, ps=0, steps=300)
    b = _with_priority(job("b", 8, ps=0, arrival=10.0, steps=50), "platinum")
    _, pods, statuses = _run_with_classes([a, b], policy="dragonet")
    assert pods.first_created("b") > pods.first_created("a")
    assert any(
        "PriorityClass 'platinum' does not exist" in m for m in statuses.messages("default/b")
    )
