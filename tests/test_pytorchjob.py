"""PyTorchJobs (``kubeflow.org/v1``): each pod's environment as Kubeflow's operator writes
it, ``elasticPolicy`` as Dragonet's worker bounds, validation, gang admission in one queue
with the other kinds, Kubeflow's success rule, the CRD and strict fields.

Expected values are written out by hand from kubeflow/training-operator v1.9.0
(``pkg/controller.v1/pytorch/envvar.go`` ``setPodEnv``, ``master.go``, ``elastic.go``;
``pkg/apis/kubeflow.org/v1/pytorch_defaults.go``; ``pytorchjob_controller.go``
``UpdateJobStatus`` and ``IsMasterRole``), not computed by Dragonet's code.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from policy.memo import NO_MEMO
from policy.model.crdcheck import check_object
from policy.pool.observe import observe
from tests import metacontroller as mc
from tests.conftest import Hook, condition, pods_of, services_of
from tests.kube_schema import validate_custom, validate_k8s
from tests.test_crd import _schema_at, _structural_violations
from tests.test_lifecycle import Run
from tests.test_mxjob import mxjob

NODES = [mc.node("n-1", cpu="32", memory="128Gi")]
CRD = mc.ROOT / "crd" / "pytorchjobs.kubeflow.org.yaml"
EXAMPLES = sorted((mc.ROOT / "examples" / "pytorchjobs").glob("*.yaml"))


def _container(name: str = "pytorch", cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "kubeflow/pytorch-dist-mnist:latest",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
        **extra,
    }


def _replica(n: int, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "replicas": n,
        "template": {"spec": {"containers": list(containers) or [_container()]}},
        **spec,
    }


def pytorchjob(name: str = "pt", workers: int = 2, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    """A Master and ``workers`` workers."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": _replica(1, _container(cpu=cpu)),
                "Worker": _replica(workers, _container(cpu=cpu)),
            },
            **spec,
        },
    }


def elastic(name: str = "el", workers: int = 2, **policy: Any) -> dict[str, Any]:
    """Workers only, under an elasticPolicy (torchrun's rendezvous on worker 0)."""
    job = pytorchjob(name, workers, elasticPolicy=policy)
    del job["spec"]["pytorchReplicaSpecs"]["Master"]
    return job


def _env(pod: dict[str, Any], container: str = "pytorch") -> list[dict[str, Any]]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == container)["env"]


def _sync(hook: Hook, job: dict[str, Any]) -> dict[str, Any]:
    return hook.sync(mc.world(mc.tfjob(job), NODES))


def _pairs(pod: dict[str, Any], container: str = "pytorch") -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in _env(pod, container)]


# --- children and env ---------------------------------------------------------------------


def test_every_pod_of_a_master_job_gets_kubeflows_env_in_every_container(hook: Hook) -> None:
    job = pytorchjob(workers=2)
    specs = job["spec"]["pytorchReplicaSpecs"]
    # The Master's own pytorchjob-port: MASTER_PORT is the Master's port (master.go:37).
    specs["Master"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "pytorchjob-port", "containerPort": 29500}
    ]
    # A sidecar with a user variable: setPodEnv appends to every container (envvar.go:49).
    specs["Worker"]["template"]["spec"]["containers"].append(
        _container("sidecar", env=[{"name": "USER_VAR", "value": "x"}])
    )
    pods = pods_of(_sync(hook, job))
    assert set(pods) == {"pt-master-0", "pt-worker-0", "pt-worker-1"}

    def expected(rank: int) -> list[tuple[str, str]]:
        # envvar.go:56-123 in order; WORLD_SIZE = 3 replicas x nprocPerNode (auto: 1);
        # PET_NNODES the replicas without an elasticPolicy.
        return [
            ("PYTHONUNBUFFERED", "1"),
            ("MASTER_PORT", "29500"),
            ("PET_MASTER_PORT", "29500"),
            ("MASTER_ADDR", "pt-master-0"),
            ("PET_MASTER_ADDR", "pt-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", str(rank)),
            ("PET_NODE_RANK", str(rank)),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_NNODES", "3"),
        ]

    assert _pairs(pods["pt-master-0"]) == expected(0)
    assert _pairs(pods["pt-worker-0"]) == expected(1)  # a worker's rank is its index + 1
    assert _pairs(pods["pt-worker-1"]) == expected(2)
    assert _pairs(pods["pt-worker-1"], "sidecar") == [("USER_VAR", "x"), *expected(2)]
    assert "TF_CONFIG" not in str(pods) and "MX_CONFIG" not in str(pods)


