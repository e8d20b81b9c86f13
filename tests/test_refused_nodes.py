"""A node the kube-scheduler refuses (issue 25): with ``watchAllPods: false`` the pool does
not see other tenants' pods, so it may pin a pod to a node they fill. The kube-scheduler
marks the pod ``PodScheduled=False``/``Unschedulable``; the pool records the refusal in the
job's Admission and avoids that node for the job for a backoff (30 s, doubling, at most
10 min), so the job trains elsewhere or waits, saying why, instead of a delete/create loop
on the same node."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

from sim.apiserver import Obj, object_key
from sim.engine import Scenario, SimConfig, Simulation
from sim.kube import node_object
from sim.spec import JobSpec, TrainingProfile, tfjob_manifest
from tests.kube_schema import validate_custom, validate_job_status
from tests.simkit import PODS, TFJOBS, scenario

ADMISSIONS = "Admission.dragonet.io/v1alpha1"
SMALL = {"cpu": "2", "memory": "2Gi"}
PROFILE = TrainingProfile(name="steady", step_time_s=1.0, restore_s=5.0)


def nodes(*cpus: str) -> tuple[dict[str, Any], ...]:
    return tuple(
        node_object(f"cpu-{i}", {"cpu": c, "memory": "64Gi"}) for i, c in enumerate(cpus, 1)
    )


def job(name: str, workers: int = 2, *, arrival: float = 1.0, steps: float = 300.0) -> JobSpec:
    manifest = tfjob_manifest(
        name, workers=workers, ps=1, worker_resources=SMALL, ps_resources=SMALL
    )
    return JobSpec(manifest, arrival, steps, PROFILE)


def foreign(node: str, cpu: str, name: str = "someone-else") -> dict[str, Any]:
    """Another tenant's pod, which a pool with ``watchAllPods: false`` does not see."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "other-team"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {"name": "app", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


