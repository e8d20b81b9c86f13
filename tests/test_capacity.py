"""What counts against a node, and which nodes may take new pods."""

from __future__ import annotations

from typing import Any

import pytest

from tests import metacontroller as mc
from tests.conftest import Clock, Hook, node_of, pods_of


def _placed(body: dict[str, Any]) -> dict[str, str]:
    return {name: node_of(p) for name, p in pods_of(body).items()}


def _other_job(name: str, node: str, created: str = "2026-11-21T08:00:00Z", **pod: Any):
    """A job of someone else's, admitted earlier, whose 5 pods sit on ``node``."""
    job = mc.tfjob("dragon-job1-cpu.yaml", name=name, created=created)
    body = Hook().sync(mc.world(job, [mc.node(node, cpu="64", memory="256Gi")]))
    return job, [mc.observed_pod(job, p, **pod) for p in pods_of(body).values()]


def test_limits_only_templates_count_as_requests(hook: Hook) -> None:
    """DRAGON's examples give only limits; counting them as zero would overcommit."""
    # Two nodes of 10 cpu: 5 pods of 4 cpu cannot share one node.
    nodes = [mc.node("n-1", cpu="10", memory="64Gi"), mc.node("n-2", cpu="10", memory="64Gi")]
    placed = _placed(hook.sync(mc.world(mc.tfjob("dragon-job1-cpu.yaml"), nodes)))
    assert sorted(list(placed.values()).count(n) for n in ("n-1", "n-2")) == [2, 2]
    assert len(placed) == 4  # PS + 3 workers: the 5th 4-cpu pod fits nowhere


def test_whole_gpus_are_accounted_and_only_gpu_nodes_take_gpu_workers(hook: Hook) -> None:
    nodes = [
        mc.node("cpu-1", cpu="64", memory="256Gi"),
        mc.node("gpu-1", cpu="64", memory="256Gi", gpu=2),
    ]
    placed = _placed(hook.sync(mc.world(mc.tfjob("dragon-job1-gpu.yaml"), nodes)))
    workers = {n: node for n, node in placed.items() if "worker" in n}
    assert workers == {"job1-worker-0": "gpu-1", "job1-worker-1": "gpu-1"}
    assert placed["job1-ps-0"] == "gpu-1", "the PS goes where most of the job is"


def test_any_resource_name_counts(hook: Hook) -> None:
    job = mc.compat("dragon-job1-cpu.yaml")
    limits = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "resources"
    ]["limits"]
    limits["example.com/fpga"] = "1"
    nodes = [mc.node("n-1", cpu="64", memory="256Gi")]
    nodes[0]["status"]["allocatable"]["example.com/fpga"] = "3"
    body = hook.sync(mc.world(mc.tfjob(job), nodes))
    assert sorted(pods_of(body)) == ["job1-ps-0", "job1-worker-0", "job1-worker-1", "job1-worker-2"]


def test_init_containers_and_overhead_count(hook: Hook) -> None:
    job = mc.compat("dragon-job1-cpu.yaml")
    spec = job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]
    spec["initContainers"] = [
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "12"}}}
    ]
    nodes = [mc.node("n-1", cpu="24", memory="64Gi"), mc.node("n-2", cpu="11", memory="64Gi")]
    placed = _placed(hook.sync(mc.world(mc.tfjob(job), nodes)))
    assert placed["job1-ps-0"] == "n-1", "the init container's 12 cpu fits only on n-1"


def test_a_sidecar_adds_to_the_containers_it_runs_beside(hook: Hook) -> None:
    """A sidecar (init container with ``restartPolicy: Always``, Kubernetes 1.29+) keeps
    running beside the PS's own 4 cpu: the PS needs 4 + 8, not the larger of the two, so it
    fills n-2 (12 cpu) alone; counted as 8 it would share n-2 with a 4-cpu worker, which the
    kube-scheduler would leave Pending."""
    job = mc.compat("dragon-job1-cpu.yaml")
    spec = job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]
    spec["initContainers"] = [
        {
            "name": "proxy",
            "image": "busybox",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "8"}},
        }
    ]
    nodes = [mc.node("n-1", cpu="11", memory="64Gi"), mc.node("n-2", cpu="12", memory="64Gi")]
    placed = _placed(hook.sync(mc.world(mc.tfjob(job), nodes)))
    assert [pod for pod, node in placed.items() if node == "n-2"] == ["job1-ps-0"]


