"""PyTorchJobs in the simulator: the real webhook and Metacontroller's PyTorchJob controller
(read from metacontroller/pytorchjob-controller.yaml) run them to Succeeded in one queue with
TFJobs and MXJobs; an elastic one grows within its elasticPolicy; a fixed one is preempted
whole and comes back whole; replayed from a Pollux trace, they report their speed and the
pool's planner learns it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from policy.memo import Memo
from policy.model.throughput import ANNOTATION
from policy.pool.observe import observe
from sim.apiserver import Obj
from sim.engine import Scenario, SimConfig, Simulation
from sim.spec import JobSpec, as_pytorchjob
from sim.throughput import ThroughputConfig
from sim.traces import load_pollux
from tests.simkit import QUICK, condition, cpu_nodes, gpu_nodes, job, scenario
from tests.test_sim_mxjob import mx_spec

PYTORCHJOBS = "PyTorchJob.kubeflow.org/v1"
PODS = "Pod.v1"
KEEP = SimConfig(delete_finished_after_s=None)
WORKLOAD = Path(__file__).parent / "fixtures" / "traces" / "workload-1.csv"
TWO = {"cpu": "2", "memory": "2Gi"}


def pt_spec(name: str, workers: int, *, arrival: float = 0.0, **bounds: Any) -> JobSpec:
    """A PyTorchJob of a TFJob's shape (sim.spec.as_pytorchjob): with ``min_workers`` or
    ``max_workers``, elastic workers; else a Master and ``workers - 1`` workers."""
    tf = job(name, workers, arrival=arrival, ps=0, worker_resources=TWO, **bounds)
    return replace(tf, manifest=as_pytorchjob(tf.manifest), profile=QUICK)


def _status(sim: Simulation, key: str) -> dict[str, Any]:
    obj = sim.api.get(PYTORCHJOBS, key)
    assert obj is not None, key
    return obj.get("status") or {}


def test_pytorchjobs_share_one_queue_with_tfjobs_and_mxjobs_and_all_succeed() -> None:
    specs = [
        pt_spec("pt", 3),
        replace(
            job("tf", 3, arrival=1.0, ps=1, worker_resources=TWO, ps_resources=TWO), profile=QUICK
        ),
        mx_spec("mx", 2, arrival=2.0),
        pt_spec("el", 2, arrival=3.0, min_workers=1, max_workers=3),
    ]
    sim = Simulation(scenario(cpu_nodes(1, cpu="12"), specs), KEEP)
    result = sim.run()
    assert {r.key: r.kind for r in result.jobs} == {
        "default/pt": "PyTorchJob",
        "default/tf": "TFJob",
        "default/mx": "MXJob",
        "default/el": "PyTorchJob",
    }
    assert all(r.finish_s is not None for r in result.jobs)
    fixed = _status(sim, "default/pt")
    assert condition(fixed, "Succeeded")["reason"] == "PyTorchJobSucceeded"
    assert fixed["replicaStatuses"]["Master"]["succeeded"] == 1
    assert condition(_status(sim, "default/el"), "Succeeded")["status"] == "True"


def test_an_elastic_pytorchjob_grows_to_max_replicas_with_the_same_rendezvous() -> None:
    spec = pt_spec("el", 2, min_workers=1, max_workers=4)
    sim = Simulation(scenario(cpu_nodes(1), [spec]), KEEP)
    envs: dict[str, list[dict[str, str]]] = {}

    def seen(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == PODS and new is not None and old is None:
            envs[new["metadata"]["name"]] = new["spec"]["containers"][0]["env"]

    sim.api.watchers.append(seen)
    (record,) = sim.run().jobs
    assert record.finish_s is not None
    assert max(n for _, n in record.workers) == 4  # grew past Worker.replicas (2)
    assert set(envs) == {f"el-worker-{i}" for i in range(4)}
    for env in envs.values():  # a grown worker joins the same rendezvous
        values = {e["name"]: e["value"] for e in env}
        assert values["PET_NNODES"] == "1:4"
        assert values["PET_RDZV_ENDPOINT"] == "el-worker-0:23456"


HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def test_a_fixed_pytorchjob_is_preempted_whole_and_runs_again_whole() -> None:
    low = replace(pt_spec("low", 4), steps=2000.0)  # a Master and 3 workers: all 8 cpu
    high = job("high", 3, arrival=100.0, ps=1, worker_resources=TWO, ps_resources=TWO)
    high.manifest["spec"]["runPolicy"] = {
        "schedulingPolicy": {"priorityClass": "high"},
        "cleanPodPolicy": "Running",  # its parameter server goes when it is done
    }
    base = scenario(cpu_nodes(1, cpu="8"), [low, replace(high, profile=QUICK)])
    sim = Simulation(Scenario(base.name, base.nodes, base.jobs, (HIGH,)), KEEP.cost_free())
    created: dict[str, list[float]] = {}
    deleted: dict[str, list[float]] = {}
    statuses: list[dict[str, Any]] = []

    def seen(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == PODS and new is not None:
            name = new["metadata"]["name"]
            if old is None:
                created.setdefault(name, []).append(sim.now)
            elif new["metadata"].get("deletionTimestamp") and not old["metadata"].get(
                "deletionTimestamp"
            ):
                deleted.setdefault(name, []).append(sim.now)
        elif tkey == PYTORCHJOBS and new is not None and new.get("status"):
            statuses.append(new["status"])

    sim.api.watchers.append(seen)
    result = sim.run()
    assert all(r.finish_s is not None for r in result.jobs)
    gang = ["low-master-0", *(f"low-worker-{i}" for i in range(3))]
    assert sorted(n for n in created if n.startswith("low-")) == gang
    assert all(len(deleted[p]) >= 1 for p in gang)  # every pod went at the preemption
    assert all(len(created[p]) == 2 for p in gang)  # ... and came back with the gang
    high_start = min(created["high-ps-0"])
    assert all(created[p][1] > high_start for p in gang)
    assert any(
        c["type"] == "Running" and c["reason"] == "PyTorchJobPreempted"
        for s in statuses
        for c in s.get("conditions") or ()
    )
    assert "preempted by default/high" in str(statuses)


def test_pytorchjobs_from_a_trace_report_their_speed_and_the_planner_learns_it() -> None:
    jobs = [replace(j, manifest=as_pytorchjob(j.manifest)) for j in load_pollux(WORKLOAD, jobs=8)]
    config = SimConfig(throughput=ThroughputConfig(noise=0.0), delete_finished_after_s=None)
    sim = Simulation(scenario(gpu_nodes(2), jobs), config)
    estimates: dict[str, Any] = {}
    post = sim.webhook.post

    def spy(path: str, body: bytes, *, measure: bool = True) -> Any:
        if path == "/pools/sync":
            request = orjson.loads(body)
            snap = observe(request["parent"], request["children"], request["related"], Memo())
            estimates.update(snap.speedups)
        return post(path, body, measure=measure)

    sim.webhook.post = spy  # type: ignore[method-assign]
    result = sim.run()
    assert {r.kind for r in result.jobs} == {"PyTorchJob"}
    assert all(r.finish_s is not None for r in result.jobs)
    reported = [
        j.key
        for j in jobs
        if ANNOTATION
        in ((sim.api.get(PYTORCHJOBS, j.key) or {}).get("metadata", {}).get("annotations") or {})
    ]
    assert len(reported) >= 4, reported
    learned = {k for k, model in estimates.items() if model.informed}
    assert learned and learned <= {j.key for j in jobs}
