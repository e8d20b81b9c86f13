"""External gang schedulers (issue 14): a pool that delegates the final binding to
kube-batch, Volcano or scheduler-plugins' coscheduling.

The pool still queues, admits and places; its Admission says which backend binds. The job's
sync writes that backend's PodGroup (fields as Kubeflow's training-operator writes them) and
marks the pods (schedulerName, the group annotation or label, the planned node as preferred
affinity). Every PodGroup is checked against the CRD its project publishes
(``tests/schemas/``), every other child against Kubernetes' schemas (``Hook.job_sync``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import metacontroller as mc
from tests.conftest import Hook, condition, load_fixture, pods_of
from tests.kube_schema import validate_custom, validate_pod_group

JOB = "kubeflow/tfjob-gang-scheduling"  # gang-tfjob.yaml: 1 PS (1 cpu), 1 Worker (1 GPU)
GANG_NODES = [mc.node(f"gpu-{i}", cpu="8", gpu=1, labels={"gpu": "1060g1"}) for i in (1, 2)]
BACKENDS = {  # backend: (PodGroup apiVersion, the pods' schedulerName)
    "kube-batch": ("scheduling.incubator.k8s.io/v1alpha1", "kube-batch"),
    "volcano": ("scheduling.volcano.sh/v1beta1", "volcano"),
    "coscheduling": ("scheduling.x-k8s.io/v1alpha1", "scheduler-plugins-scheduler"),
}
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def pod_groups(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in body["children"] if c["kind"] == "PodGroup"]


def preferred_hosts(pod: dict[str, Any]) -> list[tuple[int, str]]:
    affinity = pod["spec"].get("affinity", {}).get("nodeAffinity", {})
    return [
        (p["weight"], e["values"][0])
        for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", [])
        for e in p["preference"]["matchExpressions"]
        if e["key"] == "kubernetes.io/hostname"
    ]


# --- 1. the job's sync, in Metacontroller's request shape (tests/fixtures/) ------------------


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_an_admitted_job_gets_its_backends_pod_group_with_kubeflows_fields(
    hook: Hook, backend: str
) -> None:
    body = hook.job_sync(load_fixture(f"job-sync-gang-tfjob-{backend}.json"))
    (group,) = pod_groups(body)
    api_version, _ = BACKENDS[backend]
    assert group["apiVersion"] == api_version
    assert (group["metadata"]["namespace"], group["metadata"]["name"]) == tuple(JOB.split("/"))
    # minMember: every pod the Admission places (Kubeflow: the sum of all replicas);
    # minResources: what they request (the templates give limits only: cpu 1, 1 GPU).
    needs = {"cpu": "1", "nvidia.com/gpu": "1"}
    expected = {
        "kube-batch": {"minMember": 2},  # tf-operator v1.0 wrote minMember only
        "volcano": {"minMember": 2, "queue": "default", "minResources": needs},
        "coscheduling": {"minMember": 2, "minResources": needs},
    }[backend]
    assert group["spec"] == expected


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_the_pods_name_the_scheduler_and_their_group_and_only_prefer_the_planned_node(
    hook: Hook, backend: str
) -> None:
    body = hook.job_sync(load_fixture(f"job-sync-gang-tfjob-{backend}.json"))
    _, scheduler = BACKENDS[backend]
    pods = pods_of(body)
    assert set(pods) == {"tfjob-gang-scheduling-ps-0", "tfjob-gang-scheduling-worker-0"}
    for name, pod in pods.items():
        spec, meta = pod["spec"], pod["metadata"]
        # gang-tfjob.yaml names kube-batch itself; the other fixtures' templates name none.
        assert spec["schedulerName"] == scheduler
        assert "nodeName" not in spec
        node_affinity = spec["affinity"]["nodeAffinity"]
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in node_affinity
        assert preferred_hosts(pod) == [(100, "gpu-1")]
        assert spec["nodeSelector"] == {"gpu": "1060g1"}  # the user's own requirement
        annotations = meta.get("annotations", {})
        if backend == "coscheduling":
            assert meta["labels"][POD_GROUP_LABEL] == "tfjob-gang-scheduling"
        else:
            assert annotations[GROUP_ANNOTATION] == "tfjob-gang-scheduling"
        if backend == "volcano":
            assert annotations["volcano.sh/task-spec"] == name.split("-")[-2]  # ps, worker


def test_a_pool_with_a_gang_scheduler_tells_its_jobs_which_one_in_their_admission(
    hook: Hook,
) -> None:
    request = load_fixture("pool-sync-gang-tfjob-kube-batch.json")
    hook.pool = request["parent"]
    body = hook.pool_sync(request)  # validates every Admission against our CRD
    (admission,) = body["children"]
    assert admission["spec"]["phase"] == "Admitted"
    assert admission["spec"]["gang"] == {"scheduler": "kube-batch", "schedulerName": "kube-batch"}
    assert "gangNote" not in admission["spec"]  # its pods ask for exactly that scheduler
    job = request["related"]["TFJob.kubeflow.org/v1"][JOB]
    answer = hook.render(job)
    (group,) = pod_groups(answer)
    assert group["spec"] == {"minMember": 2}
    assert "gang schedulers are not supported" not in answer["status"]["scheduling"]["message"]


# --- 2. the pool's spec and what a job that asks for another scheduler is told ---------------


def test_a_gang_scheduler_with_binding_node_name_is_refused_out_loud(hook: Hook) -> None:
    """nodeName bypasses every scheduler: the pool keeps its Admissions and says why."""
    pool = mc.pool()
    pool["spec"].update(gangScheduler="volcano", binding="nodeName")
    hook.pool = pool
    job = mc.tfjob("gang-tfjob.yaml", namespace="kubeflow")
    body = hook.pool_sync(mc.pool_request(mc.world(job, GANG_NODES), parent=pool))
    assert body["children"] == []
    assert "binding nodeName bypasses every scheduler" in body["status"]["message"]
    assert "gangScheduler" in body["status"]["message"]


@pytest.mark.parametrize("kubeshare", ["v1", "v2"])
def test_a_gang_scheduler_with_kubeshare_is_refused_out_loud(hook: Hook, kubeshare: str) -> None:
    """KubeShare binds fractional pods itself: a PodGroup counting them would never fill, and
    the job's other pods would wait for it forever. The pool keeps its Admissions and says
    why."""
    pool = mc.pool()
    pool["spec"].update(gangScheduler="volcano", kubeshare=kubeshare)
    hook.pool = pool
    job = mc.tfjob("gang-tfjob.yaml", namespace="kubeflow")
    body = hook.pool_sync(mc.pool_request(mc.world(job, GANG_NODES), parent=pool))
    assert body["children"] == []
    message = body["status"]["message"]
    assert f"kubeshare {kubeshare} places fractional-GPU pods itself" in message
    assert "a pool uses one or the other" in message


def test_a_job_asking_for_kube_batch_in_a_pool_without_it_is_told_which_pool_has_it(
    hook: Hook,
) -> None:
    job = mc.tfjob("gang-tfjob.yaml", namespace="kubeflow")
    w = mc.world(job, GANG_NODES)
    w.pools = [mc.pool("batch", gangScheduler="kube-batch"), mc.pool("gpu")]
    body = hook.sync(w)
    note = hook.admission(job)["spec"]["gangNote"]
    assert note == (
        "its pods name schedulerName kube-batch, but TrainingPool 'default' has no gang "
        "scheduler (gangScheduler: none), so no PodGroup is written for it; pools that use "
        "kube-batch: batch (name one in spec.runPolicy.schedulingPolicy.queue), or remove "
        "schedulerName from its templates"
    )
    assert note in body["status"]["scheduling"]["message"]
    assert pod_groups(body) == []


def test_a_job_asking_for_kube_batch_in_a_volcano_pool_is_told_what_to_change(
    hook: Hook,
) -> None:
    """Its templates' scheduler is kept (Kubeflow never overwrites one), so it is said."""
    hook.pool = mc.pool(gangScheduler="volcano")
    job = mc.tfjob("gang-tfjob.yaml", namespace="kubeflow")
    body = hook.sync(mc.world(job, GANG_NODES))
    message = body["status"]["scheduling"]["message"]
    assert (
        "its pods name schedulerName kube-batch, but TrainingPool 'default' writes volcano "
        "PodGroups and binds with schedulerName volcano; no pool uses kube-batch: create one "
        "with gangScheduler: kube-batch, or remove schedulerName from its templates (the "
        "pool gives them volcano)"
    ) in message
    assert {p["spec"]["schedulerName"] for p in pods_of(body).values()} == {"kube-batch"}


