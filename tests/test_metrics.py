"""The webhook's metrics (``webhooks/metrics.py``): every metric of ``docs/metrics.md``'s
table appears, with its type, labels and multiprocess aggregation, after a simulated run's
requests through the real app; the queue-wait histogram and the pool gauges say what the
run did; ``/metrics`` under ``dragonet serve`` is not empty before the first hook request;
the chart's dashboard queries only metrics that exist; its ServiceMonitor and dashboard
ConfigMap."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from policy.model.timeutil import parse_time
from sim.engine import SimConfig, Simulation
from sim.scenario import load_scenario
from tests.test_chart import _render, _validate_all
from webhooks.metrics import Metrics

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "metrics.md"
DASHBOARD = ROOT / "chart" / "dashboards" / "dragonet.json"
ADMISSIONS = "Admission.dragonet.io/v1alpha1"
TFJOBS = "TFJob.kubeflow.org/v1"


def _table() -> list[dict[str, Any]]:
    """docs/metrics.md's table: name, type, labels, aggregation."""
    rows = []
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`dragonet_"):
            labels = set(re.findall(r"`([a-z_]+)`", cells[2]))
            rows.append(
                {"name": cells[0].strip("`"), "type": cells[1], "labels": labels, "mode": cells[3]}
            )
    return rows


@pytest.fixture(scope="module")
def demo() -> tuple[Simulation, dict[str, Any]]:
    """examples/scenario.yaml through the real app; every Admission version and job
    status it wrote; its /metrics parsed by Prometheus' own parser."""
    sim = Simulation(load_scenario(ROOT / "examples" / "scenario.yaml"), SimConfig())
    seen: dict[str, Any] = {"admitted": set(), "enqueued": {}}

    def watch(tkey: str, old: Any, new: Any) -> None:
        if new is None:
            return
        if tkey == ADMISSIONS and new["spec"].get("admittedTime"):
            seen["admitted"].add((new["metadata"]["name"], new["spec"]["admittedTime"]))
        if tkey == TFJOBS and (new.get("status") or {}).get("enqueueTime"):
            seen["enqueued"]["tfjob-" + new["metadata"]["name"]] = new["status"]["enqueueTime"]

    sim.api.watchers.append(watch)
    sim.run()
    text = sim.webhook.app.test_client().get("/metrics").get_data(as_text=True)
    seen["families"] = {f.name: f for f in text_string_to_metric_families(text)}
    return sim, seen


@pytest.fixture(scope="module")
def elastic() -> dict[str, Any]:
    """An elastic job grows into idle GPUs, then shrinks for a job that starves (DRAGON's
    rules): the run that exercises every metric. Its /metrics, parsed."""
    from tests.simkit import gpu_nodes, job, scenario

    jobs = [
        job("a", 4, min_workers=2, max_workers=6, steps=3000.0),
        job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200),
    ]
    sim = Simulation(scenario(gpu_nodes(2), jobs), SimConfig(policy="dragon"))
    sim.run()
    text = sim.webhook.app.test_client().get("/metrics").get_data(as_text=True)
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_the_docs_table_lists_every_metric_the_code_registers_as_it_registers_it() -> None:
    registered = {}
    for collector in Metrics().registry._names_to_collectors.values():
        registered[collector._name] = collector
    rows = {r["name"].removesuffix("_total"): r for r in _table()}
    assert set(rows) == set(registered)
    for name, collector in registered.items():
        row = rows[name]
        assert row["type"] == collector._type, name
        assert row["labels"] == set(collector._labelnames), name
        mode = getattr(collector, "_multiprocess_mode", "sum") if row["type"] == "gauge" else "sum"
        assert row["mode"] == mode, name


def test_every_metric_appears_after_a_simulated_run_with_its_type_and_labels(elastic) -> None:
    families = elastic
    for row in _table():
        name = row["name"].removesuffix("_total")
        assert name in families, row["name"]
        family = families[name]
        assert family.type == row["type"], name
        assert family.samples, f"{name} has no sample"
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == row["labels"], (name, sample.labels)


