"""Dragonet's metrics: every metric of ``docs/metrics.md``'s tables is registered by the
process its section names (the webhook, the recorder, the reaper, the monitor) with its
type, labels and multiprocess aggregation, and appears after a simulated run (the webhook's
through the real app, the recorder's through its real listings of the simulated API
server); the pools' queue waits, gauges and decisions say what the run did; ``/metrics``
under ``dragonet serve`` is not empty before the first hook request; the chart's dashboard
queries only metrics that exist; its ServiceMonitor and PodMonitor (checked against
prometheus-operator's CRDs) and the NetworkPolicies that let Prometheus in."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.metrics import MonitorMetrics
from policy.model.timeutil import parse_time
from reaper.probe import ReaperMetrics
from recorder.metrics import RecorderMetrics
from sim.engine import SimConfig, Simulation
from sim.recorder import attach
from sim.scenario import load_scenario
from tests.kube_schema import validate_monitoring
from tests.test_chart import _notes, _render, _validate_all
from webhooks.metrics import Metrics

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "metrics.md"
DASHBOARD = ROOT / "chart" / "dashboards" / "dragonet.json"
ADMISSIONS = "Admission.dragonet.io/v1alpha1"
TFJOBS = "TFJob.kubeflow.org/v1"
# Each table of docs/metrics.md, by the heading of its section, and the registry of the
# process it documents.
SECTIONS = {
    "The webhook": lambda: Metrics().registry,
    "The recorder: the pools": lambda: RecorderMetrics().registry,
    "The reaper": lambda: ReaperMetrics().registry,
    "The Container Monitor": lambda: MonitorMetrics().registry,
}


def _tables() -> dict[str, list[dict[str, Any]]]:
    """docs/metrics.md's tables by section: name, type, labels, aggregation (the webhook's
    table only: its processes are added up)."""
    tables: dict[str, list[dict[str, Any]]] = {}
    section = ""
    for line in DOCS.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) in (4, 5) and cells[0].startswith("`dragonet_"):
            labels = set(re.findall(r"`([a-z_]+)`", cells[2]))
            mode = cells[3] if len(cells) == 5 else None
            row = {"name": cells[0].strip("`"), "type": cells[1], "labels": labels, "mode": mode}
            tables.setdefault(section, []).append(row)
    return tables


def _table(section: str) -> list[dict[str, Any]]:
    return _tables()[section]


def _registered(registry: CollectorRegistry) -> dict[str, dict[str, Any]]:
    """Each metric a registry exposes: its type, label names and multiprocess mode."""
    out = {}
    for collector in registry._collector_to_names:  # the registry's own index
        if hasattr(collector, "_name"):  # a Counter, Gauge, Histogram
            mode = getattr(collector, "_multiprocess_mode", "sum")
            out[collector._name] = {
                "type": collector._type,
                "labels": set(collector._labelnames),
                "mode": mode if collector._type == "gauge" else "sum",
            }
        else:  # a collector of its own (the pools' gauges): what it describes
            for family in collector.describe():
                labels = set(getattr(family, "_labelnames", ()))
                out[family.name] = {"type": family.type, "labels": labels, "mode": None}
    return out


def _families(registry: Any) -> dict[str, Any]:
    text = generate_latest(registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _webhook_families(sim: Simulation) -> dict[str, Any]:
    text = sim.webhook.app.test_client().get("/metrics").get_data(as_text=True)
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def demo() -> tuple[Simulation, dict[str, Any]]:
    """examples/scenario.yaml through the real app with the recorder beside it; every
    Admission version and job status it wrote; the recorder's /metrics parsed by
    Prometheus' own parser."""
    sim = Simulation(load_scenario(ROOT / "examples" / "scenario.yaml"), SimConfig())
    recorder = attach(sim)
    seen: dict[str, Any] = {"admitted": set(), "enqueued": {}, "recorder": recorder}

    def watch(tkey: str, old: Any, new: Any) -> None:
        if new is None:
            return
        if tkey == ADMISSIONS and new["spec"].get("admittedTime"):
            seen["admitted"].add((new["metadata"]["name"], new["spec"]["admittedTime"]))
        if tkey == TFJOBS and (new.get("status") or {}).get("enqueueTime"):
            seen["enqueued"]["tfjob-" + new["metadata"]["name"]] = new["status"]["enqueueTime"]

    sim.api.watchers.append(watch)
    sim.run()
    seen["families"] = _families(recorder.metrics.registry)
    return sim, seen


