"""The monitor's decision and its requests (monitor/service.py, decide.py, kube.py): DRAGON's
rule (converged, or this node overloaded: then the heaviest worker here), throttled per pod,
written as the Migration contract fixes it, idempotent, retried after a refusal; bounded
memory; the pool's loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from monitor.kube import PodInfo, migration
from monitor.service import ReportError
from tests.kube_schema import ROOT
from tests.monitorkit import FakeCluster, allocation, make_monitor, pod

CONTRACT = yaml.safe_load(
    (Path(__file__).parent / "schemas" / "migration-contract.yaml").read_text()
)
MIGRATION_CRD = ROOT / "crd" / "migrations.dragonet.io.yaml"


def validate_migration(obj: dict[str, Any]) -> None:
    """Against the contract; and against the CRD once the `migrate` branch has put it in crd/."""
    jsonschema.Draft7Validator(CONTRACT).validate(obj)
    if MIGRATION_CRD.exists():
        crd = yaml.safe_load(MIGRATION_CRD.read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
        schema = version["schema"]["openAPIV3Schema"]
        jsonschema.Draft4Validator(schema["properties"]["spec"]).validate(obj["spec"])


def imbalanced_pool() -> dict[str, Any]:
    """node-1 carries everything (DRAGON's scenario a: every job on NODE_1)."""
    return {
        "default": {
            "nodeAllocation": [
                allocation("node-1", cpu="3", memory="12Gi"),
                allocation("node-2", cpu="0", memory="0"),
                allocation("node-3", cpu="0", memory="0"),
            ]
        }
    }


def balanced_pool() -> dict[str, Any]:
    return {"default": {"nodeAllocation": [allocation(f"node-{i}", "1", "4Gi") for i in (1, 2, 3)]}}


def converge(monitor, ticks, name: str, reports: int = 7, namespace: str | None = None):
    """Report a flat metric until the pod is Converged (the 7th report asks for a move)."""
    outcome = None
    for _ in range(reports):
        outcome = monitor.report(name, namespace, 0.9)
        ticks.advance(10)
    return outcome


def test_a_converged_worker_is_asked_to_move_once_as_the_contract_says() -> None:
    cluster = FakeCluster(pods=[pod("job1-worker-1")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    monitor.refresh()
    outcomes = [monitor.report("job1-worker-1", None, 0.9) for _ in range(1)]
    ticks.advance(10)
    for _ in range(6):
        outcomes.append(monitor.report("job1-worker-1", None, 0.9))
        ticks.advance(10)
    assert [o.category for o in outcomes][-2:] == ["Watching", "Converged"]
    assert outcomes[-1].requested == "job1-worker-1"
    assert (outcomes[-1].reason, outcomes[-1].result) == ("Converged", "created")
    assert outcomes[-1].overloaded is False
    (made,) = cluster.migrations.values()
    made = {k: v for k, v in made.items()}
    made["metadata"] = {
        k: v for k, v in made["metadata"].items() if k not in ("uid", "creationTimestamp")
    }
    assert made == {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "Migration",
        "metadata": {
            "name": "job1-worker-1",
            "namespace": "team-a",
            "labels": {
                "training.kubeflow.org/job-name": "job1",
                "training.kubeflow.org/operator-name": "dragonet",
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "job1-worker-1",
                    "uid": "uid-team-a-job1-worker-1",
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "pod": "job1-worker-1",
            "node": "node-1",
            "reason": "Converged",
            "requestedBy": "monitor/node-1",
        },
    }
    validate_migration(made)


def test_a_second_request_for_the_same_pod_is_idempotent() -> None:
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    converge(monitor, ticks, "w")
    results = []
    for _ in range(3):
        results.append(monitor.report("w", None, 0.9).result)
        ticks.advance(10)
    assert results == ["exists"] * 3
    assert len(cluster.migrations) == 1
    assert cluster.calls.count("create_migration") == 4  # one created, three 409s


def test_requests_for_one_pod_are_throttled_to_one_per_three_seconds() -> None:
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    converge(monitor, ticks, "w")
    assert monitor.report("w", None, 0.9).result == "exists"
    creates = cluster.calls.count("create_migration")
    results = []
    for _ in range(5):
        ticks.advance(0.5)
        results.append(monitor.report("w", None, 0.9).result)
    assert results == ["throttled"] * 5
    assert cluster.calls.count("create_migration") == creates
    ticks.advance(1)  # 3.5 s since the last request
    assert monitor.report("w", None, 0.9).result == "exists"
    assert cluster.calls.count("create_migration") == creates + 1


def test_a_refused_request_is_replaced_once_it_is_older_than_the_retry_period() -> None:
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster, retry_seconds=60)
    converge(monitor, ticks, "w")
    first = cluster.migrations[("team-a", "w")]
    first["status"] = {"phase": "Refused", "reason": "NoRoom", "message": "no node has room"}
    ticks.advance(30)
    assert monitor.report("w", None, 0.9).result == "exists"  # refused 30 s ago: wait
    ticks.advance(31)
    assert monitor.report("w", None, 0.9).result == "retried"
    second = cluster.migrations[("team-a", "w")]
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert "status" not in second


def test_each_refusal_of_the_same_pod_doubles_the_wait_before_asking_again() -> None:
    """A worker no node takes (converged, no better node) is not asked for every minute:
    60 s after the first refusal, 120 s after the second, up to max_retry_seconds."""
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster, retry_seconds=60, max_retry_seconds=100)
    converge(monitor, ticks, "w")

    def refuse() -> None:
        cluster.migrations[("team-a", "w")]["status"] = {"phase": "Refused", "reason": "SameNode"}

    refuse()
    ticks.advance(61)
    assert monitor.report("w", None, 0.9).result == "retried"
    refuse()
    ticks.advance(61)
    assert monitor.report("w", None, 0.9).result == "exists"  # the second refusal: 120 s ...
    ticks.advance(40)
    assert monitor.report("w", None, 0.9).result == "retried"  # ... capped at 100 s
    refuse()
    ticks.advance(95)
    assert monitor.report("w", None, 0.9).result == "exists"
    ticks.advance(10)
    assert monitor.report("w", None, 0.9).result == "retried"


def test_a_pending_request_is_never_replaced() -> None:
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster, retry_seconds=0)
    converge(monitor, ticks, "w")
    cluster.migrations[("team-a", "w")]["status"] = {"phase": "Pending"}
    ticks.advance(100)
    assert monitor.report("w", None, 0.9).result == "exists"
    assert "delete_migration" not in cluster.calls


def test_on_an_overloaded_node_the_heaviest_reporting_worker_is_asked_to_move() -> None:
    """Not whichever pod reported (the reference's choice): the light worker's reports
    ask for the heavy one."""
    pods = [
        pod("light-worker-0", job="light", cpu="250m", memory="500Mi"),
        pod("heavy-worker-0", job="heavy", cpu="2", memory="4Gi"),
        pod("other-worker-0", node="node-2"),
    ]
    cluster = FakeCluster(pods=pods, pool=imbalanced_pool())
    monitor, ticks = make_monitor(cluster)
    monitor.refresh()
    first = monitor.report("heavy-worker-0", None, 0.1)
    assert (first.requested, first.result) == ("heavy-worker-0", "created")
    ticks.advance(5)
    outcome = monitor.report("light-worker-0", None, 0.1)
    assert outcome.overloaded is True and outcome.category == "Progressing"
    assert (outcome.requested, outcome.reason) == ("heavy-worker-0", "Overloaded")
    assert outcome.result == "exists"
    assert list(cluster.migrations) == [("team-a", "heavy-worker-0")]
    made = cluster.created[0]
    assert made["spec"]["reason"] == "Overloaded" and made["spec"]["pod"] == "heavy-worker-0"
    validate_migration(made)


def test_limits_only_pods_weigh_their_limits() -> None:
    heavy = PodInfo.from_pod(pod("a", cpu="4", memory="8Gi", limits_only=True))
    assert heavy.requests == {"cpu": 4.0, "memory": 8 * 2**30}


def test_parameter_servers_are_never_asked_to_move() -> None:
    pods = [pod("job1-ps-0", rtype="ps", cpu="3", memory="8Gi")]
    cluster = FakeCluster(pods=pods, pool=imbalanced_pool())
    monitor, ticks = make_monitor(cluster)
    monitor.refresh()
    outcome = converge(monitor, ticks, "job1-ps-0")
    assert outcome.category == "Converged" and outcome.overloaded is True
    assert outcome.requested is None and "not a worker" in outcome.note
    assert cluster.migrations == {}


def test_a_balanced_pool_asks_nothing_of_a_progressing_worker() -> None:
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    monitor.refresh()
    for i in range(10):
        outcome = monitor.report("w", None, i / 10)
        ticks.advance(10)
    assert outcome.category == "Progressing" and outcome.requested is None
    assert "create_migration" not in cluster.calls


def test_a_pod_not_on_this_node_is_a_404_and_is_not_tracked() -> None:
    cluster = FakeCluster(pods=[pod("w", node="node-2")])
    monitor, _ = make_monitor(cluster)
    with pytest.raises(ReportError) as err:
        monitor.report("w", None, 0.5)
    assert err.value.status == 404 and "node 'node-1'" in str(err.value)
    assert monitor.tracked() == 0


def test_a_pod_dragonet_did_not_make_is_refused_and_never_moved() -> None:
    """Beside Kubeflow (docs/kubeflow.md) a Kubeflow job's worker on this node may run the
    same reporting code: its pods are not Dragonet's to move, whatever it reports."""
    kubeflows = pod("kf-worker-0", job="kf")
    kubeflows["metadata"]["labels"]["training.kubeflow.org/operator-name"] = "tfjob-controller"
    unlabelled = pod("plain")
    del unlabelled["metadata"]["labels"]["training.kubeflow.org/operator-name"]
    cluster = FakeCluster(pods=[kubeflows, unlabelled], pool=imbalanced_pool())
    monitor, ticks = make_monitor(cluster)
    monitor.refresh()
    for _ in range(8):  # more than it takes a Dragonet worker to converge
        with pytest.raises(ReportError) as err:
            monitor.report("kf-worker-0", None, 0.9)
        ticks.advance(10)
    assert err.value.status == 403
    assert str(err.value) == (
        "pod team-a/kf-worker-0 is not Dragonet's (training.kubeflow.org/operator-name: "
        "tfjob-controller): the monitor takes reports only about the pods of Dragonet's jobs "
        "(docs/kubeflow.md)"
    )
    with pytest.raises(ReportError, match=r"no label training\.kubeflow\.org/operator-name"):
        monitor.report("plain", None, 0.9)
    assert monitor.tracked() == 0 and cluster.migrations == {}


def test_a_name_in_two_namespaces_needs_the_namespace() -> None:
    cluster = FakeCluster(pods=[pod("w", namespace="a"), pod("w", namespace="b")])
    monitor, _ = make_monitor(cluster)
    with pytest.raises(ReportError) as err:
        monitor.report("w", None, 0.5)
    assert err.value.status == 400 and "namespaces a, b" in str(err.value)
    assert monitor.report("w", "b", 0.5).namespace == "b"
    assert monitor.report("w", "a", 0.5).namespace == "a"
    assert monitor.tracked() == 2


def test_an_unreachable_api_is_a_503_for_new_pods_and_known_ones_keep_reporting() -> None:
    cluster = FakeCluster(pods=[pod("w"), pod("new")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    monitor.report("w", None, 0.5)
    cluster.down = True
    with pytest.raises(ReportError) as err:
        monitor.report("new", None, 0.5)
    assert err.value.status == 503 and err.value.retry_after
    ticks.advance(10)
    assert monitor.report("w", None, 0.6).category == "Progressing"


def test_a_failed_create_is_counted_and_the_report_still_answered() -> None:
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    for _ in range(6):
        monitor.report("w", None, 0.9)
        ticks.advance(10)
    cluster.down = True
    outcome = monitor.report("w", None, 0.9)
    assert (outcome.category, outcome.result) == ("Converged", "error")
    assert b'dragonet_monitor_migration_requests_total{reason="Converged",result="error"} 1.0' in (
        monitor.metrics.expose()
    )


def test_silent_pods_are_forgotten_and_a_moved_pod_starts_afresh() -> None:
    cluster = FakeCluster(pods=[pod("a"), pod("b")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster, forget_seconds=120)
    converge(monitor, ticks, "a")
    monitor.report("b", None, 0.1)
    assert monitor.tracked() == 2
    ticks.advance(100)
    monitor.report("b", None, 0.2)
    ticks.advance(30)  # a silent 130 s + , b 30 s
    assert monitor.forget(ticks.t) == 1
    assert monitor.tracked() == 1
    # a reports again (a new pod of that name): a fresh record, Progressing.
    assert monitor.report("a", None, 0.9).category == "Progressing"


def test_at_most_max_pods_are_tracked() -> None:
    cluster = FakeCluster(pods=[pod(f"w-{i}") for i in range(4)])
    monitor, ticks = make_monitor(cluster, max_pods=3, forget_seconds=60)
    for i in range(3):
        monitor.report(f"w-{i}", None, 0.1)
    with pytest.raises(ReportError) as err:
        monitor.report("w-3", None, 0.1)
    assert err.value.status == 429 and "DRAGONET_MONITOR_MAX_PODS" in str(err.value)
    ticks.advance(61)
    assert monitor.report("w-3", None, 0.1).pod == "w-3"  # the others were forgotten
    assert monitor.tracked() == 1


def test_readiness_follows_the_pools_loads() -> None:
    cluster = FakeCluster(pool=balanced_pool())
    monitor, ticks = make_monitor(cluster, refresh_seconds=30)
    assert "not been read" in monitor.readiness()
    monitor.refresh()
    assert monitor.readiness() is None
    ticks.advance(91)
    assert "three refresh periods" in monitor.readiness()
    assert monitor.verdict() is None  # stale loads judge nothing
    cluster.down = True
    monitor.refresh()
    assert "cannot read TrainingPool 'default'" in monitor.readiness()


def test_a_node_outside_the_pool_is_not_ready_and_never_overloaded() -> None:
    cluster = FakeCluster(pods=[pod("w", node="gpu-9")], pool=imbalanced_pool())
    monitor, _ = make_monitor(cluster, node="gpu-9")
    monitor.refresh()
    assert monitor.readiness() == "TrainingPool 'default' has no node 'gpu-9'"
    assert monitor.report("w", None, 0.5).overloaded is None


def test_node_metrics_count_where_served_and_their_absence_is_not_an_error() -> None:
    cluster = FakeCluster(pool=balanced_pool())
    monitor, _ = make_monitor(cluster)
    monitor.refresh()
    assert monitor.verdict().overloaded is False
    cluster.metrics = [
        {"metadata": {"name": "node-1"}, "usage": {"cpu": "4", "memory": "15Gi"}},
        {"metadata": {"name": "node-2"}, "usage": {"cpu": "0", "memory": "0"}},
    ]
    monitor.refresh()
    assert monitor.loads.metrics and monitor.verdict().overloaded is True
    assert b"dragonet_monitor_node_overloaded 1.0" in monitor.metrics.expose()


def test_the_request_body_is_built_from_the_pod() -> None:
    info = PodInfo.from_pod(pod("job1-worker-3", node="node-7"))
    body = migration(info, "Overloaded", "monitor/node-7")
    validate_migration(body)
    assert body["spec"]["node"] == "node-7"


def test_a_pod_re_created_under_its_name_is_asked_for_by_its_new_uid() -> None:
    """A restarted pod keeps its name but not its uid; a request owned by the old uid would
    be garbage-collected at once."""
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    for _ in range(6):
        monitor.report("w", None, 0.9)
        ticks.advance(10)
    cluster.pods[0]["metadata"]["uid"] = "uid-of-the-new-pod"
    assert monitor.report("w", None, 0.9).result == "created"
    (made,) = cluster.created
    assert made["metadata"]["ownerReferences"][0]["uid"] == "uid-of-the-new-pod"


def test_a_pod_gone_by_the_time_of_the_request_is_forgotten() -> None:
    cluster = FakeCluster(pods=[pod("w")], pool=balanced_pool())
    monitor, ticks = make_monitor(cluster)
    for _ in range(6):
        monitor.report("w", None, 0.9)
        ticks.advance(10)
    cluster.pods.clear()
    assert monitor.report("w", None, 0.9).result == "gone"
    assert monitor.tracked() == 0 and cluster.created == []
