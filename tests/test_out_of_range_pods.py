"""A pod whose index is at or above its type's count is no part of the job (Kubeflow's
ReconcilePods deletes it): ``ps-1`` once ``PS.replicas`` is 1, a worker at or above
``max-instances``. Such pods are left from an earlier spec of the job (the user lowered a
count). A worker between ``Worker.replicas`` and ``max-instances`` is one the pool grew the
job to, and stays."""

from __future__ import annotations

import copy
from typing import Any

from tests import metacontroller as mc
from tests.conftest import Hook, pods_of, services_of

NODES = [mc.node("n-1", cpu="64", memory="256Gi")]
NOW = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]


def _spec(ps: int, workers: int, max_workers: int) -> dict[str, Any]:
    """DRAGON's job1 with these counts; the PS never restarts (a failed one would fail it)."""
    job = mc.compat("dragon-job1-cpu.yaml")
    job["spec"]["max-instances"] = max_workers
    job["spec"]["tfReplicaSpecs"]["PS"].update(replicas=ps, restartPolicy="Never")
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = workers
    return job


def _earlier_pods(hook: Hook, earlier: dict[str, Any], phase: str = "Running") -> list[dict]:
    """The pods and services job1 had under an earlier spec (2 PS, 5 workers), as the
    cluster reports them."""
    placed = [("PS", 0, "n-1"), ("PS", 1, "n-1"), *(("Worker", i, "n-1") for i in range(5))]
    request = mc.job_request(mc.world(earlier, NODES), mc.admission(earlier, placed, workers=5))
    body = hook.job_sync(request)
    pods = [mc.observed_pod(earlier, p, phase=phase) for p in pods_of(body).values()]
    services = [mc.observed_service(earlier, s) for s in services_of(body).values()]
    return pods + services


def test_a_pod_above_its_types_count_is_deleted_with_its_service(hook: Hook) -> None:
    earlier = mc.tfjob(_spec(ps=2, workers=5, max_workers=5))
    children = _earlier_pods(hook, earlier)
    job = mc.tfjob(_spec(ps=1, workers=4, max_workers=4))  # the same job, counts lowered
    pods = [c for c in children if c["kind"] == "Pod"]
    services = [c for c in children if c["kind"] == "Service"]
    w = mc.world(job, NODES, pods=pods, services=services)
    body = hook.job_sync(mc.job_request(w, mc.admission(job, NOW, workers=4)))
    kept = {"job1-ps-0", *(f"job1-worker-{i}" for i in range(4))}
    assert set(pods_of(body)) == kept  # job1-ps-1 and job1-worker-4 go
    assert set(services_of(body)) == kept
    status = body["status"]
    assert status["replicaStatuses"]["PS"] == {"active": 1, "succeeded": 0, "failed": 0}
    assert status["replicaStatuses"]["Worker"] == {"active": 4, "succeeded": 0, "failed": 0}
    assert status["scheduling"]["workers"]["current"] == 4


def test_a_failed_pod_above_its_types_count_does_not_fail_the_job(hook: Hook) -> None:
    earlier = mc.tfjob(_spec(ps=2, workers=4, max_workers=4))
    children = _earlier_pods(hook, earlier)
    job = mc.tfjob(_spec(ps=1, workers=4, max_workers=4))
    pods = [c for c in children if c["kind"] == "Pod"]
    for p in pods:
        if p["metadata"]["name"] == "job1-ps-1":  # under restartPolicy Never
            p["status"] = mc.observed_pod(job, p, phase="Failed", exit_code=1)["status"]
    w = mc.world(job, NODES, pods=pods)
    body = hook.job_sync(mc.job_request(w, mc.admission(job, NOW, workers=4)))
    assert not any(c["type"] == "Failed" for c in body["status"]["conditions"])
    assert "job1-ps-1" not in pods_of(body)
    assert body["status"]["replicaStatuses"]["PS"]["failed"] == 0


def test_workers_grown_past_worker_replicas_up_to_max_instances_stay(hook: Hook) -> None:
    """The bound for workers is max-instances: an elastic job asked for 2 and grew to 4."""
    job = mc.tfjob(_spec(ps=1, workers=2, max_workers=4))
    first = hook.job_sync(mc.job_request(mc.world(job, NODES), mc.admission(job, NOW, workers=4)))
    pods = [mc.observed_pod(job, p) for p in pods_of(first).values()]
    w = mc.world(job, NODES, pods=pods)
    body = hook.job_sync(mc.job_request(w, mc.admission(job, NOW, workers=4)))
    assert set(pods_of(body)) == {"job1-ps-0", *(f"job1-worker-{i}" for i in range(4))}
    assert body["status"]["replicaStatuses"]["Worker"]["active"] == 4


def test_an_admission_entry_above_a_types_count_creates_nothing(hook: Hook) -> None:
    """An Admission planned on an earlier spec (it still lists ps-1): the job creates only
    what its spec allows."""
    job = mc.tfjob(_spec(ps=1, workers=4, max_workers=4))
    stale_plan = [*NOW, ("PS", 1, "n-1"), ("Worker", 4, "n-1")]
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), mc.admission(job, stale_plan, 4)))
    expected = {"job1-ps-0", *(f"job1-worker-{i}" for i in range(4))}
    assert set(pods_of(body)) == expected
    assert set(services_of(body)) == expected


def test_the_pool_neither_keeps_nor_counts_a_pod_above_its_types_count() -> None:
    """Through both tiers: the pool's Admission lists only the pods the job may have, and
    the job's sync deletes the others."""
    hook = Hook()
    earlier = mc.tfjob(_spec(ps=2, workers=5, max_workers=5))
    body = hook.sync(mc.world(earlier, NODES))
    assert len(pods_of(body)) == 7
    pods = [mc.observed_pod(earlier, p) for p in pods_of(body).values()]
    services = [mc.observed_service(earlier, s) for s in services_of(body).values()]
    job = copy.deepcopy(earlier)
    job["spec"] = _spec(ps=1, workers=4, max_workers=4)["spec"]
    answer = hook.sync(mc.world(job, NODES, pods=pods, services=services))
    admission = hook.admission(job)
    assert admission is not None
    listed = {(p["type"], p["index"]) for p in admission["spec"]["pods"]}
    assert listed == {("PS", 0), *(("Worker", i) for i in range(4))}
    assert admission["spec"]["workers"] == 4
    kept = {"job1-ps-0", *(f"job1-worker-{i}" for i in range(4))}
    assert set(pods_of(answer)) == set(services_of(answer)) == kept