def test_the_queue_wait_histogram_counts_each_admission_once_with_its_wait(demo) -> None:
    _, seen = demo
    waits = [
        (parse_time(at) - parse_time(seen["enqueued"][name])).total_seconds()
        for name, at in seen["admitted"]
    ]
    assert len(waits) == 4 and sorted(waits)[-2:] == [549.0, 733.0]  # ncf, then bert
    family = seen["families"]["dragonet_pool_queue_wait_seconds"]
    by_name = {s.name: s for s in family.samples if s.labels["pool"] == "default"}
    assert by_name["dragonet_pool_queue_wait_seconds_count"].value == len(waits)
    assert by_name["dragonet_pool_queue_wait_seconds_sum"].value == sum(waits)
    buckets = {
        s.labels["le"]: s.value
        for s in family.samples
        if s.name.endswith("_bucket") and s.labels["pool"] == "default"
    }
    assert buckets["1.0"] == 2 and buckets["600.0"] == 3 and buckets["+Inf"] == 4


def test_the_pool_gauges_say_its_resources_and_jobs_by_phase(demo) -> None:
    _, seen = demo

    def value(name: str, **labels: str) -> float:
        [sample] = [
            s
            for s in seen["families"][name].samples
            if all(s.labels.get(k) == v for k, v in labels.items())
        ]
        return sample.value

    gpu = {"pool": "default", "resource": "nvidia.com/gpu"}
    assert value("dragonet_pool_capacity", **gpu, unit="integer") == 8
    assert value("dragonet_pool_capacity", pool="default", resource="cpu", unit="core") == 32
    memory = value("dragonet_pool_capacity", pool="default", resource="memory", unit="byte")
    assert memory == 128 * 2**30
    assert value("dragonet_pool_nodes", pool="default") == 2
    # The run is over: nothing queued or admitted, nothing allocated.
    assert value("dragonet_pool_jobs", pool="default", phase="Queued") == 0
    assert value("dragonet_pool_jobs", pool="default", phase="Admitted") == 0
    assert value("dragonet_pool_allocated", **gpu) == 0
    [info] = seen["families"]["dragonet_build_info"].samples
    assert info.value == 1 and info.labels["version"]


def test_the_pool_gauges_follow_the_run_while_it_runs() -> None:
    """Read while bert waits and resnet holds 6 GPUs."""
    sim = Simulation(load_scenario(ROOT / "examples" / "scenario.yaml"), SimConfig())
    read: dict[str, float] = {}

    def look() -> None:
        text = sim.webhook.app.test_client().get("/metrics").get_data(as_text=True)
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.labels.get("resource") in (None, "nvidia.com/gpu"):
                    read[s.name + s.labels.get("phase", "")] = s.value

    sim.schedule(100.0, look)
    sim.run()
    assert read["dragonet_pool_allocated"] == 8  # resnet's 6 and cifar's 2
    assert read["dragonet_pool_jobsQueued"] == 2  # bert and ncf
    assert read["dragonet_pool_jobsAdmitted"] == 2


def test_a_wait_is_counted_by_the_sync_that_admits_the_job_and_no_other() -> None:
    from datetime import UTC, datetime

    import orjson

    from policy.memo import Encoded
    from webhooks.metrics import queue_waits

    now = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)

    def admission(name: str, at: str) -> dict[str, Any]:
        job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": name}
        spec = {"phase": "Admitted", "admittedTime": at, "job": job}
        return {"metadata": {"name": f"tfjob-{name}", "namespace": "t"}, "spec": spec}

    def tfjob(name: str, enqueued: str) -> Encoded:
        obj = {"metadata": {"name": name}, "status": {"enqueueTime": enqueued}}
        return Encoded(orjson.dumps(obj))

    answered = [
        admission("new", "2026-01-01T00:10:00Z"),  # admitted by this sync
        admission("seen", "2026-01-01T00:10:00Z"),  # ... and already applied: a re-sync
        admission("older", "2026-01-01T00:05:00Z"),  # an earlier answer, answered again
    ]
    observed = {ADMISSIONS: {"t/tfjob-seen": Encoded(orjson.dumps(answered[1]))}}
    related = {
        TFJOBS: {f"t/{n}": tfjob(n, "2026-01-01T00:00:00Z") for n in ("new", "seen", "older")}
    }
    assert queue_waits(answered, observed, related, now) == (600.0,)
    # A job the pool admits in its first sync has no status yet: from its creation.
    fresh = {"metadata": {"name": "new", "creationTimestamp": "2026-01-01T00:09:00Z"}}
    related[TFJOBS]["t/new"] = Encoded(orjson.dumps(fresh))
    assert queue_waits(answered, observed, related, now) == (60.0,)
    # A request whose parts are broken (the pool plans without them) counts what it can,
    # and never fails the sync (the webhook's fuzz test found an Admission sent as a list).
    broken = {ADMISSIONS: {"t/tfjob-new": ["not", "an", "object"]}}
    assert queue_waits(answered[:1], broken, related, now) == (60.0,)
    assert queue_waits(answered[:1], {ADMISSIONS: []}, {TFJOBS: []}, now) == ()


