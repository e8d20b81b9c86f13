"""Where DRAGON's job1 lands: one big node, spilled across nodes, or nowhere (with a reason)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from tests import metacontroller as mc
from tests.conftest import Hook, load_fixture, node_of, pods_of, services_of

JOB1_PODS = {"job1-ps-0", *(f"job1-worker-{i}" for i in range(4))}
JOB1 = "default/job1"
JOB = "dragon-job1-cpu.yaml"


def test_job1_fits_whole_on_the_one_node_that_holds_it(hook: Hook) -> None:
    body = hook.plan_then_render(load_fixture("pool-sync-job1-one-big-node.json"), JOB1)
    pods = pods_of(body)
    assert set(pods) == JOB1_PODS
    assert {node_of(p) for p in pods.values()} == {"big-1"}
    # One headless Service per pod, same name, so every TF_CONFIG address resolves.
    assert set(services_of(body)) == JOB1_PODS
    assert all(s["spec"]["clusterIP"] == "None" for s in services_of(body).values())
    sched = body["status"]["scheduling"]
    assert sched["phase"] == "Admitted"
    assert sched["workers"] == {"current": 0, "target": 4, "min": 1, "max": 4}
    assert sched["nodes"] == ["big-1"]


def test_job1_spills_from_the_node_holding_its_parameter_server(hook: Hook) -> None:
    body = hook.plan_then_render(load_fixture("pool-sync-job1-spill.json"), JOB1)
    placement = {name: node_of(p) for name, p in pods_of(body).items()}
    assert set(placement) == JOB1_PODS
    ps_node = placement["job1-ps-0"]
    per_node = Counter(placement.values())
    # 12-cpu nodes hold 3 pods of 4 cpu: the PS node is filled first, the rest spill over.
    assert per_node[ps_node] == 3
    assert sorted(per_node.values()) == [2, 3]
    assert placement["job1-worker-0"] == placement["job1-worker-1"] == ps_node


def test_job1_that_cannot_fit_gets_no_pods_and_a_reason(hook: Hook) -> None:
    body = hook.plan_then_render(load_fixture("pool-sync-job1-cannot-fit.json"), JOB1)
    assert body["children"] == []
    sched = body["status"]["scheduling"]
    assert sched["phase"] == "Queued"
    # The gang is the PS plus min-instances (1) workers: 8 cpu, 16Gi; a node has 2 cpu.
    assert sched["message"] == (
        "waiting: needs 8 cpu, 16Gi memory for its 1 parameter server plus 1 worker "
        "(min-instances) at once, more than the pool's nodes hold even when empty (the "
        "largest, tiny-1, has 2 cpu, 8Gi memory): it waits for larger or more nodes"
    )
    assert sched["workers"]["current"] == 0
    assert "startTime" not in body["status"]
    assert body["status"]["enqueueTime"] == mc.T0


def test_gang_is_admitted_with_fewer_workers_when_only_min_instances_fit(hook: Hook) -> None:
    # 12 cpu in all: the PS and two workers (min-instances is 1, replicas 4).
    nodes = [mc.node("n-1", cpu="8", memory="32Gi"), mc.node("n-2", cpu="4", memory="32Gi")]
    body = hook.sync(mc.world(mc.tfjob("dragon-job1-cpu.yaml"), nodes))
    assert set(pods_of(body)) == {"job1-ps-0", "job1-worker-0", "job1-worker-1"}
    assert body["status"]["scheduling"]["workers"]["target"] == 2


def test_a_gang_is_never_placed_partially(hook: Hook) -> None:
    # Without min-instances the whole gang (PS + 4 workers) is required; only 3 pods fit.
    job = mc.compat("dragon-job1-cpu.yaml")
    del job["spec"]["min-instances"], job["spec"]["max-instances"]
    nodes = [mc.node("n-1", cpu="12", memory="64Gi")]
    body = hook.sync(mc.world(mc.tfjob(job), nodes))
    assert body["children"] == []
    assert "1 parameter server plus 4 workers" in body["status"]["scheduling"]["message"]


def test_the_older_job_wins_the_node(hook: Hook) -> None:
    request = load_fixture("pool-sync-two-jobs.json")
    for_a = hook.plan_then_render(request, "default/job-a")
    for_b = hook.plan_then_render(request, "default/job-b")
    assert {node_of(p) for p in pods_of(for_a).values()} == {"only-1"}
    assert len(pods_of(for_a)) == 5
    assert for_b["children"] == []
    assert for_b["status"]["scheduling"]["message"] == (
        "waiting: jobs ahead in the queue (default/job-a) claim the free capacity it needs"
    )


def test_the_younger_job_never_takes_capacity_the_older_one_was_planned(hook: Hook) -> None:
    """Even when the pool plans again before the older job has created its pods: the
    Admission's pods hold their room. (At 09:00:10 job-b has not waited long enough to
    shrink job-a.)"""
    hook.clock.now = datetime(2026, 11, 21, 9, 0, 10, tzinfo=UTC)
    request = load_fixture("pool-sync-two-jobs.json")
    hook.pool_sync(request)
    again = mc.pool_request(mc.world(mc.tfjob(JOB), [], jobs=[]), hook.admissions.values())
    again["related"] = request["related"]
    hook.pool_sync(again)
    first = hook.render(request["related"]["TFJob.kubeflow.org/v1"]["default/job-b"])
    assert first["children"] == []
    assert (
        len(pods_of(hook.render(request["related"]["TFJob.kubeflow.org/v1"]["default/job-a"]))) == 5
    )


def test_a_job_that_does_not_fit_does_not_block_a_smaller_one_behind_it(hook: Hook) -> None:
    """Backfill: the head of the queue is skipped, not waited for, when it cannot fit."""
    big = mc.compat("dragon-job1-cpu.yaml")
    big["spec"]["min-instances"] = 4  # PS + 4 workers = 20 cpu: more than the node has
    head = mc.tfjob(big, name="head", created="2026-11-21T09:00:00Z")
    small = mc.tfjob("dragon-job1-cpu.yaml", name="small", created="2026-11-21T09:30:00Z")
    nodes = [mc.node("n-1", cpu="16", memory="64Gi")]
    for_small = hook.sync(mc.world(small, nodes, jobs=[head, small]))
    for_head = hook.sync(mc.world(head, nodes, jobs=[head, small]))
    assert len(pods_of(for_small)) == 4  # PS + 3 workers use the 16 cpu
    assert for_head["children"] == []
    assert "5 " not in for_head["status"]["scheduling"]["message"]
    assert "plus 4 workers" in for_head["status"]["scheduling"]["message"]


def test_admitted_pods_keep_their_node_and_new_pods_use_only_free_capacity(hook: Hook) -> None:
    """Facts beat plans: another job's running pods are never moved, only counted."""
    nodes = [mc.node("n-1", cpu="24", memory="64Gi"), mc.node("n-2", cpu="24", memory="64Gi")]
    first = mc.tfjob("dragon-job1-cpu.yaml", name="first", created="2026-11-21T09:00:00Z")
    second = mc.tfjob("dragon-job1-cpu.yaml", name="second", created="2026-11-21T09:10:00Z")
    body = hook.sync(mc.world(first, nodes, jobs=[first, second]))
    first_pods = [mc.observed_pod(first, p) for p in pods_of(body).values()]
    (first_node,) = {node_of(p) for p in pods_of(body).values()}
    body2 = hook.sync(mc.world(second, nodes, jobs=[first, second], pods=first_pods))
    assert {node_of(p) for p in pods_of(body2).values()} == {"n-1", "n-2"} - {first_node}


