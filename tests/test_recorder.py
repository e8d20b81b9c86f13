"""The recorder (``recorder/``): the Events that tell each job's story, as ``kubectl describe
tfjob`` shows them, in the simulator (the real pass over the simulated API server) and
through the official client against a fake API server at the HTTP layer; a restart
repeats nothing; its writes stay within its budget; its process and its chart objects."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recorder.config import RecorderSettings
from recorder.kube import KubeEvents, KubeObjects
from recorder.loop import record_once
from recorder.story import Fact, Regarding, admission_facts, job_facts
from recorder.write import TokenBucket, Written, event_name, record
from sim.apiserver import EPOCH
from sim.engine import SimConfig, Simulation
from sim.recorder import EVENTS, attach
from sim.scenario import load_scenario
from tests.controller_cli import assert_exits_2_with_one_line, run_module
from tests.kubefake import FakeApi, granted, route, use_kubeconfig
from tests.simkit import gpu_nodes, job, scenario
from webhooks.env import unknown_variable
from webhooks.kubeapi import Api

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def describe(events: list[Mapping[str, Any]], name: str) -> list[str]:
    """The Events section of ``kubectl describe tfjob NAME``: Type, Reason, when (seconds
    into the run; ``xN over`` a series), From, Message, oldest first."""

    def at(e: Mapping[str, Any]) -> str:
        first = datetime.fromisoformat(e["eventTime"])
        when = f"{(first - EPOCH).total_seconds():.0f}s"
        series = e.get("series")
        if series:
            last = datetime.fromisoformat(series["lastObservedTime"])
            when = f"{(last - EPOCH).total_seconds():.0f}s (x{series['count']} since {when})"
        return when

    mine = sorted(
        (e for e in events if e["regarding"]["name"] == name),
        key=lambda e: (e["eventTime"], e["metadata"]["name"]),
    )
    return [
        f"{e['type']:<8} {e['reason']:<20} {at(e):<10} {e['reportingController']}  {e['note']}"
        for e in mine
    ]


def _reasons(lines: list[str]) -> list[str]:
    return [line.split()[1] for line in lines]


# --- the story of the demo scenario ------------------------------------------------------


@pytest.fixture(scope="module")
def demo() -> tuple[Simulation, Any]:
    sim = Simulation(load_scenario(ROOT / "examples" / "scenario.yaml"), SimConfig())
    recorder = attach(sim)
    sim.run()
    return sim, recorder


def test_the_demos_events_tell_each_jobs_story(demo, capsys) -> None:
    sim, _ = demo
    events = list(sim.api.list(EVENTS))
    stories = {name: describe(events, name) for name in ("resnet", "bert", "cifar", "ncf")}
    with capsys.disabled():
        for name, lines in stories.items():
            print(f"\n$ kubectl describe tfjob {name}\nEvents:")
            print("\n".join(f"  {line}" for line in lines))
    # resnet is admitted at once across both nodes, runs, succeeds.
    assert _reasons(stories["resnet"]) == ["Admitted", "TFJobSucceeded"]
    assert "gpu-1 (1 PS, 4 Worker), gpu-2 (2 Worker)" in stories["resnet"][0]
    # bert waits for room (the gang does not fit beside resnet) until resnet is done.
    assert _reasons(stories["bert"]) == ["WaitingForCapacity", "Admitted", "TFJobSucceeded"]
    assert "4 workers (min-instances) at once" in stories["bert"][0]
    # cifar fits into the 2 free GPUs at once; ncf waits for cifar, then gets its room.
    assert _reasons(stories["cifar"]) == ["Admitted", "TFJobSucceeded"]
    assert _reasons(stories["ncf"]) == ["WaitingForCapacity", "Admitted", "TFJobSucceeded"]
    assert "admitted by pool default with 1 worker: gpu-2 (1 PS, 1 Worker)" in stories["ncf"][1]
    for e in events:
        assert e["reportingController"] == "dragonet.io/recorder"
        assert e["reportingInstance"] and e["action"] and e["type"] in ("Normal", "Warning")
        assert e["regarding"]["kind"] == "TFJob" and e["regarding"]["uid"]
        assert e["metadata"]["namespace"] == e["regarding"]["namespace"]


def test_each_event_is_written_once_and_costs_a_fraction_of_metacontrollers_writes(
    demo,
) -> None:
    sim, recorder = demo
    events = list(sim.api.list(EVENTS))
    assert recorder.events.writes == len(events) == 10  # one write per story, no repeats
    mc = sim.mc.client.requests
    mc_writes = sum(v for k, v in mc.items() if k != "get")
    assert recorder.events.writes < 0.25 * mc_writes, (recorder.events.writes, mc)


def test_a_restarted_recorder_neither_repeats_nor_loses_a_story() -> None:
    def run(restarts: tuple[float, ...]) -> dict[str, Any]:
        sim = Simulation(load_scenario(ROOT / "examples" / "scenario.yaml"), SimConfig())
        recorder = attach(sim)
        for t in restarts:
            sim.schedule(t, recorder.restart)
        sim.run()
        return {
            e["metadata"]["name"]: (e["reason"], e["eventTime"], e.get("series"))
            for e in sim.api.list(EVENTS)
        } | {"writes": recorder.events.writes}

    assert run((5.0, 300.0, 700.0, 1000.0)) == run(())


# --- scaling and preemption ----------------------------------------------------------------


def test_a_job_that_grows_then_shrinks_says_from_and_to_how_many_and_why() -> None:
    jobs = [
        job("a", 4, min_workers=2, max_workers=6, steps=3000.0),
        job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200),
    ]
    sim = Simulation(scenario(gpu_nodes(2), jobs), SimConfig(policy="dragon"))
    attach(sim)
    sim.run()
    lines = describe(list(sim.api.list(EVENTS)), "a")
    print("\n".join(lines))
    grown = [line for line in lines if " Grown " in line]
    shrunk = [line for line in lines if " Shrunk " in line]
    assert grown and shrunk, lines
    assert "workers from 4 to 6" in grown[0]
    assert any("workers from 6 to" in line for line in shrunk)
    assert _reasons(lines)[0] == "Admitted" and _reasons(lines)[-1] == "TFJobSucceeded"
    b = describe(list(sim.api.list(EVENTS)), "b")
    assert "WaitingForShrink" in _reasons(b) or "WaitingForCapacity" in _reasons(b), b


def test_a_preempted_job_says_by_whom_and_that_it_was_admitted_again() -> None:
    from tests.test_preemption import HIGH, _priority, _world

    a = job("a", 8, ps=1, min_workers=8, max_workers=8, steps=2000)
    b = _priority(job("b", 8, ps=1, min_workers=8, max_workers=8, arrival=100.0, steps=200), "high")
    sim = Simulation(
        _world([a, b], HIGH), SimConfig(policy="dragonet", delete_finished_after_s=None)
    )
    attach(sim)
    sim.run()
    events = list(sim.api.list(EVENTS))
    lines = describe(events, "a")
    print("\n".join(lines))
    assert _reasons(lines) == [
        "Admitted",
        "Preempted",
        "WaitingForCapacity",
        "Admitted",
        "TFJobSucceeded",
    ]
    assert lines[1].startswith("Warning") and "preempted: default/b has higher priority" in lines[1]
    assert "jobs ahead in the queue (default/b)" in lines[2]
    b_done = next(e for e in events if e["regarding"]["name"] == "b" and "Succeeded" in e["reason"])
    second = sorted(
        e["eventTime"]
        for e in events
        if e["regarding"]["name"] == "a" and e["reason"] == "Admitted"
    )[1]
    assert second >= b_done["eventTime"]  # back in once b was done
    # Preempted again the same way would be one more in that Event's series (see below).


def test_a_migrated_worker_says_from_which_node_to_which() -> None:
    from tests.test_migration import ask, nodes
    from tests.test_migration import job as cpu_job

    sim = Simulation(
        scenario(nodes("16", "16", "16"), [cpu_job("a")]), SimConfig(delete_finished_after_s=None)
    )
    attach(sim)
    ask(sim, 60, "a", 1)
    sim.run()
    lines = describe(list(sim.api.list(EVENTS)), "a")
    print("\n".join(lines))
    [moved] = [line for line in lines if " Migrated " in line]
    assert re.search(r"Worker 1 moved from cpu-\d to cpu-\d: Manual", moved), moved
    source, target = re.findall(r"cpu-\d", moved.split("moved")[1])
    assert source != target
    # Its placement changed by the move, not by another admission: one Admitted.
    assert _reasons(lines) == ["Admitted", "Migrated", "TFJobSucceeded"]


def test_a_job_with_a_ttl_says_when_the_reaper_deletes_it_while_it_can_be_described() -> None:
    spec = job("short", 1, steps=100)
    spec.manifest["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 30}
    sim = Simulation(scenario(gpu_nodes(1), [spec]), SimConfig(delete_finished_after_s=None))
    attach(sim)
    sim.run()
    assert sim.reaper.deleted, "the reaper deleted it"
    lines = describe(list(sim.api.list(EVENTS)), "short")
    assert sorted(_reasons(lines)[-2:]) == ["TFJobSucceeded", "TTLAfterFinished"]  # at once
    [ttl] = [line for line in lines if " TTLAfterFinished " in line]
    assert "by dragonet-reaper: runPolicy.ttlSecondsAfterFinished is 30 s" in ttl
    # Said as the job ended, for the time the reaper then deleted it (within its interval).
    [(when, _)] = sim.reaper.deleted
    said = datetime.fromisoformat(ttl.split("deleted at ")[1].split()[0])
    assert said <= datetime.fromisoformat(when) <= said + timedelta(seconds=30)


# --- writing: names, series, age, budget ---------------------------------------------------


def _fact(
    at: datetime | None, note: str = "workers from 4 to 2: x", reason: str = "Shrunk"
) -> Fact:
    job_ref = Regarding("kubeflow.org/v1", "TFJob", "team", "a", "uid-a")
    return Fact(job_ref, "Normal", reason, "Scale", note, at, note)


class _Events:
    """``recorder.write.Events`` in memory."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0

    def list_ours(self) -> Iterator[Mapping[str, Any]]:
        return iter(list(self.events.values()))

    def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.events.get((namespace, name))

    def create(self, event: Mapping[str, Any]) -> None:
        from webhooks.kubeapi import AlreadyExists

        key = (event["metadata"]["namespace"], event["metadata"]["name"])
        if key in self.events:
            raise AlreadyExists("409", 409)
        self.writes += 1
        self.events[key] = dict(event)

    def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self.writes += 1
        self.events[(namespace, name)].update(body)


