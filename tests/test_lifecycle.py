"""Kubeflow v1 lifecycle: restarts by exit code, success rules, cleanup, deadlines, suspend."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import metacontroller as mc
from tests.conftest import (
    Clock,
    Hook,
    condition,
    node_of,
    observe,
    pods_of,
    services_of,
    with_status,
)

NODES = [mc.node("n-1", cpu="32", memory="128Gi")]


class Run:
    """One job through successive syncs, with the cluster reporting pod states between."""

    def __init__(self, hook: Hook, manifest: dict[str, Any] | str, **job: Any) -> None:
        self.hook = hook
        self.parent = mc.tfjob(manifest, **job)
        self.pods: list[dict[str, Any]] = []
        self.services: list[dict[str, Any]] = []
        self.body = self.sync()
        self.pods, self.services = observe(self.parent, self.body)

    def sync(self) -> dict[str, Any]:
        request = mc.world(self.parent, NODES, pods=self.pods, services=self.services)
        self.body = self.hook.sync(request)
        self.parent = with_status(self.parent, self.body)
        return self.body

    def set_pod(self, name: str, **state: Any) -> None:
        """The cluster reports a new state for one pod (by re-observing its child)."""
        self.pods = [
            mc.observed_pod(self.parent, self._child(name), **state)
            if p["metadata"]["name"] == name
            else p
            for p in self.pods
        ]

    def _child(self, name: str) -> dict[str, Any]:
        pod = copy.deepcopy(next(p for p in self.pods if p["metadata"]["name"] == name))
        pod["metadata"]["labels"].pop("controller-uid")
        pod.pop("status")
        return pod

    def drop_pods_not_in_answer(self) -> None:
        """Metacontroller deleted what the answer omitted; the deletions completed."""
        wanted = set(pods_of(self.body))
        self.pods = [p for p in self.pods if p["metadata"]["name"] in wanted]
        have = {p["metadata"]["name"] for p in self.pods}
        for name, child in pods_of(self.body).items():
            if name not in have:
                self.pods.append(mc.observed_pod(self.parent, child, phase="Pending"))


def _job1(**changes: Any) -> dict[str, Any]:
    job = mc.compat("dragon-job1-cpu.yaml")
    job["spec"].update(changes)
    return job


def _with_policy(policy: str) -> dict[str, Any]:
    job = _job1()
    for spec in job["spec"]["tfReplicaSpecs"].values():
        spec["restartPolicy"] = policy
    return job


def test_retryable_exit_code_restarts_only_that_pod(hook: Hook) -> None:
    run = Run(hook, _with_policy("ExitCode"))
    run.set_pod("job1-worker-2", phase="Failed", exit_code=137)
    body = run.sync()
    assert set(pods_of(body)) == {"job1-ps-0", "job1-worker-0", "job1-worker-1", "job1-worker-3"}
    assert "job1-worker-2" in services_of(body), "a restarting pod keeps its DNS name"
    assert condition(body, "Restarting")["status"] == "True"
    assert condition(body, "Failed") is None
    # Once the failed pod is gone, it comes back on a node with room, same name and index.
    run.drop_pods_not_in_answer()
    body = run.sync()
    assert "job1-worker-2" in pods_of(body)
    assert node_of(pods_of(body)["job1-worker-2"]) == "n-1"
    assert pods_of(body)["job1-worker-2"]["spec"]["restartPolicy"] == "Never"


def test_permanent_exit_code_fails_the_job_and_says_which_pod(hook: Hook) -> None:
    run = Run(hook, _with_policy("ExitCode"))
    run.set_pod("job1-worker-1", phase="Failed", exit_code=1)
    body = run.sync()
    failed = condition(body, "Failed")
    assert failed["status"] == "True" and failed["reason"] == "TFJobFailed"
    assert "job1-worker-1 exited with code 1" in failed["message"]
    assert body["children"] == []  # job1 says cleanPodPolicy: All
    assert body["status"]["completionTime"] == body["status"]["finishedTime"]
    assert body["status"]["scheduling"]["phase"] == "Finished"


@pytest.mark.parametrize(("code", "retried"), [(1, False), (127, False), (128, True), (255, True)])
def test_exit_code_policy_retries_128_and_above_and_fails_on_1_to_127(
    hook: Hook, code: int, retried: bool
) -> None:
    """Kubeflow's IsRetryableExitCode is ``code >= 128``: the boundary both ways."""
    run = Run(hook, _with_policy("ExitCode"))
    run.set_pod("job1-worker-2", phase="Failed", exit_code=code)
    body = run.sync()
    if retried:
        assert condition(body, "Failed") is None
        assert condition(body, "Restarting")["status"] == "True"
        assert "job1-worker-2" not in pods_of(body)  # deleted, to be created again
        assert len(pods_of(body)) == 4
    else:
        failed = condition(body, "Failed")
        assert failed["status"] == "True" and failed["reason"] == "TFJobFailed"
        assert f"job1-worker-2 exited with code {code}, a permanent error" in failed["message"]
        assert condition(body, "Restarting") is None