def test_a_pool_other_than_default_says_what_to_change_without_naming_pools(
    hook: Hook,
) -> None:
    hook.pool = mc.pool("gpu")
    manifest = mc.compat("gang-tfjob.yaml")
    manifest["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "gpu"}}
    job = mc.tfjob(manifest, namespace="kubeflow")
    hook.sync(mc.world(job, GANG_NODES))
    note = hook.admission(job)["spec"]["gangNote"]
    assert note.endswith(
        "name a pool with gangScheduler: kube-batch in spec.runPolicy.schedulingPolicy.queue, "
        "or remove schedulerName from its templates"
    )


# --- 3. schedulingPolicy, elastic jobs, the end of a job -------------------------------------


def _render(job: dict[str, Any], backend: str, slots: list[tuple[str, int, str]]) -> dict:
    _, scheduler = BACKENDS[backend]
    admission = mc.admission(
        job,
        slots,
        workers=sum(1 for t, _, _ in slots if t == "Worker"),
        gang=(backend, scheduler),
        pool_name=job["spec"].get("runPolicy", {}).get("schedulingPolicy", {}).get("queue")
        or "default",
    )
    return Hook().job_sync(mc.job_request(mc.world(job, []), admission, gang=[backend]))


def _job1(**scheduling_policy: Any) -> dict[str, Any]:
    """DRAGON's job1: 1 PS and 1-4 elastic workers, 4 cpu / 8Gi each (limits only)."""
    manifest = mc.compat("dragon-job1-cpu.yaml")
    if scheduling_policy:
        manifest["spec"]["runPolicy"] = {"schedulingPolicy": scheduling_policy}
    return mc.tfjob(manifest)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_min_member_follows_an_elastic_jobs_worker_target(backend: str) -> None:
    """Grown to 4 workers the gang is 5 pods; shrunk to 2 it is 3: the PodGroup is the same
    object (updated in place), so a gang scheduler never waits for workers the pool took
    back, nor binds part of a growth."""
    job = _job1()
    slots = [("PS", 0, "n1"), *(("Worker", i, "n1") for i in range(4))]
    grown = pod_groups(_render(job, backend, slots))
    shrunk = pod_groups(_render(job, backend, slots[:3]))
    assert [g["spec"]["minMember"] for g in grown + shrunk] == [5, 3]
    assert grown[0]["metadata"] == shrunk[0]["metadata"]
    if backend != "kube-batch":
        assert grown[0]["spec"]["minResources"] == {"cpu": "20", "memory": "40Gi"}
        assert shrunk[0]["spec"]["minResources"] == {"cpu": "12", "memory": "24Gi"}


def test_scheduling_policy_fills_the_volcano_pod_group_as_kubeflow_does() -> None:
    """minAvailable asks for fewer pods at once (the first ones: the PS first); the queue is
    the job's queue, which is also its TrainingPool; priorityClass names the group's."""
    job = _job1(minAvailable=2, queue="team-a", priorityClass="high")
    slots = [("PS", 0, "n1"), *(("Worker", i, "n1") for i in range(3))]
    (group,) = pod_groups(_render(job, "volcano", slots))
    assert group["spec"] == {
        "minMember": 2,
        "queue": "team-a",
        "priorityClassName": "high",
        "minResources": {"cpu": "8", "memory": "16Gi"},
    }


def test_scheduling_policy_fills_the_coscheduling_pod_group() -> None:
    job = _job1(minResources={"cpu": "6", "nvidia.com/gpu": 2}, scheduleTimeoutSeconds=90)
    (group,) = pod_groups(_render(job, "coscheduling", [("PS", 0, "n1"), ("Worker", 0, "n1")]))
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "6", "nvidia.com/gpu": "2"},
        "scheduleTimeoutSeconds": 90,
    }


