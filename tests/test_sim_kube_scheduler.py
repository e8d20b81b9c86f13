"""The simulated kube-scheduler and kubelet admission (``sim.kube_scheduler``), plugin by
plugin. Cases marked "upstream" are the cases of the plugin's own ``*_test.go`` in
kubernetes/kubernetes (same inputs, same outcome); the rest follow the plugin's source.
The last section runs the simulator with a deliberately wrong policy filter and shows the
cluster catching it, the way a real one would."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.model.cluster import Node
from policy.model.jobs import pod_request
from policy.pool.filters import rejection
from sim.apiserver import Obj
from sim.engine import SimConfig, Simulation, SimulationError
from sim.kube import node_object
from sim.kube_scheduler import (
    AFFINITY_REASON,
    TAINTS_REASON,
    KubeScheduler,
    NodeView,
    PodView,
    affinity_scores,
    least_allocated,
    pod_requests,
    shortages,
    taint_scores,
)
from sim.spec import JobSpec
from tests.simkit import GPU, PODS, gpu_nodes, job, scenario, stale_view_race

# --- builders ---------------------------------------------------------------------------


def node(
    name: str = "node-1",
    alloc: Mapping[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: str = "True",
) -> dict[str, Any]:
    obj = node_object(name, dict(alloc or {"cpu": "4", "memory": "16Gi"}), dict(labels or {}))
    obj["spec"] = {"taints": list(taints)} if taints else {}
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    obj["status"]["conditions"][0]["status"] = ready
    return obj


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return (
        {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}
    )


def container(requests: Mapping[str, str] | None = None, **more: Any) -> dict[str, Any]:
    resources = {"requests": dict(requests)} if requests else {}
    return {"name": "c", "image": "busybox", "resources": resources, **more}


def spec(*containers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"containers": list(containers) or [container()], **fields}


def affinity(*terms: Mapping[str, Any]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": list(terms)}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def scheduler(*nodes: Mapping[str, Any]) -> KubeScheduler:
    ks = KubeScheduler()
    for n in nodes:
        ks.set_node(n)
    return ks


def reasons(pod_spec: Mapping[str, Any], node_obj: Mapping[str, Any]) -> list[str]:
    ks = scheduler(node_obj)
    return ks.filter(ks.view(pod_spec), ks.nodes[node_obj["metadata"]["name"]])


# --- NodeUnschedulable, NodeName --------------------------------------------------------

UNSCHEDULABLE_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("pod_spec", "node_obj", "expected"),
    [
        # upstream: "Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)"
        (spec(), node(unschedulable=True), ["node(s) were unschedulable"]),
        # upstream: "Schedule pod to normal node"
        (spec(), node(), []),
        # upstream: "Schedule pod with toleration to unschedulable node ..."
        (spec(tolerations=[UNSCHEDULABLE_TOLERATION]), node(unschedulable=True), []),
        # An Exists toleration with no key tolerates everything, the cordon too.
        (spec(tolerations=[{"operator": "Exists"}]), node(unschedulable=True), []),
        # NodeName: the pod's node only.
        (spec(nodeName="node-1"), node("node-1"), []),
        (spec(nodeName="node-1"), node("node-2"), ["node(s) didn't match the requested node name"]),
    ],
    ids=[
        "cordoned",
        "normal",
        "cordoned-tolerated",
        "tolerate-all",
        "nodename-same",
        "nodename-other",
    ],
)
def test_node_unschedulable_and_node_name(
    pod_spec: dict, node_obj: dict, expected: list[str]
) -> None:
    assert reasons(pod_spec, node_obj) == expected


def test_a_node_that_is_not_ready_carries_the_taint_the_node_controller_gives_it() -> None:
    assert reasons(spec(), node(ready="False")) == [
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    ]
    assert reasons(spec(), node(ready="Unknown")) == [
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    ]


# --- TaintToleration --------------------------------------------------------------------


def tol(key: str, op: str, value: str = "", effect: str = "") -> dict[str, str]:
    out = {"key": key, "operator": op, "value": value, "effect": effect}
    return {k: v for k, v in out.items() if v}


@pytest.mark.parametrize(
    ("tolerations", "taints", "expected"),
    [
        # upstream: "A pod having no tolerations can't be scheduled onto a node with nonempty
        # taints"
        ([], [taint("dedicated", "user1")], "{dedicated: user1}"),
        # upstream: "A pod which can be scheduled on a dedicated node assigned to user1 ..."
        ([tol("dedicated", "Equal", "user1", "NoSchedule")], [taint("dedicated", "user1")], None),
        # upstream: "A pod which can't be scheduled on a dedicated node assigned to user2 ..."
        (
            [tol("dedicated", "Equal", "user2", "NoSchedule")],
            [taint("dedicated", "user1")],
            "{dedicated: user1}",
        ),
        # upstream: "... with a toleration uses operator Exists that tolerates the taints"
        ([tol("foo", "Exists", effect="NoSchedule")], [taint("foo", "bar")], None),
        # upstream: "A pod has multiple tolerations, node has multiple taints, all ... tolerated"
        (
            [
                tol("dedicated", "Equal", "user2", "NoSchedule"),
                tol("foo", "Exists", effect="NoSchedule"),
            ],
            [taint("dedicated", "user2"), taint("foo", "bar")],
            None,
        ),
        # upstream: "... keys and values match the taint on the node, but (non-empty) effect
        # doesn't match, can't be scheduled onto the node"
        ([tol("foo", "Equal", "bar", "PreferNoSchedule")], [taint("foo", "bar")], "{foo: bar}"),
        # upstream: "... the effect of toleration is empty, and the effect of taint is
        # NoSchedule. Pod can be scheduled onto the node"
        ([tol("foo", "Equal", "bar")], [taint("foo", "bar")], None),
        # upstream: "... key and value don't match the taint on the node, but the effect of
        # taint on node is PreferNoSchedule. Pod can be scheduled onto the node"
        (
            [tol("dedicated", "Equal", "user2", "NoSchedule")],
            [taint("dedicated", "user1", "PreferNoSchedule")],
            None,
        ),
        # upstream: "The pod has no toleration, but the effect of taint on node is
        # PreferNoSchedule. Pod can be scheduled onto the node"
        ([], [taint("dedicated", "user1", "PreferNoSchedule")], None),
        # NoExecute filters too; the first untolerated taint is the one named.
        ([], [taint("a", "1", "PreferNoSchedule"), taint("b", "2", "NoExecute")], "{b: 2}"),
        # Empty key with Exists tolerates every key and value.
        ([tol("", "Exists")], [taint("a", "1"), taint("b", "2", "NoExecute")], None),
        # No operator means Equal: the values must be equal ("" too).
        ([{"key": "gpu"}], [taint("gpu")], None),
        ([{"key": "gpu"}], [taint("gpu", "yes")], "{gpu: yes}"),
        # Gt and Lt compare the values as integers (toleration.go).
        ([tol("tier", "Gt", "2")], [taint("tier", "3")], None),
        ([tol("tier", "Gt", "2")], [taint("tier", "2")], "{tier: 2}"),
        ([tol("tier", "Lt", "2")], [taint("tier", "x")], "{tier: x}"),
        # An operator the API does not know tolerates nothing.
        ([tol("gpu", "Matches", "")], [taint("gpu")], "{gpu: }"),
    ],
)
def test_taint_toleration_filter(
    tolerations: list[dict], taints: list[dict], expected: str | None
) -> None:
    got = reasons(spec(tolerations=tolerations), node(taints=taints))
    assert got == ([] if expected is None else [f"node(s) had untolerated taint {expected}"])


def test_taint_toleration_score_prefers_fewer_untolerated_prefer_no_schedule_taints() -> None:
    """upstream: "the more intolerable taints a node has, the lower score it gets"."""
    pod = PodView.parse(spec(tolerations=[tol("foo", "Equal", "bar", "PreferNoSchedule")]))
    nodes = [
        NodeView.parse(node("a")),
        NodeView.parse(node("b", taints=[taint("cpu-type", "arm64", "PreferNoSchedule")])),
        NodeView.parse(
            node(
                "c",
                taints=[
                    taint("cpu-type", "arm64", "PreferNoSchedule"),
                    taint("disk-type", "ssd", "PreferNoSchedule"),
                ],
            )
        ),
        NodeView.parse(node("d", taints=[taint("foo", "bar", "PreferNoSchedule")])),
    ]
    assert taint_scores(pod, nodes) == [100, 50, 0, 100]


# --- NodeAffinity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod_spec", "labels", "name", "matches"),
    [
        # upstream: "missing labels"
        (spec(nodeSelector={"foo": "bar"}), {}, "node-1", False),
        # upstream: "same labels"
        (spec(nodeSelector={"foo": "bar"}), {"foo": "bar"}, "node-1", True),
        # upstream: "node labels are superset"
        (spec(nodeSelector={"foo": "bar"}), {"foo": "bar", "baz": "blah"}, "node-1", True),
        # upstream: "node labels are subset"
        (spec(nodeSelector={"foo": "bar", "baz": "blah"}), {"foo": "bar"}, "node-1", False),
        # upstream: "Pod with matchExpressions using In operator that matches the existing node"
        (
            spec(affinity=affinity({"matchExpressions": [expr("foo", "In", "bar", "value2")]})),
            {"foo": "bar"},
            "node-1",
            True,
        ),
        # upstream: "Pod with matchExpressions using Gt operator that matches the existing node"
        (
            spec(affinity=affinity({"matchExpressions": [expr("kernel-version", "Gt", "0204")]})),
            {"kernel-version": "0206"},
            "node-1",
            True,
        ),
        # upstream: "Pod with matchExpressions using NotIn operator that matches the existing node"
        (
            spec(
                affinity=affinity({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]})
            ),
            {"mem-type": "DDR3"},
            "node-1",
            True,
        ),
        # upstream: "Pod with matchExpressions using Exists operator that matches the existing node"
        (
            spec(affinity=affinity({"matchExpressions": [expr("GPU", "Exists")]})),
            {"GPU": "NVIDIA-GRID-K1"},
            "node-1",
            True,
        ),
        # upstream: "Pod with affinity that don't match node's labels won't schedule onto the node"
        (
            spec(affinity=affinity({"matchExpressions": [expr("foo", "In", "value1", "value2")]})),
            {"foo": "bar"},
            "node-1",
            False,
        ),
        # upstream: "Pod with empty MatchExpressions is not a valid value will match no objects"
        (spec(affinity=affinity({"matchExpressions": []})), {"foo": "bar"}, "node-1", False),
        # upstream: "Pod with no Affinity will schedule onto a node"
        (spec(), {"foo": "bar"}, "node-1", True),
        # upstream: "Pod with Affinity but nil NodeSelector will schedule onto a node"
        (spec(affinity={"nodeAffinity": {}}), {"foo": "bar"}, "node-1", True),
        # upstream: "Pod with multiple matchExpressions ANDed that matches the existing node"
        (
            spec(
                affinity=affinity(
                    {
                        "matchExpressions": [
                            expr("GPU", "Exists"),
                            expr("GPU", "NotIn", "AMD", "INTER"),
                        ]
                    }
                )
            ),
            {"GPU": "NVIDIA-GRID-K1"},
            "node-1",
            True,
        ),
        # upstream: "Pod with multiple matchExpressions ANDed that doesn't match the existing node"
        (
            spec(
                affinity=affinity(
                    {"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]}
                )
            ),
            {"GPU": "NVIDIA-GRID-K1"},
            "node-1",
            False,
        ),
        # upstream: "Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's
        # labels and will schedule onto the node"
        (
            spec(
                affinity=affinity(
                    {"matchExpressions": [expr("foo", "In", "bar", "value2")]},
                    {"matchExpressions": [expr("diffkey", "In", "wrong", "value2")]},
                )
            ),
            {"foo": "bar"},
            "node-1",
            True,
        ),
        # upstream: "Pod with an Affinity and a PodSpec.NodeSelector ... both are satisfied"
        (
            spec(
                nodeSelector={"foo": "bar"},
                affinity=affinity({"matchExpressions": [expr("foo", "Exists")]}),
            ),
            {"foo": "bar"},
            "node-1",
            True,
        ),
        # upstream: "Pod with an Affinity matches node's labels but the PodSpec.NodeSelector
        # ... is not satisfied"
        (
            spec(
                nodeSelector={"foo": "bar"},
                affinity=affinity({"matchExpressions": [expr("foo", "Exists")]}),
            ),
            {"foo": "barrrrrr"},
            "node-1",
            False,
        ),
        # upstream: "Pod with an invalid value in Affinity term won't be scheduled onto the node"
        (
            spec(
                affinity=affinity(
                    {"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]}
                )
            ),
            {"foo": "bar"},
            "node-1",
            False,
        ),
        # upstream: "Pod with matchFields using In operator that matches the existing node"
        (
            spec(affinity=affinity({"matchFields": [expr("metadata.name", "In", "node-1")]})),
            {},
            "node-1",
            True,
        ),
        # upstream: "Pod with matchFields using In operator that does not match the existing node"
        (
            spec(affinity=affinity({"matchFields": [expr("metadata.name", "In", "node-1")]})),
            {},
            "node-2",
            False,
        ),
        # upstream: "Pod with two terms: matchFields does not match, but matchExpressions matches"
        (
            spec(
                affinity=affinity(
                    {"matchFields": [expr("metadata.name", "In", "node-1")]},
                    {"matchExpressions": [expr("foo", "In", "bar")]},
                )
            ),
            {"foo": "bar"},
            "node-2",
            True,
        ),
        # upstream: "Pod with one term: matchFields does not match, but matchExpressions matches"
        (
            spec(
                affinity=affinity(
                    {
                        "matchFields": [expr("metadata.name", "In", "node-1")],
                        "matchExpressions": [expr("foo", "In", "bar")],
                    }
                )
            ),
            {"foo": "bar"},
            "node-2",
            False,
        ),
        # upstream: "Pod with one term: both matchFields and matchExpressions match"
        (
            spec(
                affinity=affinity(
                    {
                        "matchFields": [expr("metadata.name", "In", "node-1")],
                        "matchExpressions": [expr("foo", "In", "bar")],
                    }
                )
            ),
            {"foo": "bar"},
            "node-1",
            True,
        ),
        # upstream: "Pod with two terms: both matchFields and matchExpressions do not match"
        (
            spec(
                affinity=affinity(
                    {"matchFields": [expr("metadata.name", "In", "node-1")]},
                    {"matchExpressions": [expr("foo", "In", "not-match-to-bar")]},
                )
            ),
            {"foo": "bar"},
            "node-2",
            False,
        ),
        # Gt/Lt parse as Go's ParseInt: "1_0" is no integer (Python's int() would say 10).
        (
            spec(affinity=affinity({"matchExpressions": [expr("cores", "Gt", "4")]})),
            {"cores": "1_0"},
            "node-1",
            False,
        ),
        (
            spec(affinity=affinity({"matchExpressions": [expr("cores", "Lt", "4")]})),
            {},
            "node-1",
            False,
        ),
        # A matchFields In with two values does not parse: the term matches nothing.
        (
            spec(
                affinity=affinity(
                    {"matchFields": [expr("metadata.name", "In", "node-1", "node-2")]}
                )
            ),
            {},
            "node-1",
            False,
        ),
        (
            spec(affinity=affinity({"matchFields": [expr("metadata.name", "NotIn", "node-2")]})),
            {},
            "node-1",
            True,
        ),
    ],
)
def test_node_affinity_filter(
    pod_spec: dict, labels: dict[str, str], name: str, matches: bool
) -> None:
    got = reasons(pod_spec, node(name, labels=labels))
    assert got == ([] if matches else [AFFINITY_REASON])


def test_node_affinity_score_adds_the_weights_of_matching_preferred_terms() -> None:
    """Scaled so the best node has 100; a zero weight or an empty preference counts not."""
    preferred = [
        {"weight": 2, "preference": {"matchExpressions": [expr("foo", "In", "bar")]}},
        {"weight": 8, "preference": {"matchExpressions": [expr("key", "In", "value")]}},
        {"weight": 0, "preference": {"matchExpressions": [expr("az", "In", "az1")]}},
        {"weight": 5, "preference": {}},
    ]
    pod = PodView.parse(
        spec(
            affinity={
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
            }
        )
    )
    nodes = [
        NodeView.parse(node("a", labels={"foo": "bar"})),
        NodeView.parse(node("b", labels={"foo": "bar", "key": "value"})),
        NodeView.parse(node("c", labels={"az": "az1"})),
    ]
    assert affinity_scores(pod, nodes) == [20, 100, 0]


def test_node_affinity_on_node_names_narrows_the_nodes_tried() -> None:
    """The PreFilter: nodes outside ``metadata.name In`` are not filtered but reported."""
    nodes = [node(f"node-{i}") for i in (1, 2, 3)]
    only = spec(affinity=affinity({"matchFields": [expr("metadata.name", "In", "node-2")]}))
    assert scheduler(*nodes).schedule(only).node == "node-2"
    full = spec(
        container({"cpu": "8"}),
        affinity=affinity({"matchFields": [expr("metadata.name", "In", "node-2")]}),
    )
    assert scheduler(*nodes).schedule(full).message == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
    conflict = spec(
        affinity=affinity(
            {
                "matchFields": [
                    expr("metadata.name", "In", "node-1"),
                    expr("metadata.name", "In", "node-2"),
                ]
            }
        )
    )
    assert scheduler(*nodes).schedule(conflict).message == (
        "0/3 nodes are available: pod affinity terms conflict."
    )


# --- NodeResourcesFit -------------------------------------------------------------------

# upstream fit_test.go's node: 10 millicores, 20 bytes of memory, 32 pods, 5 example.com/aaa.
FIT_NODE = {"cpu": "10m", "memory": "20", "pods": "32", "example.com/aaa": "5"}


def used(cpu: int, memory: int, aaa: int = 0) -> dict[str, int]:
    return {"cpu": cpu, "memory": memory, "example.com/aaa": aaa}


def res(cpu: int, memory: int) -> dict[str, str]:
    """Millicores and bytes, as upstream's test pods ask."""
    return {"cpu": f"{cpu}m", "memory": str(memory)}


