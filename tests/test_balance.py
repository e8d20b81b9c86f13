"""The pool's ``balance`` moves (policy/pool/migrate.py): a CPU worker crowded on a node
whose CPU its workers oversubscribe goes where CPU idles, with no request asked; nothing
moves where every node is busy, nor a GPU worker, nor under DRAGON's score.

Run in the simulator with the CPU the manifests imply (sim/cpu.py): burstable jobs
(requests 250m, limits 4 CPU) on 4-CPU nodes, as container-migration's speed scenarios."""

from __future__ import annotations

from typing import Any

from sim.engine import Scenario, SimConfig, Simulation
from sim.kube import node_object
from sim.profiles import MANIFEST_PROFILE
from sim.results import SimResult
from sim.spec import JobSpec, tfjob_manifest

NODES = ("node-1", "node-2", "node-3")


def _nodes(gpus: int = 0) -> tuple[dict[str, Any], ...]:
    extra = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return tuple(node_object(n, {"cpu": "4", "memory": "16Gi", **extra}) for n in NODES)


def _job(name: str, node: str, workers: int = 1, gpu: bool = False) -> JobSpec:
    small = {"cpu": "250m", "memory": "500Mi"}
    worker = {**small, "nvidia.com/gpu": "1"} if gpu else small
    m = tfjob_manifest(name, workers=workers, ps=1, worker_resources=worker, ps_resources=small)
    for replica in m["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "4"
    m["spec"]["node-preference"] = node
    m["metadata"]["annotations"] = {"dragonet.io/chief-movable": "true"}
    return JobSpec(m, 0.0, 300.0, MANIFEST_PROFILE)


def _run(jobs: tuple[JobSpec, ...], gpus: int = 0, **config: Any) -> SimResult:
    return Simulation(Scenario("balance", _nodes(gpus), jobs), SimConfig(**config)).run()


def _moves(result: SimResult) -> int:
    return int(result.summary.get("migrations", 0))


def test_crowded_cpu_workers_go_to_idle_nodes_and_the_jobs_finish_sooner() -> None:
    piled = tuple(_job(f"job{i}", "node-1") for i in (1, 2, 3))
    balanced = _run(piled)
    left = _run(piled, migration={"balance": False})
    # one worker to each idle node; the third stays with the parameter servers
    assert _moves(balanced) == 2 and _moves(left) == 0
    assert balanced.summary["avg_jct_s"] < 0.75 * left.summary["avg_jct_s"]


def test_nothing_moves_while_every_node_is_busy() -> None:
    """One job per node: moving a worker would only take CPU from another worker. Once a
    job is done its node idles, and a worker may go there (the pool cannot tell that its
    job is about to end too); the old pod trains until the replacement runs."""
    spread = tuple(_job(f"job{i}", n, workers=2) for i, n in enumerate(NODES, 1))
    sim = Simulation(Scenario("spread", _nodes(), spread), SimConfig())
    result = sim.run()
    first_done = min(r.jct_s for r in result.jobs)
    moved = [t for t, event, pod, _ in sim.log if event == "create" and pod.endswith("-m1")]
    assert all(t >= first_done for t in moved)
    alone = _run(spread, migration={"balance": False})
    assert result.summary["avg_jct_s"] <= alone.summary["avg_jct_s"] + 1.0


def test_a_gpu_worker_is_never_balanced() -> None:
    """A GPU worker steps at its GPUs' pace, whatever CPU its node has."""
    piled = tuple(_job(f"job{i}", "node-1", gpu=True) for i in (1, 2, 3))
    assert _moves(_run(piled, gpus=4)) == 0


def test_dragons_score_does_not_balance() -> None:
    piled = tuple(_job(f"job{i}", "node-1") for i in (1, 2, 3))
    assert _moves(_run(piled, policy="dragon")) == 0


def test_idle_cpu_goes_to_the_first_job_in_the_queue_first() -> None:
    """Two idle nodes and two piled-up jobs of two workers: both moves are the first job's,
    so it finishes well before the second, instead of both finishing late."""
    piled = (_job("job1", "node-1", workers=2), _job("job2", "node-1", workers=2))
    sim = Simulation(Scenario("queue", _nodes(), piled), SimConfig())
    result = sim.run()
    moved = [pod for _, event, pod, _ in sim.log if event == "create" and "-m1" in pod]
    assert moved[:2] == ["default/job1-worker-0-m1", "default/job1-worker-1-m1"]
    jct = {r.key: r.jct_s or 0.0 for r in result.jobs}
    assert jct["default/job1"] < 0.8 * jct["default/job2"]
