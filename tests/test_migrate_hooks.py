"""Migration at the hooks, request by request, shaped as Metacontroller sends them.

The job's side reads Admissions written out by the test (the contract, not the pool's
plan); the pool's side gets Migration requests as related objects; the Migration
controller's side copies answers. Every answer is validated (``tests.conftest.Hook``)."""

from __future__ import annotations

import copy
from typing import Any

from policy.model.migration import TYPE_KEY as MIGRATIONS
from policy.model.migration import request_object
from tests import metacontroller as mc
from tests.conftest import Hook, node_of, observe, pods_of, services_of, tf_config
from tests.kube_schema import validate_custom

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers (limits 4 CPU / 8Gi), min 1, max 4
NODES = [mc.node("n-1", cpu="64", memory="256Gi"), mc.node("n-2", cpu="64", memory="256Gi")]
ALL = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]


def _moving(job: dict[str, Any], generation: int = 2) -> dict[str, Any]:
    """An Admission that moves worker 2 from n-1 to n-2 (its first move)."""
    adm = mc.admission(job, ALL, workers=4, generation=generation)
    entry = next(p for p in adm["spec"]["pods"] if p["type"] == "Worker" and p["index"] == 2)
    entry.update(node="n-2", pod="job1-worker-2-m1", **{"from": "n-1"})
    adm["spec"]["moves"] = [
        {"type": "Worker", "index": 2, "count": 1, "time": mc.T0, "from": "n-1", "to": "n-2"}
    ]
    return adm


def _running(hook: Hook, job: dict[str, Any]) -> list[dict[str, Any]]:
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), mc.admission(job, ALL, workers=4)))
    pods, _ = observe(job, body)
    for p in pods:
        p["metadata"].setdefault("annotations", {})["dragonet.io/admission"] = "1"
    return pods


def test_a_move_creates_the_replacement_and_keeps_the_old_pod_until_it_runs(
    hook: Hook,
) -> None:
    job = mc.tfjob(JOB)
    pods = _running(hook, job)
    body = hook.job_sync(mc.job_request(mc.world(job, NODES, pods=pods), _moving(job)))
    placed = pods_of(body)
    assert {n: node_of(p) for n, p in placed.items() if "worker-2" in n} == {
        "job1-worker-2": "n-1",
        "job1-worker-2-m1": "n-2",
    }
    new, old = placed["job1-worker-2-m1"], placed["job1-worker-2"]
    assert tf_config(new) == tf_config(old)
    assert new["metadata"]["labels"] == old["metadata"]["labels"]
    assert new["metadata"]["annotations"]["dragonet.io/move"] == "1"
    assert "job1-worker-2" in services_of(body) and "job1-worker-2-m1" not in services_of(body)

    # The replacement exists but does not run yet: both stay.
    pending = mc.observed_pod(job, new, phase="Pending")
    body = hook.job_sync(mc.job_request(mc.world(job, NODES, pods=[*pods, pending]), _moving(job)))
    assert {"job1-worker-2", "job1-worker-2-m1"} <= set(pods_of(body))

    # It runs: the old pod is left out (Metacontroller deletes it); nothing else changes.
    running = mc.observed_pod(job, new)
    body = hook.job_sync(mc.job_request(mc.world(job, NODES, pods=[*pods, running]), _moving(job)))
    assert sorted(pods_of(body)) == [
        "job1-ps-0",
        "job1-worker-0",
        "job1-worker-1",
        "job1-worker-2-m1",
        "job1-worker-3",
    ]
    assert body["status"]["scheduling"]["moves"][0]["count"] == 1


