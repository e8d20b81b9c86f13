"""Refusals (policy/pool/refusals.py, policy/model/refusal.py), worked by hand.

A pod pinned to a node the kube-scheduler left Unschedulable, on a node whose observed
room holds it and every other pod stuck there, is first *seen*; still stuck 15 s later, it
is *counted*: the node is avoided by the job's pods for 30 s, doubling with each refusal in
a row, at most 10 min. Then the cycle (policy/pool/cycle.py) places the slot elsewhere, and
the job's sync (policy/job/sync.py) keeps the stuck pod until its Admission does so."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pytest

from policy.job.sync import sync as job_sync
from policy.memo import Memo
from policy.model.admission import Admission, JobRef, Refusal
from policy.model.cluster import HOSTNAME, L_INDEX, L_JOB, L_OPERATOR, L_TYPE, OPERATOR_NAME, Pod
from policy.model.refusal import backoff, refused_note
from policy.model.resources import Resources
from policy.model.timeutil import format_time
from policy.pool.cycle import plan
from policy.pool.observe import observe
from policy.pool.policies import rules_for
from policy.pool.refusals import avoided, next_end, refusals, unexplained
from tests import metacontroller as mc
from tests.kube_schema import validate_custom, validate_job_status

T = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
CPU2 = Resources.parse({"cpu": "2"})


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return format_time(at(seconds))


def pod(
    name: str,
    node: str = "n1",
    *,
    stuck: bool = True,
    created: float = 0.0,
    terminating: bool = False,
    request: Resources = CPU2,
) -> Pod:
    index = name.rsplit("-", 1)[-1]
    labels = {L_OPERATOR: OPERATOR_NAME, L_JOB: "a", L_TYPE: "worker", L_INDEX: index}
    return Pod(
        namespace="default",
        name=name,
        labels=MappingProxyType(labels),
        node=node,
        phase="Pending" if stuck else "Running",
        terminating=terminating,
        request=request,
        exit_code=None,
        restarts=0,
        bound=not stuck,
        created=at(created),
        unschedulable=stuck,
    )


def admission(*refused: Refusal, phase: str = "Admitted") -> Admission:
    return Admission(
        pool="default",
        job=JobRef(kind="TFJob", name="a"),
        phase=phase,  # type: ignore[arg-type]
        namespace="default",
        refused=refused,
    )


def test_the_backoff_is_30_s_doubling_to_at_most_10_min() -> None:
    waits = [backoff(n).total_seconds() for n in (1, 2, 3, 4, 5, 6, 7, 50, 10**6)]
    assert waits == [30, 60, 120, 240, 480, 600, 600, 600, 600]


@pytest.mark.parametrize(
    ("name", "pods", "free", "nodes"),
    [
        ("one stuck pod on a node with room for it", [pod("a-worker-0")], 4, {"n1"}),
        ("two stuck pods that both fit", [pod("a-worker-0"), pod("a-worker-1")], 4, {"n1"}),
        (
            "more stuck pods than the room holds: plans on a stale view, the room decides",
            [pod("a-worker-0"), pod("a-worker-1"), pod("a-worker-2")],
            4,
            set(),
        ),
        ("a node full of pods the pool sees", [pod("a-worker-0")], 1, set()),
        ("a stuck pod on its way out", [pod("a-worker-0", terminating=True)], 4, set()),
        ("a bound pod", [pod("a-worker-0", stuck=False)], 4, set()),
        ("a node not in the pool", [pod("a-worker-0", node="gone")], 4, set()),
    ],
)
def test_a_refusal_is_unexplained_when_the_room_holds_every_pod_stuck_there(
    name: str, pods: list[Pod], free: int, nodes: set[str]
) -> None:
    room = {"n1": Resources.parse({"cpu": str(free)})}
    assert unexplained(pods, room) == nodes, name


@dataclass(frozen=True)
class Row:
    name: str
    had: tuple[Refusal, ...]
    pods: tuple[Pod, ...]
    now: float
    has: tuple[Refusal, ...]
    avoided: frozenset[str] = frozenset()
    wake: float | None = None
    unexplained: frozenset[str] = frozenset({"n1"})


COUNTED_1 = Refusal(node="n1", pod="a-worker-0", count=1, time=stamp(20), until=stamp(50))
ROWS = [
    Row(
        "a pod stuck with room is only seen at first: the node is not avoided yet",
        (),
        (pod("a-worker-0", created=0),),
        5,
        (Refusal(node="n1", seen=stamp(5), seen_pod="a-worker-0"),),
        wake=20,
    ),
    Row(
        "seen and still stuck 15 s later, it counts: the node is avoided for 30 s",
        (Refusal(node="n1", seen=stamp(5), seen_pod="a-worker-0"),),
        (pod("a-worker-0", created=0),),
        20,
        (COUNTED_1,),
        avoided=frozenset({"n1"}),
        wake=50,
    ),
    Row(
        "seen less than 15 s ago: it waits for the kube-scheduler to try again",
        (Refusal(node="n1", seen=stamp(5), seen_pod="a-worker-0"),),
        (pod("a-worker-0", created=0),),
        19,
        (Refusal(node="n1", seen=stamp(5), seen_pod="a-worker-0"),),
        wake=20,
    ),
    Row(
        "seen, then bound: room had freed a moment before, nothing is recorded",
        (Refusal(node="n1", seen=stamp(5), seen_pod="a-worker-0"),),
        (pod("a-worker-0", stuck=False),),
        12,
        (),
    ),
    Row(
        "seen, then the pool sees why (the node filled): the sighting is dropped",
        (Refusal(node="n1", seen=stamp(5), seen_pod="a-worker-0"),),
        (pod("a-worker-0", created=0),),
        30,
        (),
        unexplained=frozenset(),
    ),
    Row(
        "the pod counted already, seen again on a stale view: not counted twice",
        (COUNTED_1,),
        (pod("a-worker-0", created=0),),
        22,
        (COUNTED_1,),
        avoided=frozenset({"n1"}),
        wake=50,
    ),
    Row(
        "a pod placed there again after the backoff and refused: seen anew",
        (COUNTED_1,),
        (pod("a-worker-0", created=51),),
        53,
        (COUNTED_1.model_copy(update={"seen": at(53), "seen_pod": "a-worker-0"}),),
        wake=68,
    ),
    Row(
        "... and counted 15 s later: the second refusal in a row waits 60 s",
        (COUNTED_1.model_copy(update={"seen": at(53), "seen_pod": "a-worker-0"}),),
        (pod("a-worker-0", created=51),),
        68,
        (Refusal(node="n1", pod="a-worker-0", count=2, time=stamp(68), until=stamp(128)),),
        avoided=frozenset({"n1"}),
        wake=128,
    ),
    Row(
        "a node that took a pod of the job after its backoff ended is forgiven",
        (COUNTED_1,),
        (pod("a-worker-0", stuck=False, created=60),),
        70,
        (),
    ),
    Row(
        "a pod bound there before the refusal does not forgive it",
        (COUNTED_1,),
        (pod("a-ps-0", stuck=False, created=0),),
        70,
        (COUNTED_1,),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_refusals(row: Row) -> None:
    now = at(row.now)
    got = refusals(row.pods, admission(*row.had), row.unexplained, now)
    assert got == row.has
    assert avoided(got, now) == row.avoided
    assert next_end(got, now) == (at(row.wake) if row.wake is not None else None)
    # Written into an Admission, each record is what the CRD allows.
    validate_custom(admission(*got).to_object())


def test_a_queued_job_keeps_its_refusals_as_they_are() -> None:
    had = (COUNTED_1,)
    queued = admission(*had, phase="Queued")
    assert refusals((pod("a-worker-0"),), queued, frozenset({"n1"}), at(100)) == had


def test_the_note_names_the_node_the_pod_the_backoff_and_watch_all_pods() -> None:
    seen = Refusal(node="n2", seen=stamp(5), seen_pod="a-worker-1")
    note = refused_note((COUNTED_1, seen))
    assert note == (
        "the kube-scheduler refused a-worker-0 on n1 at 2026-11-21T10:00:20Z (1st time in a "
        "row) though the pool saw room there: pods the pool does not see fill it, such as "
        "other tenants' (watchAllPods: true in the TrainingPool lets the pool see them); "
        "the job's pods avoid n1 until 2026-11-21T10:00:50Z"
    )


# --- through the cycle and the job's sync -----------------------------------------------


def _job() -> dict[str, Any]:
    worker = {
        "replicas": 2,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "tensorflow",
                        "image": "tf",
                        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                    }
                ]
            }
        },
    }
    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "a"},
        "spec": {"tfReplicaSpecs": {"Worker": worker}},
    }
    return mc.tfjob(manifest, created="2026-11-21T09:59:00Z")


def _stuck(job: dict[str, Any], index: int, node: str, created: str) -> dict[str, Any]:
    """The job's worker pinned to ``node``, left Pending and Unschedulable there."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    limits = {"cpu": "2", "memory": "1Gi"}
    container = {"name": "tensorflow", "image": "tf", "resources": {"limits": limits}}
    message = (  # the kube-scheduler's FailedScheduling message
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector."
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"a-worker-{index}",
            "namespace": "default",
            "uid": f"uid-a-{index}",
            "creationTimestamp": created,
            "labels": {
                L_OPERATOR: OPERATOR_NAME,
                L_JOB: "a",
                L_TYPE: "worker",
                L_INDEX: str(index),
                "controller-uid": job["metadata"]["uid"],
            },
        },
        "spec": {"containers": [container], "affinity": affinity},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ],
        },
    }