@pytest.fixture(scope="module")
def elastic() -> dict[str, dict[str, Any]]:
    """An elastic job grows into idle GPUs, then shrinks for a job that starves (DRAGON's
    rules): the run that exercises every metric. The webhook's and the recorder's
    /metrics, parsed."""
    from tests.simkit import gpu_nodes, job, scenario

    jobs = [
        job("a", 4, min_workers=2, max_workers=6, steps=3000.0),
        job("b", 4, min_workers=4, max_workers=4, arrival=100.0, steps=200),
    ]
    sim = Simulation(scenario(gpu_nodes(2), jobs), SimConfig(policy="dragon"))
    recorder = attach(sim)
    sim.run()
    return {
        "The webhook": _webhook_families(sim),
        "The recorder: the pools": _families(recorder.metrics.registry),
    }


def test_the_docs_tables_list_every_metric_each_process_registers_as_it_registers_it() -> None:
    tables = _tables()
    assert set(tables) == set(SECTIONS)
    for section, registry in SECTIONS.items():
        registered = _registered(registry())
        rows = {r["name"].removesuffix("_total"): r for r in tables[section]}
        assert set(rows) == set(registered), section
        for name, found in registered.items():
            row = rows[name]
            assert (row["type"], row["labels"]) == (found["type"], found["labels"]), name
            if section == "The webhook":
                assert row["mode"] == found["mode"], name


def test_every_metric_appears_after_a_simulated_run_with_its_type_and_labels(elastic) -> None:
    for section, families in elastic.items():
        for row in _table(section):
            name = row["name"].removesuffix("_total")
            assert name in families, row["name"]
            family = families[name]
            assert family.type == row["type"], name
            assert family.samples, f"{name} has no sample"
            for sample in family.samples:
                assert set(sample.labels) - {"le"} == row["labels"], (name, sample.labels)


def test_the_webhook_holds_no_pool_state_and_the_recorder_holds_it_once(elastic) -> None:
    """Two webhook replicas that answered different syncs would each hold their own view of
    a pool: the webhook exports none; the recorder exports the pool's status as listed."""
    assert not [n for n in elastic["The webhook"] if n.startswith("dragonet_pool_")]
    recorder = elastic["The recorder: the pools"]
    assert {s.labels["pool"] for s in recorder["dragonet_pool_nodes"].samples} == {"default"}


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
    decisions = {
        s.labels["reason"]: s.value for s in seen["families"]["dragonet_pool_decisions"].samples
    }
    assert decisions == {"Admitted": 4, "Preempted": 0, "Shrunk": 0, "Grown": 0, "Migrated": 0}


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
    recorder = attach(sim)
    read: dict[str, float] = {}

    def look() -> None:
        for family in _families(recorder.metrics.registry).values():
            for s in family.samples:
                if s.labels.get("resource") in (None, "nvidia.com/gpu"):
                    read[s.name + s.labels.get("phase", "")] = s.value

    sim.schedule(100.0, look)
    sim.run()
    assert read["dragonet_pool_allocated"] == 8  # resnet's 6 and cifar's 2
    assert read["dragonet_pool_jobsQueued"] == 2  # bert and ncf
    assert read["dragonet_pool_jobsAdmitted"] == 2


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
    exposed = {
        s.name for families in elastic.values() for f in families.values() for s in f.samples
    }
    queries = _queries()
    named = {m for q in queries for m in re.findall(r"\b(dragonet_[a-z0-9_]+)", q)}
    assert len(queries) >= 10 and len(named) >= 10
    assert named <= exposed, named - exposed
    # Every metric of the webhook's and the recorder's tables is graphed.
    graphed = {re.sub(r"_(bucket|sum|count)$", "", n) for n in named}
    documented = {r["name"] for section in elastic for r in _table(section)}
    assert documented - graphed <= {
        "dragonet_hook_response_bytes",
        "dragonet_pool_queued_jobs",  # dragonet_pool_jobs by phase, graphed
        "dragonet_pool_admitted_jobs",
        "dragonet_recorder_api_calls_total",
    }
    # One writer: no query takes the largest of several replicas' views of a pool.
    assert not [q for q in queries if "dragonet_pool_" in q and "max by" in q]


