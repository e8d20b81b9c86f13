"""The plan's guarantees on random clusters and queues (hypothesis).

What users would notice if these broke: pods stuck Pending on an overcommitted node, a job
running with part of its gang, or a job skipped while younger ones take its room.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.config import PolicyConfig
from policy.model.resources import Resources
from policy.plan import ADMITTED, QUEUED, plan
from policy.reconcile import reconcile
from policy.snapshot import observe
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
    related = {
        "Node.v1": {n["metadata"]["name"]: n for n in nodes},
        "TFJob.kubeflow.org/v1": {j["metadata"]["name"]: j for j in jobs},
    }
    snap = observe(None, {}, related)
    return snap, plan(snap.jobs, snap.cluster, NOW)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_new_pods_never_exceed_what_is_free_on_a_node(world) -> None:
    nodes, jobs = world
    snap, result = _plan(nodes, jobs)
    placed: dict[str, list[Resources]] = {}
    for jp in result.jobs.values():
        for (rtype, _), node in jp.create.items():
            placed.setdefault(node, []).append(jp.job.replicas[rtype].request)
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
def test_every_job_renders_what_its_slice_of_the_plan_says(world) -> None:
    nodes, jobs = world
    snap, result = _plan(nodes, jobs)
    for jp in result.jobs.values():
        decision = reconcile(jp, snap.cluster, NOW, PolicyConfig())
        pods = [c for c in decision.children if c["kind"] == "Pod"]
        assert len(pods) == len(jp.create)
        assert decision.status["scheduling"]["phase"] == jp.phase
        if jp.phase == QUEUED:
            assert decision.status["scheduling"]["message"].startswith("waiting: ")