# --- under dragonet serve ---------------------------------------------------------------


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.test_serve import start_server

    yield from start_server(tmp_path_factory.mktemp("metrics-serve"))


def test_metrics_are_not_empty_before_the_first_hook_request(serving) -> None:
    text = requests.get(f"{serving.url}/metrics", timeout=10).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [info] = families["dragonet_build_info"].samples  # one series, whichever process wrote it
    assert info.value == 1
    assert "dragonet_hook_answers" not in families or not families["dragonet_hook_answers"].samples


# --- the dashboard and the chart --------------------------------------------------------


def _queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v.get("type") == "query"]
    return exprs


def test_the_dashboard_queries_only_metrics_that_exist(elastic) -> None:
    exposed = {s.name for f in elastic.values() for s in f.samples}
    queries = _queries()
    named = {m for q in queries for m in re.findall(r"\b(dragonet_[a-z0-9_]+)", q)}
    assert len(queries) >= 10 and len(named) >= 10
    assert named <= exposed, named - exposed
    # Every metric of the table is graphed.
    graphed = {re.sub(r"_(bucket|sum|count)$", "", n) for n in named}
    assert {r["name"] for r in _table()} - graphed <= {
        "dragonet_hook_response_bytes",
        "dragonet_pool_queued_jobs",
        "dragonet_pool_admitted_jobs",
        "dragonet_pool_last_sync_timestamp_seconds",  # what ends a deleted pool's series
    }


def test_the_chart_has_neither_servicemonitor_nor_dashboard_by_default(helm: str) -> None:
    kinds = {d["kind"] for d in _render(helm)}
    assert "ServiceMonitor" not in kinds and "ConfigMap" not in kinds


DURATION = r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
# The fields of monitoring.coreos.com/v1 ServiceMonitor the chart writes, as its CRD
# (prometheus-operator) defines them; anything else is refused.
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        }
                    },
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {
                                "type": "string",
                                "pattern": DURATION,
                            },
                            "tlsConfig": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {"insecureSkipVerify": {"type": "boolean"}},
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.mark.parametrize("tls", [False, True])
def test_the_servicemonitor_scrapes_the_webhooks_service(helm: str, tls: bool) -> None:
    # TLS is on by default (the chart's own certificate); False turns it off.
    extra = (
        ["--set", "tls.enabled=true", "--set", "tls.secretName=webhook-tls"]
        if tls
        else ["--set", "tls.enabled=false"]
    )
    docs = _render(
        helm,
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.serviceMonitor.labels.release=prometheus",
        *extra,
    )
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    jsonschema.validate(monitor, SERVICE_MONITOR)
    _validate_all([d for d in docs if d["kind"] != "ServiceMonitor"])
    [service] = [d for d in docs if d["kind"] == "Service"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "https" if tls else "http")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]


def test_the_dashboard_configmap_holds_the_dashboard_for_grafanas_sidecar(helm: str) -> None:
    docs = _render(helm, "--set", "metrics.dashboard.enabled=true")
    [config_map] = [d for d in docs if d["kind"] == "ConfigMap"]
    _validate_all([config_map])
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["dragonet.json"]) == json.loads(DASHBOARD.read_text())
