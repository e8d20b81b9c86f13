"""A TFJob's TensorBoard (annotation ``dragonet.io/tensorboard``): the pool places its pod
like any other, outside the gang; the job's sync renders a Deployment and a Service there
and says where to open it; an invalid request fails the job naming the field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests import metacontroller as mc
from tests.conftest import Hook, condition, load_fixture, node_of, observe, pods_of

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers, 4 cpu / 8Gi each, min 1, max 4
ALL = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]
NODES = [mc.node("n-1", cpu="64", memory="256Gi"), mc.node("n-2", cpu="64", memory="256Gi")]
BOARD = ("TensorBoard", 0, "n-1")


def _kinds(body: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in body["children"] if c["kind"] == kind}


def _deployment(body: dict[str, Any]) -> dict[str, Any] | None:
    return _kinds(body, "Deployment").get("job1-tensorboard")


def _entries(admission: dict[str, Any]) -> dict[tuple[str, int], str | None]:
    return {(p["type"], p["index"]): p.get("node") for p in admission["spec"]["pods"]}


def _sync(hook: Hook, job: dict, admission: dict | None, **world: Any) -> dict[str, Any]:
    w = mc.world(job, NODES, pods=world.pop("pods", []))
    w.deployments = world.pop("deployments", [])
    return hook.job_sync(mc.job_request(w, admission))


# --- the job's children -----------------------------------------------------------------


def test_the_admitted_job_runs_its_tensorboard_where_the_admission_places_it(hook: Hook) -> None:
    body = hook.job_sync(load_fixture("job-sync-job1-tensorboard.json"))
    deployment = _deployment(body)
    assert deployment is not None
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]
    assert node_of(pod) == "big-1"  # pinned like the job's pods (affinity binding)
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "tensorflow/tensorflow:2.16.1"
    assert container["command"] == ["tensorboard"]
    assert "--logdir=/logs" in container["args"]
    assert container["ports"] == [{"name": "tensorboard", "containerPort": 6006}]
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}
    assert pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "tensorboard"
    service = _kinds(body, "Service")["job1-tensorboard"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "tensorboard", "port": 6006, "targetPort": "tensorboard"}
    ]
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert body["status"]["tensorboard"] == {
        "service": "job1-tensorboard",
        "address": "http://job1-tensorboard.default.svc:6006",
        "phase": "Starting",
        "message": "starting",
        "node": "big-1",
    }
    assert len(pods_of(body)) == 5  # the job's own pods are as without a TensorBoard


def test_nodename_binding_binds_the_tensorboard_pod_too(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    body = _sync(hook, job, mc.admission(job, [*ALL, BOARD], workers=4, binding="nodeName"))
    deployment = _deployment(body)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["nodeName"] == "n-1"
    assert "affinity" not in deployment["spec"]["template"]["spec"]


def test_volumes_mounts_resources_image_and_service_type_are_the_users(hook: Hook) -> None:
    job = mc.with_tensorboard(
        mc.tfjob(JOB),
        image="tensorflow/tensorflow:2.15.0",
        serviceType="NodePort",
        volumes=[{"name": "logs", "persistentVolumeClaim": {"claimName": "tf-logs"}}],
        volumeMounts=[{"name": "logs", "mountPath": "/logs", "readOnly": True}],
        resources={"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
    )
    body = _sync(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    deployment = _deployment(body)
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "logs", "persistentVolumeClaim": {"claimName": "tf-logs"}}]
    (c,) = pod["containers"]
    assert c["image"] == "tensorflow/tensorflow:2.15.0"
    assert c["volumeMounts"] == [{"name": "logs", "mountPath": "/logs", "readOnly": True}]
    assert c["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"memory": "2Gi"},
    }
    assert _kinds(body, "Service")["job1-tensorboard"]["spec"]["type"] == "NodePort"


def test_an_admitted_job_whose_tensorboard_found_no_room_runs_and_says_so(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    body = _sync(hook, job, mc.admission(job, ALL, workers=4))
    assert _deployment(body) is None and "job1-tensorboard" not in _kinds(body, "Service")
    assert len(pods_of(body)) == 5
    board = body["status"]["tensorboard"]
    assert board["phase"] == "Pending" and "waiting for room" in board["message"]


def test_a_queued_job_has_no_tensorboard_yet(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    body = _sync(hook, job, mc.admission(job, phase="Queued", message="waiting"))
    assert body["children"] == []
    assert body["status"]["tensorboard"]["phase"] == "Pending"


def _running(hook: Hook, job: dict, admission: dict) -> tuple[list, dict]:
    body = _sync(hook, job, admission)
    pods, _ = observe(job, body)
    deployment = _deployment(body)
    assert deployment is not None
    return pods, mc.observed_deployment(job, deployment)


def test_an_existing_tensorboard_stays_as_it_is_and_shows_ready(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    pods, deployment = _running(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    again = mc.admission(job, [*ALL, BOARD], workers=3, generation=2)  # a shrink, say
    body = _sync(hook, job, again, pods=pods, deployments=[deployment])
    answered = _deployment(body)
    assert answered is not None
    assert answered["spec"] == deployment["spec"]
    assert body["status"]["tensorboard"]["phase"] == "Ready"
    assert body["status"]["tensorboard"]["node"] == "n-1"


def test_a_tensorboard_the_pool_placed_anew_moves_there(hook: Hook) -> None:
    """Its pod ended or got stuck (a lost node), so the pool placed it on n-2: the
    Deployment is deleted (the Service stays), then created again on n-2."""
    job = mc.with_tensorboard(mc.tfjob(JOB))
    pods, deployment = _running(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    moved = mc.admission(job, [*ALL, ("TensorBoard", 0, "n-2")], workers=4, generation=2)
    body = _sync(hook, job, moved, pods=pods, deployments=[deployment])
    assert _deployment(body) is None
    assert "job1-tensorboard" in _kinds(body, "Service")
    assert body["status"]["tensorboard"]["message"] == "moving to n-2"
    body = _sync(hook, job, moved, pods=pods)
    deployment = _deployment(body)
    assert deployment is not None and node_of(deployment["spec"]["template"]) == "n-2"


def test_a_stale_admission_never_moves_a_tensorboard(hook: Hook) -> None:
    """The Deployment was made from generation 3; the job reads generation 2, which
    places the TensorBoard elsewhere: its view lags, so nothing moves."""
    job = mc.with_tensorboard(mc.tfjob(JOB))
    admitted = mc.admission(job, [*ALL, BOARD], workers=4, generation=3)
    pods, deployment = _running(hook, job, admitted)
    old = mc.admission(job, [*ALL, ("TensorBoard", 0, "n-2")], workers=4, generation=2)
    body = _sync(hook, job, old, pods=pods, deployments=[deployment])
    answered = _deployment(body)
    assert answered is not None and answered["spec"] == deployment["spec"]


def test_the_pool_places_a_stuck_tensorboard_anew(hook: Hook) -> None:
    """job1 runs on n-1 and n-2; its TensorBoard pod is pinned to n-1, which was cordoned
    before it could start: the kube-scheduler found no room. The pool places it again."""
    job = mc.with_tensorboard(mc.tfjob(JOB))
    body = _sync(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    pods, _ = observe(job, body)
    deployment = _deployment(body)
    assert deployment is not None
    board = mc.tensorboard_pod(deployment, phase="Pending")
    del board["spec"]["nodeName"]
    board["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    ]
    nodes = [mc.node("n-1", cpu="64", memory="256Gi", unschedulable=True), NODES[1]]
    w = mc.world(job, nodes, pods=[*pods, board])
    stored = mc.admission(job, [*ALL, BOARD], workers=4)
    body = hook.pool_sync(mc.pool_request(w, [stored]))
    (admission,) = body["children"]
    assert _entries(admission)[("TensorBoard", 0)] == "n-2"


@pytest.mark.parametrize(("policy", "kept"), [("None", True), ("Running", True), ("All", False)])
def test_a_finished_job_keeps_its_tensorboard_unless_clean_pod_policy_is_all(
    hook: Hook, policy: str, kept: bool
) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    job["spec"]["runPolicy"] = {"cleanPodPolicy": policy}
    pods, deployment = _running(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    for p in pods:
        if p["metadata"]["name"] == "job1-worker-0":
            p.update(mc.observed_pod(job, p, phase="Succeeded"))
    body = _sync(
        hook, job, mc.admission(job, [*ALL, BOARD], workers=4), pods=pods, deployments=[deployment]
    )
    assert condition(body, "Succeeded") is not None
    assert (_deployment(body) is not None) is kept
    assert ("job1-tensorboard" in _kinds(body, "Service")) is kept
    assert body["status"]["tensorboard"]["phase"] == ("Ready" if kept else "Removed")


def test_a_suspended_job_drops_its_tensorboard(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    pods, deployment = _running(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    job["spec"]["runPolicy"] = {"suspend": True}
    body = _sync(
        hook, job, mc.admission(job, [*ALL, BOARD], workers=4), pods=pods, deployments=[deployment]
    )
    assert _deployment(body) is None
    assert body["status"]["tensorboard"]["phase"] == "Removed"


def test_removing_the_annotation_removes_the_tensorboard(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    pods, deployment = _running(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    del job["metadata"]["annotations"]["dragonet.io/tensorboard"]
    body = _sync(hook, job, mc.admission(job, ALL, workers=4), pods=pods, deployments=[deployment])
    assert _deployment(body) is None and "tensorboard" not in body["status"]
    assert len(pods_of(body)) == 5


def test_finalize_waits_for_the_tensorboard_deployment_to_go(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB))
    _, deployment = _running(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    w = mc.world(job, NODES, finalizing=True)
    w.deployments = [deployment]
    answer = hook.post("/tfjobs/finalize", mc.job_request(w, None)).get_json()
    assert answer["children"] == [] and answer["finalized"] is False
    w.deployments = []
    answer = hook.post("/tfjobs/finalize", mc.job_request(w, None)).get_json()
    assert answer["finalized"] is True


# --- invalid requests -------------------------------------------------------------------

WHERE = "metadata.annotations['dragonet.io/tensorboard']: "


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("{not json", "is neither JSON nor YAML"),
        ('"/logs"', "must be an object"),
        ("{}", "logDir: Field required"),
        ('{"logDir": ""}', "logDir: String should have at least 1 character"),
        ('{"logDir": "/l", "logdir": "/l"}', "logdir: Extra inputs are not permitted"),
        ('{"logDir": "/l", "serviceType": "External"}', "serviceType: Input should be"),
        ('{"logDir": "/l", "volumes": [{"name": "a"}, {"name": "a"}]}', "volumes[1].name 'a'"),
        (
            '{"logDir": "/l", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}',
            "volumeMounts[0].name 'x' names no volume of the TensorBoard (volumes: none)",
        ),
        ('{"logDir": "/l", "volumeMounts": [{"name": "x"}]}', "volumeMounts.0.mountPath: Field"),
        (
            '{"logDir": "/l", "resources": {"requests": {"cpu": "lots"}}}',
            "resources: unreadable quantity",
        ),
        ('{"logDir": "/l", "resources": {"request": {}}}', "resources.request: Extra inputs"),
        ("logDir: /l\nvolumes: &v [{name: a}]\nvolumeMounts: *v", "aliases (*name) are not"),
        ("[" * 5000, "nested too deeply"),
    ],
)
def test_an_invalid_tensorboard_fails_the_job_naming_the_field(
    hook: Hook, raw: str, words: str
) -> None:
    job = mc.tfjob(JOB)
    job["metadata"]["annotations"] = {"dragonet.io/tensorboard": raw}
    body = _sync(hook, job, None)
    failed = condition(body, "Failed")
    assert failed is not None and failed["status"] == "True"
    assert failed["message"].startswith(f"TFJob default/job1 is invalid: {WHERE}")
    assert words in failed["message"], failed["message"]
    assert body["children"] == []


def test_a_tensorboard_on_an_mxjob_is_refused_out_loud(hook: Hook) -> None:
    from tests.make_fixtures import mxjob

    job = mxjob("mx", created=mc.T0)
    job["metadata"]["annotations"] = {"dragonet.io/tensorboard": '{"logDir": "/l"}'}
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), None))
    failed = condition(body, "Failed")
    assert failed is not None
    assert failed["message"].endswith(WHERE + "TensorBoard is supported on TFJobs only, not MXJobs")


def test_a_job_name_too_long_for_its_tensorboard_is_named(hook: Hook) -> None:
    job = mc.with_tensorboard(mc.tfjob(JOB, name="j" * 53))
    body = _sync(hook, job, None)
    failed = condition(body, "Failed")
    assert failed is not None and "too long for a TensorBoard" in failed["message"]


def test_the_yaml_form_of_the_annotation_is_read_too(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    job["metadata"]["annotations"] = {
        "dragonet.io/tensorboard": "logDir: /yaml\nserviceType: NodePort\n"
    }
    body = _sync(hook, job, mc.admission(job, [*ALL, BOARD], workers=4))
    deployment = _deployment(body)
    assert deployment is not None
    assert "--logdir=/yaml" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


# --- the pool ---------------------------------------------------------------------------


def test_the_pool_places_the_tensorboard_beside_the_parameter_server(hook: Hook) -> None:
    body = hook.pool_sync(load_fixture("pool-sync-job1-tensorboard.json"))
    (admission,) = body["children"]
    assert admission["spec"]["phase"] == "Admitted"
    entries = _entries(admission)
    assert entries[("PS", 0)] == "big-1"
    assert entries[("TensorBoard", 0)] == "big-1"
    assert admission["spec"]["pods"][-1]["type"] == "TensorBoard"  # after the replicas
    used = body["status"]["allocated"]["cpu"]
    assert used == "0"  # nothing exists yet: the plan is not the usage


def test_on_tainted_nodes_the_tensorboard_tolerates_what_its_parameter_server_does(
    hook: Hook,
) -> None:
    """A GPU pool's nodes are tainted and labelled; the job's pods tolerate the taint and
    select the label. Its TensorBoard inherits both from the parameter server: the pool
    places it beside the PS (not on the one untainted node outside the job's selector),
    and its pod can run there."""
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    nodes = [
        mc.node("gpu-1", cpu="64", memory="256Gi", taints=[taint]),
        mc.node("plain-1", cpu="64", memory="256Gi"),
    ]
    nodes[0]["metadata"]["labels"]["accelerator"] = "a100"
    job = mc.with_tensorboard(mc.tfjob(JOB))
    for replica in job["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["tolerations"] = [toleration]
        replica["template"]["spec"]["nodeSelector"] = {"accelerator": "a100"}
    body = hook.pool_sync(mc.pool_request(mc.world(job, nodes)))
    (admission,) = body["children"]
    entries = _entries(admission)
    assert entries[("PS", 0)] == "gpu-1"
    assert entries[("TensorBoard", 0)] == "gpu-1"
    placed = [(t, i, n) for (t, i), n in entries.items()]
    stored = mc.admission(job, placed, workers=4)
    w = mc.world(job, nodes)
    deployment = _deployment(hook.job_sync(mc.job_request(w, stored)))
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    assert pod["tolerations"] == [toleration]
    assert pod["nodeSelector"] == {"accelerator": "a100"}
    assert node_of(deployment["spec"]["template"]) == "gpu-1"


def test_without_a_toleration_the_tensorboard_never_goes_to_a_tainted_node(hook: Hook) -> None:
    taint = {"key": "dedicated", "value": "ps", "effect": "NoSchedule"}
    nodes = [
        mc.node("a-tainted", cpu="64", memory="256Gi", taints=[taint]),
        mc.node("b-plain", cpu="64", memory="256Gi"),
    ]
    job = mc.with_tensorboard(mc.tfjob(JOB))
    body = hook.pool_sync(mc.pool_request(mc.world(job, nodes)))
    (admission,) = body["children"]
    assert _entries(admission)[("TensorBoard", 0)] == "b-plain"


def test_a_tensorboard_that_does_not_fit_waits_and_never_holds_the_gang_back(hook: Hook) -> None:
    """A 20-cpu node holds the job's 20-cpu gang and nothing more: the job is admitted
    whole, its TensorBoard waits; a second node later gives it room."""
    job = mc.with_tensorboard(mc.tfjob(JOB))
    tight = [mc.node("n-1", cpu="20", memory="64Gi")]
    w = mc.world(job, tight)
    w.deployments = []
    answer = hook.sync(w)
    admission = hook.admission(job)
    assert admission is not None and admission["spec"]["phase"] == "Admitted"
    entries = _entries(admission)
    assert ("TensorBoard", 0) not in entries
    assert sum(1 for t, _ in entries if t == "Worker") == 4
    assert answer["status"]["tensorboard"]["phase"] == "Pending"
    w.nodes = [*tight, mc.node("n-2", cpu="2", memory="8Gi")]
    answer = hook.sync(w)
    assert _entries(hook.admission(job))[("TensorBoard", 0)] == "n-2"
    deployment = _deployment(answer)
    assert deployment is not None and node_of(deployment["spec"]["template"]) == "n-2"


def test_a_running_tensorboard_holds_its_room_against_a_queued_job(hook: Hook) -> None:
    """job-a's TensorBoard pod (1 cpu) runs on the only node; job-b's 20-cpu gang would fit
    the 20-cpu node without it, so it must wait, never over-commit the node."""
    node = [mc.node("n-1", cpu="20", memory="64Gi")]
    a = mc.with_tensorboard(
        mc.tfjob(JOB, name="job-a", created="2026-11-21T09:00:00Z"),
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
    )
    a["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    b = mc.tfjob(JOB, name="job-b", created="2026-11-21T09:00:05Z")
    b["spec"]["min-instances"] = 4  # no shrinking into the room
    ws = mc.world(a, node, pods=[], jobs=[a, b])
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "job-a-tensorboard", "namespace": "default", "labels": {}},
        "spec": {"template": _template(a, "n-1")},
    }
    ws.pods = [mc.tensorboard_pod(deployment)]
    body = hook.pool_sync(mc.pool_request(ws))
    admissions = {c["spec"]["job"]["name"]: c for c in body["children"]}
    assert admissions["job-b"]["spec"]["phase"] == "Queued"
    assert body["status"]["allocated"]["cpu"] == "1"
    ws.pods = []  # its TensorBoard gone: job-b fits
    body = hook.pool_sync(mc.pool_request(ws, hook.admissions.values()))
    admissions = {c["spec"]["job"]["name"]: c for c in body["children"]}
    assert admissions["job-b"]["spec"]["phase"] == "Admitted"


def _template(job: dict[str, Any], node: str) -> dict[str, Any]:
    from policy.job.tensorboard import render_deployment
    from policy.model.jobs import parse_job
    from policy.model.kinds import TFJOB

    return render_deployment(parse_job(job, TFJOB), node, node)["spec"]["template"]


def test_a_placed_tensorboard_not_created_yet_holds_its_room(hook: Hook) -> None:
    """The Admission placed job-a's TensorBoard (1 cpu) on n-1; its pod does not exist
    yet. job-b, arriving then, needs 16 of the 16.5 cpu left without that TensorBoard, so
    it must wait for it instead of over-committing the node."""
    node = [mc.node("n-1", cpu="24500m", memory="64Gi")]
    a = mc.with_tensorboard(
        mc.tfjob(JOB, name="job-a", created="2026-11-21T09:00:00Z"),
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
    )
    a["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 1
    a["spec"]["max-instances"] = 1  # PS + 1 worker: 8 cpu
    hook.pool_sync(mc.pool_request(mc.world(a, node)))
    assert _entries(hook.admission(a))[("TensorBoard", 0)] == "n-1"
    b = mc.tfjob(JOB, name="job-b", created="2026-11-21T09:00:05Z")
    b["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 3
    b["spec"]["min-instances"] = 3
    b["spec"]["max-instances"] = 3  # PS + 3 workers: 16 cpu
    # job-a's pods exist now, its TensorBoard's not yet.
    pods = [mc.observed_pod(a, p) for p in pods_of(hook.render(a)).values()]
    w = mc.world(a, node, jobs=[a, b], pods=pods)
    body = hook.pool_sync(mc.pool_request(w, hook.admissions.values()))
    admissions = {c["spec"]["job"]["name"]: c for c in body["children"]}
    assert admissions["job-b"]["spec"]["phase"] == "Queued"
    assert _entries(admissions["job-a"])[("TensorBoard", 0)] == "n-1"


def test_an_invalid_tensorboard_takes_no_capacity_and_stops_no_other_plan(hook: Hook) -> None:
    bad = mc.tfjob(JOB, name="bad", created="2026-11-21T09:00:00Z")
    bad["metadata"]["annotations"] = {"dragonet.io/tensorboard": "{oops"}
    good = mc.with_tensorboard(mc.tfjob(JOB, name="good", created="2026-11-21T09:00:05Z"))
    body = hook.pool_sync(mc.pool_request(mc.world(good, NODES, jobs=[bad, good])))
    names = [c["spec"]["job"]["name"] for c in body["children"]]
    assert names == ["good"]
    assert ("TensorBoard", 0) in _entries(body["children"][0])


def test_the_plan_notices_a_changed_tensorboard_request() -> None:
    """The pool reuses a plan while nothing it reads changed: the annotation is read."""
    from policy.model.jobs import parse_job
    from policy.model.kinds import TFJOB

    job = mc.with_tensorboard(mc.tfjob(JOB))
    other = copy.deepcopy(job)
    other["metadata"]["annotations"]["dragonet.io/tensorboard"] = json.dumps(
        {"logDir": "/l", "resources": {"requests": {"cpu": "3"}}}
    )
    assert parse_job(job, TFJOB).plan_key != parse_job(other, TFJOB).plan_key


# --- end to end, through the simulator ----------------------------------------------------


def _sim_job(name: str, cpu_each: str, tb_cpu: str, arrival: float = 0.0) -> Any:
    from sim.spec import JobSpec
    from tests.simkit import QUICK

    def replica(n: int) -> dict[str, Any]:
        container = {
            "name": "tensorflow",
            "image": "tf:1",
            "resources": {"requests": {"cpu": cpu_each, "memory": "1Gi"}},
        }
        return {"replicas": n, "template": {"spec": {"containers": [container]}}}

    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running"},
            "tfReplicaSpecs": {"PS": replica(1), "Worker": replica(1)},
        },
    }
    manifest = mc.with_tensorboard(manifest, resources={"requests": {"cpu": tb_cpu}})
    return JobSpec(manifest, arrival, 100.0, QUICK)


def test_a_converted_legacy_tfjob_runs_to_succeeded_with_its_tensorboard() -> None:
    from sim.engine import SimConfig, Simulation
    from sim.spec import JobSpec
    from tests.simkit import QUICK, cpu_nodes, scenario
    from webhooks.convert import convert
    from webhooks.manifests import load_documents

    (doc,) = load_documents(mc.COMPAT / "legacy-tfjob-v1alpha1.yaml")
    job, _ = convert(doc)
    job["metadata"]["namespace"] = "default"
    spec = JobSpec(job, 0.0, 100.0, QUICK)
    sim = Simulation(scenario(cpu_nodes(2), [spec]), SimConfig(delete_finished_after_s=None))
    (record,) = sim.run().jobs
    assert record.finish_s is not None
    status = sim.api.get("TFJob.kubeflow.org/v1", spec.key)["status"]
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in status["conditions"])
    # cleanPodPolicy None (v1's default): the TensorBoard outlives the training, as it did.
    board = status["tensorboard"]
    assert board["phase"] == "Ready"
    assert board["address"] == "http://example-job-tensorboard.default.svc:6006"
    assert sim.api.get("Deployment.apps/v1", "default/example-job-tensorboard") is not None
    (pod,) = [
        p
        for p in sim.api.list("Pod.v1")
        if p["metadata"]["labels"].get("training.kubeflow.org/replica-type") == "tensorboard"
    ]
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == board["node"]


def test_deleting_the_job_deletes_its_tensorboard() -> None:
    from sim.engine import SimConfig, Simulation
    from tests.simkit import cpu_nodes, scenario

    spec = _sim_job("gone", "1", "1")
    sim = Simulation(scenario(cpu_nodes(1), [spec]), SimConfig(delete_finished_after_s=5.0))
    (record,) = sim.run().jobs
    assert record.finish_s is not None
    assert sim.api.get("TFJob.kubeflow.org/v1", spec.key) is None
    assert list(sim.api.list("Deployment.apps/v1")) == []
    assert list(sim.api.list("Pod.v1")) == []


@pytest.mark.parametrize("binding", ["nodeName", "affinity"])
def test_tensorboards_never_over_commit_a_node_and_their_room_shows(binding: str) -> None:
    """Two 6-cpu nodes, three jobs of 2 + 2 cpu with a 2-cpu TensorBoard each: two jobs and
    their TensorBoards fill the cluster, the third waits. No kubelet ever refuses a pod
    (with nodeName binding it would, on an over-committed node), every job succeeds, and
    the cluster's allocation shows the TensorBoards' cpu."""
    from sim.engine import SimConfig, Simulation
    from tests.simkit import cpu_nodes, scenario

    jobs = [_sim_job(f"j{i}", "2", "2", arrival=float(i)) for i in range(3)]
    config = SimConfig(delete_finished_after_s=None, binding=binding)  # type: ignore[arg-type]
    sim = Simulation(scenario(cpu_nodes(2, cpu="6"), jobs), config)
    result = sim.run()
    assert all(r.finish_s is not None for r in result.jobs)
    assert result.summary["kubelet_rejections"] == 0
    peak = max(s.allocated.get("cpu", 0.0) for s in result.samples)
    assert peak == pytest.approx(12.0)  # 2 jobs x (2 + 2) cpu + 2 TensorBoards x 2 cpu
    starts = {r.key: r.start_s for r in result.jobs}
    assert starts["default/j2"] > max(starts["default/j0"], starts["default/j1"])


def test_two_tensorboards_placed_in_one_plan_never_share_room_that_holds_one(hook: Hook) -> None:
    """17 cpu: two 8-cpu gangs and one 1-cpu TensorBoard. The older job's TensorBoard gets
    the last cpu; the younger one's waits."""
    node = [mc.node("n-1", cpu="17", memory="64Gi")]
    jobs = []
    for name, created in (("job-a", "2026-11-21T09:00:00Z"), ("job-b", "2026-11-21T09:00:05Z")):
        j = mc.with_tensorboard(
            mc.tfjob(JOB, name=name, created=created),
            resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        )
        j["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 1
        j["spec"]["max-instances"] = 1
        jobs.append(j)
    body = hook.pool_sync(mc.pool_request(mc.world(jobs[0], node, jobs=jobs)))
    admissions = {c["spec"]["job"]["name"]: c for c in body["children"]}
    assert {a["spec"]["phase"] for a in admissions.values()} == {"Admitted"}
    assert _entries(admissions["job-a"])[("TensorBoard", 0)] == "n-1"
    assert ("TensorBoard", 0) not in _entries(admissions["job-b"])


def test_the_example_renders_its_tensorboard_beside_the_job(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from cli.main import main
    from tests.kube_schema import validate_custom, validate_k8s

    example = mc.ROOT / "examples" / "tfjobs" / "mnist-tensorboard.yaml"
    nodes = mc.ROOT / "examples" / "nodes.yaml"
    assert main(["render", str(example), "--nodes", str(nodes)]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    for doc in docs:
        (validate_custom if doc["kind"] == "Admission" else validate_k8s)(doc)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (admission,) = [d for d in docs if d["kind"] == "Admission"]
    board = _entries(admission)[("TensorBoard", 0)]
    assert node_of(deployment["spec"]["template"]) == board == _entries(admission)[("PS", 0)]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "logs", "mountPath": "/logs", "readOnly": True}
    ]


def test_a_tensorboard_on_a_lost_node_comes_back_on_another() -> None:
    """cpu-1 holds the job and its TensorBoard and is lost mid-training: the Deployment's
    new pod, pinned to the lost node, cannot be scheduled; the pool places it anew and the
    job moves it, while its training pods are repaired."""
    from sim.engine import SimConfig, Simulation
    from tests.simkit import cpu_nodes, scenario

    spec = _sim_job("lost", "1", "1")
    config = SimConfig(delete_finished_after_s=None, node_losses=((20.0, "cpu-1"),))
    sim = Simulation(scenario(cpu_nodes(2), [spec]), config)
    (record,) = sim.run().jobs
    assert record.finish_s is not None
    board = sim.api.get("TFJob.kubeflow.org/v1", spec.key)["status"]["tensorboard"]
    assert board["phase"] == "Ready" and board["node"] == "cpu-2"
    running = [
        p["spec"].get("nodeName")
        for p in sim.api.list("Pod.v1")
        if p["metadata"]["labels"].get("training.kubeflow.org/replica-type") == "tensorboard"
        and p["status"].get("phase") == "Running"
    ]
    assert running == ["cpu-2"]
