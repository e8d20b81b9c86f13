"""Preemption between the tiers, one hook call at a time: what a preempted Admission makes a
job do, what the pool writes, and the queue order of least attained service (issue 16).
Requests are shaped as Metacontroller sends them (``tests/metacontroller.py``)."""

from __future__ import annotations

import copy
from typing import Any

from policy.model.jobs import CHECKPOINT_ANNOTATION
from tests import metacontroller as mc
from tests.conftest import Clock, Hook, node_of, pods_of

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers, min 1, max 4
NODES = [mc.node("n-1", cpu="64", memory="256Gi")]
ALL = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]
PREEMPTION = {
    "time": "2026-11-25T10:05:00Z",
    "by": "default/urgent",
    "reason": "default/urgent has higher priority (1000 > 0)",
}


def _preempted(job: dict[str, Any]) -> dict[str, Any]:
    """The Admission a pool writes for a job it preempts: Queued, no pods, its service."""
    obj = mc.admission(job, phase="Queued", generation=2, message="preempted by default/urgent")
    obj["spec"]["reason"] = "Preempted"
    obj["spec"]["service"] = {
        "gpuSeconds": 1200.0,
        "preemptions": 1,
        "lasPreemptions": 0,
        "lastPreemption": PREEMPTION,
    }
    return obj


def _running_pods(hook: Hook, job: dict[str, Any], **admission: Any) -> list[dict[str, Any]]:
    w = mc.world(job, NODES)
    body = hook.job_sync(mc.job_request(w, mc.admission(job, ALL, workers=4, **admission)))
    pods = [mc.observed_pod(job, p) for p in pods_of(body).values()]
    for p in pods:
        p["metadata"].setdefault("annotations", {})["dragonet.io/admission"] = "1"
    return pods