def test_an_admission_that_does_not_name_a_moved_workers_pod_keeps_that_pod(hook: Hook) -> None:
    """Facts beat plans: an Admission rebuilt without ``pod`` names never replaces a moved
    worker's running pod by a fresh ``{job}-worker-{i}``."""
    job = mc.tfjob(JOB)
    pods = _running(hook, job)
    moved = next(p for p in pods if p["metadata"]["name"] == "job1-worker-2")
    moved = copy.deepcopy(moved)
    moved["metadata"]["name"] = "job1-worker-2-m1"
    others = [p for p in pods if p["metadata"]["name"] != "job1-worker-2"]
    body = hook.job_sync(
        mc.job_request(
            mc.world(job, NODES, pods=[*others, moved]),
            mc.admission(job, ALL, workers=4, generation=2),
        )
    )
    assert "job1-worker-2-m1" in pods_of(body) and "job1-worker-2" not in pods_of(body)


def _pool_request(
    w: mc.World, admissions: Any, requests: list[dict[str, Any]], hook: Hook
) -> dict[str, Any]:
    request = mc.pool_request(w, admissions, hook.pool)
    request["related"][MIGRATIONS] = {
        f"{r['metadata']['namespace']}/{r['metadata']['name']}": r for r in requests
    }
    return request