def _admission(job: dict[str, Any], node: str, refused: list[dict[str, Any]]) -> dict[str, Any]:
    obj = mc.admission(job, [("Worker", 0, node), ("Worker", 1, node)], 2)
    obj["spec"]["admittedTime"] = "2026-11-21T09:59:01Z"
    if refused:
        obj["spec"]["refused"] = refused
    return obj


def _plan(refused: list[dict[str, Any]], now: datetime):
    """Job a's two workers pinned to n1 and stuck there (n1 is full of pods the pool does
    not see); n2 is empty."""
    job = _job()
    pods = [_stuck(job, i, "n1", "2026-11-21T09:59:02Z") for i in (0, 1)]
    w = mc.world(job, [mc.node("n1", cpu="8"), mc.node("n2", cpu="8")], pods=pods)
    request = mc.pool_request(w, [_admission(job, "n1", refused)], parent=mc.pool(policy="dragon"))
    snap = observe(request["parent"], request["children"], request["related"], Memo(limit=0))
    result = plan(snap, now, rules_for(snap.spec))
    return result.jobs["default/a"]


def test_the_cycle_first_keeps_a_stuck_pod_where_it_is_and_notes_it_was_seen() -> None:
    now = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
    jp = _plan([], now)
    assert {s: p.node for s, p in jp.placements.items()} == {
        ("Worker", 0): "n1",
        ("Worker", 1): "n1",
    }
    assert [r.to_json() for r in jp.refused] == [
        {"node": "n1", "count": 0, "seen": "2026-11-21T10:00:00Z", "seenPod": "a-worker-0"}
    ]
    assert jp.wake_at == now + timedelta(seconds=15)


