"""The two target scores of a move (``policy.pool.move_score``), case by case."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from policy.model.cluster import L_INDEX, L_JOB, L_OPERATOR, L_TYPE, OPERATOR_NAME, Pod
from policy.model.resources import Resources
from policy.pool.move_score import MoveRefused, NodeLoad, dragon_target, dragonet_target

NODE = Resources.parse({"cpu": "4", "memory": "16Gi"})


def pod(name: str, node: str, rtype: str = "worker", cpu: str = "4", request: str = "250m") -> Pod:
    labels = {L_OPERATOR: OPERATOR_NAME, L_JOB: "j", L_TYPE: rtype, L_INDEX: "0"}
    return Pod(
        namespace="default",
        name=name,
        labels=MappingProxyType(labels),
        node=node,
        phase="Running",
        terminating=False,
        request=Resources.parse({"cpu": request, "memory": "500Mi"}),
        exit_code=None,
        restarts=0,
        bound=True,
        limits=Resources.parse({"cpu": cpu, "memory": "8Gi"}),
    )


def load(*pods: Pod, nodes: tuple[str, ...] = ("n-1", "n-2", "n-3")) -> NodeLoad:
    return NodeLoad.of(pods, {n: NODE for n in nodes})


def test_dragon_takes_the_least_loaded_node_and_the_first_name_on_a_tie() -> None:
    moving = pod("w", "n-1")
    loads = load(moving, pod("x", "n-1"), pod("y", "n-3"))
    assert dragon_target(loads, moving, ["n-2", "n-3"], frozenset(), 0.2, False) == "n-2"
    tied = load(moving, pod("x", "n-1"))
    assert dragon_target(tied, moving, ["n-2", "n-3"], frozenset(), 0.2, False) == "n-2"


def test_dragon_does_not_move_a_pod_whose_node_is_among_the_least_loaded() -> None:
    moving = pod("w", "n-1")
    loads = load(moving, pod("x", "n-2"), pod("y", "n-3"))
    refused = dragon_target(loads, moving, ["n-2", "n-3"], frozenset(), 0.2, False)
    assert refused == MoveRefused("SameNode", "n-1 is already among the least loaded nodes")
    assert load(moving, pod("x", "n-2"), pod("y", "n-3")).limits == loads.limits  # unchanged


@pytest.mark.parametrize(
    ("ps_nodes", "others", "manual", "expected"),
    [
        # Three workers share n-1's 4 CPUs (a third each): anywhere else is faster, even
        # away from the PS (0.65 > 0.33): the PS's node is preferred only on a tie.
        (frozenset({"n-1"}), ("n-1", "n-1"), False, "n-2"),
        # Alone on its PS's node: no node is faster.
        (
            frozenset({"n-1"}),
            (),
            False,
            MoveRefused("SameNode", "no node would run w faster than n-1"),
        ),
        # ... but an operator's request moves it anyway, to the first best node.
        (frozenset({"n-1"}), (), True, "n-2"),
        # Its PS on n-3 with room: there, at full speed.
        (frozenset({"n-3"}), ("n-1",), False, "n-3"),
    ],
)
def test_dragonet_moves_to_where_the_worker_runs_fastest(
    ps_nodes: frozenset[str], others: tuple[str, ...], manual: bool, expected: object
) -> None:
    moving = pod("w", "n-1")
    loads = load(moving, *(pod(f"o{i}", n) for i, n in enumerate(others)))
    assert dragonet_target(loads, moving, ["n-2", "n-3"], ps_nodes, 0.2, manual) == expected


def test_dragonet_refuses_a_move_that_gains_less_than_min_gain() -> None:
    # Two workers on n-1 (half a CPU share each, next to the PS): elsewhere 0.65, +30 %.
    moving = pod("w", "n-1")
    loads = load(moving, pod("o", "n-1"))
    ps = frozenset({"n-1"})
    assert dragonet_target(loads, moving, ["n-2"], ps, 0.2, False) == "n-2"
    refused = dragonet_target(loads, moving, ["n-2"], ps, 0.5, False)
    assert isinstance(refused, MoveRefused) and refused.reason == "NoGain"
    assert "only 30% faster" in refused.message


def test_parameter_servers_count_their_requests_not_their_limits() -> None:
    moving = pod("w", "n-1")
    servers = [pod(f"ps{i}", "n-1", rtype="ps") for i in range(3)]
    loads = load(moving, *servers)
    # the servers take their requests (3 x 250m), the worker the rest of its 4-CPU limit
    assert loads.share("n-1", moving) == pytest.approx(3.25 / 4)
    assert loads.dragon("n-1") == pytest.approx(0.5 * 16 / 4 + 0.5 * 32 / 16)


@pytest.mark.parametrize(
    ("case", "others", "joining", "expected"),
    [
        ("alone with room: its whole limit", (), False, 1.0),
        ("two alike split the node", (("n-1", "250m"),), False, 0.5),
        ("a heavier request takes more (CFS weights)", (("n-1", "750m"),), False, 0.25),
        ("joining a node of one alike: half", (("n-2", "250m"),), True, 0.5),
    ],
)
def test_a_workers_share_follows_cfs_weights(
    case: str, others: tuple[tuple[str, str], ...], joining: bool, expected: float
) -> None:
    moving = pod("w", "n-1")
    loads = load(moving, *(pod(f"o{i}", n, request=r) for i, (n, r) in enumerate(others)))
    node = "n-2" if joining else "n-1"
    assert loads.share(node, moving, joining) == pytest.approx(expected), case


def test_idle_cpu_is_what_servers_and_workers_limits_leave() -> None:
    moving = pod("w", "n-1", cpu="2")
    loads = load(moving, pod("ps", "n-1", rtype="ps"), pod("x", "n-2"))
    assert (loads.idle("n-1"), loads.idle("n-2"), loads.idle("n-3")) == (1750, 0, 4000)
    assert not loads.full_without("n-1", moving)  # its going would leave 3.75 CPUs idle
    crowded = load(moving, pod("x", "n-1"), pod("y", "n-1"))
    assert crowded.full_without("n-1", moving)  # two busy workers still use all 4
