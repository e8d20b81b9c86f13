"""The filter phase (``policy.pool.filters``) where it once disagreed with the
kube-scheduler: node selector requirements the scheduler's label selector does not parse.
(``tests/test_sim_kube_scheduler.py`` checks the whole filter against an independent one.)"""

from __future__ import annotations

from typing import Any

import pytest

from policy.model.cluster import Node
from policy.pool.filters import rejection


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
