"""The plan's guarantees on random clusters and queues (hypothesis).

What users would notice if these broke: pods stuck Pending on an overcommitted node, a job
running with part of its gang, or a job skipped while younger ones take its room.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.job.sync import sync as job_sync
from policy.memo import Memo
from policy.model.admission import ADMITTED, QUEUED
from policy.model.resources import Resources
from policy.pool.cycle import plan
from policy.pool.observe import observe
from policy.pool.policies import rules_for
from policy.pool.sync import sync as pool_sync
from tests import metacontroller as mc
from tests.conftest import NOW


def _job(i: int, ps: int, workers: int, low: int, high: int, cpu: int, mem: int) -> dict:
    def replica(n: int) -> dict[str, Any]:
        limits = {"cpu": str(cpu), "memory": f"{mem}Gi"}
        container = {"name": "tensorflow", "image": "tf", "resources": {"limits": limits}}
        return {"replicas": n, "template": {"spec": {"containers": [container]}}}

    spec: dict[str, Any] = {"tfReplicaSpecs": {"Worker": replica(workers)}}
    if ps:
        spec["tfReplicaSpecs"]["PS"] = replica(ps)
    spec["min-instances"], spec["max-instances"] = low, high
    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": f"j{i}"},
        "spec": spec,
    }
    return mc.tfjob(manifest, created=f"2026-11-21T09:{i // 60:02d}:{i % 60:02d}Z")


@st.composite
def clusters(draw) -> tuple[list[dict], list[dict]]:
    nodes = [
        mc.node(f"n{i}", cpu=str(draw(st.integers(1, 16))), memory=f"{draw(st.integers(1, 64))}Gi")
        for i in range(draw(st.integers(1, 6)))
    ]
    jobs = []
    for i in range(draw(st.integers(1, 8))):
        workers = draw(st.integers(1, 5))
        low = draw(st.integers(1, workers))
        high = draw(st.integers(workers, 6))
        jobs.append(
            _job(
                i,
                draw(st.integers(0, 2)),
                workers,
                low,
                high,
                draw(st.integers(1, 6)),
                draw(st.integers(1, 16)),
            )
        )
    return nodes, jobs


def _plan(nodes: list[dict], jobs: list[dict]):
    request = mc.pool_request(mc.world(jobs[0], nodes, jobs=jobs))
    snap = observe(request["parent"], request["children"], request["related"], Memo(limit=0))
    rules = rules_for(snap.spec)
    return snap, plan(snap, NOW, rules)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_new_pods_never_exceed_what_is_free_on_a_node(world) -> None:
    nodes, jobs = world
    snap, result = _plan(nodes, jobs)
    placed: dict[str, list[Resources]] = {}
    for jp in result.jobs.values():
        for (rtype, _), new in jp.create.items():
            placed.setdefault(new.node, []).append(jp.job.replicas[rtype].request)
    for node, requests in placed.items():
        assert Resources.total(requests).fits_in(snap.cluster.free[node]), node


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_every_admission_is_a_whole_gang(world) -> None:
    nodes, jobs = world
    _, result = _plan(nodes, jobs)
    for jp in result.jobs.values():
        job = jp.job
        types = [t for t, _ in jp.create]
        if jp.phase == QUEUED:
            assert not jp.create
            continue
        assert jp.phase == ADMITTED
        for r in job.required():
            assert types.count(r.type) == r.replicas
        workers = sorted(i for t, i in jp.create if t == "Worker")
        assert workers == list(range(len(workers)))  # contiguous indices from 0
        assert job.min_workers <= len(workers) <= job.worker.replicas
        assert jp.workers_target == len(workers)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_a_waiting_job_would_not_fit_even_without_the_younger_ones(world) -> None:
    """Younger jobs never take an older job's room: a job waits only because it does not fit
    in what older jobs left, so removing every younger job would not let it in either."""
    nodes, jobs = world
    _, result = _plan(nodes, jobs)
    for i, job in enumerate(jobs):
        key = f"default/{job['metadata']['name']}"
        if result.jobs[key].phase == QUEUED:
            _, alone = _plan(nodes, jobs[: i + 1])
            assert alone.jobs[key].phase == QUEUED, key


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_every_job_renders_exactly_what_its_admission_places(world) -> None:
    nodes, jobs = world
    request = mc.pool_request(mc.world(jobs[0], nodes, jobs=jobs))
    pool = pool_sync(request["parent"], request["children"], request["related"], NOW)
    admissions = {c["spec"]["job"]["name"]: c for c in pool.children}
    assert sorted(admissions) == sorted(j["metadata"]["name"] for j in jobs)
    for job in jobs:
        child = admissions[job["metadata"]["name"]]
        stored = mc.stored_admission(request["parent"], child, None)
        job_request = mc.job_request(mc.world(job, nodes), stored)
        decision = job_sync(job_request["parent"], {}, job_request["related"], NOW)
        pods = {c["metadata"]["name"] for c in decision.children if c["kind"] == "Pod"}
        placed = {
            f"{job['metadata']['name']}-{p['type'].lower()}-{p['index']}"
            for p in child["spec"]["pods"]
        }
        assert pods == placed
        assert decision.status["scheduling"]["phase"] == child["spec"]["phase"]
        assert decision.status["scheduling"]["message"] == child["spec"]["message"]
        if child["spec"]["phase"] == QUEUED:
            assert child["spec"]["message"].startswith("waiting: ")