def test_the_exit_code_is_the_tensorflow_containers_not_a_sidecars(hook: Hook) -> None:
    """A sidecar that exited 1 next to a tensorflow container killed with 137 (on either
    side of it in the pod's status) is a retryable failure, not a permanent one."""
    job = _with_policy("ExitCode")
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["containers"].append({"name": "log-shipper", "image": "fluent-bit:3"})
    run = Run(hook, job)

    def terminated(name: str, code: int) -> dict[str, Any]:
        return {
            "name": name,
            "ready": False,
            "restartCount": 0,
            "image": "x",
            "imageID": "",
            "state": {"terminated": {"exitCode": code, "reason": "Error", "finishedAt": mc.T0}},
        }

    for pod, first in (("job1-worker-1", "log-shipper"), ("job1-worker-2", "tensorflow")):
        run.set_pod(pod, phase="Failed")
        observed = next(p for p in run.pods if p["metadata"]["name"] == pod)
        both = {
            "log-shipper": terminated("log-shipper", 1),
            "tensorflow": terminated("tensorflow", 137),
        }
        second = "tensorflow" if first == "log-shipper" else "log-shipper"
        observed["status"]["containerStatuses"] = [both[first], both[second]]
    body = run.sync()
    assert condition(body, "Failed") is None
    assert condition(body, "Restarting")["status"] == "True"
    assert set(pods_of(body)) == {"job1-ps-0", "job1-worker-0", "job1-worker-3"}


