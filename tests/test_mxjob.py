"""MXJobs (``kubeflow.org/v1``): children, MX_CONFIG and ps-lite's env byte for byte,
validation, lifecycle, and one queue with TFJobs.

Expected values are written out by hand from Kubeflow's MXNet controller
(kubeflow/training-operator v1.7.0, ``pkg/controller.v1/mxnet/mxnet.go``: ``SetPodEnv``,
``genClusterSpec``, ``genLabelsSpec``, ``addBytePSEnv``; ``mxjob_controller.go``:
``IsMasterRole``), not computed by Dragonet's code.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests import metacontroller as mc
from tests.conftest import (
    Clock,
    Hook,
    condition,
    load_fixture,
    observe,
    pods_of,
    services_of,
    with_status,
)
from tests.kube_schema import validate_custom, validate_k8s
from tests.test_crd import _schema_at, _structural_violations
from tests.test_lifecycle import Run

NODES = [mc.node("n-1", cpu="32", memory="128Gi")]


def _container(name: str = "mxnet", cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "mxjob/mxnet:gpu",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
        **extra,
    }


def _replica(n: int, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "replicas": n,
        "template": {"spec": {"containers": list(containers) or [_container()]}},
        **spec,
    }


def mxjob(name: str = "mx", cpu: str = "1", **spec: Any) -> dict[str, Any]:
    """An MXTrain job: 1 scheduler, 2 servers, 3 workers (each count its own)."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Scheduler": _replica(1, _container(cpu=cpu)),
                "Server": _replica(2, _container(cpu=cpu)),
                "Worker": _replica(3, _container(cpu=cpu)),
            },
            **spec,
        },
    }


def _env(pod: dict[str, Any], container: str = "mxnet") -> list[dict[str, Any]]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == container)["env"]


def _sync(hook: Hook, job: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return hook.sync(mc.world(mc.tfjob(job, namespace=namespace), NODES))


# --- children and env ---------------------------------------------------------------------


def test_every_pod_gets_kubeflows_env_byte_for_byte_in_every_container(hook: Hook) -> None:
    job = mxjob()
    specs = job["spec"]["mxReplicaSpecs"]
    # A custom mxjob-port on the servers: MX_CONFIG lists each type with its own port.
    specs["Server"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "mxjob-port", "containerPort": 9000}
    ]
    # A sidecar and a user variable: Kubeflow appends to every container's env.
    specs["Worker"]["template"]["spec"]["containers"].append(
        _container("sidecar", env=[{"name": "USER_VAR", "value": "x"}])
    )
    body = _sync(hook, job)
    pods = pods_of(body)
    assert set(pods) == {
        "mx-scheduler-0",
        "mx-server-0",
        "mx-server-1",
        "mx-worker-0",
        "mx-worker-1",
        "mx-worker-2",
    }
    # genClusterSpec: bare names (no namespace), keys sorted as Go marshals a map;
    # genLabelsSpec: the template annotation tuner-server-key, "" when absent.
    cluster = (
        '{"cluster":{"scheduler":[{"url":"mx-scheduler-0","port":9091}],'
        '"server":[{"url":"mx-server-0","port":9000},{"url":"mx-server-1","port":9000}],'
        '"worker":[{"url":"mx-worker-0","port":9091},{"url":"mx-worker-1","port":9091},'
        '{"url":"mx-worker-2","port":9091}]},'
        '"labels":{"scheduler":"","server":"","worker":""},'
    )

    def expected(rtype: str, index: int) -> list[dict[str, str]]:
        # SetPodEnv's order; DMLC_PS_ROOT_* from scheduler 0; DMLC_WORKER_ID on workers.
        env = [
            {
                "name": "MX_CONFIG",
                "value": cluster + f'"task":{{"type":"{rtype}","index":{index}}}}}',
            },
            {"name": "DMLC_PS_ROOT_PORT", "value": "9091"},
            {"name": "DMLC_PS_ROOT_URI", "value": "mx-scheduler-0"},
            {"name": "DMLC_NUM_SERVER", "value": "2"},
            {"name": "DMLC_NUM_WORKER", "value": "3"},
            {"name": "DMLC_ROLE", "value": rtype},
            {"name": "DMLC_USE_KUBERNETES", "value": "1"},
        ]
        if rtype == "worker":
            env.append({"name": "DMLC_WORKER_ID", "value": str(index)})
        return env

    for name, pod in pods.items():
        _, rtype, index = name.split("-")
        assert _env(pod) == expected(rtype, int(index)), name
    sidecar = _env(pods["mx-worker-2"], "sidecar")
    assert sidecar == [{"name": "USER_VAR", "value": "x"}, *expected("worker", 2)]
    assert "TF_CONFIG" not in str(body)