def test_a_story_that_happens_again_is_one_more_in_its_series_not_another_event() -> None:
    api, written, free = _Events(), Written(timedelta(hours=1)), TokenBucket(0, 1)
    t1, t2 = T0, T0 + timedelta(minutes=5)
    record([_fact(t1)], api, written, t1, "r", free)
    record([_fact(t1)], api, written, t1 + timedelta(seconds=10), "r", free)  # seen again
    assert api.writes == 1
    record([_fact(t2)], api, written, t2, "r", free)  # it happened again
    [event] = api.events.values()
    assert event["series"] == {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}
    assert event["eventTime"] == "2026-01-01T00:00:00.000000Z"
    # Another recorder (a restart) knows only what it lists: it writes nothing again.
    again = Written(timedelta(hours=1))
    again.load(api.list_ours(), t2)
    record([_fact(t1), _fact(t2)], api, again, t2 + timedelta(seconds=30), "r", free)
    assert api.writes == 2
    # Another story (other numbers) is another Event.
    record([_fact(t2, "workers from 6 to 4: y")], api, written, t2, "r", free)
    assert len(api.events) == 2


def test_a_second_recorder_that_finds_the_name_taken_counts_on_from_what_is_there() -> None:
    api, free = _Events(), TokenBucket(0, 1)
    record([_fact(T0)], api, Written(timedelta(hours=1)), T0, "r1", free)
    later = T0 + timedelta(minutes=1)
    record([_fact(T0), _fact(later)], api, Written(timedelta(hours=1)), later, "r2", free)
    [event] = api.events.values()
    assert event["series"]["count"] == 2 and event["reportingInstance"] == "r1"


