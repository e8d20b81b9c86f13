"""Beside Kubeflow (issue 39, docs/kubeflow.md): with the chart's ``kubeflow.coexist``,
Dragonet runs only the jobs marked for it (label ``dragonet.io/managed-by: dragonet`` and
``runPolicy.managedBy: dragonet.io/dragonet``) and leaves every other job, its pods and its
status to Kubeflow's training-operator, while its pools count Kubeflow's pods as taken room.
End to end in the simulator, beside a Kubeflow-like controller (tests/kubeflowfake.py), on
an API server that stores TFJobs under Kubeflow's own CRD."""

from __future__ import annotations

from typing import Any

import pytest

from policy.model.jobs import COEXIST_LABEL, DRAGONET, TRAINING_OPERATOR
from sim.engine import Scenario, SimConfig, Simulation
from sim.spec import tfjob_manifest
from tests import metacontroller as mc
from tests.kubeflowfake import L_JOB, PODS, TFJOBS, FakeKubeflow, with_kubeflow_crd
from tests.simkit import HookSpy, condition, gpu_nodes, job, status_of
from webhooks.hooks import pool_related_resources

ADMISSIONS = "Admission.dragonet.io/v1alpha1"
KEEP = SimConfig(delete_finished_after_s=None, kubeflow_coexist=True).cost_free()


def dragonet_job(name: str, workers: int, arrival: float, steps: float) -> Any:
    spec = job(name, workers, arrival=arrival, steps=steps)
    spec.manifest["metadata"]["labels"] = {COEXIST_LABEL: "dragonet"}
    spec.manifest["spec"]["runPolicy"] = {"managedBy": DRAGONET}
    return spec


def kubeflow_job(name: str, workers: int) -> dict[str, Any]:
    """A TFJob as a Kubeflow user writes it: no mark, so Kubeflow's."""
    manifest = tfjob_manifest(name, workers=workers)
    manifest["metadata"]["namespace"] = "default"
    return manifest