def test_a_tuning_job_has_no_scheduler_root_and_copies_the_tuner_server_key(hook: Hook) -> None:
    job = mxjob("tune", jobMode="MXTune")
    server = _replica(1)
    server["template"]["metadata"] = {"annotations": {"tuner-server-key": "rpc<key>&"}}
    job["spec"]["mxReplicaSpecs"] = {
        "TunerTracker": _replica(1),
        "TunerServer": server,
        "Tuner": _replica(1),
    }
    pods = pods_of(_sync(hook, job))
    assert set(pods) == {"tune-tuner-0", "tune-tunerserver-0", "tune-tunertracker-0"}
    # getConfigAddr without a scheduler: url "" and port 0. Go's json.Marshal escapes
    # <, > and & as \u003c, \u003e, \u0026.
    assert _env(pods["tune-tunerserver-0"]) == [
        {
            "name": "MX_CONFIG",
            "value": '{"cluster":{"tuner":[{"url":"tune-tuner-0","port":9091}],'
            '"tunerserver":[{"url":"tune-tunerserver-0","port":9091}],'
            '"tunertracker":[{"url":"tune-tunertracker-0","port":9091}]},'
            '"labels":{"tuner":"","tunerserver":"rpc\\u003ckey\\u003e\\u0026","tunertracker":""},'
            '"task":{"type":"tunerserver","index":0}}',
        },
        {"name": "DMLC_PS_ROOT_PORT", "value": "0"},
        {"name": "DMLC_PS_ROOT_URI", "value": ""},
        {"name": "DMLC_NUM_SERVER", "value": "0"},
        {"name": "DMLC_NUM_WORKER", "value": "0"},
        {"name": "DMLC_ROLE", "value": "tunerserver"},
        {"name": "DMLC_USE_KUBERNETES", "value": "1"},
    ]


def test_pods_and_services_carry_kubeflows_names_labels_and_port(hook: Hook) -> None:
    body = _sync(hook, mxjob())
    pods, services = pods_of(body), services_of(body)
    assert set(services) == set(pods)
    server = pods["mx-server-1"]
    assert server["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "dragonet",
        "training.kubeflow.org/job-name": "mx",
        "training.kubeflow.org/replica-type": "server",
        "training.kubeflow.org/replica-index": "1",
        "training.kubeflow.org/job-role": "master",  # Kubeflow's IsMasterRole: Server pods
    }
    roles = {
        n for n, p in pods.items() if "training.kubeflow.org/job-role" in p["metadata"]["labels"]
    }
    assert roles == {"mx-server-0", "mx-server-1"}
    assert server["spec"]["containers"][0]["ports"] == [
        {"name": "mxjob-port", "containerPort": 9091}
    ]
    assert server["spec"]["restartPolicy"] == "Never"
    svc = services["mx-worker-2"]["spec"]
    assert svc["clusterIP"] == "None"
    assert svc["ports"] == [{"name": "mxjob-port", "port": 9091}]


def test_status_says_the_job_is_not_elastic(hook: Hook) -> None:
    scheduling = _sync(hook, mxjob())["status"]["scheduling"]
    assert scheduling["phase"] == "Admitted"
    assert scheduling["elastic"] is False
    assert scheduling["workers"] == {"current": 0, "target": 3, "min": 3, "max": 3}


# --- validation ---------------------------------------------------------------------------


def _drop(rtype: str):
    return lambda j: j["spec"]["mxReplicaSpecs"].pop(rtype)


def _set(key: str, value: Any):
    return lambda j: j["spec"].update({key: value})


def _replicas(rtype: str, n: int):
    return lambda j: j["spec"]["mxReplicaSpecs"][rtype].update(replicas=n)