def test_each_replica_type_follows_its_own_restart_policy(hook: Hook) -> None:
    """Workers under ExitCode are retried on 137; the PS under Never fails the job on it."""
    job = _job1()
    job["spec"]["tfReplicaSpecs"]["PS"]["restartPolicy"] = "Never"
    job["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    run = Run(hook, job)
    run.set_pod("job1-worker-1", phase="Failed", exit_code=137)
    body = run.sync()
    assert condition(body, "Failed") is None
    assert "job1-worker-1" not in pods_of(body)
    run.drop_pods_not_in_answer()
    run.set_pod("job1-ps-0", phase="Failed", exit_code=137)
    failed = condition(run.sync(), "Failed")
    assert failed["status"] == "True"
    assert "job1-ps-0 failed (exit code 137) and restartPolicy is Never" in failed["message"]


def test_a_pod_evicted_before_its_container_ran_is_retried_under_exit_code(hook: Hook) -> None:
    run = Run(hook, _with_policy("ExitCode"))
    run.pods = [
        {**p, "status": {"phase": "Failed", "reason": "Evicted"}}
        if p["metadata"]["name"] == "job1-ps-0"
        else p
        for p in run.pods
    ]
    body = run.sync()
    assert "job1-ps-0" not in pods_of(body)
    assert condition(body, "Failed") is None


def test_never_policy_fails_the_job_on_any_failed_pod(hook: Hook) -> None:
    run = Run(hook, _with_policy("Never"))
    run.set_pod("job1-ps-0", phase="Failed", exit_code=143)
    assert condition(run.sync(), "Failed")["status"] == "True"


def test_dynamic_workers_may_fail_without_failing_the_job(hook: Hook) -> None:
    job = _with_policy("Never")
    job["spec"]["enableDynamicWorker"] = True
    run = Run(hook, job)
    run.set_pod("job1-worker-3", phase="Failed", exit_code=1)
    body = run.sync()
    assert condition(body, "Failed") is None
    assert "job1-worker-3" in pods_of(body)  # kept, not restarted


def test_worker_0_exiting_0_completes_the_job_and_cleanup_follows_policy(hook: Hook) -> None:
    run = Run(hook, _job1(cleanPodPolicy="None"))
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    body = run.sync()
    assert condition(body, "Succeeded")["status"] == "True"
    assert condition(body, "Succeeded")["reason"] == "TFJobSucceeded"
    assert len(pods_of(body)) == 5, "cleanPodPolicy None keeps every pod"
    statuses = body["status"]["replicaStatuses"]
    assert statuses["Worker"] == {"active": 0, "succeeded": 4, "failed": 0}


@pytest.mark.parametrize(
    ("policy", "kept"),
    [("All", set()), ("Running", {"job1-worker-0"}), ("None", "all")],
)
def test_clean_pod_policy_after_success(hook: Hook, policy: str, kept: Any) -> None:
    job = _job1()
    del job["spec"]["cleanPodPolicy"]
    job["spec"]["runPolicy"] = {"cleanPodPolicy": policy}
    run = Run(hook, job)
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    run.set_pod("job1-worker-3", phase="Pending")  # Running deletes Pending pods too
    body = run.sync()
    assert condition(body, "Succeeded")["status"] == "True"
    expected = set(pods_of(run.body)) if kept == "all" else kept
    assert set(pods_of(body)) == expected
    assert set(services_of(body)) == expected


def test_a_running_condition_is_flipped_false_on_completion(hook: Hook) -> None:
    run = Run(hook, _job1())
    body = run.sync()  # pods are Running now
    assert condition(body, "Running")["status"] == "True"
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    body = run.sync()
    assert condition(body, "Running")["status"] == "False"
    assert [c["type"] for c in body["status"]["conditions"]][-1] == "Succeeded"


def test_only_worker_0_completes_a_job_without_a_chief(hook: Hook) -> None:
    run = Run(hook, _job1(cleanPodPolicy="None"))
    run.set_pod("job1-worker-1", phase="Succeeded", exit_code=0)
    body = run.sync()
    assert condition(body, "Succeeded") is None
    assert condition(body, "Running")["status"] == "True"


def test_parameter_server_completion_does_not_complete_the_job(hook: Hook) -> None:
    run = Run(hook, _job1())
    run.set_pod("job1-ps-0", phase="Succeeded", exit_code=0)
    body = run.sync()
    assert condition(body, "Succeeded") is None


def test_all_workers_policy_waits_for_every_worker(hook: Hook) -> None:
    run = Run(hook, _job1(successPolicy="AllWorkers"))
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    assert condition(run.sync(), "Succeeded") is None
    for i in (1, 2, 3):
        run.set_pod(f"job1-worker-{i}", phase="Succeeded", exit_code=0)
    assert condition(run.sync(), "Succeeded")["status"] == "True"


def test_chief_decides_success_even_with_workers_running(hook: Hook) -> None:
    job = _job1()
    job["spec"]["tfReplicaSpecs"]["Chief"] = copy.deepcopy(job["spec"]["tfReplicaSpecs"]["PS"])
    run = Run(hook, job)
    assert "job1-chief-0" in pods_of(run.body)
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    assert condition(run.sync(), "Succeeded") is None  # worker 0 is not the chief here
    run.set_pod("job1-chief-0", phase="Succeeded", exit_code=0)
    assert condition(run.sync(), "Succeeded")["status"] == "True"


def test_with_a_chief_the_job_runs_when_the_chief_does_not_its_workers(hook: Hook) -> None:
    """Kubeflow: a job with a Chief is Running when its chief is active; workers running
    while the chief is still pending do not make it Running."""
    job = _job1()
    job["spec"]["tfReplicaSpecs"]["Chief"] = copy.deepcopy(job["spec"]["tfReplicaSpecs"]["PS"])
    run = Run(hook, job)
    run.set_pod("job1-chief-0", phase="Pending")
    assert condition(run.sync(), "Running") is None
    run.set_pod("job1-chief-0", phase="Running")
    assert condition(run.sync(), "Running")["status"] == "True"


def test_a_running_pod_being_deleted_counts_as_failed_not_active(hook: Hook) -> None:
    """Kubeflow's replica statuses: Running with a deletionTimestamp is failed."""
    run = Run(hook, _job1())
    run.set_pod("job1-worker-2", phase="Running", terminating=True)
    statuses = run.sync()["status"]["replicaStatuses"]
    assert statuses["Worker"] == {"active": 3, "succeeded": 0, "failed": 1}
    assert statuses["PS"] == {"active": 1, "succeeded": 0, "failed": 0}


def test_first_terminal_condition_wins(hook: Hook) -> None:
    run = Run(hook, _job1(cleanPodPolicy="None"))
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    run.sync()
    run.set_pod("job1-worker-1", phase="Failed", exit_code=1)
    body = run.sync()
    assert condition(body, "Succeeded")["status"] == "True"
    assert condition(body, "Failed") is None


def test_active_deadline_fires_on_time_and_removes_everything(hook: Hook, clock: Clock) -> None:
    job = _job1(cleanPodPolicy="None")
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 600}
    run = Run(hook, job)
    body = run.sync()
    assert body["resyncAfterSeconds"] == 600  # admitted just now: the full deadline is left
    clock.advance(240)
    assert run.sync()["resyncAfterSeconds"] == 360
    clock.advance(360)
    body = run.sync()
    failed = condition(body, "Failed")
    assert failed["reason"] == "TFJobDeadlineExceeded"
    assert body["children"] == [], "a deadline removes all pods, whatever cleanPodPolicy says"
    assert "resyncAfterSeconds" not in body


