"""The simulated Metacontroller keeps the contract the real one does (metacontroller-contract.md
§1-3, pools-and-backends.md §1): what it calls, when, how long a sync holds its key, and what
it writes. Results of the simulator are only as good as this: a simulator that called a hook
more or less often, synced one parent twice at once, or updated pods in place, would test a
Dragonet that cannot exist.

These are tests of the model, not of Dragonet: they run the two CompositeControllers of
``metacontroller/`` against a small fake webhook defined here (a pool hook that admits every
TFJob with one Admission, a job hook that creates the pods its Admission lists), whose
answers each test can bend. Dragonet's own webhook is tested end to end through the
simulator in tests/test_simulate.py and tests/test_elastic.py.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import pairwise
from typing import Any

import orjson
import pytest
from flask import Flask, Response, request

from policy.model.cluster import L_INDEX, L_JOB, L_OPERATOR, L_TYPE, OPERATOR_NAME
from policy.model.pool import pool_object
from sim.apiserver import EPOCH, Obj, object_key
from sim.engine import JOBS, POOLS, Scenario, SimConfig, Simulation, SimulationError
from sim.metacontroller import LAST_APPLIED
from tests.simkit import PODS, TFJOBS, HookCall, HookSpy, comparable, gpu_nodes, job, scenario

ADMISSIONS = "Admission.dragonet.io/v1alpha1"
POOL_TYPE = "TrainingPool.dragonet.io/v1alpha1"
SERVICES = "Service.v1"
# The model as it was before it charged Metacontroller's costs (one worker, free writes, no
# resync, customize cached for ever): the timings these tests pin. The costs have their own.
KEEP = SimConfig(delete_finished_after_s=None).cost_free()
# A job sync that takes half a second of simulated time: long enough to see what happens
# while it runs.
SLOW_JOBS = replace(KEEP, job_sync_base_ms=500.0, job_sync_per_kib_ms=0.0)


# --- the fake webhook -----------------------------------------------------------------------


@dataclass
class Seen:
    """One request the fake webhook received."""

    t: float  # the webhook's clock
    path: str
    parent: str
    children: dict[str, list[str]]  # type -> keys
    related: dict[str, list[str]]


@dataclass
class Fake:
    """A webhook of the same shape as Dragonet's, with knobs a test may turn at any time."""

    # The Nodes the pool's customize answer relates (a label selector).
    node_selector: dict[str, Any] = field(default_factory=dict)
    # The pool writes each Admission in the job's namespace (False: leaves it out).
    namespaced_admissions: bool = True
    # spec.message of a job's Admission (job key -> text); a change is an in-place update.
    notes: dict[str, str] = field(default_factory=dict)
    # The next answers of a job's sync hook that are refusals: (HTTP status, Retry-After).
    refusals: dict[str, list[tuple[int, str | None]]] = field(default_factory=dict)
    resync_after: dict[str, float] = field(default_factory=dict)  # job key -> seconds
    job_status_counter: bool = False  # a job status that changes on every sync
    admission_counter: bool = False  # Admissions that change on every pool sync
    pool_status_counter: bool = False  # a pool status that changes on every sync
    float_workers: bool = False  # Admissions write spec.workers as a float (1.0, not 1)
    apps: int = 0  # processes started (webhook restarts)
    seen: list[Seen] = field(default_factory=list)
    _counter: int = 0

    def __call__(self, clock: Callable[[], datetime]) -> Flask:
        self.apps += 1
        app = Flask("fake-dragonet")

        def answer(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
            return Response(orjson.dumps(body), status, headers, mimetype="application/json")

        def read() -> dict[str, Any]:
            req = orjson.loads(request.get_data())
            if "children" in req:
                self.seen.append(
                    Seen(
                        (clock() - EPOCH).total_seconds(),
                        request.path,
                        object_key(req["parent"]),
                        {t: sorted(m) for t, m in req["children"].items()},
                        {t: sorted(m) for t, m in req["related"].items()},
                    )
                )
            return req

        @app.post("/pools/customize")
        def pool_customize() -> Response:
            read()
            rules = [
                {"apiVersion": "v1", "resource": "nodes", "labelSelector": self.node_selector},
                {"apiVersion": "kubeflow.org/v1", "resource": "tfjobs", "labelSelector": {}},
            ]
            return answer({"relatedResources": rules})

        @app.post("/pools/sync")
        def pool_sync() -> Response:
            req = read()
            admissions = [
                self._admission(req["parent"], j)
                for _, j in sorted(req["related"].get(TFJOBS, {}).items())
                if not j["metadata"].get("deletionTimestamp")
            ]
            status: dict[str, Any] = {"jobs": len(admissions)}
            if self.pool_status_counter:
                self._counter += 1
                status["syncs"] = self._counter
            return answer({"status": status, "children": admissions})

        @app.post("/tfjobs/customize")
        def job_customize() -> Response:
            meta = read()["parent"]["metadata"]
            rule = {
                "apiVersion": "dragonet.io/v1alpha1",
                "resource": "admissions",
                "namespace": meta["namespace"],
                "names": [f"tfjob-{meta['name']}"],
            }
            return answer({"relatedResources": [rule]})

        @app.post("/tfjobs/sync")
        @app.post("/tfjobs/finalize")
        def job_sync() -> Response:
            req = read()
            key = object_key(req["parent"])
            refusals = self.refusals.get(key)
            if refusals and not req["finalizing"]:
                code, retry = refusals.pop(0)
                return answer({"error": "refused"}, code, {"Retry-After": retry} if retry else {})
            return answer(self._job(req))

        return app

    def _admission(self, pool: Obj, tfjob: Obj) -> dict[str, Any]:
        meta = tfjob["metadata"]
        replicas = tfjob["spec"]["tfReplicaSpecs"]
        pods = [
            {"type": t, "index": i}
            for t, r in sorted(replicas.items())
            for i in range(int(r.get("replicas", 1)))
        ]
        workers = int((replicas.get("Worker") or {}).get("replicas", 0))
        ameta: dict[str, Any] = {"name": f"tfjob-{meta['name']}"}
        if self.namespaced_admissions:
            ameta["namespace"] = meta["namespace"]
        spec = {
            "pool": pool["metadata"]["name"],
            "job": {"kind": "TFJob", "name": meta["name"], "uid": meta["uid"]},
            "phase": "Admitted",
            "workers": float(workers) if self.float_workers else workers,
            "pods": pods,
        }
        note = self.notes.get(object_key(tfjob))
        if note:
            spec["message"] = note
        if self.admission_counter:
            self._counter += 1
            spec["message"] = f"pool sync {self._counter}"
        return {
            "apiVersion": "dragonet.io/v1alpha1",
            "kind": "Admission",
            "metadata": ameta,
            "spec": spec,
        }

    def _job(self, req: Mapping[str, Any]) -> dict[str, Any]:
        parent = req["parent"]
        meta, old = parent["metadata"], parent.get("status") or {}
        pods = req["children"].get(PODS, {})
        if req["finalizing"]:
            left = pods or req["children"].get(SERVICES)
            return {"status": old, "children": [], "finalized": not left}
        done = old.get("phase") == "Succeeded" or any(
            p["metadata"]["labels"][L_TYPE] == "worker" and p["status"].get("phase") == "Succeeded"
            for p in pods.values()
        )
        key = f"{meta['namespace']}/tfjob-{meta['name']}"
        admission = req["related"].get(ADMISSIONS, {}).get(key)
        children: list[dict[str, Any]] = []
        if admission is not None:  # kept once done too (cleanPodPolicy None): finalize cleans
            for entry in admission["spec"]["pods"]:
                pod = _pod(parent, entry["type"], entry["index"])
                observed = pods.get(f"{meta['namespace']}/{pod['metadata']['name']}")
                if observed is None or observed["status"].get("phase") != "Failed":
                    children.append(pod)  # a failed pod is left out: deleted, then made again
            children.append(_service(parent))
        running = any(p["status"].get("phase") == "Running" for p in pods.values())
        phase = (
            "Succeeded"
            if done
            else "Running"
            if running
            else "Admitted"
            if admission
            else "Waiting"
        )
        status: dict[str, Any] = {"phase": phase}
        if self.job_status_counter:
            self._counter += 1
            status["syncs"] = self._counter
        body: dict[str, Any] = {"status": status, "children": children}
        resync = self.resync_after.get(object_key(parent))
        if resync:
            body["resyncAfterSeconds"] = resync
        return body

    def of(self, path: str, parent: str | None = None) -> list[Seen]:
        return [s for s in self.seen if s.path == path and parent in (None, s.parent)]


def _pod(parent: Obj, rtype: str, index: int) -> dict[str, Any]:
    meta = parent["metadata"]
    template = parent["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]
    labels = {
        L_OPERATOR: OPERATOR_NAME,
        L_JOB: meta["name"],
        L_TYPE: rtype.lower(),
        L_INDEX: str(index),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{meta['name']}-{rtype.lower()}-{index}", "labels": labels},
        "spec": {**copy.deepcopy(template), "restartPolicy": "OnFailure"},
    }


def _service(parent: Obj) -> dict[str, Any]:
    name = parent["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": {L_JOB: name}},
    }


def _sim(jobs: list[Any], config: SimConfig = KEEP, fake: Fake | None = None, nodes: int = 2):
    fake = fake if fake is not None else Fake()
    sim = Simulation(scenario(gpu_nodes(nodes), jobs), config, webhook_app=fake)
    return sim, fake, HookSpy(sim)


def _without_rv(obj: Obj) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _but_node(spec: Any) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "nodeName"}