def test_the_chart_has_neither_monitors_nor_dashboard_by_default(helm: str) -> None:
    kinds = {d["kind"] for d in _render(helm)}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "ConfigMap"}


def _scraped(helm: str, *extra: str) -> list[dict[str, Any]]:
    return _render(
        helm,
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.serviceMonitor.labels.release=prometheus",
        *extra,
    )


@pytest.mark.parametrize("tls", [False, True])
def test_the_servicemonitor_scrapes_the_webhooks_service(helm: str, tls: bool) -> None:
    # TLS is on by default (the chart's own certificate); False turns it off.
    extra = (
        ["--set", "tls.enabled=true", "--set", "tls.secretName=webhook-tls"]
        if tls
        else ["--set", "tls.enabled=false"]
    )
    docs = _scraped(helm, *extra)
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    validate_monitoring(monitor)
    _validate_all([d for d in docs if d["kind"] not in ("ServiceMonitor", "PodMonitor")])
    [service] = [d for d in docs if d["kind"] == "Service"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "https" if tls else "http")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels, matchExpressions In/NotIn/Exists) against labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for e in selector.get("matchExpressions", []):
        value = labels.get(e["key"])
        if e["operator"] == "In" and value not in e["values"]:
            return False
        if e["operator"] == "NotIn" and value in e["values"]:
            return False
        if e["operator"] == "Exists" and value is None:
            return False
    return True


def _pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each workload's pod template, by its component label."""
    return {
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"][
            "template"
        ]
        for d in docs
        if d["kind"] in ("Deployment", "DaemonSet")
    }


def _ports(pod: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c["ports"]}


def test_the_podmonitor_scrapes_the_recorder_the_reaper_and_each_monitor(helm: str) -> None:
    docs = _scraped(helm, "--set", "monitor.enabled=true")
    [monitor] = [d for d in docs if d["kind"] == "PodMonitor"]
    validate_monitoring(monitor)
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    pods = _pods(docs)
    scraped = {
        c
        for c, pod in pods.items()
        if _matches(monitor["spec"]["selector"], pod["metadata"]["labels"])
    }
    assert scraped == {"recorder", "reaper", "monitor"}  # the webhook's through its Service
    names = {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]}
    for component in scraped:
        assert names & set(_ports(pods[component])), component
    # Turned off, a process is not looked for.
    off = _scraped(helm, "--set", "reaper.enabled=false")
    [monitor] = [d for d in off if d["kind"] == "PodMonitor"]
    assert monitor["spec"]["selector"]["matchExpressions"][0]["values"] == ["recorder"]