def test_backoff_limit_counts_container_restarts(hook: Hook) -> None:
    job = _job1()
    job["spec"]["runPolicy"] = {"backoffLimit": 3}
    run = Run(hook, job)
    run.set_pod("job1-worker-1", phase="Running", restarts=2)
    assert condition(run.sync(), "Failed") is None
    run.set_pod("job1-worker-2", phase="Running", restarts=1)
    body = run.sync()
    assert condition(body, "Failed")["reason"] == "TFJobBackoffLimitExceeded"
    assert body["children"] == []


def test_backoff_limit_counts_restarts_of_every_container_of_a_pod(hook: Hook) -> None:
    """Kubeflow sums the restartCount of all of a running pod's containers: a crashing
    sidecar counts as much as the tensorflow container."""
    job = _job1()
    job["spec"]["runPolicy"] = {"backoffLimit": 3}
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["containers"].append({"name": "log-shipper", "image": "fluent-bit:3"})
    run = Run(hook, job)
    run.set_pod("job1-worker-1", phase="Running", restarts=1)
    pod = next(p for p in run.pods if p["metadata"]["name"] == "job1-worker-1")
    pod["status"]["containerStatuses"].append(
        {
            "name": "log-shipper",
            "ready": True,
            "restartCount": 2,
            "image": "fluent-bit:3",
            "imageID": "",
            "state": {"running": {"startedAt": mc.T0}},
        }
    )
    body = run.sync()
    assert condition(body, "Failed")["reason"] == "TFJobBackoffLimitExceeded"
    assert "(3 restarts, backoffLimit 3)" in condition(body, "Failed")["message"]


def test_run_policy_wins_over_the_legacy_top_level_field(hook: Hook) -> None:
    """job1 says cleanPodPolicy: All at spec top level (DRAGON's layout); Kubeflow's
    runPolicy saying None is the one that holds."""
    job = _job1()
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "None"}
    run = Run(hook, job)
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    body = run.sync()
    assert condition(body, "Succeeded")["status"] == "True"
    assert len(pods_of(body)) == 5


def test_suspend_removes_pods_and_resume_requeues(hook: Hook, clock: Clock) -> None:
    run = Run(hook, _job1())
    started = run.sync()["status"]["startTime"]
    assert started == "2026-11-21T10:01:00Z"  # admitted at its first sync
    run.parent["spec"]["runPolicy"] = {"suspend": True}
    body = run.sync()
    assert body["children"] == []
    assert condition(body, "Suspended")["status"] == "True"
    assert condition(body, "Running")["status"] == "False"
    assert body["status"]["scheduling"]["phase"] == "Suspended"
    # Kubeflow keeps startTime while a job is suspended; the queue's times go.
    assert body["status"]["startTime"] == started
    assert "enqueueTime" not in body["status"] and "startRunTime" not in body["status"]
    run.pods, run.services = [], []
    clock.advance(30)
    assert run.sync()["status"]["startTime"] == started  # still suspended: still kept
    run.parent["spec"]["runPolicy"] = {"suspend": False}
    body = run.sync()
    assert condition(body, "Suspended")["status"] == "False"
    assert condition(body, "Suspended")["reason"] == "TFJobResumed"
    assert len(pods_of(body)) == 5
    # It runs again from now (Kubeflow resets startTime on resume), at the queue's back.
    assert body["status"]["enqueueTime"] == body["status"]["startTime"] == "2026-11-21T10:01:30Z"