def _update_spec(sim: Simulation, tkey: str, key: str, **fields: Any) -> None:
    live = sim.api.get(tkey, key)
    sim.api.update({**live, "spec": {**live["spec"], **fields}})


def _update_meta(sim: Simulation, tkey: str, key: str, field_: str, **values: str) -> None:
    live = sim.api.get(tkey, key)
    meta = {**live["metadata"], field_: {**(live["metadata"].get(field_) or {}), **values}}
    sim.api.update({**live, "metadata": meta})


def _syncs(spy: HookSpy, controller: str, lo: float = 0.0, hi: float = 1e18) -> list[HookCall]:
    return [c for c in spy.by(controller, "sync") if lo <= c.t <= hi]


# --- what is called, and how often ----------------------------------------------------------


def test_customize_is_called_once_per_parent_generation_for_both_controllers() -> None:
    sim, _, spy = _sim([job("a", 1, steps=200), job("b", 1, arrival=5, steps=200)])
    # Spec changes (new generations) at t=30, while both jobs train.
    sim.schedule(30.0, lambda: _update_spec(sim, TFJOBS, "default/a", activeDeadlineSeconds=1e5))
    sim.schedule(30.0, lambda: _update_spec(sim, POOL_TYPE, "default", idleSeconds=90))
    sim.run()

    customize = Counter((c.parent, c.generation) for c in spy.calls if c.hook == "customize")
    assert customize == {
        ("default", 1): 1,
        ("default", 2): 1,
        ("default/a", 1): 1,
        ("default/a", 2): 1,
        ("default/b", 1): 1,
    }
    assert {c.controller for c in spy.calls if c.parent == "default"} == {POOLS}
    assert len(_syncs(spy, POOLS)) > 2 and len(_syncs(spy, JOBS)) > 4  # answers are cached
    for tkey, key in ((TFJOBS, "default/a"), (POOL_TYPE, "default")):
        obj = sim.api.get(tkey, key)
        assert obj["metadata"]["generation"] == 2
        assert obj["status"]["observedGeneration"] == 2  # written by Metacontroller
    assert all("observedGeneration" not in c.answer["status"] for c in spy.by(JOBS, "sync"))


