"""Objects as a real API server returns them (sim/sizes.py): the requests grow as they do on a
real cluster, and nothing the webhook or the simulator reads changes, so decisions do not."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from sim.engine import SimConfig, Simulation
from sim.kube import node_object
from sim.scenario import load_scenario
from sim.sizes import NODE_IMAGES, dress, fields_v1

WHEN = "2026-01-01T00:00:00Z"


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every scalar of ``value`` with its path (map keys, list indexes)."""
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _lookup(obj: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def _pod(phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "job1-worker-0", "namespace": "default", "labels": {"a": "b"}},
        "spec": {
            "nodeName": "gpu-1",
            "restartPolicy": "OnFailure",
            "containers": [{"name": "tensorflow", "image": "tf:2", "resources": {}}],
        },
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "tensorflow",
                    "ready": False,
                    "restartCount": 2,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
            ],
        },
    }


def test_fields_v1_mirrors_the_fields_and_keys_lists_by_their_merge_key() -> None:
    value = {
        "labels": {"app": "x"},
        "containers": [{"name": "tf", "ports": [{"containerPort": 2222}]}],
        "containerStatuses": [{"name": "tf"}],
        "args": ["a"],
    }
    assert fields_v1(value) == {
        ".": {},
        "f:labels": {".": {}, "f:app": {}},
        "f:containers": {
            ".": {},
            'k:{"name":"tf"}': {
                ".": {},
                "f:name": {},
                "f:ports": {".": {}, 'k:{"containerPort":2222}': {".": {}, "f:containerPort": {}}},
            },
        },
        "f:containerStatuses": {},  # atomic, as the kubelet's entry has it
        "f:args": {},
    }


def test_dressing_adds_fields_and_changes_none_that_was_set() -> None:
    node = node_object("gpu-1", {"cpu": "8", "nvidia.com/gpu": "4"}, {"zone": "a"})
    for obj in (node, _pod(), _pod("Pending")):
        dressed = dress(None, obj, WHEN)
        for path, value in _leaves(obj):
            assert _lookup(dressed, path) == value, path
        assert dressed["metadata"]["managedFields"]
    pod = dress(None, _pod(), WHEN)
    cs = pod["status"]["containerStatuses"][0]
    assert {k: cs[k] for k in _pod()["status"]["containerStatuses"][0]} == (
        _pod()["status"]["containerStatuses"][0]
    )
    assert {"containerID", "image", "imageID", "started"} <= set(cs)
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert {"hostIP", "podIP", "podIPs", "qosClass", "startTime"} <= set(pod["status"])
    assert pod["spec"]["volumes"][0]["name"].startswith("kube-api-access-")


def test_a_real_node_carries_the_kubelets_status() -> None:
    node = dress(None, node_object("gpu-1", {"cpu": "8", "nvidia.com/gpu": "4"}), WHEN)
    status = node["status"]
    assert len(status["images"]) == NODE_IMAGES == 50
    assert {c["type"] for c in status["conditions"]} >= {"Ready", "MemoryPressure", "DiskPressure"}
    assert status["allocatable"]["nvidia.com/gpu"] == "4"
    assert status["nodeInfo"]["kubeletVersion"] and status["daemonEndpoints"]
    # A node as big as a real one: several KiB (a real 21-image minikube node: about 8 KiB).
    assert 10_000 < len(orjson.dumps(node)) < 20_000


def test_a_real_objects_run_decides_the_same_with_larger_requests() -> None:
    example = load_scenario("examples/scenario.yaml")
    runs = {}
    for sizes in ("minimal", "real"):
        sim = Simulation(example, SimConfig(object_sizes=sizes))
        seen: list[int] = []
        post = sim.webhook.post

        def spy(
            path: str, body: bytes, *, measure: bool = True, post: Any = post, seen: list = seen
        ) -> Any:
            if path == "/pools/sync":
                seen.append(len(body))
            return post(path, body, measure=measure)

        sim.webhook.post = spy  # type: ignore[method-assign]
        summary = sim.run().summary
        runs[sizes] = (summary, max(seen))
    (small, small_bytes), (real, real_bytes) = runs["minimal"], runs["real"]
    for key in ("avg_jct_s", "makespan_s", "sync_calls", "api_requests", "scale_actions"):
        assert small[key] == real[key], key
    assert real_bytes > 2.5 * small_bytes