def _unschedulable(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


def _run(config: SimConfig = KEEP) -> tuple[Simulation, FakeKubeflow, HookSpy]:
    # Two 4-GPU nodes: Kubeflow's job takes 4 GPUs from t=0 for 300 s; Dragonet's a (4 GPUs,
    # longer than that) and b (4 GPUs) arrive at 10 s and 20 s: b must wait for Kubeflow's
    # pods, since a holds the other 4.
    scenario = Scenario(
        "beside-kubeflow",
        gpu_nodes(2),
        (dragonet_job("a", 4, 10.0, 3000), dragonet_job("b", 4, 20.0, 60)),
        (kubeflow_job("kf", 4),),
    )
    sim = Simulation(scenario, config)
    with_kubeflow_crd(sim)
    kubeflow = FakeKubeflow(sim, run_s=300.0)
    spy = HookSpy(sim)
    refused: list[tuple[float, str]] = []
    sim.refused = refused  # type: ignore[attr-defined]

    def watch(tkey: str, old: Any, new: Any) -> None:
        if tkey == PODS and new is not None and _unschedulable(new):
            refused.append((sim.now, new["metadata"]["name"]))

    sim.api.watchers.append(watch)
    sim.run()
    return sim, kubeflow, spy


@pytest.fixture(scope="module")
def beside() -> tuple[Simulation, FakeKubeflow, HookSpy]:
    return _run()


def test_dragonet_never_syncs_kubeflows_job_nor_plans_it(beside) -> None:
    """Metacontroller never calls a hook for Kubeflow's job (its sync would release
    Kubeflow's pods and overwrite the job's status), and no pool writes it an Admission."""
    sim, _, spy = beside
    assert spy.calls, "the run made hook calls"
    assert not [c for c in spy.calls if c.parent == "default/kf"]
    assert sim.api.get(ADMISSIONS, "default/tfjob-kf") is None
    for call in spy.of("/pools/sync"):
        assert all("kf" not in name for name in (call.answer or {}).get("children", [])), call


def test_every_write_to_kubeflows_job_and_its_pods_is_kubeflows_or_the_clusters(beside) -> None:
    """The job's status is exactly what Kubeflow wrote last (Succeeded), it never got
    Metacontroller's finalizer, and its pods are the ones Kubeflow made, still owned by it."""
    sim, kubeflow, _ = beside
    kf = sim.api.get(TFJOBS, "default/kf")
    assert kf is not None
    assert (TFJOBS, "default/kf", kf["metadata"]["resourceVersion"]) in kubeflow.wrote
    assert condition(kf["status"], "Succeeded") is not None
    assert not kf["metadata"].get("finalizers")
    assert set(kf["status"]) <= {"conditions", "startTime", "completionTime"}
    made = {key for tkey, key, _ in kubeflow.wrote if tkey == PODS}
    assert made == {f"default/kf-{t}-{i}" for t, n in (("ps", 1), ("worker", 4)) for i in range(n)}
    kf_pods = [p for p in sim.api.list(PODS) if p["metadata"]["labels"].get(L_JOB) == "kf"]
    for pod in kf_pods:
        [owner] = pod["metadata"]["ownerReferences"]
        assert owner["uid"] == kf["metadata"]["uid"] and owner["controller"] is True
        assert "controller-uid" not in pod["metadata"]["labels"]


def test_kubeflow_skips_dragonets_jobs_by_their_managed_by(beside) -> None:
    """Kubeflow's rule (managedBy not its own: skip) keeps it off Dragonet's jobs, which
    Dragonet runs to the end under Kubeflow's CRD (its own status fields pruned)."""
    sim, kubeflow, _ = beside
    assert kubeflow.reconciled == ["default/kf"]
    assert sorted(kubeflow.skipped) == ["default/a", "default/b"]
    for name in ("a", "b"):
        status = status_of(sim, f"default/{name}")
        assert condition(status, "Succeeded") is not None, status
        assert "scheduling" not in status  # pruned: Kubeflow's CRD does not declare it
    for pod in sim.api.list(PODS):
        labels = pod["metadata"]["labels"]
        if labels.get(L_JOB) in ("a", "b"):
            assert labels["training.kubeflow.org/operator-name"] == "dragonet"


def test_the_pool_counts_kubeflows_pods_as_taken(beside) -> None:
    """Kubeflow's 4 GPUs are not the pool's to give: the second Dragonet job waits until
    Kubeflow's pods are done, and no Dragonet pod is ever refused by the kube-scheduler
    for want of room the pool thought was free."""
    sim, _, _ = beside
    starts = {name: status_of(sim, f"default/{name}")["startTime"] for name in ("a", "b")}
    kf_done = status_of(sim, "default/kf")["completionTime"]
    a_done = status_of(sim, "default/a")["completionTime"]
    assert starts["a"] < kf_done <= starts["b"] < a_done, (starts, kf_done, a_done)
    assert not [(t, pod) for t, pod in sim.refused if pod[:2] in ("a-", "b-")]


def test_pool_customize_reads_only_marked_jobs_and_every_training_pod() -> None:
    pool = mc.pool()
    rules = {r["resource"]: r["labelSelector"] for r in pool_related_resources(pool, True)}
    assert rules["tfjobs"] == rules["mxjobs"] == {"matchLabels": {COEXIST_LABEL: "dragonet"}}
    assert rules["pods"] == {
        "matchExpressions": [{"key": "training.kubeflow.org/operator-name", "operator": "Exists"}]
    }
    alone = {r["resource"]: r["labelSelector"] for r in pool_related_resources(pool)}
    assert alone["tfjobs"] == {}
    assert alone["pods"] == {"matchLabels": {"training.kubeflow.org/operator-name": "dragonet"}}
    everything = mc.pool(watchAllPods=True)
    assert {r["resource"]: r["labelSelector"] for r in pool_related_resources(everything, True)}[
        "pods"
    ] == {}


@pytest.mark.parametrize("manager", [None, TRAINING_OPERATOR])
def test_a_marked_job_that_kubeflow_runs_is_left_alone(hook, manager: str | None) -> None:
    """Without the admission policy, a job could carry Dragonet's label and Kubeflow's
    managedBy: Kubeflow runs it, so Dragonet creates no pod, writes no status and gives
    its room to others."""
    theirs = mc.tfjob("dragon-job1-cpu.yaml", name="theirs")
    theirs["metadata"]["labels"] = {COEXIST_LABEL: "dragonet"}
    if manager:
        theirs["spec"]["runPolicy"] = {"managedBy": manager}
    mine = mc.tfjob("dragon-job1-cpu.yaml", name="mine", created="2026-11-21T10:00:30Z")
    nodes = [mc.node("n-1", cpu="20", memory="64Gi")]  # room for one of them
    body = hook.sync(mc.world(theirs, nodes, jobs=[theirs, mine]))
    assert body == {"children": [], "status": {}}
    assert hook.admission(theirs) is None
    assert hook.sync(mc.world(mine, nodes, jobs=[theirs, mine]))["children"]
