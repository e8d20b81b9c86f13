"""One tenant's broken job never stops the plan for anyone else (issue 11), end to end.

Two tenants share two 4-GPU nodes with the well-behaved jobs of ``test_elastic``: ``a``
borrows idle GPUs, ``b`` then needs them back. Before either, tenant ``team-x`` submits a
job beyond every bound (2^31 - 1 parameter servers), and a third job's status is
overwritten with garbage by someone allowed to write it while it runs.
"""

from __future__ import annotations

import copy

from sim.engine import SimConfig, Simulation
from tests.conftest import condition
from tests.simkit import TFJOBS, gpu_nodes, job, scenario, status_of


def test_a_broken_job_in_the_queue_leaves_every_other_job_admitted_scaled_and_finished() -> None:
    jobs = [
        job("a", 4, min_workers=2, max_workers=6, steps=900),
        job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200),
        job("c", 1, steps=300, arrival=10.0),
    ]
    sim = Simulation(
        scenario(gpu_nodes(2), jobs), SimConfig(policy="dragonet", delete_finished_after_s=None)
    )
    broken = copy.deepcopy(job("x", 2).manifest)
    broken["metadata"]["namespace"] = "team-x"
    broken["spec"]["tfReplicaSpecs"]["PS"]["replicas"] = 2**31 - 1
    sim.api.create(broken)  # first in the queue: it arrives before everyone

    def vandalise() -> None:
        sim.api.patch(TFJOBS, "default/c", status={"conditions": "x", "scheduling": [1]})

    sim.schedule(60.0, vandalise)
    targets: dict[str, list[int]] = {}

    def watch(tkey: str, old, new) -> None:
        if tkey == TFJOBS and new is not None:
            sched = (new.get("status") or {}).get("scheduling")
            target = (
                ((sched or {}).get("workers") or {}).get("target")
                if isinstance(sched, dict)
                else None
            )
            seen = targets.setdefault(new["metadata"]["name"], [])
            if target and (not seen or seen[-1] != target):
                seen.append(target)

    sim.api.watchers.append(watch)
    result = sim.run()

    assert result.summary["jobs_finished"] == 3
    assert result.summary["sync_errors"] == 0
    for name in ("a", "b", "c"):
        succeeded = condition({"status": status_of(sim, f"default/{name}")}, "Succeeded")
        assert succeeded is not None and succeeded["status"] == "True", name
    # a grew into idle GPUs, then gave some back to b and c.
    grown = targets["a"].index(6)
    assert targets["a"][:grown] == [4] and targets["a"][grown + 1] < 6
    failed = condition({"status": status_of(sim, "team-x/x")}, "Failed")
    assert failed is not None and failed["status"] == "True"
    assert "PS.replicas" in failed["message"] and "1024" in failed["message"]
    assert not [p for p in sim.api.list("Pod.v1") if p["metadata"]["name"].startswith("x-")]
