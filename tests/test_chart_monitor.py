"""The chart's Container Monitor (monitor.* values), rendered and linted by the real helm:
the DaemonSet, its node-local Service, ServiceAccount and least-privilege RBAC."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from monitor.config import MonitorSettings
from tests.kube_schema import validate_k8s
from tests.test_chart import (
    CHART,
    _one,
    _render,
    _run,
    _values_file,
    _webhook,
    restricted_violations,
)
from webhooks.env import unknown_variable

MONITOR_VALUES: dict[str, Any] = {
    "image": {
        "repository": "registry.example.com/ml/dragonet",
        "tag": "0.1.0-rc1",
        "pullPolicy": "Always",
    },
    "monitor": {
        "enabled": True,
        "port": 9081,
        "hostPort": 9081,
        "pool": "gpu-pool",
        "threshold": 1.5,
        "throttleSeconds": 5,
        "retrySeconds": 120,
        "maxRetrySeconds": 900,
        "forgetSeconds": 300,
        "maxPods": 64,
        "refreshSeconds": 15,
        "logLevel": "debug",
        "nodeSelector": {"pool": "training"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-node-critical",
        "serviceAccount": {
            "create": True,
            "name": "monitor-sa",
            "annotations": {"example.com/owner": "ml"},
        },
    },
}


@pytest.fixture(scope="module")
def monitor_docs(helm: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    values = _values_file(tmp_path_factory.mktemp("monitor"), MONITOR_VALUES)
    return _render(helm, "-f", values, release="ml", namespace="training")


def _monitor(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    names = ("ml-dragonet-monitor", "monitor-sa")
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] in names]
    return found


def _env(daemonset: dict[str, Any]) -> dict[str, Any]:
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_helm_lint_strict_with_the_monitor(helm: str, tmp_path: Path) -> None:
    _run(helm, "lint", "--strict", str(CHART), "--set", "monitor.enabled=true")
    _run(helm, "lint", "--strict", str(CHART), "-f", _values_file(tmp_path, MONITOR_VALUES))


def test_the_monitor_is_off_by_default(helm: str) -> None:
    docs = _render(helm)
    assert not [d for d in docs if "monitor" in d["metadata"]["name"]]


def test_the_monitor_render_has_its_objects_and_they_validate(monitor_docs) -> None:
    mine = sorted(
        (d["kind"], d["metadata"]["name"])
        for d in monitor_docs
        if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "monitor"
    )
    assert mine == [
        ("ClusterRole", "ml-dragonet-monitor"),
        ("ClusterRoleBinding", "ml-dragonet-monitor"),
        ("DaemonSet", "ml-dragonet-monitor"),
        ("NetworkPolicy", "ml-dragonet-monitor"),  # only training pods reach it
        ("Service", "ml-dragonet-monitor"),
        ("ServiceAccount", "monitor-sa"),
        # What RBAC cannot narrow (admission-policies.yaml, tests/test_chart_security.py).
        ("ValidatingAdmissionPolicy", "ml-dragonet-monitor-jobs"),
        ("ValidatingAdmissionPolicy", "ml-dragonet-monitor-migrations"),
        ("ValidatingAdmissionPolicyBinding", "ml-dragonet-monitor-jobs"),
        ("ValidatingAdmissionPolicyBinding", "ml-dragonet-monitor-migrations"),
    ]
    for kind, name in mine:
        validate_k8s(
            next(d for d in monitor_docs if (d["kind"], d["metadata"]["name"]) == (kind, name))
        )


def test_values_reach_the_daemonset(monitor_docs) -> None:
    ds = _one(monitor_docs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "registry.example.com/ml/dragonet:0.1.0-rc1"
    assert container["command"] == ["dragonet-monitor"]
    assert container["ports"] == [
        {"name": "monitor", "containerPort": 9081, "hostPort": 9081, "protocol": "TCP"}
    ]
    assert _env(ds) == {
        "NODE_NAME": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        "DRAGONET_MONITOR_PORT": "9081",
        "DRAGONET_MONITOR_POOL": "gpu-pool",
        "DRAGONET_MONITOR_THRESHOLD": "1.5",
        "DRAGONET_MONITOR_THROTTLE_SECONDS": "5",
        "DRAGONET_MONITOR_RETRY_SECONDS": "120",
        "DRAGONET_MONITOR_MAX_RETRY_SECONDS": "900",
        "DRAGONET_MONITOR_FORGET_SECONDS": "300",
        "DRAGONET_MONITOR_MAX_PODS": "64",
        "DRAGONET_MONITOR_REFRESH_SECONDS": "15",
        "DRAGONET_MONITOR_AUTH": "token",
        "DRAGONET_MONITOR_TOKEN_AUDIENCE": "dragonet-monitor",
        "DRAGONET_MONITOR_TOKEN_CACHE_SECONDS": "60",
        "DRAGONET_MONITOR_LOG_LEVEL": "debug",
    }
    assert pod["nodeSelector"] == {"pool": "training"}
    assert pod["tolerations"] == MONITOR_VALUES["monitor"]["tolerations"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["serviceAccountName"] == "monitor-sa"
    assert pod["automountServiceAccountToken"] is True
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "monitor"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "monitor"}


def test_the_monitor_reads_the_environment_the_chart_sets(
    monitor_docs, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _env(_one(monitor_docs, "DaemonSet")).items():
        monkeypatch.setenv(name, value if isinstance(value, str) else "node-7")
    # (the monitor refuses a variable of its prefix it has no setting for)
    assert unknown_variable(os.environ, MonitorSettings, "dragonet-monitor") is None
    settings = MonitorSettings()
    assert (settings.node_name, settings.port, settings.pool, settings.threshold) == (
        "node-7",
        9081,
        "gpu-pool",
        1.5,
    )
    assert (settings.throttle_seconds, settings.retry_seconds, settings.forget_seconds) == (
        5,
        120,
        300,
    )
    assert (settings.max_pods, settings.refresh_seconds, settings.log_level) == (64, 15, "debug")
    assert (settings.auth, settings.token_audience, settings.token_cache_seconds) == (
        "token",
        "dragonet-monitor",
        60,
    )


def test_the_node_local_service_selects_only_the_monitor_pods(monitor_docs) -> None:
    service = _monitor(monitor_docs, "Service")
    ds = _one(monitor_docs, "DaemonSet")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["internalTrafficPolicy"] == "Local"
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "monitor"
    assert ds["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    webhook = _webhook(monitor_docs)["spec"]["template"]["metadata"]["labels"]
    assert not service["spec"]["selector"].items() <= webhook.items()


def test_the_role_is_bound_to_the_monitors_account_only(monitor_docs) -> None:
    binding = _monitor(monitor_docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "ml-dragonet-monitor"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "monitor-sa", "namespace": "training"}
    ]
    role = _monitor(monitor_docs, "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "create", "delete", "patch"}  # never update, watch or *
    # It patches only jobs (their throughput annotation, docs/speedup.md).
    patched = {r for rule in role["rules"] if "patch" in rule["verbs"] for r in rule["resources"]}
    assert patched == {"tfjobs", "mxjobs", "pytorchjobs"}
    assert all("*" not in rule["resources"] for rule in role["rules"])
    (pools,) = [r for r in role["rules"] if r["resources"] == ["trainingpools"]]
    assert pools["resourceNames"] == ["gpu-pool"]


def test_without_a_host_port_the_monitor_pod_meets_the_restricted_standard(helm: str) -> None:
    docs = _render(helm, "--set", "monitor.enabled=true", "--set", "monitor.hostPort=0")
    pod = _one(docs, "DaemonSet")["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    with_port = _one(_render(helm, "--set", "monitor.enabled=true"), "DaemonSet")
    assert restricted_violations(with_port["spec"]["template"]["spec"]) == ["monitor: hostPort"]


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("monitor.threshold=-1", "/monitor/threshold"),
        ("monitor.hostPort=70000", "/monitor/hostPort"),
        ("monitor.pool=Not_A_Pool", "/monitor/pool"),
        ("monitor.refreshSeconds=0", "/monitor/refreshSeconds"),
        ("monitor.logLevel=loud", "/monitor/logLevel"),
    ],
)
def test_invalid_monitor_values_are_refused_with_a_message(
    helm: str, flag: str, message: str
) -> None:
    proc = _run(
        helm,
        "template",
        "x",
        str(CHART),
        "--set",
        "monitor.enabled=true",
        "--set",
        flag,
        check=False,
    )
    assert proc.returncode != 0
    assert message in proc.stderr