PROMETHEUS = {
    "namespace": {"kubernetes.io/metadata.name": "monitoring"},
    "pod": {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"},
}


def _admits(
    policy: dict[str, Any], namespace: dict[str, str], pod: dict[str, str], port: Any
) -> bool:
    """Whether a NetworkPolicy's ingress rules let a pod (its labels, its namespace's)
    reach ``port`` (a number or a name) of the pods it selects."""
    for rule in policy["spec"].get("ingress", []):
        ports = [p["port"] for p in rule.get("ports", [])]
        if ports and port not in ports:
            continue
        for peer in rule.get("from", []):
            ns_ok = "namespaceSelector" in peer and _matches(peer["namespaceSelector"], namespace)
            pod_ok = _matches(peer.get("podSelector", {}), pod)
            if ns_ok and pod_ok:
                return True
    return False


@pytest.mark.parametrize("scraped", [False, True])
def test_the_networkpolicies_let_prometheus_scrape_exactly_when_it_is_set_up(
    helm: str, scraped: bool
) -> None:
    """With the ServiceMonitor on, Prometheus's pods reach the webhook's port and the
    recorder's and reaper's metrics port; without it, nothing but Metacontroller reaches
    the webhook, and nothing the recorder or the reaper."""
    docs = _scraped(helm) if scraped else _render(helm)
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    _validate_all(policies)
    pods = _pods(docs)
    for component in ("webhook", "recorder", "reaper"):
        labels = pods[component]["metadata"]["labels"]
        mine = [p for p in policies if _matches(p["spec"]["podSelector"], labels)]
        assert mine, f"no NetworkPolicy selects the {component}"
        port = "https" if component == "webhook" else "metrics"
        assert port in _ports(pods[component])
        let_in = any(_admits(p, PROMETHEUS["namespace"], PROMETHEUS["pod"], port) for p in mine)
        assert let_in == scraped, component
        stranger = any(_admits(p, {"kubernetes.io/metadata.name": "team"}, {}, port) for p in mine)
        assert not stranger, component


TRAINING_POD = {"training.kubeflow.org/operator-name": "dragonet"}
KUBEFLOW_POD = {"training.kubeflow.org/operator-name": "tfjob-controller"}


@pytest.mark.parametrize("scraped", [False, True])
def test_the_monitors_networkpolicy_lets_in_dragonets_training_pods_and_prometheus_if_set_up(
    helm: str, scraped: bool, tmp_path: Path
) -> None:
    """Training pods of every namespace report to their node's monitor; Prometheus scrapes
    its port when the PodMonitor is on; nothing else reaches it: another pod, or a Kubeflow
    job's."""
    on = ("--set", "monitor.enabled=true")
    docs = _scraped(helm, *on) if scraped else _render(helm, *on)
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    _validate_all(policies)
    monitor = _pods(docs)["monitor"]
    labels = monitor["metadata"]["labels"]
    mine = [p for p in policies if _matches(p["spec"]["podSelector"], labels)]
    assert [p["metadata"]["name"] for p in mine] == ["dragonet-monitor"]
    port = "monitor"
    assert port in _ports(monitor)
    team = {"kubernetes.io/metadata.name": "team-a"}
    assert _admits(mine[0], team, TRAINING_POD, port)
    assert _admits(mine[0], {"kubernetes.io/metadata.name": "default"}, TRAINING_POD, port)
    assert not _admits(mine[0], team, TRAINING_POD, "https")  # its port alone
    assert not _admits(mine[0], team, KUBEFLOW_POD, port)
    assert not _admits(mine[0], team, {}, port)
    assert _admits(mine[0], PROMETHEUS["namespace"], PROMETHEUS["pod"], port) == scraped
    off = _render(helm, *on, "--set", "networkPolicy.enabled=false")
    assert not [d for d in off if d["kind"] == "NetworkPolicy"]
    # helm install says who reaches it.
    flags = (*on, "--set", f"metrics.serviceMonitor.enabled={str(scraped).lower()}")
    said = "Its NetworkPolicy lets in only Dragonet's training pods"
    assert said + (" and Prometheus." if scraped else ".") in _notes(helm, tmp_path, *flags)


def test_the_dashboard_configmap_holds_the_dashboard_for_grafanas_sidecar(helm: str) -> None:
    docs = _render(helm, "--set", "metrics.dashboard.enabled=true")
    [config_map] = [d for d in docs if d["kind"] == "ConfigMap"]
    _validate_all([config_map])
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["dragonet.json"]) == json.loads(DASHBOARD.read_text())
