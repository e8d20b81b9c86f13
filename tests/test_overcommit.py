"""Taking back an admission whose gang over-commits the nodes with another's (issue 25), at
the phase level: the pool's plan for the observed pods, with no webhook and no simulator.

Two gangs admitted on a stale view, whose pods the kube-scheduler placed in part (the rest
Pending and Unschedulable) or the kubelet refused (``binding: nodeName``), each hold room
the other lacks. One admission is taken back so that the other gang completes; a gang that
only waits behind a job that trains is left alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.memo import Memo
from policy.model.admission import ADMITTED, PREEMPTED, QUEUED
from policy.model.cluster import L_INDEX, L_JOB, L_OPERATOR, L_TYPE, OPERATOR_NAME
from policy.pool.cycle import Plan, plan
from policy.pool.observe import observe
from policy.pool.policies import rules_for
from tests import metacontroller as mc
from tests.conftest import NOW

HOSTNAME = "kubernetes.io/hostname"


def _job(name: str, workers: int, priority_class: str | None) -> dict[str, Any]:
    container = {
        "name": "tensorflow",
        "image": "tf",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    worker = {
        "replicas": workers,
        "restartPolicy": "OnFailure",
        "template": {"spec": {"containers": [container]}},
    }
    spec: dict[str, Any] = {"tfReplicaSpecs": {"Worker": worker}}
    if priority_class:
        spec["runPolicy"] = {"schedulingPolicy": {"priorityClass": priority_class}}
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name}}
    return mc.tfjob({**manifest, "spec": spec}, created="2026-11-21T09:00:00Z")


def _pod(job: str, index: int, node: str, state: str) -> dict[str, Any]:
    """A worker pod pinned to ``node``: ``bound`` (running there), ``stuck`` (the
    kube-scheduler found no room: Pending, Unschedulable) or ``refused`` (bound by
    nodeName, the kubelet refused it: Failed, OutOfnvidia.com/gpu)."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    spec: dict[str, Any] = {
        "containers": [
            {"name": "tensorflow", "image": "tf", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        ],
        "affinity": affinity,
    }
    if state == "stuck":
        status: dict[str, Any] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    elif state == "refused":
        spec = {**spec, "nodeName": node}
        status = {"phase": "Failed", "reason": "OutOfnvidia.com/gpu"}
    else:
        spec = {**spec, "nodeName": node}
        status = {"phase": "Running"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-{index}",
            "namespace": "default",
            "uid": f"uid-{job}-{index}",
            "labels": {
                L_OPERATOR: OPERATOR_NAME,
                L_JOB: job,
                L_TYPE: "worker",
                L_INDEX: str(index),
            },
        },
        "spec": spec,
        "status": status,
    }


def _admission(job: dict[str, Any], placed: list[tuple[str, str]], at: str) -> dict[str, Any]:
    """Admitted at ``at`` with its workers where they are; with none, taken back by x."""
    if not placed:
        obj = mc.admission(job, phase="Queued")
        obj["spec"]["service"] = {
            "gpuSeconds": 0,
            "preemptions": 1,
            "lastPreemption": {"time": at, "by": "default/x", "reason": "taken back"},
        }
        return obj
    obj = mc.admission(job, [("Worker", i, n) for i, (n, _) in enumerate(placed)], len(placed))
    obj["spec"]["admittedTime"] = at
    return obj


def _plan(
    policy: str, pods: dict[str, list[tuple[str, str]]], first: str, high: str | None
) -> Plan:
    """Jobs x and y (4 workers each) admitted, ``first`` of them earlier, ``high`` (if any)
    of priority class ``high``; ``pods``: each job's workers as (node, state)."""
    jobs = {n: _job(n, 4, "high" if n == high else None) for n in ("x", "y")}
    at = {n: "2026-11-21T09:00:01Z" if n == first else "2026-11-21T09:00:02Z" for n in jobs}
    nodes = sorted({node for placed in pods.values() for node, _ in placed} | {"n0"})
    admissions = [_admission(jobs[n], pods[n], at[n]) for n in jobs]
    observed = [_pod(n, i, node, state) for n in jobs for i, (node, state) in enumerate(pods[n])]
    w = mc.world(
        jobs["x"],
        [mc.node(n, gpu=4) for n in nodes],
        jobs=list(jobs.values()),
        pods=observed,
        priority_classes=[mc.priority_class("high", 1000)],
    )
    request = mc.pool_request(w, admissions, parent=mc.pool(policy=policy))
    snap = observe(request["parent"], request["children"], request["related"], Memo(limit=0))
    rules = rules_for(snap.spec)
    return plan(snap, NOW, rules)