def test_history_older_than_the_event_ttl_is_not_written() -> None:
    api = _Events()
    now = T0 + timedelta(hours=2)
    record(
        [_fact(T0), _fact(None, reason="WaitingForCapacity")],
        api,
        Written(timedelta(hours=1)),
        now,
        "r",
        TokenBucket(0, 1),
    )
    assert [e["reason"] for e in api.events.values()] == ["WaitingForCapacity"]


def test_the_write_budget_paces_writes_at_its_rate_after_its_burst() -> None:
    clock = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s

    bucket = TokenBucket(2.0, 3, clock=lambda: clock[0], sleep=sleep)
    for _ in range(7):
        bucket.take()
    assert slept[:0] == [] and len(slept) == 4  # three at once, then one every 0.5 s
    assert clock[0] == pytest.approx(2.0)


def test_the_loop_lists_what_was_written_first_then_watches_and_stops_when_told() -> None:
    import threading
    import time

    from recorder.kube import ADMISSIONS, Change, Listing
    from recorder.loop import Writer, run

    admission = _admission("a", lastScale={"time": "2026-01-01T00:00:10Z", "from": 4, "to": 2})
    stop = threading.Event()
    watched: list[str] = []

    class Objects:
        def list(self, resource):
            return Listing([admission] if resource == ADMISSIONS else [], "7")

        def watch(self, resource, version, timeout):
            if resource != ADMISSIONS or len(watched) == 3:
                stop.wait(0.05)  # the API server ends an idle watch
                return
            watched.append(version)
            yield Change("MODIFIED", admission)  # seen again: nothing new

    api = _Events()
    earlier = Written(timedelta(hours=1))
    record(admission_facts(admission), api, earlier, T0, "r0", TokenBucket(0, 1))
    assert api.writes == 1  # the Shrunk Event, by a recorder that is gone
    clock = lambda: T0 + timedelta(minutes=1)  # noqa: E731
    writer = Writer(api, Written(timedelta(hours=1)), "r1", TokenBucket(0, 1), stop, clock)
    loop = threading.Thread(target=run, args=(Objects(), writer, 1, 0.01))
    loop.start()
    deadline = time.monotonic() + 10
    while writer.handed < 4 and time.monotonic() < deadline:  # listed once, watched 3 times
        time.sleep(0.01)
    stop.set()
    loop.join(5)
    assert not loop.is_alive()
    assert watched == ["7", "7", "7"]  # watched from the list's resourceVersion
    assert writer.handed == 4 and api.writes == 1  # nothing written again