def test_the_cycle_places_a_refused_job_on_another_node_and_wakes_when_the_backoff_ends() -> None:
    now = datetime(2026, 11, 21, 10, 0, 15, tzinfo=UTC)
    seen = [{"node": "n1", "count": 0, "seen": "2026-11-21T10:00:00Z", "seenPod": "a-worker-0"}]
    jp = _plan(seen, now)
    assert {s: p.node for s, p in jp.placements.items()} == {
        ("Worker", 0): "n2",
        ("Worker", 1): "n2",
    }
    assert [r.to_json() for r in jp.refused] == [
        {
            "node": "n1",
            "pod": "a-worker-0",
            "count": 1,
            "time": "2026-11-21T10:00:15Z",
            "until": "2026-11-21T10:00:45Z",
        }
    ]
    assert jp.wake_at == now + timedelta(seconds=30)


def test_the_jobs_sync_keeps_a_stuck_pod_until_its_admission_places_it_elsewhere() -> None:
    """Deleted while the pool has not seen the refusal, the pod would take it along; once
    the Admission places the slot on n2, it goes (and is created there next)."""
    job = _job()
    now = datetime(2026, 11, 21, 10, 0, 5, tzinfo=UTC)
    pods = [_stuck(job, i, "n1", "2026-11-21T09:59:02Z") for i in (0, 1)]
    w = mc.world(job, [mc.node("n1", cpu="8"), mc.node("n2", cpu="8")], pods=pods)

    def names(admission: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        request = mc.job_request(w, admission)
        decision = job_sync(request["parent"], request["children"], request["related"], now)
        kept = sorted(c["metadata"]["name"] for c in decision.children if c["kind"] == "Pod")
        return kept, decision.status

    kept, _ = names(_admission(job, "n1", []))
    assert kept == ["a-worker-0", "a-worker-1"]
    counted = {
        "node": "n1",
        "pod": "a-worker-0",
        "count": 1,
        "time": "2026-11-21T10:00:15Z",
        "until": "2026-11-21T10:00:45Z",
    }
    kept, status = names(_admission(job, "n2", [counted]))
    assert kept == []
    assert status["scheduling"]["refused"] == [counted]
    assert "a-worker-0 on n1" in status["scheduling"]["message"]
    assert "watchAllPods: true" in status["scheduling"]["message"]
    validate_job_status("TFJob", status)