def aaa(n: int) -> dict[str, str]:
    return {"example.com/aaa": str(n)}


@pytest.mark.parametrize(
    ("pod_spec", "on_node", "expected"),
    [
        # upstream: "no resources requested always fits"
        (spec(), used(10, 20), []),
        # upstream: "too many resources fails"
        (spec(container(res(1, 1))), used(10, 20), ["Insufficient cpu", "Insufficient memory"]),
        # upstream: "too many resources fails due to init container cpu"
        (
            spec(container(res(1, 1)), initContainers=[container(res(3, 1))]),
            used(8, 19),
            ["Insufficient cpu"],
        ),
        # upstream: "too many resources fails due to highest init container cpu"
        (
            spec(container(res(1, 1)), initContainers=[container(res(3, 1)), container(res(2, 1))]),
            used(8, 19),
            ["Insufficient cpu"],
        ),
        # upstream: "too many resources fails due to init container memory"
        (
            spec(container(res(1, 1)), initContainers=[container(res(1, 3))]),
            used(9, 19),
            ["Insufficient memory"],
        ),
        # upstream: "init container fits because it's the max, not sum, of containers and
        # init containers"
        (spec(container(res(1, 1)), initContainers=[container(res(1, 1))]), used(9, 19), []),
        # upstream: "both resources fit"
        (spec(container(res(1, 1))), used(5, 5), []),
        # upstream: "one resource memory fits"
        (spec(container(res(2, 1))), used(9, 5), ["Insufficient cpu"]),
        # upstream: "one resource cpu fits"
        (spec(container(res(1, 2))), used(5, 19), ["Insufficient memory"]),
        # upstream: "equal edge case"
        (spec(container(res(5, 1))), used(5, 19), []),
        # upstream: "extended resource fits"
        (spec(container(aaa(1))), used(0, 0), []),
        # upstream: "extended resource capacity enforced"
        (spec(container(aaa(10))), used(0, 0), ["Insufficient example.com/aaa"]),
        # upstream: "extended resource allocatable enforced"
        (spec(container(aaa(1))), used(0, 0, 5), ["Insufficient example.com/aaa"]),
        # upstream: "extended resource allocatable enforced for unknown resource"
        (spec(container({"example.com/bbb": "1"})), used(0, 0), ["Insufficient example.com/bbb"]),
        # Overhead counts (fit.go's computePodResourceRequest).
        (spec(container(res(1, 1)), overhead={"cpu": "5m"}), used(5, 5), ["Insufficient cpu"]),
        # A container with limits only requests its limits (the API server's defaulting).
        (spec(container(resources={"limits": {"cpu": "6m"}})), used(5, 5), ["Insufficient cpu"]),
    ],
)
def test_node_resources_fit_filter(
    pod_spec: dict, on_node: dict[str, int], expected: list[str]
) -> None:
    view = NodeView.parse(node(alloc=FIT_NODE))
    got = shortages(pod_requests(pod_spec), view, on_node, 0)
    assert [s.reason for s in got] == expected