def test_a_preempted_admission_deletes_every_pod_and_the_status_says_by_whom(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    pods = _running_pods(hook, job)
    body = hook.job_sync(mc.job_request(mc.world(job, NODES, pods=pods), _preempted(job)))
    assert pods_of(body) == {}  # the PS too: the job goes back to the queue whole
    scheduling = body["status"]["scheduling"]
    assert scheduling["phase"] == "Queued" and scheduling["reason"] == "Preempted"
    assert scheduling["service"]["lastPreemption"] == PREEMPTION
    assert scheduling["service"]["preemptions"] == 1
    assert "only by a job of higher priority" in scheduling["preemptible"]


def test_a_stale_preempted_admission_deletes_nothing(hook: Hook) -> None:
    """A pod newer than the Admission the job reads: its view lags, it keeps every pod."""
    job = mc.tfjob(JOB)
    pods = _running_pods(hook, job)
    for p in pods:
        p["metadata"]["annotations"]["dragonet.io/admission"] = "3"
    body = hook.job_sync(mc.job_request(mc.world(job, NODES, pods=pods), _preempted(job)))
    kept = {n: node_of(p) for n, p in pods_of(body).items()}
    assert kept == {p["metadata"]["name"]: "n-1" for p in pods}
    assert sorted(kept) == ["job1-ps-0", *(f"job1-worker-{i}" for i in range(4))]


def test_the_pools_grace_period_reaches_the_pods_unless_the_template_sets_one(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    admission = mc.admission(job, ALL, workers=4)
    admission["spec"]["gracePeriodSeconds"] = 120
    own = copy.deepcopy(job)
    own["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["terminationGracePeriodSeconds"] = 5
    del own["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["terminationGracePeriodSeconds"]
    body = hook.job_sync(mc.job_request(mc.world(own, NODES), admission))
    graces = {n: p["spec"].get("terminationGracePeriodSeconds") for n, p in pods_of(body).items()}
    assert graces["job1-ps-0"] == 5
    assert {graces[f"job1-worker-{i}"] for i in range(4)} == {120}


def test_a_checkpoint_interval_that_is_not_a_positive_number_fails_the_job(hook: Hook) -> None:
    for bad in ("ten minutes", "0", "-60", "nan"):
        job = mc.tfjob(JOB)
        job["metadata"]["annotations"] = {CHECKPOINT_ANNOTATION: bad}
        body = hook.job_sync(mc.job_request(mc.world(job, NODES), None))
        failed = next(c for c in body["status"]["conditions"] if c["type"] == "Failed")
        assert CHECKPOINT_ANNOTATION in failed["message"] and repr(bad) in failed["message"]
    good = mc.tfjob(JOB)
    good["metadata"]["annotations"] = {CHECKPOINT_ANNOTATION: "600"}
    body = hook.job_sync(mc.job_request(mc.world(good, NODES), None))
    preemptible = body["status"]["scheduling"]["preemptible"]
    assert preemptible.endswith("every 600 s")
    # Both queue orders of dragonet-las may preempt it (the job's tier knows neither).
    assert "least attained service" in preemptible and "shortest remaining first" in preemptible


def _urgent(status: dict[str, Any] | None = None) -> dict[str, Any]:
    urgent = mc.tfjob(JOB, name="urgent", created="2026-11-25T10:04:00Z", status=status)
    urgent["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "urgent"}}
    for r in urgent["spec"]["tfReplicaSpecs"].values():
        r["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10"}}
    return urgent


def _big(name: str) -> dict[str, Any]:
    job = mc.tfjob(JOB, name=name)
    job["spec"]["max-instances"] = job["spec"]["min-instances"] = 4
    for r in job["spec"]["tfReplicaSpecs"].values():
        r["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10"}}
    return job


def test_the_pool_preempts_a_lower_priority_job_and_a_restarted_webhook_decides_alike() -> None:
    clock = Clock()
    hook = Hook(clock=clock)
    low = _big("low")  # 5 pods x 10 cpu of the node's 64; fixed size: no shrink helps
    hook.sync(mc.world(low, NODES))
    pods = [mc.observed_pod(low, p) for p in pods_of(hook.render(low)).values()]
    clock.advance(60)
    urgent = _urgent()
    classes = [mc.priority_class("urgent", 1000)]
    w = mc.world(urgent, NODES, jobs=[low, urgent], pods=pods, priority_classes=classes)
    request = mc.pool_request(w, hook.admissions.values(), hook.pool)
    body = hook.pool_sync(request)
    answers = {c["metadata"]["name"]: c["spec"] for c in body["children"]}
    victim = answers["tfjob-low"]
    assert victim["phase"] == "Queued" and victim["reason"] == "Preempted"
    assert victim["pods"] == []
    assert victim["service"]["preemptions"] == 1
    assert victim["service"]["lastPreemption"]["by"] == "default/urgent"
    assert "higher priority (1000 > 0)" in victim["message"]
    assert answers["tfjob-urgent"]["reason"] == "WaitingForPreemption"
    # A fresh webhook process (nothing in memory) answers the same request alike.
    restarted = Hook(clock=clock)
    restarted.admissions = dict(hook.admissions)
    assert restarted.post("/pools/sync", request).get_json() == body


def test_least_attained_service_queues_a_younger_job_ahead_of_one_that_ran_long() -> None:
    """Under dragonet-las a job that attained 5 GPU-h in earlier runs (its status keeps the
    record) queues behind a younger job that attained nothing; under dragonet, arrival
    order decides."""
    attained = {
        "scheduling": {"service": {"gpuSeconds": 5 * 3600.0, "preemptions": 1}},
        "enqueueTime": "2026-11-25T09:00:00Z",
    }
    ran_long = _big("ranlong")
    ran_long["status"] = attained
    fresh = _big("fresh")
    fresh["metadata"]["creationTimestamp"] = "2026-11-25T10:00:00Z"
    # Room for one of them: the node holds 64 cpu, each needs 50.
    admitted = {}
    for policy in ("dragonet", "dragonet-las"):
        hook = Hook(pool=mc.pool(policy=policy, lasThresholdsGPUHours=[1]))
        w = mc.world(fresh, NODES, jobs=[ran_long, fresh])
        body = hook.pool_sync(mc.pool_request(w, (), hook.pool))
        phases = {c["metadata"]["name"]: c["spec"]["phase"] for c in body["children"]}
        admitted[policy] = sorted(n for n, p in phases.items() if p == "Admitted")
    assert admitted == {"dragonet": ["tfjob-ranlong"], "dragonet-las": ["tfjob-fresh"]}