def test_running_and_terminating_pods_occupy_their_node(hook: Hook) -> None:
    other, pods = _other_job("other", "n-1", terminating=True)
    nodes = [mc.node("n-1", cpu="24", memory="64Gi"), mc.node("n-2", cpu="24", memory="64Gi")]
    mine = mc.tfjob("dragon-job1-cpu.yaml")
    body = hook.sync(mc.world(mine, nodes, jobs=[other, mine], pods=pods))
    assert set(_placed(body).values()) == {"n-2"}


def test_finished_pods_free_their_node(hook: Hook) -> None:
    other, pods = _other_job("other", "n-1", phase="Succeeded")
    nodes = [mc.node("n-1", cpu="20", memory="64Gi")]
    mine = mc.tfjob("dragon-job1-cpu.yaml")
    body = hook.sync(mc.world(mine, nodes, jobs=[other, mine], pods=pods))
    assert set(_placed(body).values()) == {"n-1"}


def test_pending_pods_count_on_the_node_they_are_pinned_to(hook: Hook) -> None:
    """A pod not yet scheduled still claims its planned node: no second job lands there."""
    other, pods = _other_job("other", "n-1", phase="Pending", bound=False)
    nodes = [mc.node("n-1", cpu="24", memory="64Gi"), mc.node("n-2", cpu="24", memory="64Gi")]
    mine = mc.tfjob("dragon-job1-cpu.yaml")
    body = hook.sync(mc.world(mine, nodes, jobs=[other, mine], pods=pods))
    assert set(_placed(body).values()) == {"n-2"}


@pytest.mark.parametrize(
    ("node", "why"),
    [
        (mc.node("bad", cpu="64", memory="256Gi", unschedulable=True), "bad is cordoned"),
        (mc.node("bad", cpu="64", memory="256Gi", ready=False), "bad is not Ready"),
        (
            mc.node(
                "bad",
                cpu="64",
                memory="256Gi",
                taints=[{"key": "maintenance", "value": "yes", "effect": "NoSchedule"}],
            ),
            "bad has taint maintenance=yes:NoSchedule",
        ),
    ],
)
def test_nodes_that_take_no_new_pods_are_skipped_and_named(
    hook: Hook, node: dict[str, Any], why: str
) -> None:
    body = hook.sync(mc.world(mc.tfjob("dragon-job1-cpu.yaml"), [node]))
    assert body["children"] == []
    assert why in body["status"]["scheduling"]["message"]
    ok = mc.node("good", cpu="64", memory="256Gi")
    body = hook.sync(mc.world(mc.tfjob("dragon-job1-cpu.yaml"), [node, ok]))
    assert set(_placed(body).values()) == {"good"}


def test_tolerated_taints_and_node_selectors_are_honoured(hook: Hook) -> None:
    job = mc.compat("gang-tfjob.yaml")  # nodeSelector gpu: 1060g1
    tainted = mc.node(
        "gpu-a",
        cpu="16",
        memory="64Gi",
        gpu=1,
        labels={"gpu": "1060g1"},
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
    )
    plain = mc.node("gpu-b", cpu="16", memory="64Gi", gpu=1, labels={"gpu": "1080ti"})
    body = hook.sync(mc.world(mc.tfjob(job, namespace="kubeflow"), [tainted, plain]))
    assert body["children"] == []
    assert "gpu-b does not match nodeSelector gpu=1060g1" in body["status"]["scheduling"]["message"]
    for spec in job["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    body = hook.sync(mc.world(mc.tfjob(job, namespace="kubeflow"), [tainted, plain]))
    assert set(_placed(body).values()) == {"gpu-a"}


def test_the_users_own_required_affinity_is_kept_and_combined(hook: Hook) -> None:
    job = mc.compat("dragon-job1-cpu.yaml")
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    for spec in job["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [zone]}]
                }
            }
        }
    nodes = [
        mc.node("in-b", cpu="64", memory="256Gi", labels={"zone": "b"}),
        mc.node("in-a", cpu="64", memory="256Gi", labels={"zone": "a"}),
    ]
    pod = pods_of(hook.sync(mc.world(mc.tfjob(job), nodes)))["job1-ps-0"]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                zone,
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["in-a"]},
            ]
        }
    ]