INVALID = [
    (
        "no scheduler",
        _drop("Scheduler"),
        "spec.mxReplicaSpecs has no Scheduler: jobMode MXTrain needs Scheduler, Server, Worker",
    ),
    (
        "two schedulers",
        _replicas("Scheduler", 2),
        "spec.mxReplicaSpecs.Scheduler.replicas is 2; the job needs exactly one Scheduler",
    ),
    (
        "min-instances",
        _set("min-instances", 1),
        "spec.min-instances: MXJobs are not elastic (ps-lite fixes the number of workers when "
        "the job starts), so it runs Worker.replicas workers; remove it",
    ),
    (
        "max-instances",
        _set("max-instances", 4),
        "spec.max-instances: MXJobs are not elastic",
    ),
    (
        "unknown mode",
        _set("jobMode", "MXServe"),
        "spec.jobMode 'MXServe' is not supported: MXTrain or MXTune",
    ),
    (
        "tuner in a training job",
        lambda j: j["spec"]["mxReplicaSpecs"].update(Tuner=_replica(1)),
        "spec.mxReplicaSpecs.Tuner belongs to jobMode MXTune, not MXTrain",
    ),
    (
        "no mxnet container",
        lambda j: j["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"].update(
            containers=[_container("main")]
        ),
        "spec.mxReplicaSpecs.Worker.template.spec has no container named 'mxnet'",
    ),
    (
        "no replica specs",
        lambda j: j["spec"].pop("mxReplicaSpecs"),
        "spec.mxReplicaSpecs: Field required",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_an_invalid_mxjob_fails_with_the_field_named(hook: Hook, mutate, message: str) -> None:
    job = mxjob()
    mutate(job)
    parent = mc.tfjob(job)
    body = hook.job_sync(mc.job_request(mc.world(parent, NODES), None))
    failed = condition(body, "Failed")
    assert failed["status"] == "True"
    assert failed["reason"] == "MXJobFailedValidation"
    assert failed["message"].startswith("MXJob default/mx is invalid: ")
    assert message in failed["message"]
    assert body["children"] == []
    assert body["status"]["scheduling"]["phase"] == "Invalid"
    # ... and the pool gives it no room.
    pool = hook.pool_sync(mc.pool_request(mc.world(parent, NODES)))
    assert pool["children"] == []


# --- one queue with TFJobs ----------------------------------------------------------------


def _tfjob(name: str, cpu: str) -> dict[str, Any]:
    container = {
        "name": "tensorflow",
        "image": "tf:2",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "tfReplicaSpecs": {
                t: {"replicas": n, "template": {"spec": {"containers": [dict(container)]}}}
                for t, n in (("PS", 1), ("Worker", 2))
            }
        },
    }


@pytest.mark.parametrize("first", ["MXJob", "TFJob"])
def test_an_mxjob_and_a_tfjob_share_one_queue_each_admitted_whole_or_not_at_all(
    hook: Hook, first: str
) -> None:
    """6 cpu free; the MXJob needs 6 (6 pods x 1), the TFJob 3 (3 x 1): both fit alone,
    not together. The older one is admitted whole, the other waits whole."""
    node = [mc.node("n-1", cpu="6", memory="64Gi")]
    times = {"MXJob": mc.T0, "TFJob": mc.T0}
    times["TFJob" if first == "MXJob" else "MXJob"] = "2026-11-21T10:00:30Z"
    mx = mc.tfjob(mxjob("mx", cpu="1"), created=times["MXJob"])
    tf = mc.tfjob(_tfjob("tf", "1"), created=times["TFJob"])
    world = mc.world(mx, node, jobs=[mx, tf])
    pool = hook.pool_sync(mc.pool_request(world))
    phases = {a["metadata"]["name"]: a["spec"]["phase"] for a in pool["children"]}
    winner, loser = (mx, tf) if first == "MXJob" else (tf, mx)
    wname, lname = (f"{j['kind'].lower()}-{j['metadata']['name']}" for j in (winner, loser))
    assert phases == {wname: "Admitted", lname: "Queued"}
    admitted = pods_of(hook.render(winner))
    assert len(admitted) == (6 if first == "MXJob" else 3)
    waiting = hook.render(loser)
    assert pods_of(waiting) == {}
    assert waiting["status"]["scheduling"]["phase"] == "Queued"
    assert "waiting" in waiting["status"]["scheduling"]["message"]


def test_an_mxjob_too_large_waits_and_a_younger_tfjob_backfills(hook: Hook) -> None:
    node = [mc.node("n-1", cpu="6", memory="64Gi")]
    mx = mc.tfjob(mxjob("mx", cpu="2"))  # 12 cpu: never fits
    tf = mc.tfjob(_tfjob("tf", "1"), created="2026-11-21T10:00:30Z")
    pool = hook.pool_sync(mc.pool_request(mc.world(mx, node, jobs=[mx, tf])))
    phases = {a["metadata"]["name"]: a["spec"]["phase"] for a in pool["children"]}
    assert phases == {"mxjob-mx": "Queued", "tfjob-tf": "Admitted"}
    assert pods_of(hook.render(mx)) == {}
    message = hook.render(mx)["status"]["scheduling"]["message"]
    assert "1 scheduler and 2 servers plus 3 workers at once" in message


# --- lifecycle ----------------------------------------------------------------------------


def _policy(job: dict[str, Any], policy: str) -> dict[str, Any]:
    for spec in job["spec"]["mxReplicaSpecs"].values():
        spec["restartPolicy"] = policy
    return job


def test_all_workers_done_succeeds_while_scheduler_and_servers_still_run(hook: Hook) -> None:
    run = Run(hook, mxjob(cleanPodPolicy="Running"))
    run.body = run.sync()
    assert condition(run.body, "Running")["reason"] == "MXJobRunning"
    for i in range(2):
        run.set_pod(f"mx-worker-{i}", phase="Succeeded")
    body = run.sync()
    assert condition(body, "Succeeded") is None, "one worker still runs"
    run.set_pod("mx-worker-2", phase="Succeeded")
    body = run.sync()
    done = condition(body, "Succeeded")
    assert done["status"] == "True" and done["reason"] == "MXJobSucceeded"
    assert condition(body, "Running")["status"] == "False"
    # cleanPodPolicy Running: the scheduler and servers still running go, workers stay.
    assert set(pods_of(body)) == {"mx-worker-0", "mx-worker-1", "mx-worker-2"}
    assert body["status"]["replicaStatuses"]["Worker"] == {"active": 0, "succeeded": 3, "failed": 0}
    assert body["status"]["replicaStatuses"]["Server"]["active"] == 0


def test_the_scheduler_succeeding_ends_the_job_as_in_kubeflow(hook: Hook) -> None:
    run = Run(hook, mxjob())
    run.sync()
    run.set_pod("mx-scheduler-0", phase="Succeeded")
    body = run.sync()
    assert condition(body, "Succeeded")["status"] == "True"


def test_a_server_running_alone_does_not_make_the_job_running(hook: Hook) -> None:
    run = Run(hook, mxjob())
    run.pods = [
        p
        if p["metadata"]["name"].startswith("mx-server")
        else mc.observed_pod(run.parent, run._child(p["metadata"]["name"]), phase="Pending")
        for p in run.pods
    ]
    assert condition(run.sync(), "Running") is None


def test_exit_code_policy_fails_on_a_permanent_code_and_restarts_on_a_retryable_one(
    hook: Hook,
) -> None:
    run = Run(hook, _policy(mxjob(), "ExitCode"))
    run.sync()
    run.set_pod("mx-server-1", phase="Failed", exit_code=137)
    body = run.sync()
    assert condition(body, "Restarting")["reason"] == "MXJobRestarting"
    assert "mx-server-1" not in pods_of(body) and "mx-server-1" in services_of(body)
    assert condition(body, "Failed") is None
    run.drop_pods_not_in_answer()
    body = run.sync()
    assert "mx-server-1" in pods_of(body)
    run.set_pod("mx-worker-1", phase="Failed", exit_code=2)
    body = run.sync()
    failed = condition(body, "Failed")
    assert failed["status"] == "True" and failed["reason"] == "MXJobFailed"
    assert "mx-worker-1 exited with code 2" in failed["message"]
    assert body["status"]["scheduling"]["phase"] == "Finished"


def test_suspend_deletes_every_pod_and_resume_brings_the_whole_gang_back(hook: Hook) -> None:
    run = Run(hook, mxjob())
    run.sync()
    run.parent = copy.deepcopy(run.parent)
    run.parent["spec"]["runPolicy"] = {"suspend": True}
    body = run.sync()
    assert body["children"] == []
    assert condition(body, "Suspended")["reason"] == "MXJobSuspended"
    run.pods, run.services = [], []
    run.parent["spec"]["runPolicy"] = {"suspend": False}
    body = run.sync()
    assert len(pods_of(body)) == 6
    assert condition(body, "Suspended")["status"] == "False"


def test_observed_pods_round_trip(hook: Hook) -> None:
    """The answer's pods, once the cluster reports them running, keep the job as it is."""
    parent = mc.tfjob(mxjob())
    body = hook.sync(mc.world(parent, NODES))
    pods, svcs = observe(parent, body)
    parent = with_status(parent, body)
    again = hook.sync(mc.world(parent, NODES, pods=pods, services=svcs))
    assert set(pods_of(again)) == set(pods_of(body))
    assert again["status"]["replicaStatuses"]["Scheduler"]["active"] == 1


# --- the CRD ------------------------------------------------------------------------------

MX_CRD = mc.ROOT / "crd" / "mxjobs.kubeflow.org.yaml"


def _mx_crd() -> dict[str, Any]:
    return yaml.safe_load(MX_CRD.read_text())


def test_the_crd_is_structural_with_status_and_printer_columns() -> None:
    crd = _mx_crd()
    validate_k8s(crd)
    assert crd["metadata"]["name"] == "mxjobs.kubeflow.org"
    assert crd["spec"]["names"]["plural"] == "mxjobs"
    assert crd["spec"]["scope"] == "Namespaced"
    [v1] = crd["spec"]["versions"]
    assert v1["name"] == "v1" and v1["storage"] and v1["subresources"] == {"status": {}}
    schema = v1["schema"]["openAPIV3Schema"]
    assert _structural_violations(schema, "openAPIV3Schema", root=True) == []
    for column in v1["additionalPrinterColumns"]:
        if not column["jsonPath"].startswith(".metadata."):
            assert _schema_at(schema, column["jsonPath"])["type"] == column["type"], column
    names = [c["name"] for c in v1["additionalPrinterColumns"]]
    assert names[0] == "State" and names[-1] == "Age"


def test_the_crd_accepts_mxjobs_and_refuses_what_is_beyond_the_bounds() -> None:
    job = mc.tfjob(mxjob())
    validate_custom(job)
    # The TFJob CRD's bounds (policy/model/bounds.py).
    too_many = copy.deepcopy(job)
    too_many["spec"]["mxReplicaSpecs"]["Worker"]["replicas"] = 1025
    deadline = copy.deepcopy(job)
    deadline["spec"]["runPolicy"] = {"activeDeadlineSeconds": 3153600001}
    mode = copy.deepcopy(job)
    mode["spec"]["jobMode"] = "MXServe"
    for bad in (too_many, deadline, mode):
        with pytest.raises(AssertionError):
            validate_custom(bad)
    # Kept (not pruned), so that the webhook can refuse them out loud.
    elastic = copy.deepcopy(job)
    elastic["spec"]["max-instances"] = 4
    validate_custom(elastic)


def test_the_webhook_and_the_crd_agree_on_the_bounds(hook: Hook) -> None:
    job = mxjob()
    job["spec"]["mxReplicaSpecs"]["Worker"]["replicas"] = 1025
    body = hook.job_sync(mc.job_request(mc.world(mc.tfjob(job), NODES), None))
    assert "spec.mxReplicaSpecs.Worker.replicas" in condition(body, "Failed")["message"]


def test_the_example_mxjobs_validate_against_the_crd_and_run(hook: Hook) -> None:
    paths = sorted((mc.ROOT / "examples" / "mxjobs").glob("*.yaml"))
    assert paths
    for path in paths:
        job = mc.tfjob(yaml.safe_load(path.read_text()))
        validate_custom(job)
        body = hook.sync(mc.world(job, [*NODES, mc.node("g-1", gpu=4)]))
        assert condition(body, "Failed") is None, path
        assert len(pods_of(body)) == 4, path


# --- committed fixtures: Metacontroller's exact request shape (tests/make_fixtures.py) -----


def test_fixture_pool_admits_the_older_mxjob_whole_and_queues_the_tfjob_whole(
    hook: Hook,
) -> None:
    request = load_fixture("pool-sync-mxjob-and-tfjob.json")
    pool = hook.pool_sync(request)
    by_name = {a["metadata"]["name"]: a["spec"] for a in pool["children"]}
    assert set(by_name) == {"mxjob-mx", "tfjob-job1"}
    mx, tf = by_name["mxjob-mx"], by_name["tfjob-job1"]
    assert mx["phase"] == "Admitted" and tf["phase"] == "Queued"
    assert mx["job"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "name": "mx",
        "uid": request["related"]["MXJob.kubeflow.org/v1"]["default/mx"]["metadata"]["uid"],
    }
    assert sorted((p["type"], p["index"], p["node"]) for p in mx["pods"]) == sorted(
        [("Scheduler", 0, "only-1"), ("Server", 0, "only-1"), ("Server", 1, "only-1")]
        + [("Worker", i, "only-1") for i in range(3)]
    )
    assert tf["pods"] == []
    assert "default/mx" in tf["message"]  # the job ahead that claims the room
    assert len(pods_of(hook.plan_then_render(request, "default/mx"))) == 6
    assert pods_of(hook.render(request["related"]["TFJob.kubeflow.org/v1"]["default/job1"])) == {}


def test_fixture_job_sync_renders_kubeflows_env_for_each_pod(hook: Hook) -> None:
    # Written out from mxnet.go's genClusterSpec / genLabelsSpec / SetPodEnv (v1.7.0).
    body = hook.job_sync(load_fixture("job-sync-mxjob-admitted.json"))
    pods = pods_of(body)
    assert len(pods) == 6 and len(services_of(body)) == 6
    worker = _env(pods["mx-worker-1"])
    assert worker == [
        {
            "name": "MX_CONFIG",
            "value": '{"cluster":{"scheduler":[{"url":"mx-scheduler-0","port":9091}],'
            '"server":[{"url":"mx-server-0","port":9091},{"url":"mx-server-1","port":9091}],'
            '"worker":[{"url":"mx-worker-0","port":9091},{"url":"mx-worker-1","port":9091},'
            '{"url":"mx-worker-2","port":9091}]},'
            '"labels":{"scheduler":"","server":"","worker":""},'
            '"task":{"type":"worker","index":1}}',
        },
        {"name": "DMLC_PS_ROOT_PORT", "value": "9091"},
        {"name": "DMLC_PS_ROOT_URI", "value": "mx-scheduler-0"},
        {"name": "DMLC_NUM_SERVER", "value": "2"},
        {"name": "DMLC_NUM_WORKER", "value": "3"},
        {"name": "DMLC_ROLE", "value": "worker"},
        {"name": "DMLC_USE_KUBERNETES", "value": "1"},
        {"name": "DMLC_WORKER_ID", "value": "1"},
    ]
    scheduler = _env(pods["mx-scheduler-0"])
    assert scheduler[0]["value"].endswith('"task":{"type":"scheduler","index":0}}')
    assert [e["name"] for e in scheduler][-1] == "DMLC_USE_KUBERNETES"  # no worker id
    assert {e["name"]: e["value"] for e in scheduler}["DMLC_ROLE"] == "scheduler"
    assert body["status"]["scheduling"]["nodes"] == ["only-1"]


def test_the_deadline_and_the_backoff_limit_fail_an_mxjob_and_remove_every_pod(
    hook: Hook, clock: Clock
) -> None:
    run = Run(hook, mxjob(runPolicy={"activeDeadlineSeconds": 600, "cleanPodPolicy": "None"}))
    assert run.sync()["resyncAfterSeconds"] == 600
    clock.advance(600)
    body = run.sync()
    assert condition(body, "Failed")["reason"] == "MXJobDeadlineExceeded"
    assert body["children"] == []

    backoff = Run(Hook(clock=clock), _policy(mxjob("mb", backoffLimit=2), "OnFailure"))
    backoff.set_pod("mb-server-0", phase="Running", restarts=1)
    assert condition(backoff.sync(), "Failed") is None
    backoff.set_pod("mb-worker-2", phase="Running", restarts=1)
    body = backoff.sync()
    assert condition(body, "Failed")["reason"] == "MXJobBackoffLimitExceeded"
    assert body["children"] == []