def test_a_full_node_refuses_one_more_pod_even_one_that_asks_for_nothing() -> None:
    """upstream: "even without specified resources, predicate fails when there's no space
    for additional pod"."""
    view = NodeView.parse(node(alloc={"cpu": "10m", "memory": "20", "pods": "1"}))
    assert [s.reason for s in shortages(pod_requests(spec()), view, {}, 1)] == ["Too many pods"]


def test_pod_requests_add_sidecars_and_take_the_largest_init_step() -> None:
    """A sidecar (init container with restartPolicy Always) runs beside the containers and
    the later init containers (component-helpers' PodRequests)."""
    pod = spec(
        container({"cpu": "1"}),
        initContainers=[
            container({"cpu": "1"}, restartPolicy="Always"),
            container({"cpu": "3"}),
        ],
    )
    assert pod_requests(pod)["cpu"] == 4000
    plain = spec(container({"cpu": "1"}), initContainers=[container({"cpu": "500m"})])
    assert pod_requests(plain)["cpu"] == 1000


def test_least_allocated_prefers_the_emptier_node_counting_missing_requests_as_defaults() -> None:
    """The pod asks 1 cpu and no memory, which counts as 200Mi: on the busy node cpu scores
    0 (all 4 cpus taken) and memory (10Gi - 1Gi - 200Mi)/10Gi, on the free one cpu 75."""
    ks = scheduler(
        node("busy", {"cpu": "4", "memory": "10Gi"}), node("free", {"cpu": "4", "memory": "10Gi"})
    )
    ks.bind("p0", "busy", spec(container({"cpu": "3", "memory": "1Gi"})))
    pod = ks.view(spec(container({"cpu": "1"})))
    busy, free = ks.nodes["busy"], ks.nodes["free"]
    assert least_allocated(pod, busy) == (0 + (10 * 1024 - 1024 - 200) * 100 // (10 * 1024)) // 2
    assert least_allocated(pod, free) == (75 + (10 * 1024 - 200) * 100 // (10 * 1024)) // 2
    assert ks.schedule(spec(container({"cpu": "1"}))).node == "free"


def test_the_plugins_scores_add_up_with_upstreams_weights() -> None:
    """TaintToleration weighs 3, NodeAffinity 2, NodeResourcesFit 1: an untolerated
    PreferNoSchedule taint (-300) outweighs the emptier node, a preferred node (+200) the
    fuller one."""
    ks = scheduler(
        node("empty", taints=[taint("spot", "yes", "PreferNoSchedule")]),
        node("full", labels={"zone": "a"}),
    )
    ks.bind("p0", "full", spec(container({"cpu": "3", "memory": "12Gi"})))
    assert ks.schedule(spec(container({"cpu": "500m"}))).node == "full"
    tolerant = spec(container({"cpu": "500m"}), tolerations=[tol("spot", "Exists")])
    assert ks.schedule(tolerant).node == "empty"
    preference = {"weight": 1, "preference": {"matchExpressions": [expr("zone", "In", "a")]}}
    prefers = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preference]}}
    both = spec(container({"cpu": "500m"}), tolerations=[tol("spot", "Exists")], affinity=prefers)
    assert ks.schedule(both).node == "full"