def test_node_name_binding_when_configured(clock: Clock) -> None:
    hook = Hook(clock=clock, pool=mc.pool(binding="nodeName"))
    nodes = [mc.node("n-1", cpu="64", memory="256Gi")]
    pods = pods_of(hook.sync(mc.world(mc.tfjob("dragon-job1-cpu.yaml"), nodes)))
    assert {p["spec"]["nodeName"] for p in pods.values()} == {"n-1"}
    assert all("affinity" not in p["spec"] for p in pods.values())


def test_affinity_uses_the_nodes_hostname_label(hook: Hook) -> None:
    node = mc.node("ip-10-0-0-1.ec2.internal", cpu="64", memory="256Gi")
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "ip-10-0-0-1"
    pods = pods_of(hook.sync(mc.world(mc.tfjob("dragon-job1-cpu.yaml"), [node])))
    assert {node_of(p) for p in pods.values()} == {"ip-10-0-0-1"}


def test_pods_pinned_by_hostname_count_on_their_node_when_hostname_and_name_differ(
    hook: Hook,
) -> None:
    """A pod not yet bound is pinned by the hostname label, not the node's name: it must
    still count on its node, or the next job is placed into room that is taken."""
    node = mc.node("ip-10-0-0-1.ec2.internal", cpu="24", memory="64Gi")
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "ip-10-0-0-1"
    first = mc.tfjob("dragon-job1-cpu.yaml", name="first", created="2026-11-21T09:00:00Z")
    second = mc.tfjob("dragon-job1-cpu.yaml", name="second", created="2026-11-21T09:30:00Z")
    both = [first, second]
    body = hook.sync(mc.world(first, [node], jobs=both))
    assert len(pods_of(body)) == 5  # 20 of the 24 cpu
    pending = [mc.observed_pod(first, p, bound=False) for p in pods_of(body).values()]
    again = hook.sync(mc.world(first, [node], jobs=both, pods=pending))
    assert again["status"]["scheduling"]["nodes"] == ["ip-10-0-0-1.ec2.internal"]
    waiting = hook.sync(mc.world(second, [node], jobs=both, pods=pending))
    assert waiting["children"] == []  # PS + 1 worker need 8 cpu; 4 are left
    assert waiting["status"]["scheduling"]["phase"] == "Queued"


def test_foreign_pods_count_when_all_pods_are_watched(clock: Clock) -> None:
    """With watchAllPods, a non-Dragonet pod on a node reduces what is free there."""
    hook = Hook(clock=clock, pool=mc.pool(watchAllPods=True))
    foreign = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": "prod", "uid": "u1", "labels": {"app": "db"}},
        "spec": {
            "nodeName": "n-1",
            "containers": [{"name": "db", "image": "pg", "resources": {"requests": {"cpu": "20"}}}],
        },
        "status": {"phase": "Running"},
    }
    nodes = [mc.node("n-1", cpu="24", memory="64Gi"), mc.node("n-2", cpu="24", memory="64Gi")]
    body = hook.sync(mc.world(mc.tfjob("dragon-job1-cpu.yaml"), nodes, pods=[foreign]))
    assert set(_placed(body).values()) == {"n-2"}