def test_a_job_suspended_from_creation_has_no_start_time(hook: Hook) -> None:
    job = _job1()
    job["spec"]["runPolicy"] = {"suspend": True}
    body = Run(hook, job).body
    assert body["children"] == []
    assert "startTime" not in body["status"]
    assert [(c["type"], c["status"]) for c in body["status"]["conditions"]] == [
        ("Created", "True"),
        ("Suspended", "True"),
    ]


def test_time_spent_suspended_never_counts_toward_the_deadline(hook: Hook, clock: Clock) -> None:
    """Ran 5 of its 10 minutes, then was suspended for an hour: resumed, it gets its 10
    minutes again from when it runs, instead of failing at once on a deadline that passed
    while it was suspended."""
    job = _job1()
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 600}
    run = Run(hook, job)
    clock.advance(300)
    assert run.sync()["resyncAfterSeconds"] == 300
    run.parent["spec"]["runPolicy"]["suspend"] = True
    run.sync()
    run.pods, run.services = [], []
    clock.advance(3600)
    run.parent["spec"]["runPolicy"]["suspend"] = False
    body = run.sync()
    assert condition(body, "Failed") is None
    assert len(pods_of(body)) == 5
    run.pods, run.services = observe(run.parent, body)
    clock.advance(60)
    body = run.sync()
    assert condition(body, "Failed") is None
    assert body["status"]["startTime"] == "2026-11-21T11:06:00Z"  # when it resumed
    assert body["resyncAfterSeconds"] == 540


def test_status_is_stable_when_nothing_changes(hook: Hook, clock: Clock) -> None:
    """Metacontroller re-syncs on every status change: an unchanged world must give an
    unchanged status, or the job hot-loops."""
    run = Run(hook, _job1())
    first = run.sync()
    clock.advance(45)
    second = run.sync()
    assert second["status"] == first["status"]
    assert second["children"] == first["children"]


def test_a_resumed_jobs_start_is_not_taken_from_pods_its_suspension_deleted(
    hook: Hook,
) -> None:
    """Resumed while the pods its suspension deleted still terminate (created at 10:00):
    its new start is when this sync admits it again (10:01), not those pods' creation."""
    job = _job1()
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 600}
    status = {
        "startTime": "2026-11-21T09:00:00Z",
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TFJobCreated"},
            {"type": "Running", "status": "False", "reason": "TFJobSuspended"},
            {"type": "Suspended", "status": "True", "reason": "TFJobSuspended"},
        ],
    }
    parent = mc.tfjob(job, status=status)
    placed = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]
    admission = mc.admission(parent, placed, workers=4)
    rendered = hook.job_sync(mc.job_request(mc.world(mc.tfjob(job), NODES), admission))
    leaving = [mc.observed_pod(parent, p, terminating=True) for p in pods_of(rendered).values()]
    body = hook.job_sync(mc.job_request(mc.world(parent, NODES, pods=leaving), admission))
    assert condition(body, "Suspended")["reason"] == "TFJobResumed"
    assert condition(body, "Failed") is None
    assert body["status"]["startTime"] == "2026-11-21T10:01:00Z"


@pytest.mark.parametrize("suspend_after", [True, False])
def test_a_job_that_finishes_while_suspended_keeps_a_stable_status(
    hook: Hook, clock: Clock, suspend_after: bool
) -> None:
    """Suspended, and its worker 0 succeeds before its pods are gone: the job is finished,
    though its status still says Suspended. Whether its spec still asks for suspension or
    not, later syncs must write the same status (a finished job is never resumed), or
    Metacontroller re-syncs it for ever."""
    run = Run(hook, _job1(cleanPodPolicy="None"))
    run.parent["spec"]["runPolicy"] = {"suspend": True}
    assert condition(run.sync(), "Suspended")["status"] == "True"
    run.set_pod("job1-worker-0", phase="Succeeded", exit_code=0)
    run.parent["spec"]["runPolicy"] = {"suspend": suspend_after}
    first = run.sync()
    assert condition(first, "Succeeded")["status"] == "True"
    clock.advance(45)
    second = run.sync()
    assert second["status"] == first["status"]
