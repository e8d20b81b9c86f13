"""Queue order at the pool: priority, then enqueue time, then namespace/name.

Each test gives the job that should go first the later name and namespace, so an order by
name (or namespace) instead of time admits the wrong job. One 12-cpu node holds one of
DRAGON's job1 (its PS and min-instances worker need 8 cpu), never two.
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
    assert body["status"]["scheduling"]["message"] == (
        "waiting: jobs ahead in the queue (team-z/zulu) claim the free capacity it needs"
    )
    assert len(pods_of(hook.render(older))) == 3  # PS + 2 workers fill the 12 cpu


def test_a_resumed_job_queues_behind_jobs_that_waited_while_it_was_suspended(
    clock: Clock,
) -> None:
    """Resuming re-enters the queue at the back: the enqueue time is the resume time, not
    the creation time, both before the job's own sync has written it (its status still
    says Suspended) and after."""
    suspended = mc.tfjob(JOB, name="zulu", created="2026-11-21T08:00:00Z")
    suspended["spec"]["runPolicy"] = {"suspend": True}
    waiting = mc.tfjob(JOB, name="alpha", created="2026-11-21T09:30:00Z")
    hook = Hook(clock=clock)
    body = hook.sync(mc.world(suspended, NODES, jobs=[suspended, waiting]))
    suspended = _after(suspended, body)  # its sync marked it Suspended
    assert condition(body, "Suspended")["status"] == "True"

    suspended["spec"]["runPolicy"] = {"suspend": False}  # resumed at 10:01, after alpha came
    hook = Hook(clock=clock)  # a pool that admitted neither yet (the node was busy till now)
    hook.pool_sync(mc.pool_request(mc.world(waiting, NODES, jobs=[suspended, waiting])))
    assert _phases(hook) == {"default/alpha": "Admitted", "default/zulu": "Queued"}

    # Its own sync writes the resume time as its enqueue time; the order stays.
    resumed = _after(suspended, hook.render(suspended))
    assert resumed["status"]["enqueueTime"] == "2026-11-21T10:01:00Z"
    hook = Hook(clock=clock)
    hook.pool_sync(mc.pool_request(mc.world(waiting, NODES, jobs=[resumed, waiting])))
    assert _phases(hook) == {"default/alpha": "Admitted", "default/zulu": "Queued"}


def _after(job: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {**job, "status": body["status"]}
