"""The CPU a node's pods get (sim/cpu.py): CFS's weighted fair share, capped by limits, and
what the pods' manifests imply of it; then a job's speed in the simulator follows it."""

from __future__ import annotations

import pytest

from sim.cpu import Claim, claim_of, fair_share, shares
from sim.engine import Scenario, SimConfig, Simulation
from sim.kube import node_object
from sim.profiles import MANIFEST_PROFILE
from sim.spec import JobSpec, tfjob_manifest

BUSY = None  # a training loop: wants all it may have


@pytest.mark.parametrize(
    ("case", "claims", "capacity", "cores"),
    [
        ("one pod alone gets its limit", [Claim(250, 4000, BUSY)], 16000, [4.0]),
        ("an unbounded pod alone gets the node", [Claim(250, None, BUSY)], 4000, [4.0]),
        (
            "three pods on a 4-CPU node share by requests",
            [Claim(250, 4000, BUSY), Claim(500, 4000, BUSY), Claim(1000, 4000, BUSY)],
            4000,
            [4 / 7, 8 / 7, 16 / 7],
        ),
        (
            "equal requests share equally",
            [Claim(250, 4000, BUSY)] * 3,
            4000,
            [4 / 3] * 3,
        ),
        (
            "a limit caps a pod; the others get what it leaves",
            [Claim(250, 1000, BUSY), Claim(250, 4000, BUSY)],
            4000,
            [1.0, 3.0],
        ),
        (
            "a pod that wants little gets it; the busy one the rest",
            [Claim(250, 4000, 250), Claim(250, 4000, BUSY)],
            4000,
            [0.25, 3.75],
        ),
        (
            "room for everything wanted: each gets its want",
            [Claim(500, 4000, 1000), Claim(500, 4000, 2000)],
            4000,
            [1.0, 2.0],
        ),
        (
            "a pod that requests nothing still gets the kernel's least weight",
            [Claim(0, None, BUSY), Claim(1000, None, BUSY)],
            4000,
            [4 * 2 / 1026, 4 * 1024 / 1026],
        ),
    ],
)
def test_fair_share(case: str, claims: list[Claim], capacity: int, cores: list[float]) -> None:
    got = fair_share(dict(enumerate(claims)), capacity)
    assert [u.cores for u in got.values()] == pytest.approx(cores), case
    assert sum(u.cores for u in got.values()) <= capacity / 1000 + 1e-9


def test_what_cgroups_show_contention_apart_from_a_limit() -> None:
    """Contention shows as pressure (CPU others hold); a limit below the want as throttling."""
    alone = fair_share({"w": Claim(250, 4000, BUSY)}, 8000)["w"]
    assert (alone.cores, alone.speed, alone.pressure, alone.throttled) == (4.0, 1.0, 0.0, True)
    crowded = fair_share({"a": Claim(250, 4000, BUSY), "b": Claim(250, 4000, BUSY)}, 4000)
    assert crowded["a"].speed == pytest.approx(0.5)
    assert crowded["a"].pressure == pytest.approx(0.5)
    assert not crowded["a"].throttled


@pytest.mark.parametrize(
    ("resources", "claim"),
    [
        ({"requests": {"cpu": "250m"}, "limits": {"cpu": "4"}}, Claim(250, 4000)),
        ({"limits": {"cpu": "4"}}, Claim(4000, 4000)),  # the API server defaults the request
        ({"requests": {"cpu": "1"}}, Claim(1000, None)),  # no limit: unbounded
        ({}, Claim(0, None)),
    ],
)
def test_a_claim_is_what_the_manifest_says(resources: dict, claim: Claim) -> None:
    spec = {"containers": [{"name": "tensorflow", "resources": resources}]}
    assert claim_of(spec) == claim


def test_a_pod_is_unbounded_when_one_container_has_no_limit() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    assert claim_of(spec) == Claim(1600, None)


def test_shares_are_the_kubelets() -> None:
    assert (shares(0), shares(1), shares(250), shares(1000)) == (2, 2, 256, 1024)


def _nodes(cpu: str, names: tuple[str, ...] = ("node-1",)) -> tuple[dict, ...]:
    return tuple(node_object(n, {"cpu": cpu, "memory": "64Gi"}) for n in names)


def _burstable(name: str, workers: int, node: str, gpu: bool = False) -> JobSpec:
    worker = {"cpu": "250m", "memory": "1Gi"}
    if gpu:
        worker["nvidia.com/gpu"] = "1"
    m = tfjob_manifest(
        name, workers=workers, ps=1, worker_resources=worker, ps_resources=dict(worker)
    )
    for replica in m["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "4"
    m["spec"]["node-preference"] = node
    return JobSpec(m, 0.0, 1000.0, MANIFEST_PROFILE)


def _jct(nodes: tuple[dict, ...], *jobs: JobSpec) -> dict[str, float]:
    result = Simulation(Scenario("cpu", nodes, jobs), SimConfig(policy="dragonet")).run()
    return {r.key: r.jct_s for r in result.jobs}


def test_jobs_piled_on_one_node_train_slower_than_alone() -> None:
    alone = _jct(_nodes("4"), _burstable("a", 1, "node-1"))["default/a"]
    piled = _jct(_nodes("4"), *(_burstable(n, 1, "node-1") for n in "abc"))
    # alone: its PS takes its 0.25 request, the worker the other 3.75 of its 4 cores: 1000
    # steps of 1 s at 0.94 speed, after a 30 s restore; three busy workers (and three light
    # PSs) on 4 CPUs: each worker gets (4 - 3 x 0.25) / 3 = 1.08 cores, 0.27 speed
    assert alone == pytest.approx(1000 / 0.9375 + 30, rel=0.02)
    assert min(piled.values()) == pytest.approx(1000 / (3.25 / 12) + 30, rel=0.02)


def test_a_gpu_job_steps_at_its_gpus_pace_whatever_the_cpu() -> None:
    nodes = tuple(
        node_object("node-1", {"cpu": "4", "memory": "64Gi", "nvidia.com/gpu": "4"})
        for _ in range(1)
    )
    alone = _jct(nodes, _burstable("g", 1, "node-1", gpu=True))["default/g"]
    crowded = _jct(nodes, _burstable("g", 1, "node-1", gpu=True), _burstable("c", 2, "node-1"))[
        "default/g"
    ]
    assert crowded == pytest.approx(alone, rel=0.01)
