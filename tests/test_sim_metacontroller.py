"""The simulated Metacontroller keeps the contract the real one does (metacontroller-contract.md
§2-3): what it calls, when, and what it writes. Results of the simulator are only as good as
this: a simulator that called the hook more or less often, or updated pods in place, would
test a Dragonet that cannot exist."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from typing import Any

from sim.apiserver import Obj, object_key
from sim.engine import SimConfig, Simulation
from tests.simkit import (
    PODS,
    TFJOBS,
    HookCall,
    HookSpy,
    condition,
    gpu_nodes,
    job,
    scenario,
    status_of,
)

KEEP = SimConfig(delete_finished_after_s=None)
SYNC, CUSTOMIZE, FINALIZE = "tfjobs/sync", "tfjobs/customize", "tfjobs/finalize"


def _without_rv(obj: Obj) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _but_node(spec: Any) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "nodeName"}


def _update_spec(sim: Simulation, key: str, **fields: Any) -> None:
    live = sim.api.get(TFJOBS, key)
    sim.api.update({**live, "spec": {**live["spec"], **fields}})


def test_customize_is_called_once_per_parent_generation() -> None:
    sim = Simulation(
        scenario(gpu_nodes(1), [job("a", 1, steps=200), job("b", 1, arrival=5, steps=200)]), KEEP
    )
    spy = HookSpy(sim)
    # A spec change (a new generation) at t=30, while both jobs train.
    sim.schedule(30.0, lambda: _update_spec(sim, "default/a", activeDeadlineSeconds=100_000))
    sim.run()

    customize = Counter((c.parent, c.generation) for c in spy.of(CUSTOMIZE))
    assert customize == {("default/a", 1): 1, ("default/a", 2): 1, ("default/b", 1): 1}
    syncs = Counter(c.parent for c in spy.of(SYNC))
    assert syncs["default/a"] > 2 and syncs["default/b"] > 1  # the answer is cached
    a = sim.api.get(TFJOBS, "default/a")
    assert a["metadata"]["generation"] == 2
    assert a["status"]["observedGeneration"] == 2  # written by Metacontroller, not the hook
    assert all("observedGeneration" not in (c.answer.get("status") or {}) for c in spy.of(SYNC))


def test_a_status_is_written_only_when_it_changes() -> None:
    sim = Simulation(scenario(gpu_nodes(1), [job("a", 2, steps=100)]), KEEP)
    noop_writes: list[float] = []

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == TFJOBS and old and new and _without_rv(old) == _without_rv(new):
            noop_writes.append(sim.now)

    sim.api.watchers.append(watch)
    sim.run()
    assert noop_writes == []

    # Settled: one more sync answers the same status, and nothing is written.
    before = sim.api.get(TFJOBS, "default/a")["metadata"]["resourceVersion"]
    calls = sim.mc.sync_calls
    sim.mc.enqueue("default/a")
    sim.mc.run_batch()
    assert sim.mc.sync_calls == calls + 1
    assert sim.api.get(TFJOBS, "default/a")["metadata"]["resourceVersion"] == before


def test_a_child_left_out_of_an_answer_is_deleted() -> None:
    victim = "a-worker-1"
    dropped: list[float] = []

    def drop_once(call: HookCall, body: Any) -> Any:
        if call.path != SYNC or call.parent != "default/a" or call.t < 30 or dropped:
            return body
        dropped.append(call.t)
        children = [
            c for c in body["children"] if (c["kind"], c["metadata"]["name"]) != ("Pod", victim)
        ]
        assert len(children) == len(body["children"]) - 1
        return {**body, "children": children}

    sim = Simulation(scenario(gpu_nodes(1), [job("a", 2, steps=300)]), KEEP)
    HookSpy(sim, rewrite=drop_once)
    sim.schedule(30.0, lambda: sim.mc.enqueue("default/a"))
    sim.run()

    (t,) = dropped
    events = [(when, ev) for when, ev, pod, _ in sim.log if pod == f"default/{victim}"]
    gone = next(when for when, ev in events if ev == "gone")
    assert t <= gone <= t + sim.config.grace_s  # deleted at once, gone after its grace period
    assert "create" in [ev for when, ev in events if when >= gone]  # the next sync restores it


def test_an_existing_pod_is_never_updated_in_place() -> None:
    """OnDelete: a changed pod in an answer leaves the live pod as it is."""

    def change_pods(call: HookCall, body: Any) -> Any:
        if call.path != SYNC or call.t < 30:
            return body
        body = copy.deepcopy(body)
        for child in body["children"]:
            if child["kind"] == "Pod":
                child["spec"]["containers"][0]["image"] = "changed:latest"
                child["metadata"].setdefault("labels", {})["changed"] = "yes"
        return body

    spec_changes: list[tuple[str, Any, Any]] = []

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey != PODS or old is None or new is None:
            return
        # The only spec change allowed is the kube-scheduler's binding (nodeName, once).
        was, now = old["spec"].get("nodeName"), new["spec"].get("nodeName")
        rest_changed = _but_node(old["spec"]) != _but_node(new["spec"])
        labels_changed = new["metadata"].get("labels") != old["metadata"].get("labels")
        if rest_changed or labels_changed or (was and was != now):
            spec_changes.append((object_key(new), old["spec"], new["spec"]))

    sim = Simulation(scenario(gpu_nodes(1), [job("a", 2, steps=200)]), KEEP)
    HookSpy(sim, rewrite=change_pods)
    sim.api.watchers.append(watch)
    sim.schedule(30.0, lambda: sim.mc.enqueue("default/a"))
    (record,) = sim.run().jobs

    assert record.finish_s is not None
    assert spec_changes == []
    pods = list(sim.api.list(PODS))
    assert pods and all(p["spec"]["containers"][0]["image"] != "changed:latest" for p in pods)
    # Nor deleted to apply the change: every pod was created once, before the rewrites.
    creates = [(t, pod) for t, ev, pod, _ in sim.log if ev == "create"]
    assert len({pod for _, pod in creates}) == len(creates)
    assert all(t < 30 for t, _ in creates)


def test_resync_after_seconds_fires_an_active_deadline_with_nothing_else_happening() -> None:
    deadline = 100
    spec = job("slow", 1, steps=1e6)
    manifest = copy.deepcopy(dict(spec.manifest))
    manifest["spec"]["runPolicy"] = {"activeDeadlineSeconds": deadline}
    spec = dataclasses.replace(spec, manifest=manifest)
    sim = Simulation(scenario(gpu_nodes(1), [spec]), KEEP)
    changes: list[tuple[float, str]] = []
    sim.api.watchers.append(lambda tkey, old, new: changes.append((sim.now, tkey)))
    spy = HookSpy(sim)
    (record,) = sim.run().jobs

    failed = condition(status_of(sim, "default/slow"), "Failed")
    assert failed is not None and failed["reason"].endswith("DeadlineExceeded")
    assert record.finish_s is None
    # The job started (startTime) at 0 s; it failed at its deadline, within the one-second
    # rounding of resyncAfterSeconds, woken by nothing but the resync.
    t_fail = next(c.t for c in spy.of(SYNC) if _failed(c))
    assert deadline <= t_fail < deadline + 1
    quiet = [t for t, _ in changes if t < t_fail]
    assert max(quiet) < deadline / 2  # pods ran by then; nothing changed until the deadline
    assert not [p for p in sim.api.list(PODS) if not p["metadata"].get("deletionTimestamp")]


def _failed(call: HookCall) -> bool:
    c = condition(call.answer.get("status") or {}, "Failed")
    return c is not None and c["status"] == "True"


def test_deleting_a_job_finalizes_it_pods_first() -> None:
    sim = Simulation(scenario(gpu_nodes(1), [job("a", 2, steps=50)]), SimConfig())
    spy = HookSpy(sim)
    order: list[tuple[float, str, str, str]] = []  # (t, type, key, what)

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        if new is None:
            order.append((sim.now, tkey, object_key(obj), "gone"))
        elif new["metadata"].get("deletionTimestamp") and not (
            old and old["metadata"].get("deletionTimestamp")
        ):
            order.append((sim.now, tkey, object_key(obj), "deleting"))

    sim.api.watchers.append(watch)
    (record,) = sim.run().jobs

    assert sim.api.get(TFJOBS, "default/a") is None
    job_events = [(t, what) for t, tkey, key, what in order if tkey == TFJOBS]
    assert [what for _, what in job_events] == ["deleting", "gone"]
    asked = job_events[0][0]
    assert asked == record.finish_s + sim.config.delete_finished_after_s
    finalizes = spy.of(FINALIZE)
    assert len(finalizes) >= 2  # the first sees pods still there and cannot be final
    assert not finalizes[0].answer["finalized"] and finalizes[-1].answer["finalized"]
    assert all(c.t >= asked for c in finalizes)
    assert all(c.answer["children"] == [] for c in finalizes)
    job_gone = order.index(next(e for e in order if e[1] == TFJOBS and e[3] == "gone"))
    children_gone = [i for i, e in enumerate(order) if e[1] != TFJOBS and e[3] == "gone"]
    assert children_gone and max(children_gone) < job_gone  # pods and services went first


def test_a_pod_of_one_job_resyncs_every_parent() -> None:
    """Dragonet's customize hook relates every pod of ours: any of them changing re-plans
    every job, since each job's plan depends on the whole cluster."""
    names = ["a", "b", "c"]
    jobs = [job(n, 1, arrival=i, steps=1e6) for i, n in enumerate(names)]
    sim = Simulation(scenario(gpu_nodes(1), jobs), SimConfig(max_time_s=120))
    spy = HookSpy(sim)

    def touch() -> None:
        pod = sim.api.get(PODS, "default/a-worker-0")
        labels = {**pod["metadata"]["labels"], "touched": "yes"}
        sim.api.update({**pod, "metadata": {**pod["metadata"], "labels": labels}})

    sim.schedule(60.0, touch)
    sim.run()
    synced = [c for c in spy.of(SYNC) if 40 <= c.t <= 80]
    assert synced and all(c.t == 60 for c in synced)  # quiet but for the touch
    assert {c.parent for c in synced} == {f"default/{n}" for n in names}