def test_a_recorder_told_to_stop_writes_nothing_more() -> None:
    api = _Events()
    facts = [_fact(T0), _fact(T0, "workers from 6 to 4: y")]
    tally = record(
        facts, api, Written(timedelta(hours=1)), T0, "r", TokenBucket(0, 1), lambda: True
    )
    assert (tally.created, api.writes) == (0, 0)


def test_an_object_it_cannot_read_yields_no_fact() -> None:
    assert admission_facts({"metadata": {"namespace": "x"}, "spec": {"phase": "Nope"}}) == []
    assert admission_facts({"spec": []}) == []
    assert job_facts({"kind": "TFJob", "status": {"conditions": "x"}}) == []
    broken = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "j", "namespace": "n"},
        "status": {"conditions": [None, {"type": "Succeeded", "status": "True"}]},
    }
    [fact] = job_facts(broken)
    assert fact.reason == "TFJobSucceeded" and fact.at is None


def test_event_names_are_valid_and_the_same_for_the_same_story() -> None:
    import re

    long = Fact(
        Regarding("kubeflow.org/v1", "TFJob", "n", "j" * 253, "u"), "Normal", "R", "A", "x", T0, "i"
    )
    name = event_name(long)
    assert len(name) <= 253 and re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name)
    assert event_name(_fact(T0)) == event_name(_fact(T0 + timedelta(hours=1)))
    assert event_name(_fact(T0)) != event_name(_fact(T0, "workers from 6 to 4: y"))


# --- through the official client -------------------------------------------------------------


def _admission(name: str, phase: str = "Admitted", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "Admission",
        "metadata": {"name": f"tfjob-{name}", "namespace": "team"},
        "spec": {
            "pool": "default",
            "job": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "name": name,
                "uid": f"u-{name}",
            },
            "phase": phase,
            "workers": 2,
            "pods": [
                {"type": "PS", "index": 0, "node": "n1"},
                {"type": "Worker", "index": 0, "node": "n1"},
                {"type": "Worker", "index": 1, "node": "n2"},
            ],
            **spec,
        },
    }


