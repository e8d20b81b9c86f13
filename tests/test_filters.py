"""The filter phase (``policy.pool.filters``) where it once disagreed with the
kube-scheduler: node selector requirements the scheduler's label selector does not parse;
and host ports (``policy.model.hostports``), which the plan once did not count at all.
(``tests/test_sim_kube_scheduler.py`` checks the whole filter against an independent one.)"""

from __future__ import annotations

from typing import Any

import pytest

from policy.model.cluster import Cluster, Node, Pod
from policy.model.hostports import wanted as wanted_ports
from policy.model.podspec import host_ports
from policy.model.pool import PoolSpec
from policy.pool.filters import rejection
from policy.pool.ledger import Ledger
from policy.pool.policies import rules_for
from tests.conftest import NOW


def _node(labels: dict[str, str]) -> Node:
    return Node.from_object(
        {
            "metadata": {"name": "n1", "labels": labels},
            "status": {"allocatable": {"cpu": "4", "pods": "110"}},
        }
    )


def _requiring(*exprs: dict[str, Any]) -> dict[str, Any]:
    term = {"matchExpressions": list(exprs)}
    required = {"nodeSelectorTerms": [term]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }


@pytest.mark.parametrize(
    ("labels", "expr"),
    [
        # Go's strconv.ParseInt takes no "1_0" (Python's int() reads 10): no number, no match.
        ({"cores": "1_0"}, {"key": "cores", "operator": "Gt", "values": ["4"]}),
        # "+5" is an integer to Go but no label value: the requirement does not parse.
        ({"cores": "8"}, {"key": "cores", "operator": "Gt", "values": ["+5"]}),
        # A value that is no label value spoils the requirement, and its term, for every node.
        ({"zone": "a"}, {"key": "zone", "operator": "NotIn", "values": ["bad value!"]}),
        ({"zone": "a"}, {"key": "zone", "operator": "In", "values": ["a", "bad value!"]}),
    ],
    ids=["underscore-number", "signed-value", "notin-bad-value", "in-bad-value"],
)
def test_a_requirement_the_kube_scheduler_cannot_parse_matches_no_node(
    labels: dict[str, str], expr: dict[str, Any]
) -> None:
    assert rejection(_node(labels), _requiring(expr)) == (
        "n1 does not match the required node affinity"
    )


def test_well_formed_numbers_and_values_still_match() -> None:
    node = _node({"cores": "10", "zone": "a"})
    assert rejection(node, _requiring({"key": "cores", "operator": "Gt", "values": ["4"]})) is None
    assert (
        rejection(node, _requiring({"key": "zone", "operator": "NotIn", "values": ["b"]})) is None
    )


# --- Host ports (kube-scheduler's NodePorts) --------------------------------------------


def _ported(*ports: str, host_network: bool = False) -> dict[str, Any]:
    """A pod spec whose container takes host ports written "PROTO/IP:port"."""
    listed = []
    for p in ports:
        proto, rest = p.split("/")
        ip, port = rest.rsplit(":", 1)
        listed.append(
            {"containerPort": int(port), "hostPort": int(port), "protocol": proto, "hostIP": ip}
        )
    spec: dict[str, Any] = {"containers": [{"name": "c", "ports": listed}]}
    if host_network:
        spec["hostNetwork"] = True
    return spec


def _fits(wanted: dict[str, Any], taken: dict[str, Any]) -> bool:
    """Whether a pod of ``wanted`` fits on a node that runs a pod of ``taken``, as the
    cycle's ledger judges it (the same sums as CPUs)."""
    pod = Pod.from_object(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {**taken, "nodeName": "n1"},
            "status": {"phase": "Running"},
        },
        main=("c",),
    )
    cluster = Cluster.observe([_node({})], [pod])
    request = host_ports(wanted)
    ledger = Ledger.open(cluster, rules_for(PoolSpec()), NOW, host_ports=wanted_ports([request]))
    return request.fits_in(ledger.free["n1"])


@pytest.mark.parametrize(
    ("wanted", "taken", "fits"),
    [
        # upstream node_ports_test.go, case by case (as tests/test_sim_kube_scheduler.py):
        (("UDP/127.0.0.1:8080",), (), True),  # "nothing running"
        (("UDP/127.0.0.1:8080",), ("UDP/127.0.0.1:9090",), True),  # "other port"
        (("UDP/127.0.0.1:8080",), ("UDP/127.0.0.1:8080",), False),  # "same udp port"
        (("TCP/127.0.0.1:8080",), ("TCP/127.0.0.1:8080",), False),  # "same tcp port"
        (("UDP/127.0.0.1:8080",), ("TCP/127.0.0.1:8080",), True),  # "different protocol"
        # "second udp port conflict"
        (("UDP/127.0.0.1:8000", "UDP/127.0.0.1:8080"), ("UDP/127.0.0.1:8080",), False),
        # "first tcp port conflict due to 0.0.0.0 hostIP"
        (("TCP/0.0.0.0:8001",), ("TCP/127.0.0.1:8001",), False),
        # "second tcp port conflict to 0.0.0.0 hostIP"
        (("TCP/127.0.0.1:8001",), ("TCP/0.0.0.0:8001",), False),
        # "second different protocol"
        (("UDP/127.0.0.1:8001",), ("TCP/0.0.0.0:8001",), True),
        # "UDP hostPort conflict due to 0.0.0.0 hostIP"
        (("UDP/0.0.0.0:8001",), ("TCP/0.0.0.0:8001", "UDP/0.0.0.0:8001"), False),
        # Stricter than upstream's "different host ip" (which fits): any two uses of one
        # (protocol, port) conflict here, so a plan never relies on two host IPs.
        (("TCP/127.0.0.1:8080",), ("TCP/127.0.0.2:8080",), False),
    ],
)
def test_a_node_takes_no_pod_whose_host_port_a_pod_on_it_holds(
    wanted: tuple[str, ...], taken: tuple[str, ...], fits: bool
) -> None:
    assert _fits(_ported(*wanted), _ported(*taken)) is fits


def test_on_the_host_network_every_container_port_is_a_host_port() -> None:
    tf = {"containers": [{"name": "c", "ports": [{"name": "tfjob-port", "containerPort": 2222}]}]}
    on_host = {**tf, "hostNetwork": True}
    assert _fits(tf, tf) and _fits(tf, on_host) and _fits(on_host, tf)
    assert not _fits(on_host, on_host)
    # The port Dragonet adds to a TF task's pod counts there too, and only there.
    bare = {"containers": [{"name": "c"}]}
    assert host_ports({**bare, "hostNetwork": True}, added=(2222,)) == host_ports(on_host)
    assert not host_ports(bare, added=(2222,))
