"""The contract between the tiers: what a pool's Admission makes a job do, and what a job
does without one. Each job sync here reads an Admission written out by the test
(``mc.admission``), so these tests pin the contract, not the pool's plan."""

from __future__ import annotations

from bisect import bisect_right

from policy.pool.attained_service import REMAINING_LADDER_S, UNMEASURED_LEFT_S
from tests import metacontroller as mc
from tests.conftest import Hook, node_of, pods_of, services_of

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers, min 1, max 4
NODES = [mc.node("n-1", cpu="64", memory="256Gi"), mc.node("n-2", cpu="64", memory="256Gi")]
ALL = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]


def _sync(hook: Hook, job: dict, admission: dict | None, pods: list | None = None) -> dict:
    return hook.job_sync(mc.job_request(mc.world(job, NODES, pods=pods or []), admission))


def _running(job: dict, body: dict, generation: int = 1) -> list[dict]:
    """The pods of an answer as the cluster reports them, created from ``generation``."""
    pods = [mc.observed_pod(job, p) for p in pods_of(body).values()]
    for p in pods:
        p["metadata"].setdefault("annotations", {})["dragonet.io/admission"] = str(generation)
    return pods


def _placed(pods: list[dict]) -> dict[str, str]:
    """Each observed pod's name and node."""
    return {p["metadata"]["name"]: node_of(p) for p in pods}


