"""TF_CONFIG, byte for byte: what TensorFlow in each pod reads to find its peers."""

from __future__ import annotations

import json
from typing import Any

from tests import metacontroller as mc
from tests.conftest import Hook, pods_of, services_of, tf_config
from webhooks.config import Settings


def _container(name: str = "tensorflow") -> dict[str, Any]:
    return {"name": name, "image": "tf:2", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}


def _job(name: str, replicas: dict[str, int], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "tfReplicaSpecs": {
                t: {"replicas": n, "template": {"spec": {"containers": [_container()]}}}
                for t, n in replicas.items()
            },
            **spec,
        },
    }


def _sync(hook: Hook, job: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    parent = mc.tfjob(job, namespace=namespace)
    return pods_of(hook.sync(mc.world(parent, [mc.node("n-1", cpu="64", memory="256Gi")])))


def test_dense_form_matches_kubeflows_own_expectation(hook: Hook) -> None:
    # Kubeflow's unit test (tensorflow_test.go): 1 worker, 1 PS, 1 evaluator in ns3.
    pods = _sync(hook, _job("test-tfjob", {"Worker": 1, "PS": 1, "Evaluator": 1}), "ns3")
    assert tf_config(pods["test-tfjob-worker-0"]) == (
        '{"cluster":{"evaluator":["test-tfjob-evaluator-0.ns3.svc:2222"],'
        '"ps":["test-tfjob-ps-0.ns3.svc:2222"],"worker":["test-tfjob-worker-0.ns3.svc:2222"]},'
        '"task":{"type":"worker","index":0},"environment":"cloud"}'
    )


def test_every_pod_gets_its_own_task_and_the_same_cluster(hook: Hook) -> None:
    # Every type has its own count (1, 2, 3), so a list sized by another type's shows.
    pods = _sync(hook, _job("mnist", {"Chief": 1, "PS": 2, "Worker": 3}))
    configs = {name: json.loads(tf_config(p)) for name, p in pods.items()}
    assert {n: (c["task"]["type"], c["task"]["index"]) for n, c in configs.items()} == {
        "mnist-chief-0": ("chief", 0),
        "mnist-ps-0": ("ps", 0),
        "mnist-ps-1": ("ps", 1),
        "mnist-worker-0": ("worker", 0),
        "mnist-worker-1": ("worker", 1),
        "mnist-worker-2": ("worker", 2),
    }
    cluster = configs["mnist-chief-0"]["cluster"]
    assert all(c["cluster"] == cluster for c in configs.values())
    assert cluster == {
        "chief": ["mnist-chief-0.default.svc:2222"],
        "ps": [f"mnist-ps-{i}.default.svc:2222" for i in range(2)],
        "worker": [f"mnist-worker-{i}.default.svc:2222" for i in range(3)],
    }
    # Only the chief carries the master role when a Chief exists.
    roles = {
        n for n, p in pods.items() if p["metadata"]["labels"].get("training.kubeflow.org/job-role")
    }
    assert roles == {"mnist-chief-0"}


def test_elastic_job_lists_max_instances_workers_whatever_it_runs_with(hook: Hook) -> None:
    """DRAGON's form: growing or shrinking never changes a running pod's TF_CONFIG."""
    parent = mc.tfjob("dragon-job1-cpu.yaml")
    # Room for the PS and two workers only: admitted with 2 of max 4.
    nodes = [mc.node("n-1", cpu="12", memory="64Gi")]
    pods = pods_of(hook.sync(mc.world(parent, nodes)))
    assert set(pods) == {"job1-ps-0", "job1-worker-0", "job1-worker-1"}
    expected_workers = [f"job1-worker-{i}.default.svc:2222" for i in range(4)]
    for pod in pods.values():
        assert json.loads(tf_config(pod))["cluster"]["worker"] == expected_workers
    assert tf_config(pods["job1-worker-1"]) == (
        '{"cluster":{"ps":["job1-ps-0.default.svc:2222"],"worker":['
        + ",".join(f'"{w}"' for w in expected_workers)
        + ']},"task":{"type":"worker","index":1},"environment":"cloud"}'
    )


def test_sparse_form_with_enable_dynamic_worker(hook: Hook) -> None:
    # PS and Worker counts differ, so a list sized by the wrong type shows.
    pods = _sync(hook, _job("dyn", {"PS": 2, "Worker": 3}, enableDynamicWorker=True))
    assert tf_config(pods["dyn-worker-2"]) == (
        '{"cluster":{"worker":{"2":"dyn-worker-2.default.svc:2222"},'
        '"ps":["dyn-ps-0.default.svc:2222","dyn-ps-1.default.svc:2222"]},'
        '"task":{"type":"worker","index":2}}'
    )
    assert tf_config(pods["dyn-ps-0"]) == (
        '{"cluster":{"worker":{},"ps":["dyn-ps-0.default.svc:2222"]},"task":{"type":"ps","index":0}}'
    )


def test_custom_cluster_domain_and_port(clock) -> None:
    hook = Hook(Settings(cluster_domain="tf.training.org"), clock)
    job = _job("dist", {"PS": 1, "Worker": 1})
    job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "tfjob-port", "containerPort": 3333}
    ]
    pods = _sync(hook, job, "ns2")
    assert json.loads(tf_config(pods["dist-worker-0"]))["cluster"] == {
        "ps": ["dist-ps-0.ns2.svc.tf.training.org:3333"],
        "worker": ["dist-worker-0.ns2.svc.tf.training.org:2222"],
    }
    # The PS's Service exposes the port its TF_CONFIG address names, not the default.
    services = services_of(hook.render(mc.tfjob(job, namespace="ns2")))
    assert services["dist-ps-0"]["spec"]["ports"] == [{"name": "tfjob-port", "port": 3333}]
    assert services["dist-worker-0"]["spec"]["ports"] == [{"name": "tfjob-port", "port": 2222}]