def test_equal_nodes_are_chosen_by_name_so_runs_repeat() -> None:
    """The real scheduler picks at random among the best; this one takes the first name."""
    ks = scheduler(node("b"), node("a"), node("c"))
    assert ks.schedule(spec(container({"cpu": "1"}))).node == "a"


def test_terminal_pods_leave_the_node_and_the_pod_count() -> None:
    ks = scheduler(node(alloc={"cpu": "4", "memory": "1Gi", "pods": "1"}))
    ks.bind("p0", "node-1", spec(container({"cpu": "4"})))
    assert ks.schedule(spec()).message == ("0/1 nodes are available: 1 Too many pods.")
    ks.unbind("p0", "node-1")
    assert ks.schedule(spec(container({"cpu": "4"}))).node == "node-1"


# --- FailedScheduling's message -------------------------------------------------------


def test_the_failed_scheduling_message_counts_each_nodes_first_reason_sorted() -> None:
    gpu = {"cpu": "8", "memory": "32Gi", GPU: "4"}
    ks = scheduler(
        node("gpu-1", gpu),
        node("gpu-2", gpu, taints=[taint("dedicated", "ps")]),
        node("gpu-3", gpu, taints=[taint("dedicated", "ps")]),
    )
    ks.bind("p0", "gpu-1", spec(container({GPU: "4"})))
    decision = ks.schedule(spec(container({GPU: "1"})))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "2 node(s) had untolerated taint {dedicated: ps}."
    )