def test_sync_calls_are_counted_per_controller() -> None:
    sim, fake, spy = _sim([job("a", 2, steps=50), job("b", 1, arrival=3, steps=50)], SimConfig())
    summary = sim.run().summary

    by = summary["sync_calls_by_controller"]
    assert by == {POOLS: len(spy.by(POOLS, "sync")), JOBS: len(spy.by(JOBS)) - 2}
    assert spy.by(JOBS, "finalize")  # the jobs were deleted: finalize counts as a sync call
    assert summary["sync_calls"] == by[POOLS] + by[JOBS] == sim.mc.sync_calls
    assert set(summary["sync_latency_ms_by_controller"]) == {POOLS, JOBS}
    assert all(v["p50"] is not None for v in summary["sync_latency_ms_by_controller"].values())
    assert summary["sync_errors"] == 0
    # Charged by the default model: base + per KiB of each request, customize calls too.
    busy = summary["sync_busy_s_by_controller"]
    assert 0.002 * by[POOLS] < busy[POOLS] < 0.003 * (by[POOLS] + 1)
    assert 0.001 * by[JOBS] < busy[JOBS] < 0.002 * (by[JOBS] + 2)
    assert len(fake.of("/pools/sync")) == by[POOLS]


def test_a_seed_fixes_the_run_and_measured_costs_still_run() -> None:
    jobs = [job(n, 2, arrival=i * 3, steps=80) for i, n in enumerate("abc")]
    config = SimConfig(mc_workers=3)
    runs = []
    for _ in range(2):
        sim, _, spy = _sim(jobs, config)
        runs.append((comparable(sim.run().summary), [(c.t, c.path, c.parent) for c in spy.calls]))
    assert runs[0] == runs[1]

    sim, _, _ = _sim(jobs, replace(config, sync_cost="measured"))
    summary = sim.run().summary
    assert summary["jobs_finished"] == 3 and summary["sync_errors"] == 0


# --- the workqueue: one key at a time, events coalesce ----------------------------------------


def test_a_key_is_never_synced_concurrently_with_itself() -> None:
    """Every sync holds its key for its cost (0.5 s here); events keep arriving meanwhile."""
    jobs = [job(n, 3, arrival=i, steps=60) for i, n in enumerate("abcd")]
    sim, _, spy = _sim(jobs, replace(SLOW_JOBS, mc_workers=5))
    sim.run()

    calls = [c for c in spy.by(JOBS) if c.hook != "customize"]
    by_job: dict[str, list[float]] = {}
    for c in calls:
        by_job.setdefault(c.parent, []).append(c.t)
    for times in by_job.values():
        assert all(b - a >= 0.5 - 1e-9 for a, b in pairwise(times))
    # ... while different jobs did run at once (five workers): the check above means something.
    starts = sorted((c.t, c.parent) for c in calls)
    assert any(b[0] - a[0] < 0.5 and a[1] != b[1] for a, b in pairwise(starts))


def test_events_during_a_sync_give_exactly_one_more_sync() -> None:
    sim, _, spy = _sim([job("a", 2, steps=1e6), job("b", 1, steps=1e6)], SLOW_JOBS)

    def touch(pod: str) -> Callable[[], None]:
        return lambda: _update_meta(sim, PODS, pod, "labels", touched=str(sim.now))

    # At 60 (everything quiet), a's sync starts; three of its pods change while it runs.
    sim.schedule(60.0, lambda: sim.mc[JOBS].enqueue("default/a"))
    for dt, pod in ((0.1, "a-worker-0"), (0.2, "a-worker-1"), (0.3, "a-ps-0")):
        sim.schedule(60.0 + dt, touch(f"default/{pod}"))
    # At 80, b's sync holds the only worker while a changes three times: a queued key
    # collapses, and a is synced once, after b.
    sim.schedule(80.0, lambda: sim.mc[JOBS].enqueue("default/b"))
    for dt in (0.1, 0.2, 0.3):
        sim.schedule(80.0 + dt, touch("default/a-worker-0"))
    sim.schedule(100.0, lambda: None)  # keep the run going past the quiet period
    sim.run()

    assert [(c.t, c.parent) for c in _syncs(spy, JOBS, 50, 70)] == [
        (60.0, "default/a"),
        (60.5, "default/a"),  # one more pass, not one per event
    ]
    assert [(c.t, c.parent) for c in _syncs(spy, JOBS, 70, 95)] == [
        (80.0, "default/b"),
        (80.5, "default/a"),
    ]


def test_a_sync_sees_the_view_at_its_start_and_lands_after_its_cost() -> None:
    sim, fake, spy = _sim([job("a", 2, steps=100)], SLOW_JOBS)
    sim.run()

    first = next(c for c in spy.by(JOBS, "sync") if c.answer["children"])
    assert fake.of("/tfjobs/sync", "default/a")[0].t == spy.by(JOBS, "sync")[0].t  # its clock
    creates = [t for t, ev, pod, _ in sim.log if ev == "create" and pod.startswith("default/a-")]
    assert creates and min(creates) == first.t + 0.5
    assert len(set(creates)) == 1  # all of one answer at once


# --- what is written ------------------------------------------------------------------------


def test_a_status_is_written_only_when_it_changes() -> None:
    sim, _, _ = _sim([job("a", 2, steps=100), job("b", 1, steps=100)])
    noop_writes: list[tuple[float, str]] = []

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey in (TFJOBS, POOL_TYPE) and old and new and _without_rv(old) == _without_rv(new):
            noop_writes.append((sim.now, tkey))

    sim.api.watchers.append(watch)
    sim.run()
    assert noop_writes == []

    # Settled: one more sync of each answers the same status, and nothing is written.
    before = {k: sim.api.get(t, k)["metadata"]["resourceVersion"] for t, k in _parents()}
    calls = sim.mc.sync_calls
    sim.mc[JOBS].enqueue("default/a")
    sim.mc[POOLS].enqueue("default")
    sim.settle()
    assert sim.mc.sync_calls == calls + 2
    assert before == {k: sim.api.get(t, k)["metadata"]["resourceVersion"] for t, k in _parents()}