@pytest.fixture
def kube(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[KubeObjects, KubeEvents, FakeApi]:
    use_kubeconfig(tmp_path, monkeypatch)
    api = Api(1.0)
    server = FakeApi()
    route(api.client, server.request, monkeypatch)
    return KubeObjects(api, page_size=2), KubeEvents(api, page_size=2), server


def _pass(
    kube: tuple[KubeObjects, KubeEvents, FakeApi], now: datetime, written: Written | None = None
):
    objects, events, _ = kube
    written = written or Written(timedelta(hours=1))
    written.load(events.list_ours(), now)
    return record_once(objects, events, written, now, "recorder-0", TokenBucket(0, 1))


def test_through_the_client_the_api_holds_events_k8s_io_v1_events_as_written(kube) -> None:
    _, _, server = kube
    admitted = _admission(
        "a",
        admittedTime="2026-01-01T00:00:10Z",
        lastScale={"time": "2026-01-01T00:01:00Z", "from": 4, "to": 2, "reason": "for b"},
    )
    server.put("dragonet.io/v1alpha1", "admissions", admitted)
    for i in range(3):  # pages of 2
        waiting = _admission(f"w{i}", "Queued", reason="WaitingForCapacity", message="room")
        server.put("dragonet.io/v1alpha1", "admissions", waiting)
    done = _pass(kube, T0 + timedelta(minutes=2))
    assert (done.tally.created, done.tally.failed, done.unlisted) == (5, 0, 0)
    events = server.objects("events.k8s.io/v1", "events")
    by_reason = {e["reason"]: e for e in events if e["regarding"]["name"] == "a"}
    assert set(by_reason) == {"Admitted", "Shrunk"}
    shrunk = by_reason["Shrunk"]
    assert shrunk["note"] == "workers from 4 to 2: for b"
    assert shrunk["eventTime"] == "2026-01-01T00:01:00.000000Z"
    assert shrunk["regarding"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "name": "a",
        "namespace": "team",
        "uid": "u-a",
    }
    assert shrunk["metadata"]["namespace"] == "team"
    assert shrunk["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "dragonet-recorder"}
    # A second recorder (a restart) lists them and writes nothing.
    writes = server.writes
    assert _pass(kube, T0 + timedelta(minutes=3)).tally.created == 0
    assert server.writes == writes
    # The job shrinks again, from 2 to 1: another story; then grows back from 4 to 2 later
    # (the same words): one more in that series, a patch.
    admitted["spec"]["lastScale"] = {
        "time": "2026-01-01T00:05:00Z",
        "from": 4,
        "to": 2,
        "reason": "for b",
    }
    server.put("dragonet.io/v1alpha1", "admissions", admitted)
    done = _pass(kube, T0 + timedelta(minutes=6))
    assert (done.tally.created, done.tally.counted) == (0, 1)
    [shrunk] = [e for e in server.objects("events.k8s.io/v1", "events") if e["reason"] == "Shrunk"]
    assert shrunk["series"] == {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}
    # A merge of the series into the Event (not a JSON patch's list of operations).
    assert server.patch_types == ["application/merge-patch+json"]


def test_a_failed_job_its_ttl_and_a_pools_left_out_object_are_told(kube) -> None:
    _, _, server = kube
    failed = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "bad", "namespace": "team"},
        "spec": {"runPolicy": {"ttlSecondsAfterFinished": 600}},
        "status": {
            "completionTime": "2026-01-01T00:00:30Z",
            "conditions": [
                {"type": "Created", "status": "True", "reason": "TFJobCreated"},
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "TFJobFailed",
                    "message": "spec.tfReplicaSpecs.Worker.replicas: must be at least 0",
                    "lastTransitionTime": "2026-01-01T00:00:30Z",
                },
            ],
        },
    }
    server.put("kubeflow.org/v1", "tfjobs", _listed(failed))
    problem = "Node gpu-9 is left out: status.allocatable.cpu: not a quantity"
    pool = {"metadata": {"name": "default"}, "status": {"problems": [problem]}}
    server.put("dragonet.io/v1alpha1", "trainingpools", pool)
    assert _pass(kube, T0 + timedelta(minutes=1)).tally.created == 3
    events = {e["reason"]: e for e in server.objects("events.k8s.io/v1", "events")}
    assert events["TFJobFailed"]["type"] == "Warning"
    assert events["TFJobFailed"]["note"].startswith("spec.tfReplicaSpecs.Worker.replicas")
    assert events["TFJobFailed"]["regarding"]["uid"] == failed["metadata"]["uid"]
    ttl = events["TTLAfterFinished"]
    assert ttl["note"] == (
        "deleted at 2026-01-01T00:10:30Z by dragonet-reaper: "
        "runPolicy.ttlSecondsAfterFinished is 600 s"
    )
    left_out = events["ObjectLeftOut"]
    assert (left_out["type"], left_out["note"]) == ("Warning", problem)
    # A cluster-scoped object's Events go to the default namespace, as a Node's do.
    assert left_out["metadata"]["namespace"] == "default"
    assert left_out["regarding"] == {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "TrainingPool",
        "name": "default",
        "uid": pool["metadata"]["uid"],
    }


