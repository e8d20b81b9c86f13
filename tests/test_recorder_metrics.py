"""The pools' metrics, exported once by the recorder (``recorder/metrics.py``), and the
recorder's and the reaper's probes (``webhooks/health.py``).

Over fixture listings: the gauges are the listed pools' statuses and a deleted pool's
series leave with the listing that misses it; each decision is counted once however often
it is listed, again only when it happens again, and not at all when it was already there
as the recorder started; a queue wait is observed once, whichever of the job and its
Admission is listed first. Through the simulator: each shrink and grow the pool decides is
counted once, however many syncs answer it. The probes say whether the loop progresses
and succeeds, served over real HTTP; the chart wires them to the port the process reads."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import requests
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from recorder.informer import Cache, Informer
from recorder.kube import POOLS, Change, Gone, Listing, Resource
from recorder.metrics import RecorderMetrics
from recorder.probe import ObservedEvents, ObservedObjects
from webhooks.health import Pulse, create_app, serve
from webhooks.kubeapi import ApiError

TFJOBS = Resource("kubeflow.org/v1", "TFJob", "tfjobs")


def samples(metrics: RecorderMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def pools_of(metrics: RecorderMetrics) -> set[str]:
    return {dict(labels)["pool"] for _, labels in samples(metrics) if "pool" in dict(labels)}


def pool(name: str, queued: int, admitted: int, gpus: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "TrainingPool",
        "metadata": {"name": name},
        "status": {
            "queued": queued,
            "admitted": admitted,
            "nodes": 2,
            "capacity": {"nvidia.com/gpu": gpus, "cpu": "32", "memory": "128Gi"},
            "allocated": {"nvidia.com/gpu": "6", "cpu": "1500m", "memory": "bad"},
        },
    }


def admission(job: str, pool: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "dragonet.io/v1alpha1",
        "kind": "Admission",
        "metadata": {"name": f"tfjob-{job}", "namespace": "team"},
        "spec": {
            "pool": pool,
            "job": {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": job, "uid": job},
            "phase": "Admitted",
            "workers": 2,
            **spec,
        },
    }


def tfjob(name: str, enqueued: str | None = None) -> dict[str, Any]:
    status = {"enqueueTime": enqueued} if enqueued else {}
    meta = {"name": name, "namespace": "team", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": meta, "status": status}


def decisions(metrics: RecorderMetrics, pool: str = "default") -> dict[str, float]:
    return {
        dict(labels)["reason"]: v
        for (name, labels), v in samples(metrics).items()
        if name == "dragonet_pool_decisions_total" and dict(labels)["pool"] == pool
    }


# --- the pools' state -------------------------------------------------------------------


def test_the_gauges_are_the_listed_pools_statuses_and_a_deleted_pools_series_go() -> None:
    metrics = RecorderMetrics()
    metrics.pools_listed([pool("default", 3, 2), pool("gpu", 0, 1, gpus="16")])
    m = samples(metrics)
    assert m[("dragonet_pool_queued_jobs", (("pool", "default"),))] == 3
    assert m[("dragonet_pool_jobs", (("phase", "Admitted"), ("pool", "gpu")))] == 1
    gpu = (("pool", "gpu"), ("resource", "nvidia.com/gpu"), ("unit", "integer"))
    assert m[("dragonet_pool_capacity", gpu)] == 16
    cpu = (("pool", "default"), ("resource", "cpu"), ("unit", "core"))
    assert m[("dragonet_pool_allocated", cpu)] == 1.5
    memory = (("pool", "default"), ("resource", "memory"), ("unit", "byte"))
    assert ("dragonet_pool_allocated", memory) not in m  # not a quantity: no sample
    assert m[("dragonet_pool_decisions_total", (("pool", "gpu"), ("reason", "Shrunk")))] == 0
    # The next listing holds what the pool's status says now; gpu was deleted.
    metrics.pools_listed([pool("default", 0, 5)])
    m = samples(metrics)
    assert m[("dragonet_pool_queued_jobs", (("pool", "default"),))] == 0
    assert pools_of(metrics) == {"default"}  # gauges, decisions and waits: all gone


def test_a_listing_that_fails_part_way_keeps_the_last_whole_one() -> None:
    """The pools' gauges read the informer's cache: a list that fails (after a watch that
    expired) leaves the last whole one there; each call is counted by its result."""
    metrics, pulse, stop = RecorderMetrics(), Pulse(60), threading.Event()
    cache = Cache()
    metrics.follow([(POOLS.kind, POOLS.plural, cache)])

    class Flaky:
        lists = 0

        def list(self, resource: Resource) -> Listing:
            self.lists += 1
            if self.lists == 1:
                return Listing([pool("default", 4, 1)], "1")
            stop.set()
            raise ApiError("the connection broke", None)

        def watch(self, resource: Resource, version: str, timeout: int) -> Iterator[Change]:
            raise Gone("410 Gone: too old", 410)
            yield  # a generator, as a watch is

    observed = ObservedObjects(Flaky(), metrics, pulse)
    Informer(observed, POOLS, lambda r, o: None, stop, cache=cache).run()
    m = samples(metrics)
    assert m[("dragonet_pool_queued_jobs", (("pool", "default"),))] == 4
    calls = "dragonet_recorder_api_calls_total"
    assert m[(calls, (("call", "list_trainingpools"), ("result", "ok")))] == 1
    assert m[(calls, (("call", "list_trainingpools"), ("result", "error")))] == 1
    assert m[(calls, (("call", "watch_trainingpools"), ("result", "410")))] == 1


# --- decisions, once each --------------------------------------------------------------

SCALE = {"time": "2026-01-01T00:05:00Z", "from": 4, "to": 2, "reason": "for b"}


def test_each_decision_is_counted_once_however_often_it_is_listed() -> None:
    metrics = RecorderMetrics()
    metrics.pools_listed([pool("default", 0, 0)])
    old = admission("old", admittedTime="2026-01-01T00:00:00Z", lastScale=SCALE)
    metrics.admissions_listed([old])  # there as the recorder starts: the past
    assert set(decisions(metrics).values()) == {0}
    new = admission("new", admittedTime="2026-01-01T00:10:00Z")
    for _ in range(3):  # listed at every pass; answered by any number of replicas
        metrics.admissions_listed([old, new])
    assert decisions(metrics)["Admitted"] == 1
    # old shrinks again the same way, later: it happened again. Then moves a worker.
    move = {"type": "Worker", "index": 1, "count": 1, "time": "2026-01-01T00:21:00Z"}
    again = admission(
        "old",
        admittedTime="2026-01-01T00:00:00Z",
        lastScale={**SCALE, "time": "2026-01-01T00:20:00Z"},
        moves=[{**move, "from": "n1", "to": "n2", "reason": "Converged"}],
    )
    for _ in range(2):
        metrics.admissions_listed([again, new])
    preempted = admission(
        "new",
        phase="Queued",
        reason="Preempted",
        service={
            "gpuSeconds": 10,
            "preemptions": 1,
            "lastPreemption": {"time": "2026-01-01T00:30:00Z", "by": "team/c", "reason": "x"},
        },
    )
    metrics.admissions_listed([again, preempted])
    assert decisions(metrics) == {
        "Admitted": 1,
        "Preempted": 1,
        "Shrunk": 1,
        "Grown": 0,
        "Migrated": 1,
    }
    # Another pool's decisions are its own.
    metrics.admissions_listed(
        [again, preempted, admission("x", "gpu", admittedTime="2026-01-01T01:00:00Z")]
    )
    assert decisions(metrics, "gpu") == {"Admitted": 1}
    assert decisions(metrics)["Admitted"] == 1


def test_the_queue_wait_is_observed_once_whichever_is_listed_first() -> None:
    def run(order: list[str]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        metrics = RecorderMetrics()
        metrics.pools_listed([pool("default", 0, 0)])
        metrics.admissions_listed([])  # the recorder's first pass: nothing yet
        jobs = [tfjob("a", "2026-01-01T00:01:00Z"), tfjob("b")]  # b: no status yet
        admitted = [
            admission("a", admittedTime="2026-01-01T00:11:00Z"),
            admission("b", admittedTime="2026-01-01T00:00:30Z"),
        ]
        for _ in range(2):
            for what in order:
                if what == "jobs":
                    metrics.jobs_listed("TFJob", jobs)
                else:
                    metrics.admissions_listed(admitted)
        return samples(metrics)

    for order in (["jobs", "admissions"], ["admissions", "jobs"]):
        m = run(order)
        key = (("pool", "default"),)
        assert m[("dragonet_pool_queue_wait_seconds_count", key)] == 2, order
        assert m[("dragonet_pool_queue_wait_seconds_sum", key)] == 600 + 30, order
    # A job queued again since its admission (a later enqueueTime): no wait for that one.
    metrics = RecorderMetrics()
    metrics.pools_listed([pool("default", 0, 0)])
    metrics.admissions_listed([])
    metrics.jobs_listed("TFJob", [tfjob("a", "2026-01-01T00:20:00Z")])
    metrics.admissions_listed([admission("a", admittedTime="2026-01-01T00:11:00Z")])
    metrics.jobs_listed("TFJob", [tfjob("a", "2026-01-01T00:20:00Z")])
    waits = [v for (n, _), v in samples(metrics).items() if n.endswith("wait_seconds_count")]
    assert waits == [0]


def test_shrinks_and_grows_are_counted_once_each_as_the_pool_decides_them() -> None:
    """Through the simulator (the real app, Metacontroller's two controllers, the recorder
    listing every 10 s): a job grows into idle GPUs, then shrinks for a job that starves.
    Every new lastScale the pool decides is counted once, by reason, however often the
    pool syncs and answers it afterwards."""
    from sim.engine import SimConfig, Simulation
    from sim.recorder import EVENTS, attach
    from tests.simkit import gpu_nodes, job, scenario

    jobs = [
        job("a", 4, min_workers=2, max_workers=6, steps=3000.0),
        job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200),
    ]
    sim = Simulation(scenario(gpu_nodes(2), jobs), SimConfig(policy="dragon"))
    recorder = attach(sim)
    scales: list[dict[str, Any]] = []

    def on_change(tkey: str, old: Any, new: Any) -> None:
        if tkey != "Admission.dragonet.io/v1alpha1" or new is None:
            return
        scale = new["spec"].get("lastScale")
        if scale and (old is None or old["spec"].get("lastScale") != scale):
            scales.append(scale)

    sim.api.watchers.append(on_change)
    sim.run()
    ups = sum(1 for s in scales if s["to"] > s["from"])
    downs = sum(1 for s in scales if s["to"] < s["from"])
    assert ups >= 1 and downs >= 1, scales
    counted = decisions(recorder.metrics)
    assert (counted["Grown"], counted["Shrunk"], counted["Admitted"]) == (ups, downs, 2)
    # The same facts as the Events tell, each once.
    events = [e for e in sim.api.list(EVENTS) if e["reason"] in ("Grown", "Shrunk")]
    told = sum((e.get("series") or {}).get("count", 1) for e in events)
    assert told == ups + downs
    assert recorder.refreshes > 5  # each fact read again and again


# --- probes ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_alive_while_the_loop_makes_calls_ready_while_they_succeed() -> None:
    clock = Clock()
    pulse = Pulse(90, clock=clock)
    metrics = RecorderMetrics()
    app = create_app("dragonet-recorder", pulse, metrics.registry).test_client()
    assert app.get("/healthz").status_code == 200  # just started
    ready = app.get("/readyz")
    assert ready.status_code == 503 and "no API call has succeeded yet" in ready.json["reason"]

    class Events:
        def list_ours(self) -> Iterator[Mapping[str, Any]]:
            return iter([])

        def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
            raise ApiError("forbidden", 403)

        def create(self, event: Mapping[str, Any]) -> None: ...

        def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> None: ...

    events = ObservedEvents(Events(), metrics, pulse)
    list(events.list_ours())
    assert app.get("/readyz").status_code == 200
    clock.now += 60
    with pytest.raises(ApiError):
        events.read("team", "x")  # the API refuses: alive (it called), not ready later
    clock.now += 60
    assert app.get("/healthz").status_code == 200
    unready = app.get("/readyz")
    assert (
        unready.status_code == 503 and "no API call succeeded for 120 s" in unready.json["reason"]
    )
    clock.now += 31  # no call returned for 91 s: a loop stuck in a call, or a bug
    stalled = app.get("/healthz")
    assert stalled.status_code == 503 and "no API call returned for 91 s" in stalled.json["reason"]
    m = samples(metrics)
    assert m[("dragonet_recorder_api_calls_total", (("call", "get_event"), ("result", "403")))] == 1


def test_the_probes_and_metrics_are_served_over_http() -> None:
    metrics = RecorderMetrics()
    metrics.pools_listed([pool("default", 2, 1)])
    pulse = Pulse(60)
    server = serve("dragonet-recorder", create_app("r", pulse, metrics.registry), "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        assert requests.get(f"{url}/healthz", timeout=5).status_code == 200
        assert requests.get(f"{url}/readyz", timeout=5).status_code == 503
        text = requests.get(f"{url}/metrics", timeout=5).text
        assert 'dragonet_pool_queued_jobs{pool="default"} 2.0' in text
        assert "dragonet_build_info{" in text
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_it_cannot_bind_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from webhooks import process

    first = serve("x", create_app("x", Pulse(60), RecorderMetrics().registry), "127.0.0.1", 0)
    try:
        with pytest.raises(process.Exit) as done:
            serve(
                "dragonet-reaper",
                create_app("y", Pulse(60), RecorderMetrics().registry),
                "127.0.0.1",
                first.server_port,
            )
        assert done.value.status == 2
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(
            f"dragonet-reaper: cannot serve /healthz and /metrics on 127.0.0.1:{first.server_port}"
        )
    finally:
        first.shutdown()
        first.server_close()


@pytest.mark.parametrize("component", ["recorder", "reaper"])
def test_the_chart_probes_the_port_the_process_serves(helm: str, component: str) -> None:
    from reaper.config import ReaperSettings
    from recorder.config import RecorderSettings
    from tests.kube_schema import validate_k8s
    from tests.test_chart import _render

    docs = _render(helm, "--set", f"{component}.port=9123")
    [deployment] = [
        d
        for d in docs
        if d["kind"] == "Deployment"
        and d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    validate_k8s(deployment)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    prefix = f"DRAGONET_{component.upper()}_"
    load = RecorderSettings if component == "recorder" else ReaperSettings
    settings = load(**{k.removeprefix(prefix).lower(): v for k, v in env.items()})
    [port] = container["ports"]
    assert (port["name"], port["containerPort"], settings.port) == ("metrics", 9123, 9123)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    if component == "recorder":  # the pools' metrics have one writer, even in a rollout
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}
