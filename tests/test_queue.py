"""Queue order at the pool: priority, then enqueue time, then namespace/name.

In each test the job that should go first has the later name (and namespace), and where
priority decides, it is also the younger: an order by name, namespace or time where another
key should win admits the wrong job. One 12-cpu node holds one of DRAGON's job1 (its PS and
min-instances worker need 8 cpu), never two.
"""

from __future__ import annotations

from typing import Any

from tests import metacontroller as mc
from tests.conftest import Clock, Hook, condition, pods_of

NODES = [mc.node("n-1", cpu="12", memory="64Gi")]
JOB = "dragon-job1-cpu.yaml"


def _phases(hook: Hook) -> dict[str, str]:
    return {
        f"{a['metadata']['namespace']}/{a['spec']['job']['name']}": a["spec"]["phase"]
        for a in hook.last_pool["children"]
    }


def test_the_job_enqueued_first_is_admitted_first_whatever_its_name(hook: Hook) -> None:
    older = mc.tfjob(JOB, name="zulu", namespace="team-z", created="2026-11-21T09:00:00Z")
    younger = mc.tfjob(JOB, name="alpha", namespace="team-a", created="2026-11-21T09:30:00Z")
    w = mc.world(younger, NODES, jobs=[younger, older])
    body = hook.sync(w)
    assert _phases(hook) == {"team-z/zulu": "Admitted", "team-a/alpha": "Queued"}
    assert body["children"] == []
    # zulu is of another namespace: alpha's tenant reads that it is ahead, not its name.
    assert body["status"]["scheduling"]["message"] == (
        "waiting: jobs ahead in the queue (a job in another namespace) claim the free "
        "capacity it needs"
    )
    assert len(pods_of(hook.render(older))) == 3  # PS + 2 workers fill the 12 cpu


def test_a_resumed_job_queues_behind_jobs_that_waited_while_it_was_suspended(
    clock: Clock,
) -> None:
    """Resuming re-enters the queue at the back: the enqueue time is the resume time, not
    the creation time, both before the job's own sync has written it (its status still
    says Suspended) and after."""
    suspended = mc.tfjob(JOB, name="alpha", created="2026-11-21T08:00:00Z")
    suspended["spec"]["runPolicy"] = {"suspend": True}
    waiting = mc.tfjob(JOB, name="zulu", created="2026-11-21T09:30:00Z")
    hook = Hook(clock=clock)
    body = hook.sync(mc.world(suspended, NODES, jobs=[suspended, waiting]))
    suspended = _after(suspended, body)  # its sync marked it Suspended
    assert condition(body, "Suspended")["status"] == "True"

    suspended["spec"]["runPolicy"] = {"suspend": False}  # resumed at 10:01, after zulu came
    hook = Hook(clock=clock)  # a pool that admitted neither yet (the node was busy till now)
    hook.pool_sync(mc.pool_request(mc.world(waiting, NODES, jobs=[suspended, waiting])))
    assert _phases(hook) == {"default/zulu": "Admitted", "default/alpha": "Queued"}

    # Its own sync writes the resume time as its enqueue time; the order stays.
    resumed = _after(suspended, hook.render(suspended))
    assert resumed["status"]["enqueueTime"] == "2026-11-21T10:01:00Z"
    hook = Hook(clock=clock)
    hook.pool_sync(mc.pool_request(mc.world(waiting, NODES, jobs=[resumed, waiting])))
    assert _phases(hook) == {"default/zulu": "Admitted", "default/alpha": "Queued"}


def _after(job: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {**job, "status": body["status"]}


def _with_pod_class(name: str, created: str, pod_class: str) -> dict[str, Any]:
    """job1 whose pod templates name the class (no runPolicy.schedulingPolicy)."""
    job = mc.compat(JOB)
    for spec in job["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["priorityClassName"] = pod_class
    return mc.tfjob(job, name=name, created=created)


def test_a_class_named_only_by_the_pods_orders_the_queue(hook: Hook) -> None:
    """Without runPolicy.schedulingPolicy.priorityClass, the pods' priorityClassName is the
    job's class (as the kube-scheduler sees it): the youngest job goes first."""
    older = mc.tfjob(JOB, name="alpha", created="2026-11-21T08:00:00Z")
    urgent = _with_pod_class("zulu", "2026-11-21T09:30:00Z", "urgent")
    classes = [mc.priority_class("urgent", 1000)]
    hook.sync(mc.world(urgent, NODES, jobs=[older, urgent], priority_classes=classes))
    assert _phases(hook) == {"default/zulu": "Admitted", "default/alpha": "Queued"}


def test_a_job_without_a_class_has_the_global_default_priority(hook: Hook) -> None:
    """The cluster's globalDefault class (100) outranks an older job's class (50); without
    a globalDefault the older job would go first (0 < 50)."""
    mid = mc.compat(JOB)
    mid["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "mid"}}
    older = mc.tfjob(mid, name="alpha", created="2026-11-21T08:00:00Z")
    plain = mc.tfjob(JOB, name="zulu", created="2026-11-21T09:30:00Z")
    classes = [mc.priority_class("mid", 50), mc.priority_class("batch", 100, default=True)]
    hook.sync(mc.world(plain, NODES, jobs=[older, plain], priority_classes=classes))
    assert _phases(hook) == {"default/zulu": "Admitted", "default/alpha": "Queued"}