# --- the kubelet's admission ----------------------------------------------------------


GPU_NODE = {"cpu": "8", "memory": "32Gi", GPU: "4"}


@pytest.mark.parametrize(
    ("pod_spec", "node_obj", "reason", "message"),
    [
        (
            spec(container({GPU: "5"})),
            node(alloc=GPU_NODE),
            "OutOfnvidia.com/gpu",
            "Node didn't have enough resource: nvidia.com/gpu, requested: 5, used: 0, capacity: 4",
        ),
        (
            spec(container({"cpu": "9"})),
            node(alloc=GPU_NODE),
            "OutOfcpu",
            "Node didn't have enough resource: cpu, requested: 9000, used: 0, capacity: 8000",
        ),
        (
            spec(nodeSelector={"gpu": "yes"}),
            node(alloc=GPU_NODE),
            "NodeAffinity",
            f"Predicate NodeAffinity failed: {AFFINITY_REASON}",
        ),
        (
            spec(),
            node(alloc=GPU_NODE, taints=[taint("maintenance", "now", "NoExecute")]),
            "TaintToleration",
            f"Predicate TaintToleration failed: {TAINTS_REASON}",
        ),
        # The kubelet checks NoExecute taints only, and never the cordon.
        (spec(), node(alloc=GPU_NODE, taints=[taint("dedicated", "ps")]), None, None),
        (spec(), node(alloc=GPU_NODE, unschedulable=True), None, None),
        # An extended resource the node does not know is dropped (cluster-level resources).
        (spec(container({"example.com/licence": "1"})), node(alloc=GPU_NODE), None, None),
    ],
    ids=["gpu", "cpu", "selector", "no-execute", "no-schedule", "cordoned", "unknown-extended"],
)
def test_kubelet_admission(
    pod_spec: dict, node_obj: dict, reason: str | None, message: str | None
) -> None:
    ks = scheduler(node_obj)
    ks.bind("p", "node-1", pod_spec)
    rejection = ks.admit("p", pod_spec, "node-1")
    if reason is None:
        assert rejection is None
    else:
        assert rejection is not None
        assert (rejection.reason, rejection.message) == (reason, message)


def test_the_kubelet_admits_pods_in_its_own_order_against_those_it_admitted() -> None:
    """Five one-GPU pods bound to a four-GPU node at once: the first four run, the fifth is
    refused (not the first, though all five are bound when it looks)."""
    ks = scheduler(node(alloc=GPU_NODE))
    pods = {f"p{i}": spec(container({GPU: "1"})) for i in range(5)}
    for uid, s in pods.items():
        ks.bind(uid, "node-1", s)
    outcome = {uid: ks.admit(uid, s, "node-1") for uid, s in pods.items()}
    assert [uid for uid, r in outcome.items() if r is not None] == ["p4"]
    assert outcome["p4"].reason == "OutOfnvidia.com/gpu"
    ks.unbind("p0", "node-1")  # one finishes: room for the next
    assert ks.admit("p5", spec(container({GPU: "1"})), "node-1") is None


# --- the simulator catches a wrong policy filter ---------------------------------------


def _no_filter(node: object, pod_spec: Mapping[str, Any]) -> None:
    """A deliberately wrong policy filter: every node takes every pod."""
    return None