def test_a_single_worker_job_gets_no_tf_config(hook: Hook) -> None:
    pods = _sync(hook, _job("local", {"Worker": 1}))
    assert tf_config(pods["local-worker-0"]) is None
    port = pods["local-worker-0"]["spec"]["containers"][0]["ports"]
    assert port == [{"name": "tfjob-port", "containerPort": 2222}]


def test_user_tf_config_is_replaced_not_duplicated(hook: Hook) -> None:
    job = _job("dup", {"PS": 1, "Worker": 1})
    job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "TF_CONFIG", "value": "{}"},
        {"name": "KEEP", "value": "1"},
    ]
    env = _sync(hook, job)["dup-worker-0"]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["KEEP", "TF_CONFIG"]


def test_a_job_grown_past_its_replicas_gives_every_worker_all_max_instances_peers(
    hook: Hook,
) -> None:
    """Worker.replicas (2) below max-instances (4): every pod lists 4 workers from the first
    sync, and a worker the pool grows later (index 3, at or above replicas) gets its own
    index and the same list, so no running pod's TF_CONFIG ever has to change."""
    job = _job("grow", {"PS": 1, "Worker": 2}, **{"min-instances": 1, "max-instances": 4})
    parent = mc.tfjob(job, namespace="team-a")
    nodes = [mc.node("n-1", cpu="64", memory="256Gi")]
    first = pods_of(hook.sync(mc.world(parent, nodes)))
    assert set(first) == {"grow-ps-0", "grow-worker-0", "grow-worker-1"}
    # The pods run; nobody waits: the pool grows the job into the idle node (dragonet).
    running = [mc.observed_pod(parent, p) for p in first.values()]
    grown = pods_of(hook.sync(mc.world(parent, nodes, pods=running)))
    assert {"grow-worker-2", "grow-worker-3"} <= set(grown)
    workers = [f"grow-worker-{i}.team-a.svc:2222" for i in range(4)]
    assert tf_config(grown["grow-worker-3"]) == (
        '{"cluster":{"ps":["grow-ps-0.team-a.svc:2222"],"worker":['
        + ",".join(f'"{w}"' for w in workers)
        + ']},"task":{"type":"worker","index":3},"environment":"cloud"}'
    )
    for name, pod in {**first, **grown}.items():
        assert json.loads(tf_config(pod))["cluster"]["worker"] == workers, name


def test_without_a_chief_only_worker_0_carries_the_master_role(hook: Hook) -> None:
    """Kubeflow's IsMasterRole: worker 0 stands in for a missing Chief/Master, no other."""
    pods = _sync(hook, _job("plain", {"PS": 2, "Worker": 3}))
    roles = {
        n
        for n, p in pods.items()
        if p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master"
    }
    assert roles == {"plain-worker-0"}


def test_jobs_of_one_name_with_other_shapes_get_their_own_cluster() -> None:
    """A job's cluster is written once and kept by all it is written from (its namespace,
    name, each type's count and port, the cluster domain): a job of the same name with
    another shape, seen before or after, lists its own peers."""
    from policy.model.jobs import parse_job
    from policy.model.kinds import TFJOB
    from policy.model.kinds.tfjob import tf_config as render_tf_config

    shapes = [
        ({"Worker": 2, "PS": 1}, 2222, "", "default"),
        ({"Worker": 3, "PS": 1}, 2222, "", "default"),
        ({"Worker": 3, "PS": 2}, 3333, "", "default"),
        ({"Worker": 3, "PS": 2}, 3333, "cluster.local", "default"),
        ({"Worker": 3, "PS": 2}, 3333, "cluster.local", "team-b"),
        ({"Worker": 2, "PS": 1}, 2222, "", "default"),  # the first again
    ]
    for replicas, port, domain, namespace in shapes:
        manifest = _job("same", replicas)
        manifest["metadata"]["namespace"] = namespace
        for spec in manifest["spec"]["tfReplicaSpecs"].values():
            container = spec["template"]["spec"]["containers"][0]
            container["ports"] = [{"name": "tfjob-port", "containerPort": port}]
        job = parse_job(manifest, TFJOB)
        suffix = f".{domain}" if domain else ""
        expected = {
            t.lower(): [f"same-{t.lower()}-{i}.{namespace}.svc{suffix}:{port}" for i in range(n)]
            for t, n in sorted(replicas.items(), key=lambda kv: kv[0].lower())
        }
        for rtype, n in replicas.items():
            for index in range(n):
                config = render_tf_config(job, rtype, index, domain)
                assert json.loads(config) == {
                    "cluster": expected,
                    "task": {"type": rtype.lower(), "index": index},
                    "environment": "cloud",
                }
                assert config == json.dumps(json.loads(config), separators=(",", ":"))