HALF = [("n0", "bound")] * 2 + [("n0", "stuck")] * 2
HALF_REFUSED = [("n0", "bound")] * 2 + [("n0", "refused")] * 2
ALL = [("n0", "bound")] * 4
NONE_PLACED = [("n0", "stuck")] * 4


@pytest.mark.parametrize(
    ("case", "policy", "x", "y", "first", "high", "taken_back"),
    [
        # Each holds half its gang: the later admission goes, whatever its priority, under
        # a policy that never preempts for priority...
        ("interleaved", "dragon", HALF, HALF, "x", "y", "y"),
        ("interleaved", "gang-fifo", HALF, HALF, "x", "y", "y"),
        ("interleaved, y first", "dragon", HALF, HALF, "y", None, "x"),
        # ... and the lower priority under one that does (it would preempt it anyway).
        ("interleaved", "dragonet", HALF, HALF, "x", "y", "x"),
        ("interleaved", "tiresias", HALF, HALF, "x", "y", "x"),
        ("interleaved", "dragonet-las", HALF, HALF, "x", "y", "x"),
        ("interleaved, equal priority", "dragonet", HALF, HALF, "x", None, "y"),
        # y (lower priority, admitted later) repairs first and takes the last free GPU:
        # that room too is x's once y is taken back.
        (
            "y repaired part first",
            "dragon",
            HALF,
            [("n0", "bound")] + [("n0", "stuck")] * 3,
            "x",
            "x",
            "y",
        ),
        # binding: nodeName: the kubelet refused the pods that did not fit.
        ("kubelet refused", "dragon", HALF_REFUSED, HALF_REFUSED, "x", "y", "y"),
        # y holds nothing: it waits for x, which trains.
        ("y holds nothing", "dragon", ALL, NONE_PLACED, "x", None, None),
        ("y holds nothing", "dragonet", ALL, NONE_PLACED, "x", "y", None),
        # Room elsewhere: both gangs' missing pods are placed again, nothing is taken back.
        (
            "room on another node",
            "dragon",
            [("n0", "bound")] * 2 + [("n0", "stuck"), ("n1", "stuck")],
            HALF,
            "x",
            None,
            None,
        ),
    ],
)
def test_of_two_gangs_that_over_commit_a_node_one_is_taken_back(
    case: str,
    policy: str,
    x: list[tuple[str, str]],
    y: list[tuple[str, str]],
    first: str,
    high: str | None,
    taken_back: str | None,
) -> None:
    result = _plan(policy, {"x": x, "y": y}, first, high)
    for name in ("x", "y"):
        jp = result.jobs[f"default/{name}"]
        if name == taken_back:
            kept = "y" if name == "x" else "x"
            assert jp.phase == QUEUED and jp.reason == PREEMPTED, case
            assert jp.service is not None and jp.service.last is not None
            assert jp.service.last.by == f"default/{kept}"
            assert "could place only part of each" in jp.message
        else:
            assert jp.phase == ADMITTED, case
            assert jp.service is None


def test_the_kept_gang_places_its_missing_pods_once_the_other_gangs_pods_are_gone() -> None:
    """After the take-back, y's pods are gone: x's stuck pods are placed again on the node
    (deleted and created anew), and y waits in the queue, not admitted into x's room."""
    result = _plan("dragon", {"x": HALF, "y": []}, "x", "y")
    x, y = result.jobs["default/x"], result.jobs["default/y"]
    assert x.phase == ADMITTED
    assert sorted(p.node for p in x.placements.values()) == ["n0"] * 4
    assert y.phase == QUEUED and y.reason != PREEMPTED