@dataclasses.dataclass
class _PodConditions:
    """Each (pod, reason, message) of a PodScheduled=False condition or a pod failure, when
    a write sets it."""

    seen: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)

    @staticmethod
    def _said(pod: Obj | None) -> set[tuple[str, str]]:
        status = (pod or {}).get("status") or {}
        out = {
            (c.get("reason", ""), c.get("message", ""))
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        }
        if status.get("phase") == "Failed" and status.get("reason"):
            out.add((status["reason"], status.get("message", "")))
        return out

    def __call__(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == PODS and new is not None:
            for reason, message in sorted(self._said(new) - self._said(old)):
                self.seen.append((new["metadata"]["name"], reason, message))


def _run_until_it_loops(sim: Simulation) -> None:
    """Run; a plan the cluster refuses is made again and refused again, so the job's sync
    may hot-loop (the simulator stops it): that is the symptom too, not a test failure."""
    try:
        sim.run()
    except SimulationError as err:
        assert "synced more than" in str(err)


def _tainted_cluster() -> list[dict[str, Any]]:
    """gpu-1 is dedicated to another team (NoSchedule taint), gpu-2 and gpu-3 are free but
    a job's pods go to the emptiest node first: with the policy blind to taints, the plan
    puts the first job on gpu-1."""
    nodes = list(gpu_nodes(3))
    nodes[0]["spec"]["taints"] = [taint("dedicated", "team-b")]
    return nodes


def test_a_policy_filter_that_ignores_taints_leaves_the_pod_pending_with_upstreams_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the policy's filter ignoring taints the plan pins a pod to the tainted gpu-1; the
    independent kube-scheduler refuses it there, as a real one would."""
    monkeypatch.setattr("policy.pool.ledger.rejection", _no_filter)
    sc = scenario(_tainted_cluster(), [job("a", 4, steps=1e6)])
    sim = Simulation(sc, SimConfig(max_time_s=20, delete_finished_after_s=None))
    conditions = _PodConditions()
    sim.api.watchers.append(conditions)
    _run_until_it_loops(sim)
    assert conditions.seen, "the kube-scheduler accepted a pod on a node whose taint it refuses"
    _, reason, message = conditions.seen[0]
    assert reason == "Unschedulable"
    assert message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: team-b}, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    assert all(p["spec"].get("nodeName") != "gpu-1" for p in sim.api.list(PODS))


def test_with_the_policys_own_filter_the_same_cluster_never_refuses_a_pod() -> None:
    """The control: the real filter plans around the taint, nothing is refused."""
    sc = scenario(_tainted_cluster(), [job("a", 4, steps=1e6)])
    sim = Simulation(sc, SimConfig(max_time_s=20, delete_finished_after_s=None))
    conditions = _PodConditions()
    sim.api.watchers.append(conditions)
    sim.run()
    assert conditions.seen == []
    assert {p["spec"].get("nodeName") for p in sim.api.list(PODS)} <= {"gpu-2", "gpu-3"}


def test_bound_by_node_name_a_wrong_plan_is_refused_by_the_kubelet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DRAGON's ``nodeName`` binding skips the scheduler: the kubelet checks the node
    selector and fails the pod (reason NodeAffinity), as a real kubelet does."""
    monkeypatch.setattr("policy.pool.ledger.rejection", _no_filter)
    nodes = list(gpu_nodes(2))
    nodes[1]["metadata"]["labels"]["team"] = "a"  # only gpu-2 is the team's
    a = job("a", 2, steps=1e6)
    for replica in a.manifest["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["nodeSelector"] = {"team": "a"}
    sim = Simulation(
        scenario(nodes, [a]),
        SimConfig(binding="nodeName", max_time_s=20, delete_finished_after_s=None),
    )
    conditions = _PodConditions()
    sim.api.watchers.append(conditions)
    _run_until_it_loops(sim)
    refused = [(r, m) for _, r, m in conditions.seen]
    assert refused and refused[0] == (
        "NodeAffinity",
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    )
    assert sim.kube.rejected >= 1


# --- the policy's filter against this one ---------------------------------------------

LABEL_KEYS = ("gpu", "zone", "cores")
LABEL_VALUES = ("a", "b", "1", "4", "10", "1_0", "")
# Values a pod may write in a node selector requirement (the API checks only their count):
# some are no label values ("+5", "bad value!"), or no integers for Go ("1_0").
REQUIREMENT_VALUES = (*LABEL_VALUES[:-1], "+5", "bad value!")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@st.composite
def requirements(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")))
    key = draw(st.sampled_from(LABEL_KEYS))
    if op in ("Exists", "DoesNotExist"):
        return expr(key, op)
    count = 1 if op in ("Gt", "Lt") else draw(st.integers(1, 2))
    values = draw(st.lists(st.sampled_from(REQUIREMENT_VALUES), min_size=count, max_size=count))
    return expr(key, op, *values)


@st.composite
def terms(draw: st.DrawFn) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": draw(st.lists(requirements(), max_size=2))}
    if draw(st.booleans()) or not term["matchExpressions"]:
        op = draw(st.sampled_from(("In", "NotIn")))
        term["matchFields"] = [expr("metadata.name", op, draw(st.sampled_from(("n1", "n2"))))]
    return term


@st.composite
def tolerations(draw: st.DrawFn) -> dict[str, str]:
    """Tolerations the API accepts: an empty key only with Exists, no value with Exists."""
    op = draw(st.sampled_from(("Equal", "Exists", "")))
    key = draw(st.sampled_from(("dedicated", "gpu", *(("",) if op == "Exists" else ()))))
    value = "" if op == "Exists" else draw(st.sampled_from(("", "x")))
    return tol(key, op, value, draw(st.sampled_from(("", *EFFECTS))))


@st.composite
def pod_specs(draw: st.DrawFn) -> dict[str, Any]:
    out = spec(tolerations=draw(st.lists(tolerations(), max_size=2)))
    if draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(LABEL_KEYS), max_size=2, unique=True))
        out["nodeSelector"] = {k: draw(st.sampled_from(LABEL_VALUES[:-1])) for k in keys}
    if draw(st.booleans()):
        out["affinity"] = affinity(*draw(st.lists(terms(), min_size=1, max_size=2)))
    return out


@st.composite
def node_objects(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(LABEL_KEYS), max_size=3, unique=True))
    taints = draw(
        st.lists(
            st.builds(
                taint,
                st.sampled_from(("dedicated", "gpu")),
                st.sampled_from(("", "x")),
                st.sampled_from(EFFECTS),
            ),
            max_size=2,
        )
    )
    return node(
        draw(st.sampled_from(("n1", "n2"))),
        labels={k: draw(st.sampled_from(LABEL_VALUES)) for k in keys},
        taints=taints,
    )


