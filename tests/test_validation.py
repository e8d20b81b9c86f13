"""An invalid TFJob gets HTTP 200, no children, and a Failed condition naming the problem."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests import metacontroller as mc
from tests.conftest import Hook, condition, pods_of

NODES = [mc.node("n-1", cpu="32", memory="128Gi")]
Edit = Callable[[dict[str, Any]], None]


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["tfReplicaSpecs"]["Worker"]


def _container(job: dict[str, Any]) -> dict[str, Any]:
    return _worker(job)["template"]["spec"]["containers"][0]


def _set(path: str, value: Any) -> Edit:
    def edit(job: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = job
        for key in parents:
            target = target[key]
        target[last] = value

    return edit


INVALID: list[tuple[str, Edit, str]] = [
    (
        "min above max",
        _set("spec.min-instances", 5),
        "min-instances (5) is greater than max-instances (4)",
    ),
    (
        "replicas above max",
        _set("spec.max-instances", 3),
        "Worker.replicas (4) must lie between min-instances (1) and max-instances (3)",
    ),
    (
        "no tensorflow container",
        lambda j: _container(j).update(name="trainer"),
        "spec.tfReplicaSpecs.Worker.template.spec has no container named 'tensorflow' "
        "(found 'trainer')",
    ),
    (
        "no replicas at all",
        _set("spec.tfReplicaSpecs", {}),
        "spec.tfReplicaSpecs defines no replicas",
    ),
    (
        "no tfReplicaSpecs",
        lambda j: j["spec"].pop("tfReplicaSpecs"),
        "spec.tfReplicaSpecs: Field required",
    ),
    (
        "replicas not a number",
        lambda j: _worker(j).update(replicas="four"),
        "spec.tfReplicaSpecs.Worker.replicas: Input should be a valid integer",
    ),
    (
        "unknown replica type",
        lambda j: j["spec"]["tfReplicaSpecs"].update(Launcher=copy.deepcopy(_worker(j))),
        "unknown replica type 'Launcher'; expected one of Chief, Evaluator, Master, PS, Worker",
    ),
    (
        "chief and master",
        lambda j: j["spec"]["tfReplicaSpecs"].update(
            Chief=copy.deepcopy(_worker(j) | {"replicas": 1}),
            Master=copy.deepcopy(_worker(j) | {"replicas": 1}),
        ),
        "may define Chief or Master, not both",
    ),
    (
        "bad restart policy",
        lambda j: _worker(j).update(restartPolicy="Sometimes"),
        "spec.tfReplicaSpecs.Worker.restartPolicy: Input should be 'Always', 'OnFailure', "
        "'Never' or 'ExitCode'",
    ),
    (
        "container without image",
        lambda j: _container(j).pop("image"),
        "containers[0] (tensorflow) has no image",
    ),
    (
        "unreadable quantity",
        lambda j: _container(j)["resources"]["limits"].update(cpu="4 cores"),
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limits['cpu'] has an "
        "unreadable resource quantity",
    ),
    (
        "env not a list",
        lambda j: _container(j).update(env="global_steps=100"),
        "spec.tfReplicaSpecs.Worker.template.spec.containers.0.env: Input should be a valid list",
    ),
    (
        "port as a string",
        lambda j: _container(j)["ports"][0].update(containerPort="2222"),
        "containers.0.ports.0.containerPort: Input should be a valid integer",
    ),
    (
        "name too long for pod names",
        _set("metadata.name", "a" * 55),
        "is too long: pod and service names '<name>-<type>-<index>' must stay within 63",
    ),
    (
        "name not DNS-1035",
        _set("metadata.name", "Job_1"),
        "metadata.name 'Job_1' must be a DNS-1035 label",
    ),
    (
        "bad clean pod policy",
        _set("spec.cleanPodPolicy", "Sometimes"),
        "spec.cleanPodPolicy: Input should be 'None', 'Running' or 'All'",
    ),
    (
        "unsupported managedBy",
        _set("spec.runPolicy", {"managedBy": "example.com/batch-controller"}),
        "spec.runPolicy.managedBy 'example.com/batch-controller' is not supported: "
        "'kubeflow.org/training-operator' (or none) or 'dragonet.io/dragonet' for Dragonet "
        "to run the job, or 'kueue.x-k8s.io/multikueue' for MultiKueue to",
    ),
    (
        "managedBy not one of Kubeflow's values",
        _set("spec.runPolicy", {"managedBy": "dragonet"}),
        "spec.runPolicy.managedBy 'dragonet' is not supported",
    ),
    (
        "KubeShare share above one GPU",
        lambda j: (
            _worker(j)["template"]
            .setdefault("metadata", {})
            .update(annotations={"kubeshare/gpu_request": "1.5"})
        ),
        "spec.tfReplicaSpecs.Worker.template.metadata.annotations['kubeshare/gpu_request']: "
        "'1.5' must be greater than 0 and at most 1.0",
    ),
    (
        "KubeShare limit below the request",
        lambda j: (
            _worker(j)["template"]
            .setdefault("metadata", {})
            .update(annotations={"kubeshare/gpu_request": "0.5", "kubeshare/gpu_limit": "0.2"})
        ),
        "spec.tfReplicaSpecs.Worker.template.metadata.annotations['kubeshare/gpu_limit'] (0.2) "
        "is below 'kubeshare/gpu_request' (0.5)",
    ),
    (
        "KubeShare v2 memory not in bytes",
        lambda j: (
            _worker(j)["template"]
            .setdefault("metadata", {})
            .update(labels={"sharedgpu/gpu_request": "0.5", "sharedgpu/gpu_mem": "3Gi"})
        ),
        "spec.tfReplicaSpecs.Worker.template.metadata.labels['sharedgpu/gpu_mem']: '3Gi' must "
        "be a whole number of bytes",
    ),
    (
        "KubeShare memory without a request",
        lambda j: (
            _worker(j)["template"]
            .setdefault("metadata", {})
            .update(annotations={"kubeshare/gpu_mem": "1073741824"})
        ),
        "spec.tfReplicaSpecs.Worker.template.metadata.annotations['kubeshare/gpu_request'] is "
        "required",
    ),
    (
        "KubeShare fraction and whole GPUs at once",
        lambda j: (
            _worker(j)["template"]
            .setdefault("metadata", {})
            .update(annotations={"kubeshare/gpu_request": "0.5"}),
            _container(j)["resources"].setdefault("limits", {}).update({"nvidia.com/gpu": "1"}),
        ),
        "spec.tfReplicaSpecs.Worker.template.spec asks for whole GPUs (nvidia.com/gpu) and a "
        "fraction of one (KubeShare)",
    ),
    (
        "KubeShare resource",
        lambda j: (
            _container(j)["resources"].setdefault("limits", {}).update({"kubeshare/gpu": "1"})
        ),
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limits"
        "['kubeshare/gpu']: KubeShare takes a fractional GPU from the pod's "
        "kubeshare/gpu_request",
    ),
]


@pytest.mark.parametrize(("case", "edit", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_job_fails_with_a_message_naming_the_problem(
    hook: Hook, case: str, edit: Edit, message: str
) -> None:
    job = mc.compat("dragon-job1-cpu.yaml")
    edit(job)
    body = hook.sync(mc.world(mc.tfjob(job), NODES))
    assert body["children"] == []
    failed = condition(body, "Failed")
    assert failed is not None and failed["status"] == "True"
    assert failed["reason"] == "TFJobFailedValidation"
    assert message in failed["message"]
    assert failed["message"].startswith(f"TFJob default/{job['metadata']['name']} is invalid: ")
    assert body["status"]["scheduling"] == {"phase": "Invalid", "message": failed["message"]}


def test_an_invalid_job_takes_no_capacity_from_valid_ones(hook: Hook) -> None:
    broken = mc.compat("dragon-job1-cpu.yaml")
    broken["spec"]["min-instances"] = 9
    older = mc.tfjob(broken, name="broken", created="2026-11-21T08:00:00Z")
    valid = mc.tfjob("dragon-job1-cpu.yaml")
    nodes = [mc.node("n-1", cpu="20", memory="64Gi")]
    body = hook.sync(mc.world(valid, nodes, jobs=[older, valid]))
    assert len(pods_of(body)) == 5


@pytest.mark.parametrize(
    "manifest", ["dragon-job1-cpu.yaml", "dragon-job1-gpu.yaml", "gang-tfjob.yaml"]
)
def test_compat_manifests_are_accepted_as_written(hook: Hook, manifest: str) -> None:
    nodes = [
        mc.node("gpu-1", cpu="32", memory="128Gi", gpu=4, labels={"gpu": "1060g1"}),
    ]
    body = hook.sync(mc.world(mc.tfjob(manifest), nodes))
    assert condition(body, "Failed") is None
    assert body["status"]["scheduling"]["phase"] == "Admitted"


def _managed_by(manager: str, **spec: Any) -> dict[str, Any]:
    job = mc.compat("dragon-job1-cpu.yaml")
    job["spec"].update(spec, runPolicy={"managedBy": manager})
    return job


@pytest.mark.parametrize("valid", [True, False], ids=["valid", "invalid spec"])
def test_a_job_multikueue_manages_is_left_alone(hook: Hook, valid: bool) -> None:
    """Kueue runs it on a worker cluster and mirrors its status here: Dragonet creates no
    pod, writes no status (not even a Failed one for a spec it would reject), and gives its
    room to other jobs."""
    spec = {} if valid else {"min-instances": 9}
    theirs = mc.tfjob(_managed_by("kueue.x-k8s.io/multikueue", **spec), name="theirs")
    mine = mc.tfjob("dragon-job1-cpu.yaml", name="mine", created="2026-11-21T10:00:30Z")
    nodes = [mc.node("n-1", cpu="20", memory="64Gi")]  # room for one of them
    body = hook.sync(mc.world(theirs, nodes, jobs=[theirs, mine]))
    assert body == {"children": [], "status": {}}
    assert hook.admission(theirs) is None
    assert len(pods_of(hook.sync(mc.world(mine, nodes, jobs=[theirs, mine])))) == 5


def test_the_training_operators_own_manager_value_means_dragonet_runs_the_job(
    hook: Hook,
) -> None:
    body = hook.sync(mc.world(mc.tfjob(_managed_by("kubeflow.org/training-operator")), NODES))
    assert condition(body, "Failed") is None
    assert len(pods_of(body)) == 5


def test_dragonets_own_manager_value_means_dragonet_runs_the_job(hook: Hook) -> None:
    """The mark of a Dragonet job beside Kubeflow (docs/kubeflow.md), with or without the
    label Metacontroller selects it by."""
    for labels in ({}, {"dragonet.io/managed-by": "dragonet"}):
        job = mc.tfjob(_managed_by("dragonet.io/dragonet"))
        job["metadata"]["labels"] = labels
        body = hook.sync(mc.world(job, NODES))
        assert condition(body, "Failed") is None
        assert len(pods_of(body)) == 5