def test_an_object_left_out_is_told_on_itself_in_its_namespace_and_unnamed_on_the_pool(
    kube,
) -> None:
    """A namespaced object the pool cannot read: its tenant reads why on the object, in its
    own namespace; the pool's Event (in default) says what kind of object, not whose."""
    _, _, server = kube
    problems = [
        "Admission team-a/tfjob-big is left out: spec.pods[0].node: Input should be a string",
        "TFJob team-b/fast: its throughput is left out: history.samples: too many",
        "Pod default/w-0 is left out: spec.containers: Field required",
        "Node gpu-9 is left out: status.allocatable.cpu: not a quantity",
    ]
    pool = {"metadata": {"name": "gpu"}, "status": {"problems": problems}}
    server.put("dragonet.io/v1alpha1", "trainingpools", pool)
    assert _pass(kube, T0).tally.created == 7
    events = server.objects("events.k8s.io/v1", "events")
    assert {e["reason"] for e in events} == {"ObjectLeftOut"}
    on = {
        (e["metadata"]["namespace"], e["regarding"]["kind"], e["regarding"]["name"]): e
        for e in events
    }
    admission = on[("team-a", "Admission", "tfjob-big")]
    assert admission["regarding"] == {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "Admission",
        "namespace": "team-a",
        "name": "tfjob-big",
    }
    assert admission["type"] == "Warning"
    assert admission["note"] == (
        "Admission tfjob-big is left out of pool gpu's plan: spec.pods[0].node: Input should "
        "be a string"
    )
    throughput = on[("team-b", "TFJob", "fast")]
    assert throughput["regarding"]["apiVersion"] == "kubeflow.org/v1"
    assert throughput["note"] == (
        "TFJob fast: its throughput is left out of pool gpu's plan: history.samples: too many"
    )
    pod = on[("default", "Pod", "w-0")]
    assert pod["regarding"]["apiVersion"] == "v1"
    pools = sorted(e["note"] for e in events if e["regarding"]["kind"] == "TrainingPool")
    assert pools == sorted(
        [
            "an Admission in another namespace is left out: spec.pods[0].node: Input should "
            "be a string (an Event on it says so in its namespace)",
            "a TFJob in another namespace whose throughput is left out: history.samples: too "
            "many (an Event on it says so in its namespace)",
            problems[2],  # the default namespace's own object is named in default
            problems[3],  # a Node is the cluster's
        ]
    )
    assert {
        e["metadata"]["namespace"] for e in events if e["regarding"]["kind"] == "TrainingPool"
    } == {"default"}
    for e in events:
        if e["metadata"]["namespace"] == "default":
            assert "team-a" not in e["note"] and "tfjob-big" not in e["note"]
            assert "team-b" not in e["note"] and "fast" not in e["note"]