@settings(max_examples=400, deadline=None)
@given(pod_specs(), node_objects())
def test_the_policys_filter_agrees_with_the_kube_schedulers_on_what_the_api_accepts(
    pod_spec: dict[str, Any], node_obj: dict[str, Any]
) -> None:
    """A plan never pins a pod where the kube-scheduler refuses it, nor avoids a node it
    would take (a Ready, uncordoned node; the pod asks for no resources)."""
    policy_says = rejection(Node.from_object(node_obj), pod_spec)
    assert (policy_says is None) == (reasons(pod_spec, node_obj) == []), policy_says


@settings(max_examples=200, deadline=None)
@given(pod_specs(), node_objects(), st.sampled_from(("cordoned", "NotReady", "Unknown")))
def test_on_a_cordoned_or_unready_node_the_policy_is_never_less_strict(
    pod_spec: dict[str, Any], node_obj: dict[str, Any], state: str
) -> None:
    """The policy keeps new pods off such a node even when the pod tolerates its taint
    (a choice: a drained node takes no training pods), never the other way round."""
    if state == "cordoned":
        node_obj["spec"]["unschedulable"] = True
    else:
        node_obj["status"]["conditions"][0]["status"] = "False" if state == "NotReady" else state
    assert rejection(Node.from_object(node_obj), pod_spec) is not None


QUANTITIES = {"cpu": ("100m", "1", "2.5", "4"), GPU: ("1", "2"), "memory": ("1Gi", "512Mi")}


@st.composite
def containers(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(sorted(QUANTITIES)), max_size=3, unique=True))
    amounts = {n: draw(st.sampled_from(QUANTITIES[n])) for n in names}
    kind = draw(st.sampled_from(("requests", "limits")))
    return container(**({"resources": {kind: amounts}} if amounts else {}))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(containers(), min_size=1, max_size=3),
    st.lists(st.tuples(containers(), st.booleans()), max_size=3),
    st.sampled_from(({}, {"cpu": "250m"})),
)
def test_the_policys_pod_request_is_what_the_kube_scheduler_counts(
    main: list[dict[str, Any]], init: list[tuple[dict[str, Any], bool]], overhead: dict
) -> None:
    """Containers, init containers, sidecars, overhead, limits-only containers: the policy
    reserves what NodeResourcesFit counts (cpu in millicores, memory in bytes, GPUs)."""
    inits = [{**c, "restartPolicy": "Always"} if sidecar else c for c, sidecar in init]
    pod_spec = spec(*main, initContainers=inits, overhead=overhead)
    theirs = pod_requests(pod_spec)
    ours = pod_request(pod_spec)
    assert ours["cpu"] == theirs.get("cpu", 0)
    assert ours["memory"] == 1000 * theirs.get("memory", 0)
    assert ours[GPU] == 1000 * theirs.get(GPU, 0)


# --- a stale plan, with the policy's own filter -----------------------------------------


