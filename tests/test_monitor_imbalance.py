"""The imbalance test (monitor/imbalance.py): the reference's formula with the standard
deviation computed right, and each node's load from the pool's published allocation and
the kubelet's resource metrics."""

from __future__ import annotations

import statistics

import pytest

from monitor.imbalance import amount, overloaded, pool_loads
from tests.monitorkit import allocation


def dragon_is_overload(node_load: float, loads: list[float], threshold: float) -> bool:
    """container-migration's IsOverload, bug included: only the last deviation is squared."""
    mean = sum(loads) / len(loads)
    total = 0.0
    for x in loads:
        total = (x - mean) ** 2  # sic: = instead of +=
    return node_load - mean > threshold * (total / len(loads)) ** 0.5


def test_a_node_far_above_the_pool_is_overloaded() -> None:
    loads = [0.9, 0.2, 0.25, 0.15]
    assert overloaded(0.9, loads, 1.0)
    assert not overloaded(0.2, loads, 1.0)


def test_the_std_is_over_every_node_not_the_last_one() -> None:
    # The last node sits at the mean, so the reference's "std" is 0 and any node above the
    # mean looks overloaded; with the real std (0.29) a node at 0.6 is well within one.
    loads = [0.6, 0.0, 0.9, 0.5]
    assert statistics.pstdev(loads) == pytest.approx(0.3240, abs=1e-4)
    assert dragon_is_overload(0.6, loads, 1.0)
    assert not overloaded(0.6, loads, 1.0)


def test_the_threshold_counts_standard_deviations() -> None:
    loads = [0.8, 0.4, 0.4, 0.4]  # mean 0.5, std 0.1732
    assert overloaded(0.8, loads, 1.5)  # 0.3 > 0.26
    assert not overloaded(0.8, loads, 2.0)  # 0.3 < 0.35


def test_a_balanced_pool_or_a_single_node_is_never_overloaded() -> None:
    assert not overloaded(0.7, [0.7, 0.7, 0.7], 0.0)
    assert not overloaded(0.7, [0.7], 0.0)
    assert not overloaded(0.0, [], 1.0)


def test_load_is_the_mean_cpu_and_memory_share_of_what_pods_request() -> None:
    status = {
        "nodeAllocation": [
            allocation("node-1", cpu="2", memory="4Gi"),  # 0.5 cpu, 0.25 memory
            allocation("node-2", cpu="0", memory="0"),
        ]
    }
    loads = pool_loads(status, None)
    assert loads.nodes["node-1"].load == pytest.approx(0.375)
    assert loads.nodes["node-2"].load == 0.0
    assert not loads.metrics and loads.problems == ()


def test_usage_above_requests_counts_where_node_metrics_are_served() -> None:
    """DRAGON's examples request 250m and burst to 4 CPUs: the kubelet's metrics see that."""
    status = {
        "nodeAllocation": [allocation("node-1", "1", "2Gi"), allocation("node-2", "1", "2Gi")]
    }
    metrics = [
        {"metadata": {"name": "node-1"}, "usage": {"cpu": "3900m", "memory": "1Gi"}},
        {"metadata": {"name": "node-2"}, "usage": {"cpu": "100m", "memory": "6Gi"}},
    ]
    loads = pool_loads(status, metrics)
    assert loads.nodes["node-1"].load == pytest.approx((3.9 / 4 + 2 / 16) / 2)
    assert loads.nodes["node-2"].load == pytest.approx((1 / 4 + 6 / 16) / 2)
    assert loads.metrics


def test_the_verdict_names_load_mean_and_std() -> None:
    status = {
        "nodeAllocation": [
            allocation("node-1", "4", "16Gi"),
            allocation("node-2", "0", "0"),
            allocation("node-3", "0", "0"),
        ]
    }
    verdict = pool_loads(status, None).verdict("node-1", 1.0)
    assert verdict is not None
    assert (verdict.load, verdict.overloaded) == (1.0, True)
    assert verdict.mean == pytest.approx(1 / 3)
    assert verdict.std == pytest.approx(statistics.pstdev([1, 0, 0]))
    assert pool_loads(status, None).verdict("elsewhere", 1.0) is None


def test_one_unreadable_row_is_named_and_the_others_are_kept() -> None:
    status = {
        "nodeAllocation": [
            allocation("node-1", "1", "1Gi"),
            {"name": "node-2", "allocatable": {"cpu": "lots"}},
            {"allocatable": {}},
            "node-4",
        ]
    }
    metrics = [{"metadata": {"name": "node-1"}, "usage": {"cpu": -1}}, {"usage": {}}]
    loads = pool_loads(status, metrics)
    assert list(loads.nodes) == ["node-1"]
    assert len(loads.problems) == 5
    assert "nodeAllocation row unreadable" in loads.problems[-1]


def test_a_pool_without_per_node_allocation_says_so() -> None:
    loads = pool_loads({"nodes": 3}, None)
    assert loads.nodes == {}
    assert "no nodeAllocation" in loads.problems[0]


@pytest.mark.parametrize("bad", ["", "4 cores", "-1", True, None, {"cpu": 1}, "1e400"])
def test_quantities_that_are_not_quantities_are_errors(bad: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        amount(bad)


def test_quantities_in_kubernetes_units() -> None:
    assert amount("250m") == 0.25
    assert amount("1Gi") == 2**30
    assert amount(2) == 2.0