def _listed(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as a list serves it: without apiVersion and kind."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def test_an_api_that_fails_is_counted_and_the_pass_goes_on(kube) -> None:
    objects, events, server = kube
    server.fail = 500
    done = record_once(objects, events, Written(timedelta(hours=1)), T0, "r", TokenBucket(0, 1))
    # admissions, pools, and one list per job kind (tfjobs, mxjobs, pytorchjobs)
    assert done.unlisted == 5 and done.tally.created == 0


def test_the_charts_cluster_role_grants_exactly_what_the_recorder_calls(kube, helm: str) -> None:
    from tests.test_chart import _render

    objects, events, server = kube
    scale = {"time": "2026-01-01T00:00:10Z", "from": 4, "to": 2, "reason": "for b"}
    admitted = _admission("a", lastScale=scale)
    server.put("dragonet.io/v1alpha1", "admissions", admitted)
    _pass(kube, T0)  # list its own Events and every source; create
    # A recorder that has not listed its Events finds the name taken (read), and the job
    # shrunk the same way again later (patch the Event's series).
    admitted["spec"]["lastScale"] = {**scale, "time": "2026-01-01T00:00:50Z"}
    later = T0 + timedelta(minutes=1)
    done = record_once(objects, events, Written(timedelta(hours=1)), later, "r", TokenBucket(0, 1))
    assert done.tally.counted == 1
    # The running recorder lists and watches every source.
    _watch_all(objects, events, server)
    role = next(
        d
        for d in _render(helm)
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dragonet-recorder"
    )
    assert granted(role) == server.used


def _watch_all(objects: KubeObjects, events: KubeEvents, server: FakeApi) -> None:
    """Run the recorder's loop until it has watched every source once."""
    import threading
    import time

    from recorder.loop import Writer, run

    stop = threading.Event()
    writer = Writer(events, Written(timedelta(hours=1)), "r", TokenBucket(0, 1), stop)
    loop = threading.Thread(target=run, args=(objects, writer, 1, 0.01))
    loop.start()
    deadline = time.monotonic() + 10
    from policy.model.kinds import KINDS

    plurals = {"admissions", *(k.plural for k in KINDS), "trainingpools"}
    while {p for p, _ in server.watched} != plurals and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    loop.join(5)
    assert {p for p, _ in server.watched} == plurals


# --- the process and the chart --------------------------------------------------------------


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_module("recorder", tmp_path, *args, **env)


def test_help_says_what_it_does(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--help")
    assert proc.returncode == 0 and "Events" in proc.stdout


def test_a_bad_setting_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, DRAGONET_RECORDER_QPS="-1")
    assert_exits_2_with_one_line(proc, "dragonet-recorder: setting qps: Input should be")


def test_a_misspelt_setting_exits_2_naming_the_setting_it_meant(tmp_path: Path) -> None:
    proc = _run(tmp_path, DRAGONET_RECORDER_WATCH_SECS="60")
    assert_exits_2_with_one_line(
        proc,
        "dragonet-recorder: DRAGONET_RECORDER_WATCH_SECS: not a setting of dragonet-recorder "
        "(did you mean DRAGONET_RECORDER_WATCH_SECONDS?",
    )


def test_without_any_api_configuration_it_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, KUBECONFIG=str(tmp_path / "missing"))
    assert_exits_2_with_one_line(proc, "dragonet-recorder: no Kubernetes API configuration:")


def test_an_argument_it_does_not_take_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--qps", "5")
    assert_exits_2_with_one_line(proc, "dragonet-recorder: takes no arguments (got '--qps')")


@pytest.fixture(scope="module")
def recorder_docs(helm: str) -> list[dict[str, Any]]:
    from tests.test_chart import _render

    return _render(
        helm,
        "--set",
        "recorder.watchSeconds=7",
        "--set",
        "recorder.qps=3",
        "--set",
        "recorder.burst=4",
        "--set",
        "recorder.serviceAccount.name=rec-sa",
    )


def _recorder(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "recorder"
    ]
    return found


