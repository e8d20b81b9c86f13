"""MXJobs in the simulator: the real webhook and Metacontroller's MXJob controller (read from
metacontroller/mxjob-controller.yaml) run them to Succeeded, alone and in one queue with
TFJobs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from sim.engine import SimConfig, Simulation
from sim.scenario import load_scenario
from sim.spec import JobSpec
from tests.simkit import QUICK, CapacityProbe, condition, cpu_nodes, job, scenario

MXJOBS = "MXJob.kubeflow.org/v1"
TFJOBS = "TFJob.kubeflow.org/v1"
KEEP = SimConfig(delete_finished_after_s=None)


def mx_spec(name: str, workers: int, *, arrival: float = 0.0, cpu: str = "2") -> JobSpec:
    container = {
        "name": "mxnet",
        "image": "mxjob/mxnet:cpu",
        "resources": {"requests": {"cpu": cpu, "memory": "2Gi"}},
    }

    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "template": {"spec": {"containers": [dict(container)]}}}

    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Scheduler": replica(1),
                "Server": replica(1),
                "Worker": replica(workers),
            },
        },
    }
    return JobSpec(manifest, arrival, 100.0, QUICK)


def _tf(name: str, arrival: float) -> JobSpec:
    two = {"cpu": "2", "memory": "2Gi"}
    return job(name, 3, arrival=arrival, ps=1, worker_resources=two, ps_resources=two)


def _status(sim: Simulation, tkey: str, key: str) -> dict[str, Any]:
    obj = sim.api.get(tkey, key)
    assert obj is not None, key
    return obj.get("status") or {}


def test_an_mxjob_runs_to_succeeded() -> None:
    spec = mx_spec("mx", workers=2)
    sim = Simulation(scenario(cpu_nodes(1), [spec]), KEEP)
    (record,) = sim.run().jobs
    assert record.start_s is not None and record.finish_s is not None
    status = _status(sim, MXJOBS, spec.key)
    assert condition(status, "Succeeded")["status"] == "True"
    assert condition(status, "Succeeded")["reason"] == "MXJobSucceeded"
    assert condition(status, "Failed") is None
    assert status["replicaStatuses"]["Worker"]["succeeded"] == 2


def test_mxjobs_and_tfjobs_share_one_queue_and_all_succeed() -> None:
    """Two 16-cpu nodes; each job needs 8 cpu (MXJob: 4 pods x 2; TFJob: 1 PS + 3 workers x
    2): they queue together, each runs as one gang, nobody overcommits a node."""
    jobs = [
        mx_spec("mx-a", workers=2, arrival=0.0),
        _tf("tf-b", arrival=1.0),
        mx_spec("mx-c", workers=2, arrival=2.0),
        _tf("tf-d", arrival=3.0),
        mx_spec("mx-e", workers=2, arrival=4.0),
    ]
    sim = Simulation(scenario(cpu_nodes(2), jobs), KEEP)
    probe = CapacityProbe(sim)
    result = sim.run()
    assert all(r.finish_s is not None for r in result.jobs)
    assert probe.overcommits == []
    for spec in jobs:
        tkey = MXJOBS if spec.manifest["kind"] == "MXJob" else TFJOBS
        status = _status(sim, tkey, spec.key)
        assert condition(status, "Succeeded")["status"] == "True", spec.key
    # One queue: the fifth job (an MXJob) waited for room the others gave back.
    last = next(r for r in result.jobs if r.key == "default/mx-e")
    assert last.start_s > 4.0 + 10


def test_an_mxjob_runs_with_metacontrollers_races() -> None:
    config = dataclasses.replace(KEEP, mc_workers=5, view_delay_s=2.0)
    jobs = [mx_spec("mx-a", workers=2), _tf("tf-b", arrival=1.0)]
    sim = Simulation(scenario(cpu_nodes(1), jobs), config)
    assert all(r.finish_s is not None for r in sim.run().jobs)


def test_the_mixed_example_runs_every_job_to_succeeded() -> None:
    """examples/mixed.yaml: the MXJob runs beside the TFJob resnet in the GPUs it leaves
    free, before bert (which needs more) although bert is in the same queue."""
    example = load_scenario(Path(__file__).parents[1] / "examples" / "mixed.yaml")
    sim = Simulation(example, KEEP)
    records = {r.key: r for r in sim.run().jobs}
    assert all(r.finish_s is not None for r in records.values())
    linear, bert = records["team-m/linear"], records["team-b/bert"]
    assert linear.start_s < records["team-a/resnet"].finish_s <= bert.start_s
    for spec in example.jobs:
        tkey = MXJOBS if spec.manifest["kind"] == "MXJob" else TFJOBS
        assert condition(_status(sim, tkey, spec.key), "Succeeded")["status"] == "True"


@pytest.mark.slow
def test_a_trace_replays_as_a_mix_of_tfjobs_and_mxjobs_to_succeeded() -> None:
    from policy.model.jobs import parse_job
    from policy.model.kinds import MXJOB
    from sim.scenario import from_trace
    from tests.kube_schema import validate_custom

    trace = Path(__file__).parent / "fixtures" / "traces" / "philly-excerpt.csv"
    mixed = from_trace(trace, jobs=8, mx_share=0.5)
    plain = from_trace(trace, jobs=8)
    kinds = [s.manifest["kind"] for s in mixed.jobs]
    assert kinds == ["TFJob", "MXJob"] * 4  # every second job, spread evenly
    for mx, tf in zip(mixed.jobs, plain.jobs, strict=True):
        if mx.manifest["kind"] != "MXJob":
            assert mx == tf
            continue
        validate_custom(mx.manifest)
        job = parse_job({**mx.manifest, "metadata": {**mx.manifest["metadata"], "uid": "u"}}, MXJOB)
        tf_specs = tf.manifest["spec"]["tfReplicaSpecs"]
        assert job.replicas["Worker"].replicas == tf_specs["Worker"]["replicas"]
        assert job.replicas["Server"].replicas == tf_specs["PS"]["replicas"]
        assert (mx.arrival_s, mx.steps) == (tf.arrival_s, tf.steps)
    sim = Simulation(mixed, KEEP)
    assert all(r.finish_s is not None for r in sim.run().jobs)
    for spec in mixed.jobs:
        tkey = MXJOBS if spec.manifest["kind"] == "MXJob" else TFJOBS
        assert condition(_status(sim, tkey, spec.key), "Succeeded")["status"] == "True"


def test_an_mx_share_outside_0_to_1_is_refused() -> None:
    from sim.scenario import ScenarioError, from_trace

    trace = Path(__file__).parent / "fixtures" / "traces" / "philly-excerpt.csv"
    with pytest.raises(ScenarioError, match=r"between 0 and 1, not 1\.5"):
        from_trace(trace, jobs=4, mx_share=1.5)
    assert [s.manifest["kind"] for s in from_trace(trace, jobs=3, mx_share=1.0).jobs] == [
        "MXJob"
    ] * 3