def test_an_elastic_job_gets_torchruns_rendezvous_variables(hook: Hook) -> None:
    job = elastic(workers=2, minReplicas=1, maxReplicas=4, maxRestarts=3)
    pods = pods_of(_sync(hook, job))
    assert set(pods) == {"el-worker-0", "el-worker-1"}
    # No Master: no MASTER_*, WORLD_SIZE or RANK (envvar.go:67); elastic.go:78-119.
    assert _pairs(pods["el-worker-1"]) == [
        ("PYTHONUNBUFFERED", "1"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_RDZV_ENDPOINT", "el-worker-0:23456"),
        ("PET_RDZV_BACKEND", "c10d"),
        ("PET_NNODES", "1:4"),
        ("PET_MAX_RESTARTS", "3"),
    ]


# (spec changes, the variables of worker 0 they change or add, what must be absent)
ENV_RULES = [
    (  # a number of processes multiplies WORLD_SIZE (envvar.go:62-64, 132-140)
        {"nprocPerNode": "4"},
        {"WORLD_SIZE": "12", "PET_NPROC_PER_NODE": "4"},
        (),
    ),
    (  # any other value counts as 1 and is passed on as written
        {"nprocPerNode": "gpu"},
        {"WORLD_SIZE": "3", "PET_NPROC_PER_NODE": "gpu"},
        (),
    ),
    (  # both bounds missing take Worker.replicas (pytorch_defaults.go:48-53)
        {"elasticPolicy": {}},
        {"PET_NNODES": "2:2", "PET_RDZV_ENDPOINT": "pt-worker-0:23456"},
        (),
    ),
    (  # one bound missing takes the other's value (pytorch_defaults.go:43-47)
        {"elasticPolicy": {"minReplicas": 2}},
        {"PET_NNODES": "2:2"},
        (),
    ),
    (  # every optional rendezvous field, in elastic.go's order
        {
            "elasticPolicy": {
                "minReplicas": 2,
                "maxReplicas": 3,
                "rdzvBackend": "etcd-v2",
                "rdzvHost": "etcd.infra",
                "rdzvPort": 2379,
                "rdzvId": "run-7",
                "rdzvConf": [{"key": "timeout", "value": "900"}, {"key": "a", "value": "b"}],
                "standalone": True,
            }
        },
        {
            "PET_RDZV_ENDPOINT": "etcd.infra:2379",
            "PET_RDZV_BACKEND": "etcd-v2",
            "PET_NNODES": "2:3",
            "PET_RDZV_ID": "run-7",
            "PET_RDZV_CONF": "timeout=900,a=b",
            "PET_STANDALONE": "",
        },
        (),
    ),
    (  # the deprecated elasticPolicy.nProcPerNode replaces nprocPerNode's "auto" default
        {"elasticPolicy": {"nProcPerNode": 8}},
        {"PET_NPROC_PER_NODE": "8", "WORLD_SIZE": "3"},
        ("auto",),
    ),
]


@pytest.mark.parametrize(("changes", "expected", "absent"), ENV_RULES)
def test_kubeflows_env_rules(hook: Hook, changes: dict, expected: dict, absent: tuple) -> None:
    job = pytorchjob(**changes)
    env = _pairs(pods_of(_sync(hook, job))["pt-worker-0"])
    names = [k for k, _ in env]
    assert len(names) == len(set(names)), env  # each variable once
    got = dict(env)
    for name, value in expected.items():
        assert got.get(name) == value, (name, env)
    for value in absent:
        assert value not in got.values(), env
    assert got["RANK"] == "1" and got["PYTHONUNBUFFERED"] == "1"


def test_pods_and_services_carry_kubeflows_names_labels_port_and_restart_policy(
    hook: Hook,
) -> None:
    body = _sync(hook, pytorchjob())
    pods, services = pods_of(body), services_of(body)
    assert set(services) == set(pods)
    master = pods["pt-master-0"]
    assert master["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "dragonet",
        "training.kubeflow.org/job-name": "pt",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",  # IsMasterRole: the Master
    }
    roles = {
        n for n, p in pods.items() if "training.kubeflow.org/job-role" in p["metadata"]["labels"]
    }
    assert roles == {"pt-master-0"}
    assert master["spec"]["containers"][0]["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 23456}
    ]
    # PyTorchJobDefaultRestartPolicy (pytorch_types.go:31): OnFailure when none is given.
    assert {p["spec"]["restartPolicy"] for p in pods.values()} == {"OnFailure"}
    assert services["pt-worker-1"]["spec"]["ports"] == [{"name": "pytorchjob-port", "port": 23456}]
    for child in body["children"]:
        validate_k8s(child)
    # Without a Master, worker 0 carries the master role.
    roles = {
        n
        for n, p in pods_of(_sync(hook, elastic("el"))).items()
        if "training.kubeflow.org/job-role" in p["metadata"]["labels"]
    }
    assert roles == {"el-worker-0"}


# --- elastic bounds -----------------------------------------------------------------------


def test_elastic_policy_bounds_are_dragonets_worker_bounds(hook: Hook) -> None:
    scheduling = _sync(hook, elastic(workers=2, minReplicas=1, maxReplicas=4))["status"][
        "scheduling"
    ]
    assert "elastic" not in scheduling
    assert scheduling["workers"]["min"] == 1 and scheduling["workers"]["max"] == 4
    # DRAGON's own fields may say the same.
    same = elastic("same", workers=2, minReplicas=1, maxReplicas=4)
    same["spec"].update({"min-instances": 1, "max-instances": 4})
    workers = _sync(hook, same)["status"]["scheduling"]["workers"]
    assert (workers["min"], workers["max"]) == (1, 4)


def test_without_an_elastic_policy_the_workers_are_fixed_and_status_says_so(hook: Hook) -> None:
    scheduling = _sync(hook, pytorchjob(workers=3))["status"]["scheduling"]
    assert scheduling["elastic"] is False
    assert scheduling["workers"] == {"current": 0, "target": 3, "min": 3, "max": 3}


# --- validation ---------------------------------------------------------------------------


def _set(**fields: Any):
    return lambda j: j["spec"].update(fields)


def _replicas(rtype: str, n: int):
    return lambda j: j["spec"]["pytorchReplicaSpecs"][rtype].update(replicas=n)


INVALID = [
    (
        "two masters",
        _replicas("Master", 2),
        "Master.replicas is 2; a job has one Master",
    ),
    (
        "no master pod",
        _replicas("Master", 0),
        "spec.pytorchReplicaSpecs.Master.replicas is 0; the job needs exactly one Master",
    ),
    (
        "DRAGON's bounds without an elasticPolicy",
        _set(**{"min-instances": 1}),
        "spec.min-instances: a PyTorchJob's workers come and go only under spec.elasticPolicy",
    ),
    (
        "bounds that disagree",
        _set(**{"max-instances": 4}, elasticPolicy={"maxReplicas": 3}),
        "spec.max-instances (4) and spec.elasticPolicy.maxReplicas (3) disagree",
    ),
    (
        "min above max",
        _set(elasticPolicy={"minReplicas": 3, "maxReplicas": 2}),
        "spec.elasticPolicy.minReplicas (3) is greater than maxReplicas (2)",
    ),
    (
        "an HPA's metrics",
        _set(elasticPolicy={"metrics": [{"type": "Resource"}]}),
        "spec.elasticPolicy.metrics: not supported",
    ),
    (
        "both nProcPerNode fields",
        _set(nprocPerNode="2", elasticPolicy={"nProcPerNode": 2}),
        "spec.elasticPolicy.nProcPerNode: must not be used with spec.nprocPerNode",
    ),
    (
        "an elasticPolicy without workers",
        lambda j: (
            j["spec"]["pytorchReplicaSpecs"].pop("Worker"),
            j["spec"].update(elasticPolicy={}),
        ),
        "spec.pytorchReplicaSpecs.Worker: must be given with spec.elasticPolicy",
    ),
    (
        "an unknown rendezvous backend",
        _set(elasticPolicy={"rdzvBackend": "zookeeper"}),
        "spec.elasticPolicy.rdzvBackend: Input should be 'c10d', 'etcd' or 'etcd-v2'",
    ),
    (
        "a TFJob's replica type",
        lambda j: j["spec"]["pytorchReplicaSpecs"].update(Chief=_replica(1)),
        "spec.pytorchReplicaSpecs has unknown replica type 'Chief'; expected one of Master, Worker",
    ),
    (
        "no pytorch container",
        lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].update(
            containers=[_container("main")]
        ),
        "spec.pytorchReplicaSpecs.Worker.template.spec has no container named 'pytorch'",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_an_invalid_pytorchjob_fails_with_the_field_named(hook: Hook, mutate, message: str) -> None:
    job = pytorchjob()
    mutate(job)
    parent = mc.tfjob(job)
    body = hook.job_sync(mc.job_request(mc.world(parent, NODES), None))
    failed = condition(body, "Failed")
    assert failed["status"] == "True"
    assert failed["reason"] == "PyTorchJobFailedValidation"
    assert failed["message"].startswith("PyTorchJob default/pt is invalid: ")
    assert message in failed["message"]
    assert body["children"] == []
    assert body["status"]["scheduling"]["phase"] == "Invalid"
    pool = hook.pool_sync(mc.pool_request(mc.world(parent, NODES)))
    assert pool["children"] == []  # ... and the pool gives it no room


def test_a_misspelt_field_is_refused_with_the_closest_known_one() -> None:
    job = mc.tfjob(elastic(minReplicas=1, maxReplicas=2))
    assert check_object(job) is None
    typo = copy.deepcopy(job)
    typo["spec"]["elasticPolicy"]["maxReplica"] = 3
    said = check_object(typo)
    assert said is not None
    assert said.startswith("spec.elasticPolicy.maxReplica: ")
    assert 'did you mean "maxReplicas"' in said
    top = copy.deepcopy(job)
    top["spec"]["nprocPerNodes"] = "2"
    assert 'did you mean "nprocPerNode"' in (check_object(top) or "")


# --- one queue with the other kinds -------------------------------------------------------


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


@pytest.mark.parametrize("first", ["PyTorchJob", "TFJob"])
def test_a_pytorchjob_and_a_tfjob_share_one_queue_each_admitted_whole_or_not_at_all(
    hook: Hook, first: str
) -> None:
    """5 cpu free; the PyTorchJob needs 4 (4 pods x 1), the TFJob 3: each fits alone, not
    both. The older one is admitted whole, the other waits whole."""
    node = [mc.node("n-1", cpu="5", memory="64Gi")]
    later = "2026-11-21T10:00:30Z"
    pt = mc.tfjob(pytorchjob("pt", workers=3), created=later if first == "TFJob" else mc.T0)
    tf = mc.tfjob(_tfjob("tf", "1"), created=later if first == "PyTorchJob" else mc.T0)
    pool = hook.pool_sync(mc.pool_request(mc.world(pt, node, jobs=[pt, tf])))
    phases = {a["metadata"]["name"]: a["spec"]["phase"] for a in pool["children"]}
    winner, loser = (
        ("pytorchjob-pt", "tfjob-tf") if first == "PyTorchJob" else ("tfjob-tf", "pytorchjob-pt")
    )
    assert phases == {winner: "Admitted", loser: "Queued"}
    assert len(pods_of(hook.render(pt))) == (4 if first == "PyTorchJob" else 0)
    waiting = hook.render(tf if first == "PyTorchJob" else pt)
    assert pods_of(waiting) == {}
    assert waiting["status"]["scheduling"]["phase"] == "Queued"


def test_an_elastic_pytorchjob_is_admitted_with_its_minimum_when_that_is_all_that_fits(
    hook: Hook,
) -> None:
    node = [mc.node("n-1", cpu="2", memory="64Gi")]  # room for 2 of its 4 workers
    job = mc.tfjob(elastic(workers=4, minReplicas=2, maxReplicas=4))
    pool = hook.pool_sync(mc.pool_request(mc.world(job, node)))
    (admission,) = pool["children"]
    assert admission["spec"]["phase"] == "Admitted"
    assert set(pods_of(hook.render(job))) == {"el-worker-0", "el-worker-1"}
    # Fixed (no elasticPolicy): all of Worker.replicas or nothing.
    fixed = mc.tfjob(pytorchjob("fx", workers=3))
    pool = hook.pool_sync(mc.pool_request(mc.world(fixed, node)))
    assert [a["spec"]["phase"] for a in pool["children"]] == ["Queued"]


def test_a_waiting_pytorchjob_says_what_its_gang_needs_in_its_own_fields(hook: Hook) -> None:
    node = [mc.node("n-1", cpu="1", memory="64Gi")]  # room for no gang below
    job = mc.tfjob(elastic(workers=3, minReplicas=2, maxReplicas=4))
    hook.pool_sync(mc.pool_request(mc.world(job, node)))
    said = hook.render(job)["status"]["scheduling"]["message"]
    assert "for its 2 workers (elasticPolicy.minReplicas) at once" in said
    fixed = mc.tfjob(pytorchjob("fx", workers=2))
    hook.pool_sync(mc.pool_request(mc.world(fixed, node)))
    said = hook.render(fixed)["status"]["scheduling"]["message"]
    assert "for its 1 master plus 2 workers at once" in said  # no minimum: all of them


# --- lifecycle: Kubeflow's success rule ---------------------------------------------------


def test_the_master_succeeding_ends_the_job_while_workers_still_run(hook: Hook) -> None:
    run = Run(hook, pytorchjob())
    body = run.sync()
    assert condition(body, "Running")["reason"] == "PyTorchJobRunning"
    run.set_pod("pt-worker-0", phase="Succeeded")
    run.set_pod("pt-worker-1", phase="Succeeded")
    assert condition(run.sync(), "Succeeded") is None, "workers alone never end a Master job"
    run.set_pod("pt-master-0", phase="Succeeded")
    done = condition(run.sync(), "Succeeded")
    assert done["status"] == "True" and done["reason"] == "PyTorchJobSucceeded"


def test_without_a_master_every_worker_must_succeed(hook: Hook) -> None:
    job = pytorchjob("nm", workers=3)
    del job["spec"]["pytorchReplicaSpecs"]["Master"]
    run = Run(hook, job)
    for i in range(2):
        run.set_pod(f"nm-worker-{i}", phase="Succeeded")
    assert condition(run.sync(), "Succeeded") is None
    run.set_pod("nm-worker-2", phase="Succeeded")
    assert condition(run.sync(), "Succeeded")["status"] == "True"


def test_with_an_elastic_policy_one_worker_succeeding_ends_the_job(hook: Hook) -> None:
    run = Run(hook, elastic(workers=3, minReplicas=1, maxReplicas=3))
    run.sync()
    run.set_pod("el-worker-2", phase="Succeeded")
    assert condition(run.sync(), "Succeeded")["status"] == "True"


def test_a_failed_pod_restarts_on_failure_and_fails_the_job_under_never(hook: Hook) -> None:
    run = Run(hook, pytorchjob())  # OnFailure by default
    run.sync()
    run.set_pod("pt-worker-1", phase="Failed", exit_code=1)
    body = run.sync()
    assert condition(body, "Restarting")["reason"] == "PyTorchJobRestarting"
    assert condition(body, "Failed") is None
    job = pytorchjob("nv")
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["restartPolicy"] = "Never"
    run = Run(Hook(), job)
    run.sync()
    run.set_pod("nv-master-0", phase="Failed", exit_code=1)
    failed = condition(run.sync(), "Failed")
    assert failed["status"] == "True" and failed["reason"] == "PyTorchJobFailed"
    assert "nv-master-0 failed (exit code 1)" in failed["message"]


# --- the CRD, the chart's copy and the examples -------------------------------------------


def test_the_crd_is_structural_and_its_chart_copy_the_same() -> None:
    crd = yaml.safe_load(CRD.read_text())
    validate_k8s(crd)
    assert crd["metadata"]["name"] == "pytorchjobs.kubeflow.org"
    [v1] = crd["spec"]["versions"]
    schema = v1["schema"]["openAPIV3Schema"]
    assert _structural_violations(schema, "openAPIV3Schema", root=True) == []
    for column in v1["additionalPrinterColumns"]:
        if not column["jsonPath"].startswith(".metadata."):
            assert _schema_at(schema, column["jsonPath"])["type"] == column["type"], column
    chart = mc.ROOT / "chart" / "crds" / CRD.name
    assert chart.read_bytes() == CRD.read_bytes(), f"cp {CRD.relative_to(mc.ROOT)} chart/crds/"


def test_the_crd_accepts_pytorchjobs_and_refuses_what_is_beyond_the_bounds() -> None:
    job = mc.tfjob(elastic(minReplicas=1, maxReplicas=4, rdzvBackend="c10d"))
    validate_custom(job)
    for path, value in (
        (("spec", "pytorchReplicaSpecs", "Worker", "replicas"), 1025),
        (("spec", "elasticPolicy", "maxReplicas"), 1025),
        (("spec", "elasticPolicy", "rdzvBackend"), "zookeeper"),
        (("spec", "elasticPolicy", "rdzvPort"), 70000),
    ):
        bad = copy.deepcopy(job)
        *parents, last = path
        target = bad
        for p in parents:
            target = target[p]
        target[last] = value
        with pytest.raises(AssertionError):
            validate_custom(bad)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_the_examples_validate_against_the_crd_and_run(hook: Hook, path: Path) -> None:
    job = mc.tfjob(yaml.safe_load(path.read_text()))
    validate_custom(job)
    assert check_object(job) is None
    body = hook.sync(mc.world(job, [*NODES, mc.node("g-1", gpu=4)]))
    assert condition(body, "Failed") is None, path
    assert pods_of(body), path


def test_there_are_examples() -> None:
    assert [p.name for p in EXAMPLES] == ["elastic.yaml", "mnist.yaml"]


# --- the pool's view of a PyTorchJob's pods ------------------------------------------------


@pytest.mark.parametrize("kind", ["PyTorchJob", "MXJob"])
def test_the_pool_reads_each_kinds_pods_by_their_own_main_container(hook: Hook, kind: str) -> None:
    """A worker that failed for good under restartPolicy ExitCode (code 1): the pool reads
    its exit code in the kind's own container (``pytorch``, ``mxnet``), not TensorFlow's,
    so it sees what the job's sync sees: a permanent failure, not a pod to restart (a pod
    whose code the pool could not find would count as retryable, Kubeflow's 0xBEEF)."""
    job = pytorchjob("ec") if kind == "PyTorchJob" else mxjob("ec")
    specs = job["spec"]["pytorchReplicaSpecs" if kind == "PyTorchJob" else "mxReplicaSpecs"]
    for spec in specs.values():
        spec["restartPolicy"] = "ExitCode"
    run = Run(hook, job)
    run.sync()
    run.set_pod("ec-worker-1", phase="Failed", exit_code=1)
    failed = condition(run.sync(), "Failed")
    assert failed["status"] == "True" and failed["reason"] == f"{kind}Failed"
    request = mc.pool_request(mc.world(run.parent, NODES, pods=run.pods))
    snap = observe(request["parent"], request["children"], request["related"], NO_MEMO)
    worker = next(p for p in snap.cluster.pods if p.name == "ec-worker-1")
    assert worker.exit_code == 1
    assert all(p.started is not None for p in snap.cluster.pods if p.phase == "Running")