def _parents() -> list[tuple[str, str]]:
    return [(TFJOBS, "default/a"), (POOL_TYPE, "default")]


def test_a_child_left_out_of_an_answer_is_deleted() -> None:
    victim = "a-worker-1"
    dropped: list[float] = []

    def drop_once(call: HookCall, body: Any) -> Any:
        if call.hook != "sync" or call.parent != "default/a" or call.t < 30 or dropped:
            return body
        dropped.append(call.t)
        children = [
            c for c in body["children"] if (c["kind"], c["metadata"]["name"]) != ("Pod", victim)
        ]
        assert len(children) == len(body["children"]) - 1
        return {**body, "children": children}

    sim, _, spy = _sim([job("a", 2, steps=300)])
    spy.rewrite = drop_once
    sim.schedule(30.0, lambda: sim.mc[JOBS].enqueue("default/a"))
    sim.run()

    (t,) = dropped
    events = [(when, ev) for when, ev, pod, _ in sim.log if pod == f"default/{victim}"]
    gone = next(when for when, ev in events if ev == "gone")
    assert t <= gone <= t + 0.01 + sim.config.grace_s  # deleted when the sync lands
    assert "create" in [ev for when, ev in events if when >= gone]  # the next sync restores it


def test_an_admission_left_out_of_the_pools_answer_is_deleted() -> None:
    deletions: list[tuple[float, str]] = []

    def drop_b_once(call: HookCall, body: Any) -> Any:
        if call.path != "/pools/sync" or call.t < 30 or any(k for _, k in deletions):
            return body
        deletions.append((call.t, "asked"))
        return {
            **body,
            "children": [c for c in body["children"] if c["metadata"]["name"] != "tfjob-b"],
        }

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == ADMISSIONS and new is None and old["metadata"]["name"] == "tfjob-b":
            deletions.append((sim.now, "gone"))

    sim, _, spy = _sim([job("a", 1, steps=300), job("b", 1, steps=300)])
    spy.rewrite = drop_b_once
    sim.api.watchers.append(watch)
    sim.schedule(30.0, lambda: sim.mc[POOLS].enqueue("default"))
    sim.run()

    (asked, _), (gone, _) = deletions
    assert asked < gone <= asked + 0.01  # with the sync's effects
    assert sim.api.get(ADMISSIONS, "default/tfjob-b") is not None  # and written again


def test_an_existing_pod_is_never_updated_in_place() -> None:
    """OnDelete: a changed pod in an answer leaves the live pod as it is."""

    changed: list[float] = []

    def change_pods(call: HookCall, body: Any) -> Any:
        if call.hook != "sync" or call.controller != JOBS or call.t < 30:
            return body
        body = copy.deepcopy(body)
        for child in body["children"]:
            if child["kind"] == "Pod":
                child["spec"]["containers"][0]["image"] = "changed:latest"
                child["metadata"].setdefault("labels", {})["changed"] = "yes"
                changed.append(call.t)
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

    sim, _, spy = _sim([job("a", 2, steps=200)])
    spy.rewrite = change_pods
    sim.api.watchers.append(watch)
    sim.schedule(30.0, lambda: sim.mc[JOBS].enqueue("default/a"))
    (record,) = sim.run().jobs

    assert record.finish_s is not None
    assert changed  # answers changed the pods of a running job ...
    assert spec_changes == []  # ... and no live pod changed
    # Nor deleted to apply the change: every pod was created once, before the rewrites.
    creates = [(t, pod) for t, ev, pod, _ in sim.log if ev == "create"]
    assert len({pod for _, pod in creates}) == len(creates)
    assert all(t < 30 for t, _ in creates)


def test_an_admission_is_updated_in_place() -> None:
    """InPlace: a changed Admission is written over, same object (uid), new generation;
    a change made by someone else is put back."""
    fake = Fake()
    sim, _, spy = _sim([job("a", 1, steps=1e6), job("b", 1, steps=1e6)], fake=fake)
    versions: list[Obj] = []

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == ADMISSIONS and new is not None and new["metadata"]["name"] == "tfjob-a":
            versions.append(new)

    sim.api.watchers.append(watch)

    def note() -> None:
        fake.notes["default/a"] = "waiting for nothing"
        sim.mc[POOLS].enqueue("default")

    sim.schedule(30.0, note)
    sim.schedule(50.0, lambda: _update_meta(sim, ADMISSIONS, "default/tfjob-a", "labels", x="y"))
    sim.schedule(70.0, lambda: _update_spec(sim, ADMISSIONS, "default/tfjob-a", workers=7))
    sim.schedule(90.0, lambda: None)
    sim.run()

    created, *updates = versions
    assert {v["metadata"]["uid"] for v in versions} == {created["metadata"]["uid"]}
    noted = next(v for v in updates if v["spec"].get("message"))
    assert noted["metadata"]["generation"] == 2
    assert {k: v for k, v in noted["spec"].items() if k != "message"} == created["spec"]
    final = sim.api.get(ADMISSIONS, "default/tfjob-a")
    assert "x" not in final["metadata"]["labels"]  # labels put back
    assert final["spec"] == noted["spec"]  # spec put back
    assert final["metadata"]["generation"] == 4  # the note, the user's change, the repair
    assert [v["metadata"]["generation"] for v in updates] == [2, 2, 2, 3, 4]
    # Its own children wake the pool: each change, then its own repair (a no-op sync).
    pool_syncs = _syncs(spy, POOLS, 45, 95)
    assert len(pool_syncs) == 4
    assert all(50 <= c.t < 50.1 or 70 <= c.t < 70.1 for c in pool_syncs)