def test_min_resources_that_are_not_quantities_fail_the_job_naming_the_field() -> None:
    job = _job1(minResources={"cpu": "lots"})
    body = _render(job, "volcano", [("PS", 0, "n1"), ("Worker", 0, "n1")])
    failed = condition(body, "Failed")
    assert failed is not None and failed["reason"] == "TFJobFailedValidation"
    assert (
        "spec.runPolicy.schedulingPolicy.minResources['cpu']: 'lots' is not a quantity"
        in (failed["message"])
    )
    assert body["children"] == []


def test_a_finished_or_suspended_job_has_no_pod_group() -> None:
    """Left out of the answer, Metacontroller deletes it (Kubeflow deletes it too)."""
    slots = [("PS", 0, "n1"), ("Worker", 0, "n1")]
    suspended = _job1()
    suspended["spec"]["runPolicy"] = {"suspend": True}
    assert pod_groups(_render(suspended, "volcano", slots)) == []
    finished = _job1()
    finished["status"] = {
        "conditions": [
            {"type": "Succeeded", "status": "True", "reason": "TFJobSucceeded", "message": "done"}
        ]
    }
    assert pod_groups(_render(finished, "volcano", slots)) == []


def test_an_mxjob_gets_its_pod_group_with_every_pod() -> None:
    mx = mc.tfjob(load_fixture("job-sync-mxjob-admitted.json")["parent"])
    slots = [("Scheduler", 0, "n1"), ("Server", 0, "n1"), ("Server", 1, "n1")]
    slots += [("Worker", i, "n1") for i in range(3)]
    body = _render(mx, "volcano", slots)
    (group,) = pod_groups(body)
    assert group["spec"]["minMember"] == 6
    tasks = {p["metadata"]["annotations"]["volcano.sh/task-spec"] for p in pods_of(body).values()}
    assert tasks == {"scheduler", "server", "worker"}