def _stored(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update(uid=uid, resourceVersion="900", creationTimestamp=mc.T0, generation=1)
    return out


def _world_with_pods(hook: Hook) -> tuple[mc.World, list[dict[str, Any]]]:
    job = mc.tfjob(JOB)
    w = mc.world(job, NODES)
    hook.pool_sync(mc.pool_request(w, [], hook.pool))
    body = hook.job_sync(mc.job_request(w, hook.admission(job)))
    pods, svcs = observe(job, body)
    for p in pods:
        p["metadata"].setdefault("annotations", {})["dragonet.io/admission"] = "1"
    return mc.world(job, NODES, pods=pods, services=svcs), pods


def test_the_pool_answers_a_request_in_the_jobs_admission_and_answers_it_alike_again(
    hook: Hook,
) -> None:
    w, pods = _world_with_pods(hook)
    worker = next(p for p in pods if p["metadata"]["name"] == "job1-worker-3")
    request = _stored(request_object(worker, "Overloaded", "monitor/n-1"), "mig-1")
    validate_custom(request)
    hook.pool_sync(_pool_request(w, hook.admissions.values(), [request], hook))
    adm = hook.admission(w.parent)
    assert adm is not None
    (answer,) = adm["spec"]["migrations"]
    assert answer["request"] == "job1-worker-3" and answer["uid"] == "mig-1"
    # n-1 has CPU for all of job1: a move would only lose its PS's locality.
    assert (answer["phase"], answer["reason"]) == ("Refused", "SameNode"), answer
    assert answer["message"] == "no node would run job1-worker-3 faster than n-1"
    assert "moves" not in adm["spec"]
    # A fresh webhook process reading the same objects answers the same.
    again = Hook(clock=hook.clock)
    again.admissions = {k: copy.deepcopy(v) for k, v in hook.admissions.items()}
    again.pool_sync(_pool_request(w, again.admissions.values(), [request], again))
    assert again.admission(w.parent)["spec"] == adm["spec"]


def test_a_manual_request_moves_even_without_gain_and_records_the_count(hook: Hook) -> None:
    w, pods = _world_with_pods(hook)
    worker = next(p for p in pods if p["metadata"]["name"] == "job1-worker-3")
    request = _stored(request_object(worker, "Manual", "kubectl"), "mig-4")
    hook.pool_sync(_pool_request(w, hook.admissions.values(), [request], hook))
    spec = hook.admission(w.parent)["spec"]
    (answer,) = spec["migrations"]
    assert (answer["phase"], answer["to"], answer["move"]) == ("Moving", "n-2", 1)
    entry = next(p for p in spec["pods"] if p["type"] == "Worker" and p["index"] == 3)
    assert entry == {
        "type": "Worker",
        "index": 3,
        "node": "n-2",
        "pod": "job1-worker-3-m1",
        "from": "n-1",
    }
    assert [(m["index"], m["count"]) for m in spec["moves"]] == [(3, 1)]
    # The job's sync then starts the replacement on n-2.
    body = hook.job_sync(mc.job_request(w, hook.admission(w.parent)))
    assert node_of(pods_of(body)["job1-worker-3-m1"]) == "n-2"
    assert "job1-worker-3" in pods_of(body)


def test_the_migration_controller_reports_the_pools_answer(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    pods = _running(hook, job)
    worker = next(p for p in pods if p["metadata"]["name"] == "job1-worker-2")
    request = _stored(request_object(worker, "Manual", "kubectl"), "mig-2")
    rules = hook.post("/migrations/customize", {"controller": {}, "parent": request}).get_json()
    assert rules == {
        "relatedResources": [
            {
                "apiVersion": "dragonet.io/v1alpha1",
                "resource": "admissions",
                "namespace": "default",
                "names": ["tfjob-job1", "mxjob-job1", "pytorchjob-job1"],
            }
        ]
    }
    adm = _moving(job)
    adm["spec"]["migrations"] = [
        {
            "request": "job1-worker-2",
            "uid": "mig-2",
            "pod": "job1-worker-2",
            "phase": "Moving",
            "reason": "Planned",
            "message": "moving job1-worker-2 from n-1 to n-2 as job1-worker-2-m1",
            "from": "n-1",
            "to": "n-2",
            "move": 1,
        }
    ]
    validate_custom(adm)

    def sync(parent: dict[str, Any], admissions: list[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "controller": {},
            "parent": parent,
            "children": {},
            "related": {
                "Admission.dragonet.io/v1alpha1": {
                    f"default/{a['metadata']['name']}": a for a in admissions
                }
            },
        }
        response = hook.post("/migrations/sync", body)
        assert response.status_code == 200, response.get_data(as_text=True)
        answer = response.get_json()
        assert answer["children"] == []
        validate_custom({**parent, "status": answer["status"]})
        return answer["status"]

    assert sync(request, [adm]) == {
        "phase": "Moving",
        "target": "n-2",
        "reason": "Planned",
        "message": "moving job1-worker-2 from n-1 to n-2 as job1-worker-2-m1",
    }
    waiting = sync(request, [])
    assert waiting["phase"] == "Pending" and waiting["reason"] == "WaitingForPool"
    # Once the job's Admission is gone, an answer given is kept.
    answered = {**request, "status": {"phase": "Refused", "reason": "NoRoom", "message": "x"}}
    assert sync(answered, []) == {"phase": "Refused", "reason": "NoRoom", "message": "x"}
    # A request for another job's pod of the same name is not this one's answer.
    other = copy.deepcopy(request)
    other["metadata"]["uid"] = "mig-3"
    assert sync(other, [adm])["phase"] == "Pending"


def test_a_malformed_migration_hook_request_is_a_400(hook: Hook) -> None:
    response = hook.post("/migrations/customize", {"controller": {}, "parent": {"metadata": 3}})
    assert response.status_code == 400 and "error" in response.get_json()


def test_an_unreadable_request_is_named_in_the_pools_status_and_plans_go_on(
    hook: Hook,
) -> None:
    w, pods = _world_with_pods(hook)
    worker = next(p for p in pods if p["metadata"]["name"] == "job1-worker-3")
    good = _stored(request_object(worker, "Manual", "kubectl"), "mig-5")
    broken = _stored(request_object(worker, "Manual", "kubectl"), "mig-6")
    broken["metadata"]["name"] = "broken"
    broken["spec"] = {"pod": 7}
    body = hook.pool_sync(_pool_request(w, hook.admissions.values(), [good, broken], hook))
    assert any("Migration default/broken is left out" in p for p in body["status"]["problems"])
    (answer,) = hook.admission(w.parent)["spec"]["migrations"]
    assert (answer["request"], answer["phase"]) == ("job1-worker-3", "Moving")