def test_a_job_being_deleted_claims_no_capacity(hook: Hook) -> None:
    older = mc.tfjob("dragon-job1-cpu.yaml", name="older", created="2026-11-21T09:00:00Z")
    older["metadata"]["deletionTimestamp"] = "2026-11-21T10:00:30Z"
    younger = mc.tfjob("dragon-job1-cpu.yaml", name="younger", created="2026-11-21T09:30:00Z")
    nodes = [mc.node("n-1", cpu="20", memory="64Gi")]
    body = hook.sync(mc.world(younger, nodes, jobs=[older, younger]))
    assert len(pods_of(body)) == 5


def test_committed_fixtures_match_their_generator() -> None:
    """tests/fixtures/*.json are what tests.make_fixtures writes; rerun it after a change."""
    import json

    from tests.make_fixtures import OUT, scenarios

    for name, request in scenarios().items():
        assert json.loads((OUT / name).read_text()) == request, name


def test_a_job_waiting_for_room_says_so_in_words_that_do_not_change_with_every_pod(
    hook: Hook,
) -> None:
    """It would fit in the empty pool, but another job holds the room. Its message names
    what it needs and why it waits, not how much is free this second, and while the reason
    stays the same the words do: one pod less elsewhere changes nothing of its status (a
    message quoting free capacity would be rewritten on every pod event)."""
    nodes = [mc.node("n-1", cpu="24", memory="64Gi")]
    big = mc.compat(JOB)
    big["spec"]["min-instances"] = 4  # 5 pods of 4 cpu at once
    running = mc.tfjob(big, name="running", created="2026-11-21T09:00:00Z")
    waiting = mc.tfjob(big, name="waiting", created="2026-11-21T09:00:05Z")
    body = hook.sync(mc.world(running, nodes, jobs=[running, waiting]))
    pods = [mc.observed_pod(running, p) for p in pods_of(body).values()]
    first = hook.sync(mc.world(waiting, nodes, jobs=[running, waiting], pods=pods))
    sched = first["status"]["scheduling"]
    assert sched["reason"] == "WaitingForCapacity"
    # First written when the older job was admitted in the same plan.
    assert sched["message"] == (
        "waiting: jobs ahead in the queue (default/running) claim the free capacity it needs"
    )
    gone = [p for p in pods if p["metadata"]["name"] != "running-worker-3"]
    again = hook.sync(mc.world(waiting, nodes, jobs=[running, waiting], pods=gone))
    assert again["status"]["scheduling"] == sched

    # Seen first when the other job already runs, the same reason reads:
    fresh = Hook(clock=hook.clock).sync(
        mc.world(waiting, nodes, jobs=[running, waiting], pods=pods)
    )
    assert fresh["status"]["scheduling"]["reason"] == "WaitingForCapacity"
    assert fresh["status"]["scheduling"]["message"] == (
        "waiting: needs 20 cpu, 40Gi memory for its 1 parameter server plus 4 workers "
        "(min-instances) at once, more than is free now; it starts when running jobs give "
        "room back"
    )