# --- 4. the schemas: a PodGroup that is wrong is caught ---------------------------------------


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_pod_group_validation_can_fail(hook: Hook, backend: str) -> None:
    body = hook.job_sync(load_fixture(f"job-sync-gang-tfjob-{backend}.json"))
    (group,) = pod_groups(body)
    validate_pod_group(group)
    wrong = copy.deepcopy(group)
    wrong["spec"]["minMembers"] = 2  # a field the backend does not have
    with pytest.raises(AssertionError, match="minMembers"):
        validate_pod_group(wrong)
    wrong = copy.deepcopy(group)
    wrong["spec"]["minMember"] = "two"
    with pytest.raises(AssertionError, match="minMember"):
        validate_pod_group(wrong)


def test_an_admission_that_names_a_backend_validates_and_one_that_invents_one_does_not() -> None:
    job = _job1()
    admission = mc.admission(job, [("PS", 0, "n1")], gang=("volcano", "volcano"))
    validate_custom(admission)
    admission["spec"]["gang"]["scheduler"] = "yunikorn"
    with pytest.raises(AssertionError, match="yunikorn"):
        validate_custom(admission)


def test_pods_waiting_for_their_gang_are_kept_and_the_status_says_what_they_wait_for(
    hook: Hook,
) -> None:
    """Under a gang scheduler "unschedulable" means the gang does not fit yet, and the
    backend binds it once it does: the pods are not deleted and placed again (as a pod the
    kube-scheduler cannot put on its required node is), and the pool keeps their room."""
    request = load_fixture("job-sync-gang-tfjob-volcano.json")
    first = hook.job_sync(request)
    job = request["parent"]
    pods = []
    for pod in pods_of(first).values():
        observed = mc.observed_pod(job, pod, bound=False)
        observed["status"]["conditions"][0].update(
            reason="Unschedulable", message="0/2 tasks in gang unschedulable"
        )
        pods.append(observed)
    request = copy.deepcopy(request)
    for p in pods:
        request["children"]["Pod.v1"][f"kubeflow/{p['metadata']['name']}"] = p
    body = hook.job_sync(request)
    assert set(pods_of(body)) == {p["metadata"]["name"] for p in pods}  # none re-placed
    assert body["status"]["scheduling"]["message"] == (
        "2 pod(s) wait for volcano to bind them: it binds PodGroup tfjob-gang-scheduling "
        "all at once when its pods fit together"
    )
    w = mc.world(job, GANG_NODES, pods=pods)
    hook.pool = mc.pool(gangScheduler="volcano")
    plan = hook.pool_sync(mc.pool_request(w, parent=hook.pool))
    assert plan["status"]["allocated"]["nvidia.com/gpu"] == "1"  # the worker keeps gpu-1's GPU