def test_an_admission_made_again_is_made_from_the_answer_as_written() -> None:
    """A child is created from the answer that asked for it, byte for byte: an answer equal
    in value to the last one (``1.0 == 1``) but not in JSON does not bring back the object
    placed for the last one (the simulator reuses a placed child only for the same JSON)."""
    fake = Fake()
    sim, _, _ = _sim([job("a", 1, steps=1e6)], fake=fake)

    def written_as_float() -> None:
        fake.float_workers = True
        sim.api.remove(ADMISSIONS, "default/tfjob-a")  # gone: the pool's next sync makes it

    sim.schedule(30.0, written_as_float)
    sim.schedule(40.0, lambda: None)
    sim.run()

    made = sim.api.get(ADMISSIONS, "default/tfjob-a")
    assert made is not None and made["metadata"]["creationTimestamp"] >= "2026-01-01T00:00:30Z"
    assert made["spec"]["workers"] == 1 and isinstance(made["spec"]["workers"], float)
    assert b'"workers":1.0' in sim.api.serialized(made)


def test_resync_after_seconds_wakes_a_quiet_job() -> None:
    fake = Fake(resync_after={"default/slow": 100.0})
    sim, _, spy = _sim([job("slow", 1, steps=1e6)], replace(KEEP, max_time_s=400), fake)
    changes: list[float] = []
    sim.api.watchers.append(lambda tkey, old, new: changes.append(sim.now))
    sim.run()

    times = [c.t for c in spy.by(JOBS, "sync")]
    quiet = [t for t in times if t > max(changes) + 1]
    # Every sync asked for a wake-up 100 s after it landed, but a key waits once, for the
    # soonest: the first sync's; then each wake-up's own (a sync takes ~1 ms).
    assert len(quiet) == 3
    assert 100 < quiet[0] - times[0] < 100.01
    assert all(100 < b - a < 100.01 for a, b in pairwise(quiet))


# --- errors: nothing applied, retried ---------------------------------------------------------


def test_a_refused_sync_changes_nothing_and_is_retried() -> None:
    fake = Fake()
    sim, _, spy = _sim([job("a", 1, steps=1e6)], replace(KEEP, max_time_s=100), fake)
    statuses: list[tuple[float, Any]] = []

    def refuse() -> None:
        # Someone overwrites the status of a quiet job (which wakes no sync: the job
        # controller ignores status changes), then annotates it (which does); its syncs are
        # refused 4 times.
        fake.refusals["default/a"] = [(429, "3"), (500, None), (500, None), (500, None)]
        sim.api.patch(TFJOBS, "default/a", status={"phase": "Poked"})
        _update_meta(sim, TFJOBS, "default/a", "annotations", poked="yes")

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == TFJOBS and new is not None and old is not None:
            statuses.append((sim.now, (new.get("status") or {}).get("phase")))

    sim.api.watchers.append(watch)
    sim.schedule(60.0, refuse)
    sim.run()

    calls = [c for c in spy.by(JOBS, "sync") if c.t >= 60]
    # Its own status write does not wake it again.
    assert [c.status for c in calls] == [429, 500, 500, 500, 200]
    gaps = [b.t - a.t for a, b in pairwise(calls)]
    cost = 0.001  # a job sync: 1 ms, plus 0.02 ms per KiB of its request (a few KiB)
    # 429: Retry-After (3 s) after the answer landed, no error backoff; then client-go's
    # per-item backoff, 5, 10, 20 ms after each error landed.
    assert gaps == pytest.approx([3 + cost, 0.005 + cost, 0.010 + cost, 0.020 + cost], abs=5e-4)
    assert (sim.mc[JOBS].throttled, sim.mc[JOBS].errors, sim.mc.errors) == (1, 3, 3)
    # Nothing of a refused sync was applied: the poked status stayed until the answered
    # sync landed and wrote the job's own status back.
    after = [(t, phase) for t, phase in statuses if t >= 60]
    assert [phase for _, phase in after] == ["Poked", "Poked", "Running"]  # status, annotation
    assert after[-1][0] == pytest.approx(calls[-1].t + cost, abs=5e-4)


def test_a_hot_loop_stops_the_run() -> None:
    """A job whose status changes on every sync wakes the pool (every TFJob is related to
    it), and a pool whose Admission changes on every sync wakes the job: a loop between the
    two controllers that never settles."""
    fake = Fake(job_status_counter=True, admission_counter=True)
    sim, _, _ = _sim([job("a", 1, steps=100)], fake=fake)
    with pytest.raises(SimulationError, match=r"default/a synced more than 200"):
        sim.run()


def test_a_job_status_that_keeps_changing_does_not_loop_by_itself() -> None:
    """ignoreStatusChanges on the job controller: its own status writes do not wake it."""
    sim, _, _ = _sim([job("a", 1, steps=100)], fake=Fake(job_status_counter=True))
    summary = sim.run().summary
    assert summary["jobs_finished"] == 1
    assert summary["sync_calls_by_controller"][JOBS] < 40


def test_a_pool_status_that_keeps_changing_does_not_loop() -> None:
    """ignoreStatusChanges: the pool's own status writes do not wake it."""
    sim, _, _ = _sim([job("a", 1, steps=100)], fake=Fake(pool_status_counter=True))
    summary = sim.run().summary
    assert summary["jobs_finished"] == 1
    assert summary["sync_calls_by_controller"][POOLS] < 40


# --- finalize ----------------------------------------------------------------------------------


def test_deleting_a_job_finalizes_it_children_first() -> None:
    sim, _, spy = _sim([job("a", 2, steps=50)], SimConfig())
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
    finalizes = spy.by(JOBS, "finalize")
    assert len(finalizes) >= 2  # the first sees children still there and cannot be final
    assert not finalizes[0].answer["finalized"] and finalizes[-1].answer["finalized"]
    assert all(c.t >= asked for c in finalizes)
    job_gone = order.index(next(e for e in order if e[1] == TFJOBS and e[3] == "gone"))
    children = [i for i, e in enumerate(order) if e[1] in (PODS, SERVICES) and e[3] == "gone"]
    assert children and max(children) < job_gone  # pods and services went first
    # The pool dropped the job's Admission once the job was gone.
    assert sim.api.get(ADMISSIONS, "default/tfjob-a") is None
    assert not spy.by(POOLS, "finalize")  # the pool controller has no finalize hook
    assert "finalizers" not in sim.api.get(POOL_TYPE, "default")["metadata"]