def test_the_recorder_is_on_by_default_and_its_objects_validate(recorder_docs) -> None:
    from tests.test_chart import _validate_all, restricted_violations

    _validate_all(recorder_docs)
    pod = _recorder(recorder_docs, "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["dragonet-recorder"]
    assert (
        pod["serviceAccountName"]
        == "rec-sa"
        == _recorder(recorder_docs, "ServiceAccount")["metadata"]["name"]
    )
    assert _recorder(recorder_docs, "ClusterRoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": "rec-sa", "namespace": "dragonet"}
    ]
    assert restricted_violations(pod) == []
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_recorder_reads_the_environment_the_chart_sets(
    recorder_docs, monkeypatch: pytest.MonkeyPatch
) -> None:
    [container] = _recorder(recorder_docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    for e in container["env"]:
        if "value" in e:
            monkeypatch.setenv(e["name"], e["value"])
        else:  # the pod's name, from the downward API
            assert e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            monkeypatch.setenv(e["name"], "dragonet-recorder-abc")
    assert unknown_variable(os.environ, RecorderSettings, "dragonet-recorder") is None
    s = RecorderSettings()
    assert (s.watch_seconds, s.qps, s.burst, s.instance) == (7, 3, 4, "dragonet-recorder-abc")


def test_the_recorder_can_be_turned_off(helm: str) -> None:
    from tests.test_chart import _render

    docs = _render(helm, "--set", "recorder.enabled=false")
    assert not [d for d in docs if "recorder" in d["metadata"]["name"]]


def test_the_notes_say_where_the_events_are(helm: str, tmp_path: Path) -> None:
    from tests.test_chart import _notes

    assert "Recorder:              Deployment dragonet-recorder: each job's Events" in _notes(
        helm, tmp_path
    )
    off = _notes(helm, tmp_path / "off", "--set", "recorder.enabled=false")
    assert "Recorder:              off (recorder.enabled=false): no Events" in off


# --- one Event per fact; other namespaces ---------------------------------------------------


def test_the_admitted_event_tells_the_placement_at_admission_not_a_later_growth() -> None:
    admitted = _admission("a", admittedTime="2026-01-01T00:00:10Z")
    [fact] = admission_facts(admitted)
    assert (
        fact.note == "admitted by pool default with 2 workers: n1 (1 PS, 1 Worker), n2 (1 Worker)"
    )
    # Read only after it grew (a recorder that missed the admission): the growth is the
    # Grown Event's, not told again as the placement the job was admitted with.
    grown = _admission(
        "a",
        admittedTime="2026-01-01T00:00:10Z",
        workers=3,
        lastScale={"time": "2026-01-01T00:01:00Z", "from": 2, "to": 3, "reason": "room"},
    )
    grown["spec"]["pods"].append({"type": "Worker", "index": 2, "node": "n2"})
    by_reason = {f.reason: f for f in admission_facts(grown)}
    assert "3 workers" not in by_reason["Admitted"].note
    assert "scaled or moved since" in by_reason["Admitted"].note
    assert by_reason["Grown"].note == "workers from 2 to 3: room"
    # The same admission either way: one Event.
    assert event_name(by_reason["Admitted"]) == event_name(fact)


def test_no_note_names_another_namespaces_job() -> None:
    spec = {
        "reason": "WaitingForCapacity",
        "message": "waiting: jobs ahead in the queue (team-c/urgent, team/b) claim it",
        "service": {
            "gpuSeconds": 1.0,
            "preemptions": 1,
            "lastPreemption": {
                "time": "2026-01-01T00:01:00Z",
                "by": "team-c/urgent",
                "reason": "team-c/urgent has higher priority (1000 > 0)",
            },
        },
        "lastScale": {
            "time": "2026-01-01T00:00:50Z",
            "from": 4,
            "to": 2,
            "reason": "shrunk from 4 to 2 workers to make room for team-x/big, which waited 30 s",
        },
    }
    notes = {f.reason: f.note for f in admission_facts(_admission("a", "Queued", **spec))}
    assert notes["Preempted"] == (
        "preempted: a job in another namespace has higher priority (1000 > 0); "
        "it queues again as a whole gang"
    )
    # The same namespace's job may be named; resource names are not job keys.
    assert notes["WaitingForCapacity"] == (
        "waiting: jobs ahead in the queue (a job in another namespace, team/b) claim it"
    )
    assert "team-x" not in notes["Shrunk"] and "for a job in another namespace," in notes["Shrunk"]
    from recorder.story import private

    assert private("needs 4 nvidia.com/gpu on kubernetes.io/hostname", "team") == (
        "needs 4 nvidia.com/gpu on kubernetes.io/hostname"
    )