@pytest.mark.parametrize(
    ("backend", "status", "said"),
    [
        (
            "volcano",
            {
                "phase": "Inqueue",
                "conditions": [
                    {"type": "Scheduled", "status": "False"},
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "reason": "NotEnoughResources",
                        "message": "2/2 tasks in gang unschedulable: pod group is not ready",
                    },
                ],
            },
            "Inqueue, 0/3 running: 2/2 tasks in gang unschedulable: pod group is not ready",
        ),
        ("coscheduling", {"phase": "PreScheduling", "scheduled": 0}, "PreScheduling, 0/3 running"),
        # The counts, where the backend wrote them (zero is left out: omitempty).
        (
            "volcano",
            {
                "phase": "Unknown",
                "running": 2,
                "failed": 1,
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "reason": "NotEnoughResources",
                        "message": "1/3 tasks in gang unschedulable: pod group is not ready",
                    }
                ],
            },
            "Unknown, 2/3 running, 1 failed: 1/3 tasks in gang unschedulable: pod group is not "
            "ready",
        ),
        (
            "coscheduling",
            {"phase": "Scheduling", "running": 1, "succeeded": 1},
            "Scheduling, 1/3 running, 1 succeeded",
        ),
        ("kube-batch", {"running": 1}, "1/3 running"),  # its CRD declares only the counts
        # Volcano keeps an old Unschedulable condition once the gang is bound: a Scheduled
        # one written since says it no longer holds; one written before does not.
        (
            "volcano",
            {
                "phase": "Running",
                "running": 3,
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "message": "1/3 tasks in gang unschedulable: pod group is not ready",
                    },
                    {
                        "type": "Scheduled",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:01:02Z",
                        "reason": "tasks in gang are ready to be scheduled",
                    },
                ],
            },
            "Running, 3/3 running",
        ),
        (
            "volcano",
            {
                "phase": "Unknown",
                "running": 2,
                "conditions": [
                    {
                        "type": "Scheduled",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:01:02Z",
                    },
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:05:00Z",
                        "message": "1/3 tasks in gang unschedulable: pod group is not ready",
                    },
                ],
            },
            "Unknown, 2/3 running: 1/3 tasks in gang unschedulable: pod group is not ready",
        ),
    ],
)
def test_the_status_repeats_what_the_gang_scheduler_says_of_the_pod_group(
    backend: str, status: dict[str, Any], said: str
) -> None:
    """Pods waiting for the backend to bind their gang: the job's status says what the
    backend wrote in the PodGroup's status, so nobody has to look it up to see why."""
    job = _job1()
    _, scheduler = BACKENDS[backend]
    slots = [("PS", 0, "n1"), ("Worker", 0, "n1"), ("Worker", 1, "n1")]
    admission = mc.admission(job, slots, workers=2, gang=(backend, scheduler))
    request = mc.job_request(mc.world(job, []), admission, gang=[backend])
    hook = Hook()
    first = hook.job_sync(request)
    namespace = job["metadata"]["namespace"]
    pods = [mc.observed_pod(job, pod, bound=False) for pod in pods_of(first).values()]
    (group,) = pod_groups(first)
    request = copy.deepcopy(request)
    for p in pods:
        request["children"]["Pod.v1"][f"{namespace}/{p['metadata']['name']}"] = p
    type_key = f"PodGroup.{BACKENDS[backend][0]}"
    observed = {**copy.deepcopy(group), "status": status}
    request["children"][type_key][f"{namespace}/{group['metadata']['name']}"] = observed
    message = hook.job_sync(request)["status"]["scheduling"]["message"]
    assert message.startswith(f"3 pod(s) wait for {scheduler} to bind them")
    assert message.endswith(f"all at once when its pods fit together ({scheduler} says: {said})")
    # Before the backend wrote anything, the status says only what Dragonet knows.
    del request["children"][type_key][f"{namespace}/{group['metadata']['name']}"]
    assert hook.job_sync(request)["status"]["scheduling"]["message"].endswith("fit together")