def test_an_admitted_job_creates_exactly_the_pods_its_admission_places(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    placed = [("PS", 0, "n-2"), ("Worker", 0, "n-2"), ("Worker", 2, "n-1")]
    body = _sync(hook, job, mc.admission(job, placed, workers=2))
    assert {n: node_of(p) for n, p in pods_of(body).items()} == {
        "job1-ps-0": "n-2",
        "job1-worker-0": "n-2",
        "job1-worker-2": "n-1",
    }
    assert set(services_of(body)) == set(pods_of(body))
    assert body["status"]["scheduling"]["phase"] == "Admitted"
    assert body["status"]["scheduling"]["workers"]["target"] == 2
    pod = pods_of(body)["job1-worker-2"]
    assert pod["metadata"]["annotations"]["dragonet.io/admission"] == "1"


def test_a_worker_the_admission_no_longer_lists_is_deleted_and_the_rest_stay(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    pods = _running(job, _sync(hook, job, mc.admission(job, ALL, workers=4)))
    shrunk = mc.admission(job, ALL[:-1], workers=3, generation=2)
    body = _sync(hook, job, shrunk, pods)
    assert sorted(pods_of(body)) == ["job1-ps-0", "job1-worker-0", "job1-worker-1", "job1-worker-2"]


def test_a_stale_admission_deletes_and_creates_nothing(hook: Hook) -> None:
    """The job sees a pod created from generation 3 but reads generation 2, which lists one
    worker less: its view of the Admission lags, so it keeps every pod."""
    job = mc.tfjob(JOB)
    pods = _running(job, _sync(hook, job, mc.admission(job, ALL, workers=4)), generation=3)
    stale = mc.admission(job, ALL[:-1], workers=3, generation=2)
    body = _sync(hook, job, stale, pods)
    assert {n: node_of(p) for n, p in pods_of(body).items()} == _placed(pods)
    assert "job1-worker-3" in pods_of(body)  # the worker generation 2 no longer lists


def test_without_an_admission_a_job_keeps_its_pods_and_says_what_it_waits_for(
    hook: Hook,
) -> None:
    job = mc.tfjob(JOB)
    pods = _running(job, _sync(hook, job, mc.admission(job, ALL, workers=4)))
    body = _sync(hook, job, None, pods)
    # Facts: a missing Admission never kills running pods, nor moves them.
    assert {n: node_of(p) for n, p in pods_of(body).items()} == _placed(pods)
    assert set(services_of(body)) == set(pods_of(body))
    fresh = _sync(Hook(), mc.tfjob(JOB), None)
    assert fresh["children"] == []
    assert fresh["status"]["scheduling"]["phase"] == "Queued"
    assert (
        "waiting for TrainingPool 'default' to plan it"
        in (fresh["status"]["scheduling"]["message"])
    )


def test_an_admission_of_an_earlier_job_of_the_same_name_is_ignored(hook: Hook) -> None:
    old = mc.tfjob(JOB, created="2026-11-20T10:00:00Z")
    new = mc.tfjob(JOB)  # same name, created again: another uid
    body = _sync(hook, new, mc.admission(old, ALL, workers=4))
    assert body["children"] == []


def test_a_queued_admission_creates_nothing_and_its_message_is_the_jobs(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    waiting = mc.admission(job, phase="Queued", message="waiting: jobs ahead claim it")
    body = _sync(hook, job, waiting)
    assert body["children"] == []
    assert body["status"]["scheduling"] == {
        "phase": "Queued",
        "pool": "default",
        "message": "waiting: jobs ahead claim it",
        "workers": {"current": 0, "target": 0, "min": 1, "max": 4},
        "nodes": [],
    }


def test_a_job_naming_a_pool_that_does_not_exist_is_told_so_by_the_default_pool() -> None:
    hook = Hook()
    lost = mc.compat(JOB)
    lost["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "gpu-poll"}}
    job = mc.tfjob(lost)
    w = mc.world(job, NODES)
    w.pools = [mc.pool("gpu"), mc.pool("cpu")]
    body = hook.sync(w)
    assert body["children"] == []
    message = body["status"]["scheduling"]["message"]
    assert "TrainingPool 'gpu-poll' does not exist (pools: default, cpu, gpu)" in message
    assert hook.last_pool["status"]["message"] == (
        "1 job(s) name pools that do not exist: gpu-poll"
    )


def test_a_pool_plans_only_its_own_jobs() -> None:
    mine = mc.tfjob(JOB, name="mine")
    theirs = mc.compat(JOB)
    theirs["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "team-b"}}
    other = mc.tfjob(theirs, name="theirs")
    hook = Hook(pool=mc.pool("team-a"))
    mine["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "team-a"}}
    answer = hook.pool_sync(
        mc.pool_request(mc.world(mine, NODES, jobs=[mine, other]), parent=hook.pool)
    )
    assert [a["spec"]["job"]["name"] for a in answer["children"]] == ["mine"]
    assert answer["status"]["admitted"] == 1 and answer["status"]["queued"] == 0


def test_a_pools_status_counts_nodes_jobs_and_usage(hook: Hook) -> None:
    big = mc.compat(JOB)
    big["spec"]["min-instances"] = 4
    first = mc.tfjob(big, name="first", created="2026-11-21T09:00:00Z")
    second = mc.tfjob(big, name="second", created="2026-11-21T09:00:01Z")
    nodes = [mc.node("n-1", cpu="20", memory="64Gi", gpu=2)]
    hook.pool_sync(mc.pool_request(mc.world(first, nodes, jobs=[first, second])))
    status = hook.last_pool["status"]
    # first is admitted; its pods do not exist yet, so nothing is allocated so far.
    assert status == {
        "nodes": 1,
        "queued": 1,
        "admitted": 1,
        "capacity": {
            "cpu": "20",
            "ephemeral-storage": "100Gi",
            "memory": "64Gi",
            "nvidia.com/gpu": "2",
        },
        "allocated": {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "nvidia.com/gpu": "0"},
        "usage": "0/2 GPU",
        "nodeAllocation": [
            {
                "name": "n-1",
                "allocatable": {
                    "cpu": "20",
                    "ephemeral-storage": "100Gi",
                    "memory": "64Gi",
                    "nvidia.com/gpu": "2",
                },
                "allocated": {
                    "cpu": "0",
                    "ephemeral-storage": "0",
                    "memory": "0",
                    "nvidia.com/gpu": "0",
                },
            }
        ],
        # The queue in the open: second waits behind first's claim on the one node.
        "queue": [
            {
                "position": 1,
                "job": "default/second",
                "kind": "TFJob",
                "priority": 0,
                "enqueued": "2026-11-21T09:00:01Z",
                # (the default policy orders by the GPU-time left; a job that has not
                # said how far it is stands where a new job is assumed to)
                "lasQueue": bisect_right(REMAINING_LADDER_S, UNMEASURED_LEFT_S),
                "reason": "WaitingForCapacity",
            }
        ],
        # The pool admits (spec.stopPolicy None): Kueue's Active condition, since now.
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can admit new jobs",
                "lastTransitionTime": "2026-11-21T10:01:00Z",
            }
        ],
    }


def test_an_invalid_pool_spec_keeps_every_admission_and_says_why(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    hook.sync(mc.world(job, NODES))
    broken = mc.pool()
    broken["spec"] = {"policy": "fastest"}
    answer = hook.post(
        "/pools/sync", mc.pool_request(mc.world(job, NODES), hook.admissions.values(), broken)
    ).get_json()
    assert [a["metadata"]["name"] for a in answer["children"]] == ["tfjob-job1"]
    assert answer["children"][0]["spec"] == next(iter(hook.admissions.values()))["spec"]
    assert "spec.policy is invalid" in answer["status"]["message"]


def test_a_pools_status_publishes_each_nodes_allocation_for_the_monitor(hook: Hook) -> None:
    """The Container Monitor compares nodes by what their pods request (monitor/imbalance.py)."""
    job = mc.tfjob(JOB)
    placed = [("PS", 0, "n-2"), ("Worker", 0, "n-2"), ("Worker", 2, "n-1")]
    pods = _running(job, _sync(hook, job, mc.admission(job, placed, workers=2)))
    hook.pool_sync(mc.pool_request(mc.world(job, NODES, pods=pods)))
    rows = {r["name"]: r for r in hook.last_pool["status"]["nodeAllocation"]}
    assert list(rows) == ["n-1", "n-2"]
    assert rows["n-1"]["allocatable"]["cpu"] == "64"
    # Each pod gives limits only (4 cpu, 8Gi), which count as its requests.
    assert (rows["n-1"]["allocated"]["cpu"], rows["n-1"]["allocated"]["memory"]) == ("4", "8Gi")
    assert (rows["n-2"]["allocated"]["cpu"], rows["n-2"]["allocated"]["memory"]) == ("8", "16Gi")
    totals = hook.last_pool["status"]["allocated"]
    assert (totals["cpu"], totals["memory"]) == ("12", "24Gi")