class Creates:
    """Every pod created, by key, with when; and each Admission spec as written."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.times: dict[str, list[float]] = {}
        self.admissions: list[dict[str, Any]] = []
        sim.api.watchers.append(self._on)

    def _on(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == PODS and old is None and new is not None:
            self.times.setdefault(object_key(new), []).append(self.sim.now)
        if tkey == ADMISSIONS and new is not None:
            self.admissions.append(new)

    def count(self, key: str) -> int:
        return len(self.times.get(key, []))

    def counts(self) -> Counter[str]:
        return Counter({k: len(v) for k, v in self.times.items()})


def simulate(jobs: list[JobSpec], cluster, **config: Any) -> tuple[Simulation, Creates]:
    config.setdefault("delete_finished_after_s", None)  # keep the job: read its status
    sim = Simulation(scenario(cluster, jobs), SimConfig(**config))
    return sim, Creates(sim)


def test_a_node_full_of_unseen_pods_refuses_the_job_once_and_it_trains_on_the_other() -> None:
    """cpu-1 is full of another tenant's pod the pool cannot see; the pool places the whole
    job there (both nodes look empty), the kube-scheduler refuses it, and the job trains
    on cpu-2 soon after, each pod created at most twice. Its status names cpu-1 and says
    how ``watchAllPods`` would let the pool see the other pod."""
    sim, creates = simulate([job("a")], nodes("16", "16"), max_time_s=3600.0)
    sim.schedule(0.0, lambda: sim.api.create(foreign("cpu-1", "15")))
    status: dict[str, Any] = {}
    sim.schedule(40.0, lambda: status.update(sim.api.get(TFJOBS, "default/a")["status"]))
    result = sim.run()
    assert result.summary["jobs_finished"] == 1, result.summary
    record = result.jobs[0]
    assert record.start_s is not None and record.start_s < 60.0, record
    ours = {k: n for k, n in creates.counts().items() if k.startswith("default/a-")}
    assert set(ours) == {"default/a-ps-0", "default/a-worker-0", "default/a-worker-1"}
    assert max(ours.values()) <= 2, ours
    spec = [adm for adm in creates.admissions if adm["metadata"]["name"] == "tfjob-a"][-1]["spec"]
    assert [r["node"] for r in spec["refused"]] == ["cpu-1"], spec
    assert spec["refused"][0]["count"] == 1
    for adm in creates.admissions:
        validate_custom(adm)
    assert status["scheduling"]["nodes"] == ["cpu-2"], status["scheduling"]
    validate_job_status("TFJob", status)
    refused = status["scheduling"]["refused"]
    assert [r["node"] for r in refused] == ["cpu-1"], status["scheduling"]
    assert "cpu-1" in status["scheduling"]["message"], status["scheduling"]
    assert "watchAllPods" in status["scheduling"]["message"]


def test_with_no_other_node_free_the_job_waits_saying_why_and_retries_with_backoff() -> None:
    """cpu-1 is full of another tenant's pod; b takes most of cpu-2 first. a is placed on
    cpu-1 (the only node with room for it in the pool's view), refused, and waits (its
    parameter server fits on cpu-2, its workers do not): its status names cpu-1 and
    ``watchAllPods``, and it tries cpu-1 again after 30 s, then 60 s (not every few
    seconds). Once b finishes, a trains on cpu-2."""
    b = job("b", arrival=0.0, steps=300.0)
    a = job("a", arrival=1.0, steps=100.0)
    sim, creates = simulate([b, a], nodes("16", "8"), max_time_s=3600.0)
    sim.schedule(0.0, lambda: sim.api.create(foreign("cpu-1", "15")))
    seen: dict[str, Any] = {}
    sim.schedule(120.0, lambda: seen.update(sim.api.get(TFJOBS, "default/a")["status"]))
    result = sim.run()
    assert result.summary["jobs_finished"] == 2, result.summary
    runs = {r.key: r for r in result.jobs}
    assert runs["default/b"].finish_s is not None
    a_run = runs["default/a"]
    assert a_run.start_s is not None and a_run.start_s >= runs["default/b"].finish_s - 10
    # Tries on cpu-1 at about 4, 34 and 94 s (30 s, then 60 s later), none every few seconds
    # as before, and one more on cpu-2 once b is done.
    worker = creates.times["default/a-worker-0"]
    assert len(worker) <= 5, worker
    gaps = [later - earlier for earlier, later in pairwise(worker)]
    assert all(g >= 30.0 for g in gaps[:-1]), worker
    scheduling = seen["scheduling"]
    assert scheduling["reason"] == "PodsWaitingForRoom", scheduling
    assert "cpu-1" in scheduling["message"] and "watchAllPods" in scheduling["message"]
    assert [r["node"] for r in scheduling["refused"]] == ["cpu-1"]
    validate_job_status("TFJob", seen)
    refusals = [
        tuple(r["count"] for r in adm["spec"].get("refused", ()))
        for adm in creates.admissions
        if adm["metadata"]["name"] == "tfjob-a"
    ]
    assert (3,) in refusals, refusals  # refused three times in a row while b ran


def test_with_watch_all_pods_the_pool_sees_the_other_pod_and_nothing_is_refused() -> None:
    """The real fix where nodes are shared: the pool counts the other tenant's pod, places
    the job on cpu-2 at once, and records no refusal."""
    pool = {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "TrainingPool",
        "metadata": {"name": "default"},
        "spec": {"policy": "dragonet-las", "watchAllPods": True},
    }
    base = scenario(nodes("16", "16"), [job("a")])
    sim = Simulation(
        Scenario(base.name, base.nodes, base.jobs, (pool,)),
        SimConfig(delete_finished_after_s=None, max_time_s=3600.0),
    )
    creates = Creates(sim)
    sim.schedule(0.0, lambda: sim.api.create(foreign("cpu-1", "15")))
    result = sim.run()
    assert result.summary["jobs_finished"] == 1, result.summary
    ours = {k: n for k, n in creates.counts().items() if k.startswith("default/a-")}
    assert ours == {"default/a-ps-0": 1, "default/a-worker-0": 1, "default/a-worker-1": 1}
    written = [adm["spec"] for adm in creates.admissions if adm["metadata"]["name"] == "tfjob-a"]
    assert written and not any(spec.get("refused") for spec in written)
    assert {p.get("node") for p in written[-1]["pods"]} == {"cpu-2"}