def test_a_plan_on_a_stale_view_gets_upstreams_insufficient_message() -> None:
    """The pool's view lags 2 s: it plans y onto the GPUs x was just given (the scenario of
    tests/test_simulate.py); the kube-scheduler says why y's pods wait, as upstream words it."""
    sc = stale_view_race()
    # Cost-free: x's pods are all written before y's (with Metacontroller's write rate the
    # two gangs interleave: the test below).
    config = SimConfig(policy="dragon", view_delay_s=2.0, delete_finished_after_s=5)
    sim = Simulation(sc, config.cost_free())
    conditions = _PodConditions()
    sim.api.watchers.append(conditions)
    assert sim.run().summary["jobs_finished"] == 2
    assert conditions.seen
    assert {(r, m) for _, r, m in conditions.seen} == {
        ("Unschedulable", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    }


@pytest.mark.parametrize("binding", ["affinity", "nodeName"])
@pytest.mark.parametrize("policy", ["dragon", "dragonet", "dragonet-las", "tiresias", "gang-fifo"])
def test_two_gangs_admitted_on_a_stale_view_do_not_deadlock_at_metacontrollers_write_rate(
    policy: str, binding: str
) -> None:
    """Both gangs are admitted on a stale view and their pods interleave on the node: the
    pool takes one admission back (policy/pool/overcommit.py) and the other gang trains,
    long before Metacontroller's 30 min resync."""
    sc = stale_view_race()
    config = SimConfig(policy=policy, binding=binding, view_delay_s=2.0, delete_finished_after_s=5)
    summary = Simulation(sc, replace(config, max_time_s=3600)).run().summary
    assert summary["jobs_finished"] == 2
    assert summary["makespan_s"] < 300  # one after the other, not after a resync


def test_bound_by_node_name_on_a_stale_view_the_kubelet_refuses_with_its_own_words() -> None:
    """A pod planned on GPUs another job holds reaches a full node: OutOfnvidia.com/gpu,
    with the kubelet's message; every job still finishes."""
    sc = scenario(
        gpu_nodes(2),
        [
            job(f"j{i}", 1 + i % 3, arrival=float(i // 3), steps=20 + 10 * (i % 4))
            for i in range(12)
        ],
    )
    config = SimConfig(binding="nodeName", view_delay_s=5.0, delete_finished_after_s=5)
    sim = Simulation(sc, dataclasses.replace(config, max_time_s=400))
    conditions = _PodConditions()
    sim.api.watchers.append(conditions)
    result = sim.run()
    assert result.summary["jobs_finished"] == 12
    refused = {(r, m) for _, r, m in conditions.seen}
    assert refused and all(r == "OutOfnvidia.com/gpu" for r, _ in refused)
    assert all(
        m.startswith("Node didn't have enough resource: nvidia.com/gpu, requested: ")
        and m.endswith(", capacity: 4")
        for _, m in refused
    )
    assert result.summary["kubelet_rejections"] == len(conditions.seen)


# --- NodePorts --------------------------------------------------------------------------


def ported(*ports: str, host_network: bool = False) -> dict[str, Any]:
    """A pod whose container takes host ports written "PROTO/IP:port"."""
    out = []
    for p in ports:
        proto, rest = p.split("/")
        ip, port = rest.rsplit(":", 1)
        out.append(
            {"containerPort": int(port), "hostPort": int(port), "protocol": proto, "hostIP": ip}
        )
    return spec(container(ports=out), **({"hostNetwork": True} if host_network else {}))


@pytest.mark.parametrize(
    ("wanted", "taken", "fits"),
    [
        # upstream node_ports_test.go, case by case:
        (("UDP/127.0.0.1:8080",), (), True),  # "nothing running"
        (("UDP/127.0.0.1:8080",), ("UDP/127.0.0.1:9090",), True),  # "other port"
        (("UDP/127.0.0.1:8080",), ("UDP/127.0.0.1:8080",), False),  # "same udp port"
        (("TCP/127.0.0.1:8080",), ("TCP/127.0.0.1:8080",), False),  # "same tcp port"
        (("TCP/127.0.0.1:8080",), ("TCP/127.0.0.2:8080",), True),  # "different host ip"
        (("UDP/127.0.0.1:8080",), ("TCP/127.0.0.1:8080",), True),  # "different protocol"
        # "second udp port conflict"
        (("UDP/127.0.0.1:8000", "UDP/127.0.0.1:8080"), ("UDP/127.0.0.1:8080",), False),
        # "first tcp port conflict"
        (("TCP/127.0.0.1:8001", "UDP/127.0.0.1:8080"), ("TCP/127.0.0.1:8001",), False),
        # "first tcp port conflict due to 0.0.0.0 hostIP"
        (("TCP/0.0.0.0:8001",), ("TCP/127.0.0.1:8001",), False),
        # "TCP hostPort conflict due to 0.0.0.0 hostIP"
        (("TCP/10.0.10.10:8001", "TCP/0.0.0.0:8001"), ("TCP/127.0.0.1:8001",), False),
        # "second tcp port conflict to 0.0.0.0 hostIP"
        (("TCP/127.0.0.1:8001",), ("TCP/0.0.0.0:8001",), False),
        # "second different protocol"
        (("UDP/127.0.0.1:8001",), ("TCP/0.0.0.0:8001",), True),
        # "UDP hostPort conflict due to 0.0.0.0 hostIP"
        (("UDP/0.0.0.0:8001",), ("TCP/0.0.0.0:8001", "UDP/0.0.0.0:8001"), False),
    ],
)
def test_node_ports_filter(wanted: tuple[str, ...], taken: tuple[str, ...], fits: bool) -> None:
    ks = scheduler(node())
    ks.bind("other", "node-1", ported(*taken))
    assert ks.filter(ks.view(ported(*wanted)), ks.nodes["node-1"]) == (
        [] if fits else ["node(s) didn't have free ports for the requested pod ports"]
    )


def test_two_host_network_pods_of_one_port_never_share_a_node() -> None:
    """On the host network a container's port is a host port (the API server defaults it):
    the second TF task listening on 2222 waits, and its kubelet refuses it if bound."""
    task = spec(container(ports=[{"name": "tfjob-port", "containerPort": 2222}]), hostNetwork=True)
    ks = scheduler(node())
    ks.bind("ps", "node-1", task)
    assert ks.admit("ps", task, "node-1") is None
    assert ks.schedule(task).message == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )
    ks.bind("worker", "node-1", task)
    rejection = ks.admit("worker", task, "node-1")
    assert rejection is not None and rejection.reason == "NodePorts"
    plain = spec(container(ports=[{"name": "tfjob-port", "containerPort": 2222}]))
    assert ks.schedule(plain).node == "node-1"


def _on_host_network(spec: JobSpec) -> JobSpec:
    """Every replica on the node's network (``hostNetwork: true``, as Arena's
    ``useHostNetwork`` and KubeDL's host network mode write it): each TF task's port 2222
    is then a host port."""
    for replica in spec.manifest["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["hostNetwork"] = True
    return spec


@pytest.mark.parametrize("binding", ["affinity", "nodeName"])
def test_a_host_network_job_gets_one_node_per_pod_and_finishes(binding: str) -> None:
    """One PS and two workers on the host network, three free 4-GPU nodes: the job fits only
    with its three pods on three nodes, and the independent kube-scheduler holds that. Without
    host networking the same job finishes in 35 s; 300 s is ample."""
    sc = scenario(gpu_nodes(3), [_on_host_network(job("hn", 2, ps=1, steps=50))])
    config = SimConfig(binding=binding, max_time_s=300, delete_finished_after_s=None)
    sim = Simulation(sc, config)
    conditions = _PodConditions()
    sim.api.watchers.append(conditions)
    result = sim.run()
    assert conditions.seen == []  # no pod refused for its ports
    assert result.summary["jobs_finished"] == 1