# --- scope: a cluster-scoped parent, namespaced children ----------------------------------------


def test_a_cluster_scoped_pool_owns_admissions_in_two_namespaces() -> None:
    jobs = [job("x", 1, steps=1e6, namespace="team-a"), job("y", 1, steps=1e6, namespace="team-b")]
    sim, fake, _ = _sim(jobs, replace(KEEP, max_time_s=60))
    sim.run()

    pool = sim.api.get(POOL_TYPE, "default")
    admissions = {object_key(a): a for a in sim.api.list(ADMISSIONS)}
    assert set(admissions) == {"team-a/tfjob-x", "team-b/tfjob-y"}
    for a in admissions.values():
        (ref,) = a["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "dragonet.io/v1alpha1",
            "kind": "TrainingPool",
            "name": "default",
            "uid": pool["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert a["metadata"]["labels"]["controller-uid"] == pool["metadata"]["uid"]
    last = fake.of("/pools/sync")[-1]
    assert last.parent == "default"  # a cluster-scoped parent is keyed by name
    assert last.children == {ADMISSIONS: ["team-a/tfjob-x", "team-b/tfjob-y"]}
    # Each job's sync saw its own Admission, and nothing else.
    x = fake.of("/tfjobs/sync", "team-a/x")[-1]
    assert x.related == {ADMISSIONS: ["team-a/tfjob-x"]}
    assert {a.split("/")[0] for a in x.children[PODS]} == {"team-a"}

    # Deleting the pool garbage-collects its children in every namespace.
    sim.api.delete(POOL_TYPE, "default")
    assert list(sim.api.list(ADMISSIONS)) == []


def test_a_child_of_a_cluster_scoped_parent_without_namespace_fails_the_sync() -> None:
    fake = Fake(namespaced_admissions=False)
    sim, _, spy = _sim([job("a", 1, steps=100)], replace(KEEP, max_time_s=300), fake)
    writes: list[tuple[float, str, Any]] = []  # (t, type, what was written)

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == ADMISSIONS or (tkey == POOL_TYPE and new is not None):
            writes.append((sim.now, tkey, None if new is None else new.get("status")))

    def fix() -> None:
        fake.namespaced_admissions = True

    sim.api.watchers.append(watch)
    sim.schedule(20.0, fix)
    summary = sim.run().summary

    failed = [c for c in spy.by(POOLS, "sync") if c.t < 20 and c.answer["children"]]
    assert len(failed) >= 5 and summary["sync_errors"] == len(failed)
    assert all("must set metadata.namespace" in why for _, _, why in sim.mc[POOLS].error_log)
    # Nothing of a failed sync was applied: no Admission, and no status that counts the
    # job, until the pool answered properly; then the job ran.
    assert min(t for t, tkey, _ in writes if tkey == ADMISSIONS) > 20
    assert all(s["jobs"] == 0 for t, tkey, s in writes if tkey == POOL_TYPE and s and t < 20)
    assert sim.api.get(POOL_TYPE, "default")["status"]["jobs"] == 1
    assert summary["jobs_finished"] == 1
    # Retried after client-go's per-item backoff, doubling from 5 ms (once the job's own
    # first syncs, which wake the pool at once, are over).
    gaps = [b.t - a.t for a, b in pairwise(failed)][-4:]
    assert all(1.9 < b / a < 2.1 for a, b in pairwise(gaps))


# --- triggers --------------------------------------------------------------------------------


def test_ignore_status_changes_on_the_pool_and_on_jobs() -> None:
    sim, _, spy = _sim([job("a", 1, steps=1e6)], replace(KEEP, max_time_s=100))

    def finalizer() -> None:
        live = sim.api.get(POOL_TYPE, "default")
        sim.api.update({**live, "metadata": {**live["metadata"], "finalizers": ["x"]}})

    poke = {
        40.0: lambda: sim.api.patch(POOL_TYPE, "default", status={"jobs": 1, "poked": True}),
        45.0: lambda: sim.api.patch(TFJOBS, "default/a", status={"phase": "Poked"}),
        50.0: lambda: _update_meta(sim, POOL_TYPE, "default", "labels", team="x"),
        55.0: lambda: _update_meta(sim, POOL_TYPE, "default", "annotations", note="x"),
        60.0: lambda: _update_spec(sim, POOL_TYPE, "default", idleSeconds=61),
        65.0: finalizer,  # metadata, but none of what ignoreStatusChanges watches
        70.0: lambda: None,
    }
    for t, action in poke.items():
        sim.schedule(t, action)
    sim.run()

    # The pool: not for its status (40) nor its finalizers (65); for its labels, annotations
    # and spec, and for the job (every TFJob is related to it) changing at 45.
    assert {int(c.t) for c in _syncs(spy, POOLS, 35, 75)} == {45, 50, 55, 60}
    # A job is not synced for a status change either (its status is its sync's own answer);
    # the pool's sync at 45 changes nothing of its Admission.
    assert _syncs(spy, JOBS, 35, 75) == []
    assert sim.api.get(TFJOBS, "default/a")["status"]["phase"] == "Poked"
    assert "poked" not in sim.api.get(POOL_TYPE, "default")["status"]


def test_a_name_rule_related_change_enqueues_only_its_job() -> None:
    names = [f"j{i}" for i in range(12)]
    jobs = [job(n, 1, arrival=i, steps=1e6) for i, n in enumerate(names)]
    sim, _, spy = _sim(jobs, replace(KEEP, max_time_s=120), nodes=3)
    sim.schedule(
        60.0, lambda: _update_meta(sim, ADMISSIONS, "default/tfjob-j5", "annotations", a="b")
    )
    sim.run()

    # j5 saw the change, then the pool put its Admission back (InPlace) and j5 saw that.
    around = _syncs(spy, JOBS, 40, 80)
    assert [c.parent for c in around] == ["default/j5"] * 2
    assert around[0].t == 60.0 and around[1].t < 60.01
    assert all(60 <= c.t < 60.01 for c in _syncs(spy, POOLS, 40, 80))  # its child changed


def test_an_object_that_starts_or_stops_matching_a_selector_triggers() -> None:
    """A pool related to the Nodes labelled pool=gpu: a node that gains or loses the label
    wakes it; a change to a node it never selected does not."""

    fake = Fake(node_selector={"matchLabels": {"pool": "gpu"}})
    sim, _, spy = _sim([job("a", 1, steps=1e6)], replace(KEEP, max_time_s=120), fake)
    sim.schedule(40.0, lambda: _update_meta(sim, "Node.v1", "gpu-1", "labels", pool="gpu"))
    sim.schedule(50.0, lambda: _update_meta(sim, "Node.v1", "gpu-1", "labels", other="1"))
    sim.schedule(60.0, lambda: _update_meta(sim, "Node.v1", "gpu-2", "labels", other="1"))
    sim.schedule(70.0, lambda: _update_meta(sim, "Node.v1", "gpu-1", "labels", pool="cpu"))
    sim.schedule(80.0, lambda: _update_meta(sim, "Node.v1", "gpu-1", "labels", other="2"))
    sim.run()

    assert {c.t for c in _syncs(spy, POOLS, 35, 90)} == {40.0, 50.0, 70.0}
    related = [s.related for s in fake.of("/pools/sync") if 40 <= s.t < 70]
    assert all(r["Node.v1"] == ["gpu-1"] for r in related)


# --- faults and the informer lag still work -----------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [KEEP, replace(KEEP, mc_workers=5, view_delay_s=2.0)],
    ids=["default", "5-workers-2s-stale"],
)
def test_faults_and_a_stale_view_still_converge(config: SimConfig) -> None:
    fake = Fake()
    jobs = [job(n, 2, arrival=i * 5, steps=150) for i, n in enumerate("abc")]
    config = replace(
        config,
        webhook_restarts_s=(20.0, 45.5),
        evictions=((30.0, "default/a-worker-1"),),
        crashes=((35.0, "default/b-worker-0", 137),),
        node_losses=((60.0, "gpu-3"),),
    )
    sim = Simulation(scenario(gpu_nodes(3), jobs), config, webhook_app=fake)
    tfjob_writes: list[float] = []
    sim.api.watchers.append(
        lambda tkey, old, new: tfjob_writes.append(sim.now) if tkey == TFJOBS else None
    )
    result = sim.run()

    assert fake.apps == 3  # the first process and two restarts
    assert result.summary["jobs_finished"] == 3
    assert result.summary["sync_errors"] == 0
    # Statuses settle: after the last job finished, its last status write, and nothing more.
    assert max(tfjob_writes) < max(j.finish_s for j in result.jobs) + 30


# --- the run's TrainingPool ---------------------------------------------------------------------


def test_the_run_creates_the_default_pool_from_its_config_unless_the_scenario_brings_one() -> None:
    config = replace(KEEP, policy="dragon", binding="nodeName", starvation_seconds=12)
    sim, _, _ = _sim([job("a", 1, steps=10)], config)
    sim.run()
    pool = sim.api.get(POOL_TYPE, "default")
    assert pool["spec"] == {"policy": "dragon", "binding": "nodeName", "starvationSeconds": 12}
    assert pool["metadata"]["labels"] == {"dragonet.io/pool": "default"}

    own = pool_object("default", policy="gang-fifo", idleSeconds=5)
    sc = Scenario("own-pool", gpu_nodes(1), (job("a", 1, steps=10),), (own,))
    sim = Simulation(sc, config, webhook_app=Fake())
    result = sim.run()
    assert sim.api.get(POOL_TYPE, "default")["spec"] == own["spec"]
    assert result.policy == result.summary["policy"] == "gang-fifo"


# --- Metacontroller's real costs (v4.17.2's defaults, metacontroller-contract.md §9) ----------

REAL = SimConfig(delete_finished_after_s=None)  # every Metacontroller default


def _pod_creations(sim: Simulation, job_name: str) -> list[float]:
    return sorted(t for t, what, pod, _ in sim.log if what == "create" and f"/{job_name}-" in pod)


def test_every_request_takes_a_token_of_one_bucket_shared_by_all_controllers() -> None:
    """client-go's token bucket (--client-go-qps 5, --client-go-burst 10): after a burst of
    10, requests of every controller together go at 5 per second; a big job's 25 pods are
    written one at a time over seconds, where the cost-free simulator made them at once."""
    jobs = [job("big", 24, steps=100), job("small", 2, steps=100)]
    sim, _, _ = _sim(jobs, REAL, nodes=7)
    summary = sim.run().summary
    sent = [t for t, _ in sim.mc.client.sent]
    assert len(sent) > 60
    for i in range(len(sent) - 15):
        assert sent[i + 15] - sent[i] >= 1.0 - 1e-9  # 15 requests: a burst of 10 + 5 s^-1
    big = _pod_creations(sim, "big")[:25]  # its first pods (later ones: restarts)
    assert big[-1] - big[0] >= (25 - 10) / 5.0
    assert summary["write_latency_s"]["max"] >= 3.0

    free, _, _ = _sim(jobs, KEEP, nodes=7)
    free.run()
    made = _pod_creations(free, "big")[:25]
    assert made[-1] == made[0]


def test_a_faster_bucket_writes_faster() -> None:
    jobs = [job("big", 24, steps=100)]
    spans = []
    for qps, burst in ((5.0, 10), (50.0, 100)):
        sim, _, _ = _sim(jobs, replace(REAL, mc_qps=qps, mc_burst=burst), nodes=7)
        sim.run()
        pods = _pod_creations(sim, "big")
        spans.append(pods[-1] - pods[0])
    assert spans[0] >= 3.0 and spans[1] < 0.5


def test_each_sync_reads_its_parent_live_and_writes_a_status_only_when_it_changed() -> None:
    """AtomicStatusUpdate: one GET per finished sync, an UpdateStatus only for a change."""
    sim, _, spy = _sim([job("a", 2, steps=50), job("b", 1, arrival=3, steps=50)], REAL)
    changes = Counter()

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey in (TFJOBS, POOL_TYPE) and old and new and old.get("status") != new.get("status"):
            changes[tkey] += 1

    sim.api.watchers.append(watch)
    summary = sim.run().summary
    requests = summary["api_requests"]
    ok_syncs = sum(1 for c in spy.calls if c.hook in ("sync", "finalize") and c.status == 200)
    finalizers = 2  # each job's finalizer added (a GET and an update; never deleted here)
    assert requests["get"] == ok_syncs + finalizers
    assert requests["update_status"] == sum(changes.values()) < ok_syncs
    assert requests["create"] >= 2 + 3 + 2 * 2  # two Admissions, three pods, two services


def test_five_workers_sync_five_parents_at_once_and_no_more() -> None:
    jobs = [job(n, 1, steps=40) for n in "abcdefgh"]
    slow = replace(REAL, job_sync_base_ms=500.0, job_sync_per_kib_ms=0.0)
    sim, _, spy = _sim(jobs, slow, nodes=2)
    summary = sim.run().summary
    starts = [c.t for c in spy.by(JOBS, "sync")]
    most = max(sum(1 for s in starts if s <= t < s + 0.5) for t in starts)
    assert most == 5
    depth = summary["queue_depth_by_controller"][JOBS]
    assert depth["max"] >= 3 and depth["mean"] >= 0


def test_every_parent_is_synced_again_at_each_cache_flush() -> None:
    """--cache-flush-interval: a quiet job is synced at every flush, and only then."""
    config = replace(REAL, mc_resync_s=500.0, mc_customize_ttl_s=0.0, max_time_s=1700.0)
    sim, _, spy = _sim([job("a", 1, steps=1e9)], config)
    sim.run()
    late = [c.t for c in _syncs(spy, JOBS, lo=100.0)]
    assert [round(t) for t in late] == [500, 1000, 1500]
    pool = [round(c.t) for c in _syncs(spy, POOLS, lo=100.0)]
    assert pool == [500, 1000, 1500]


def test_customize_answers_expire_and_a_related_event_customizes_every_expired_parent() -> None:
    """The cache keeps an answer 20 minutes; then the next event of a related object (an
    Admission) calls customize for every parent of the controller whose answer expired,
    in the event handler, and the parent it concerns is synced only after those calls."""
    fake = Fake()
    config = replace(
        REAL, mc_resync_s=0.0, job_sync_base_ms=500.0, job_sync_per_kib_ms=0.0, max_time_s=1600.0
    )
    sim, _, spy = _sim([job("a", 1, steps=1e9), job("b", 1, steps=1e9)], config, fake)
    sim.schedule(1500.0, lambda: fake.notes.update({"default/a": "moved"}))
    sim.schedule(1500.0, lambda: sim.mc[POOLS].enqueue("default"))
    sim.run()
    customized = [(c.parent, round(c.t)) for c in spy.by(JOBS, "customize")]
    assert ("default/a", 0) in customized and ("default/b", 0) in customized
    late = {p for p, t in customized if t >= 1500}
    assert late == {"default/a", "default/b"}  # b's own objects did not change
    after = [c.t for c in _syncs(spy, JOBS, lo=1500.0) if c.parent == "default/a"]
    assert after and after[0] >= 1500.0 + 2 * 0.5  # behind two customize calls of 0.5 s
    assert sim.mc[JOBS].customize_calls == len(spy.by(JOBS, "customize"))


def test_dynamic_apply_stamps_each_child_with_its_last_applied_copy() -> None:
    sim, fake, _ = _sim([job("a", 2, steps=1e9)], replace(REAL, max_time_s=60.0))
    sim.schedule(30.0, lambda: fake.notes.update({"default/a": "moved"}))
    sim.schedule(30.0, lambda: sim.mc[POOLS].enqueue("default"))
    sim.run()
    for tkey, key in ((PODS, "default/a-worker-0"), (ADMISSIONS, "default/tfjob-a")):
        obj = sim.api.get(tkey, key)
        applied = orjson.loads(obj["metadata"]["annotations"][LAST_APPLIED])
        assert applied["metadata"]["name"] == obj["metadata"]["name"]
        assert applied["metadata"]["labels"] == obj["metadata"]["labels"]
        assert "ownerReferences" not in applied["metadata"]  # stamped before the owner
        assert applied["spec"] == _but_node(obj["spec"]) or tkey == PODS
    admission = sim.api.get(ADMISSIONS, "default/tfjob-a")
    applied = orjson.loads(admission["metadata"]["annotations"][LAST_APPLIED])
    assert admission["spec"]["message"] == applied["spec"]["message"] == "moved"

    ssa, _, _ = _sim(
        [job("a", 2, steps=1e9)],
        replace(REAL, max_time_s=60.0, mc_apply_strategy="server-side-apply"),
    )
    ssa.run()
    pod = ssa.api.get(PODS, "default/a-worker-0")
    assert LAST_APPLIED not in (pod["metadata"].get("annotations") or {})


def test_cost_free_is_the_simulator_as_it_was() -> None:
    free = SimConfig().cost_free()
    assert (free.mc_workers, free.mc_qps, free.mc_resync_s, free.mc_customize_ttl_s) == (1, 0, 0, 0)
    assert not free.mc_charged and free.object_sizes == "minimal"
    real = SimConfig()
    assert (real.mc_workers, real.mc_qps, real.mc_burst) == (5, 5.0, 10)
    assert (real.mc_resync_s, real.mc_customize_ttl_s) == (1800.0, 1200.0)
    assert real.mc_apply_strategy == "dynamic-apply" and real.object_sizes == "real"
