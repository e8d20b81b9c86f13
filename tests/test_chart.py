"""The Helm chart in chart/, rendered by the real helm binary.

helm must be on PATH (`make test` puts .tools/bin there; `make helm` installs it with
scripts/install-helm.sh). These tests never skip: without helm they fail and say how to get it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube_schema import ROOT, validate_composite_controller, validate_custom, validate_k8s

CHART = ROOT / "chart"
# The plain-kubectl CompositeControllers, by their name suffix, and the hooks of each.
PLAIN = {
    "pools": ROOT / "metacontroller" / "pool-controller.yaml",
    "tfjobs": ROOT / "metacontroller" / "tfjob-controller.yaml",
    "mxjobs": ROOT / "metacontroller" / "mxjob-controller.yaml",
    "pytorchjobs": ROOT / "metacontroller" / "pytorchjob-controller.yaml",
    "migrations": ROOT / "metacontroller" / "migration-controller.yaml",
}
JOB_HOOKS = ("customize", "sync", "finalize")
HOOKS = {
    "pools": ("customize", "sync"),
    "tfjobs": JOB_HOOKS,
    "mxjobs": JOB_HOOKS,
    "pytorchjobs": JOB_HOOKS,
    "migrations": ("customize", "sync"),
}

# Non-default values touching every knob, as a user's values file would.
CUSTOM_VALUES: dict[str, Any] = {
    "image": {
        "repository": "registry.example.com/ml/dragonet",
        "tag": "0.1.0-rc1",
        "pullPolicy": "Always",
    },
    "imagePullSecrets": [{"name": "regcred"}],
    "replicas": 3,
    "scheduling": {
        "poolSelector": {
            "matchLabels": {"pool": "training"},
            "matchExpressions": [
                {"key": "gpu", "operator": "In", "values": ["a100", "h100"]},
                {"key": "cordoned-for-maintenance", "operator": "DoesNotExist"},
            ],
        },
        "policy": "tiresias",
        "binding": "nodeName",
        "starvationSeconds": 45,
        "idleSeconds": 120.5,
        "clusterDomain": "cluster.local",
        "watchAllPods": True,
        "lasThresholdsGPUHours": [0.5, 4, 16],
        "lasByRemaining": False,
        "maxPreemptions": 0,
        "allocationIntervalSeconds": 0,
        "decisionIntervalSeconds": 60,
        "restartSeconds": 30,
        "minGainPerWorker": 0.05,
        "preemptionGraceSeconds": 90,
    },
    "server": {
        "workers": 3,
        "threads": 8,
        "maxInflight": 6,
        "logLevel": "debug",
        "maxRequestBytes": 16777216,
        "requestTimeoutSeconds": 5.5,
        "memoryCapMi": 512,
        "idleSeconds": 30,
        "maxConnections": 500,
    },
    "extraEnv": [{"name": "TZ", "value": "UTC"}],
    # On by default; off here (a plain-HTTP install, as metacontroller/'s manifests are).
    "tls": {"enabled": False},
    "auth": {"enabled": False},
    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    "serviceAccount": {
        "create": True,
        "name": "dragonet-hooks",
        "annotations": {"example.com/owner": "ml-platform"},
    },
    "podDisruptionBudget": {"enabled": True, "minAvailable": 2},
    "podAnnotations": {"prometheus.io/scrape": "true"},
    "podLabels": {"team": "ml"},
    "priorityClassName": "system-cluster-critical",
    "nodeSelector": {"node-role.kubernetes.io/control-plane-addons": "true"},
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
    ],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {
                            "matchLabels": {"app.kubernetes.io/component": "webhook"}
                        },
                    },
                }
            ]
        }
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "webhook"}},
        }
    ],
}


def _run(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([helm, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        pytest.fail(
            f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def _values_file(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def _render(
    helm: str,
    *extra: str,
    release: str = "dragonet",
    namespace: str = "dragonet",
) -> list[dict[str, Any]]:
    out = _run(
        helm, "template", release, str(CHART), "--namespace", namespace, "--include-crds", *extra
    ).stdout
    # libyaml's safe loader: the same documents as yaml.safe_load_all's, ten times sooner
    # (the CRDs make each render about 150 kB).
    return [d for d in yaml.load_all(out, Loader=yaml.CSafeLoader) if d]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def _webhook(docs: list[dict[str, Any]], kind: str = "Deployment") -> dict[str, Any]:
    """The webhook's object of that kind (the reaper has a Deployment and a ServiceAccount
    too)."""
    found = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "webhook"
    ]
    assert len(found) == 1, f"expected one webhook {kind}, got {len(found)}"
    return found[0]


def _env(deployment: dict[str, Any]) -> dict[str, str]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"]}


def _validate_all(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if doc["kind"] == "CompositeController":
            validate_composite_controller(doc)
        elif doc["kind"] == "TrainingPool":
            validate_custom(doc)  # against our CRD's schema, as the API server would
        else:
            # Built-in kinds, and the CustomResourceDefinition object itself.
            validate_k8s(doc)


@pytest.fixture(scope="session")
def default_docs(helm: str) -> list[dict[str, Any]]:
    return _render(helm)


@pytest.fixture(scope="session")
def custom_docs(helm: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    values = _values_file(tmp_path_factory.mktemp("values"), CUSTOM_VALUES)
    return _render(helm, "-f", values, release="ml-jobs", namespace="training")


# --- lint and render --------------------------------------------------------------------------


def test_helm_lint_strict(helm: str) -> None:
    proc = _run(helm, "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in proc.stdout


def test_helm_lint_strict_with_custom_values(helm: str, tmp_path: Path) -> None:
    _run(helm, "lint", "--strict", str(CHART), "-f", _values_file(tmp_path, CUSTOM_VALUES))


def test_chart_has_no_dependency_that_is_not_vendored(helm: str) -> None:
    # A dependency declared in Chart.yaml but missing from charts/ breaks `helm template`,
    # `helm install ./chart` and `helm lint --strict` (see chart/README.md, "Metacontroller").
    proc = _run(helm, "dependency", "list", str(CHART))
    assert "missing" not in proc.stdout, proc.stdout


def test_default_render_has_the_expected_objects(default_docs: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in default_docs)
    assert kinds == [
        ("ClusterRole", "dragonet-reaper"),
        ("ClusterRole", "dragonet-recorder"),
        ("ClusterRole", "dragonet-tfjobs-edit"),
        ("ClusterRole", "dragonet-tfjobs-view"),
        ("ClusterRole", "dragonet-trainingpools-admin"),
        ("ClusterRole", "dragonet-trainingpools-view"),
        ("ClusterRoleBinding", "dragonet-reaper"),
        ("ClusterRoleBinding", "dragonet-recorder"),
        ("CompositeController", "dragonet-migrations"),
        ("CompositeController", "dragonet-mxjobs"),
        ("CompositeController", "dragonet-pools"),
        ("CompositeController", "dragonet-pytorchjobs"),
        ("CompositeController", "dragonet-tfjobs"),
        ("CustomResourceDefinition", "admissions.dragonet.io"),
        ("CustomResourceDefinition", "migrations.dragonet.io"),
        ("CustomResourceDefinition", "mxjobs.kubeflow.org"),
        ("CustomResourceDefinition", "pytorchjobs.kubeflow.org"),
        ("CustomResourceDefinition", "tfjobs.kubeflow.org"),
        ("CustomResourceDefinition", "trainingpools.dragonet.io"),
        ("Deployment", "dragonet-reaper"),
        ("Deployment", "dragonet-recorder"),
        ("Deployment", "dragonet-webhook"),
        # Nothing but Prometheus (when it scrapes) reaches the recorder and the reaper.
        ("NetworkPolicy", "dragonet-controllers"),
        ("NetworkPolicy", "dragonet-webhook"),
        ("PodDisruptionBudget", "dragonet-webhook"),
        # TLS and the shared secret, on by default: the chart makes both (webhook-secrets.yaml).
        ("Secret", "dragonet-webhook-tls"),
        ("Secret", "dragonet-webhook-token"),
        ("Service", "dragonet-webhook"),
        ("ServiceAccount", "dragonet-reaper"),
        ("ServiceAccount", "dragonet-recorder"),
        ("ServiceAccount", "dragonet-webhook"),
        ("TrainingPool", "default"),
        # The reaper deletes only finished jobs with a TTL (admission-policies.yaml).
        ("ValidatingAdmissionPolicy", "dragonet-reaper-jobs"),
        ("ValidatingAdmissionPolicyBinding", "dragonet-reaper-jobs"),
    ]


def test_default_render_validates(default_docs: list[dict[str, Any]]) -> None:
    _validate_all(default_docs)


def test_custom_render_validates(custom_docs: list[dict[str, Any]]) -> None:
    _validate_all(custom_docs)


def test_validation_of_rendered_objects_can_fail(default_docs: list[dict[str, Any]]) -> None:
    # The validators used above are not vacuous: a typo in a rendered Deployment is caught.
    deployment = copy.deepcopy(_webhook(default_docs))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = (
        "/healthz"
    )
    with pytest.raises(AssertionError, match="paht"):
        validate_k8s(deployment)
    controller = copy.deepcopy(_controller(default_docs, "tfjobs"))
    controller["spec"]["childResources"][0]["updateStrategy"]["method"] = "Ondelete"
    with pytest.raises(AssertionError, match="Ondelete"):
        validate_composite_controller(controller)
    pool = copy.deepcopy(_one(default_docs, "TrainingPool"))
    pool["spec"]["policy"] = "fastest"
    with pytest.raises(AssertionError, match="fastest"):
        validate_custom(pool)


# --- values reach the webhook -----------------------------------------------------------------


def test_default_values_reach_the_webhook_environment(default_docs: list[dict[str, Any]]) -> None:
    assert _env(_webhook(default_docs)) == {
        "DRAGONET_PORT": "8080",
        "DRAGONET_CLUSTER_DOMAIN": "",
        "DRAGONET_WORKERS": "2",
        "DRAGONET_THREADS": "4",
        "DRAGONET_MAX_INFLIGHT": "0",
        "DRAGONET_LOG_LEVEL": "info",
        "DRAGONET_MAX_REQUEST_BYTES": "67108864",
        "DRAGONET_REQUEST_TIMEOUT_SECONDS": "8",
        "DRAGONET_MEMORY_CAP_BYTES": "201326592",
        "DRAGONET_IDLE_SECONDS": "5",
        "DRAGONET_MAX_CONNECTIONS": "1000",
        "PROMETHEUS_MULTIPROC_DIR": "/tmp/dragonet-metrics",
        # TLS and the shared secret, on by default.
        "DRAGONET_TLS_CERT_FILE": "/etc/dragonet/tls/tls.crt",
        "DRAGONET_TLS_KEY_FILE": "/etc/dragonet/tls/tls.key",
        "DRAGONET_SHARED_SECRET_FILE": "/etc/dragonet/auth/token",
    }


def test_custom_values_reach_the_webhook_environment(custom_docs: list[dict[str, Any]]) -> None:
    assert _env(_webhook(custom_docs)) == {
        "DRAGONET_PORT": "8080",
        "DRAGONET_CLUSTER_DOMAIN": "cluster.local",
        "DRAGONET_WORKERS": "3",
        "DRAGONET_THREADS": "8",
        "DRAGONET_MAX_INFLIGHT": "6",
        "DRAGONET_LOG_LEVEL": "debug",
        "DRAGONET_MAX_REQUEST_BYTES": "16777216",
        "DRAGONET_REQUEST_TIMEOUT_SECONDS": "5.5",
        "DRAGONET_MEMORY_CAP_BYTES": "536870912",
        "DRAGONET_IDLE_SECONDS": "30",
        "DRAGONET_MAX_CONNECTIONS": "500",
        "PROMETHEUS_MULTIPROC_DIR": "/tmp/dragonet-metrics",
        "TZ": "UTC",
    }


def test_default_values_make_the_default_pool(default_docs: list[dict[str, Any]]) -> None:
    pool = _one(default_docs, "TrainingPool")
    assert pool["metadata"]["name"] == "default"
    assert pool["metadata"]["labels"]["dragonet.io/pool"] == "default"
    assert pool["spec"] == {
        "policy": "dragonet-las",
        "binding": "affinity",
        "starvationSeconds": 30,
        "idleSeconds": 60,
        "watchAllPods": False,
        "lasThresholdsGPUHours": [16],
        "lasByRemaining": True,
        "maxPreemptions": 1000000,
        "allocationIntervalSeconds": 0,
        "decisionIntervalSeconds": 0,
        "restartSeconds": 30,
        "minGainPerWorker": 0.05,
    }


def test_custom_scheduling_values_reach_the_default_pool(
    custom_docs: list[dict[str, Any]],
) -> None:
    """The pool's settings live in the TrainingPool now, not in the webhook's environment;
    and the webhook reads what the chart writes there."""
    from policy.model.pool import PoolSpec

    pool = _one(custom_docs, "TrainingPool")
    assert pool["spec"] == {
        "nodeSelector": CUSTOM_VALUES["scheduling"]["poolSelector"],
        "policy": "tiresias",
        "binding": "nodeName",
        "starvationSeconds": 45,
        "idleSeconds": 120.5,
        "watchAllPods": True,
        "lasThresholdsGPUHours": [0.5, 4, 16],
        "lasByRemaining": False,
        "maxPreemptions": 0,
        "allocationIntervalSeconds": 0,
        "decisionIntervalSeconds": 60,
        "restartSeconds": 30,
        "minGainPerWorker": 0.05,
        "preemptionGraceSeconds": 90,
    }
    spec = PoolSpec.model_validate(pool["spec"])
    assert spec.nodeSelector.as_dict() == CUSTOM_VALUES["scheduling"]["poolSelector"]
    assert (spec.policy, spec.binding) == ("tiresias", "nodeName")
    assert (spec.lasThresholdsGPUHours, spec.maxPreemptions) == ((0.5, 4, 16), 0)
    assert spec.lasByRemaining is False
    assert spec.decisionIntervalSeconds == 60
    assert spec.preemptionGraceSeconds == 90
    assert (spec.starvationSeconds, spec.idleSeconds, spec.watchAllPods) == (45, 120.5, True)


def test_the_default_pool_is_optional(helm: str) -> None:
    docs = _render(helm, "--set", "scheduling.createDefaultPool=false")
    assert [d for d in docs if d["kind"] == "TrainingPool"] == []


@pytest.mark.parametrize(
    ("flag", "env_name", "expected"),
    [
        ("scheduling.clusterDomain=corp.example", "DRAGONET_CLUSTER_DOMAIN", "corp.example"),
        ("server.workers=5", "DRAGONET_WORKERS", "5"),
        ("server.threads=1", "DRAGONET_THREADS", "1"),
        ("server.maxInflight=2", "DRAGONET_MAX_INFLIGHT", "2"),
        ("server.logLevel=warning", "DRAGONET_LOG_LEVEL", "warning"),
        ("server.maxRequestBytes=1048576", "DRAGONET_MAX_REQUEST_BYTES", "1048576"),
        ("server.requestTimeoutSeconds=3", "DRAGONET_REQUEST_TIMEOUT_SECONDS", "3"),
        ("server.memoryCapMi=64", "DRAGONET_MEMORY_CAP_BYTES", "67108864"),
        ("server.memoryCapMi=0", "DRAGONET_MEMORY_CAP_BYTES", "0"),
        ("server.idleSeconds=30", "DRAGONET_IDLE_SECONDS", "30"),
        ("server.maxConnections=200", "DRAGONET_MAX_CONNECTIONS", "200"),
    ],
)
def test_each_value_given_with_set_reaches_its_variable(
    helm: str, flag: str, env_name: str, expected: str
) -> None:
    env = _env(_webhook(_render(helm, "--set", flag)))
    assert env[env_name] == expected


def _memory_limit(docs: list[dict[str, Any]]) -> str:
    [container] = _webhook(docs)["spec"]["template"]["spec"]["containers"]
    return container["resources"]["limits"]["memory"]


def test_the_memory_limit_follows_the_cap_the_workers_and_what_else_a_worker_takes(
    helm: str, default_docs: list[dict[str, Any]]
) -> None:
    """workers x (cap + baseline + in flight), in Mi, unless the limit is set: raising the
    cap or the workers raises the limit with it (issue 36: the limit was a fixed 1Gi)."""
    assert _memory_limit(default_docs) == "1024Mi"  # 2 x (192 + 128 + 192)
    more = _render(helm, "--set", "server.workers=3", "--set", "server.memoryCapMi=512")
    assert _memory_limit(more) == f"{3 * (512 + 128 + 192)}Mi"
    assert _env(_webhook(more))["DRAGONET_MEMORY_CAP_BYTES"] == str(512 << 20)
    given = _render(helm, "--set", "resources.limits.memory=3Gi")
    assert _memory_limit(given) == "3Gi"


@pytest.mark.parametrize(
    ("flag", "field", "expected"),
    [
        ("scheduling.binding=nodeName", "binding", "nodeName"),
        ("scheduling.policy=kube-default", "policy", "kube-default"),
        ("scheduling.starvationSeconds=5", "starvationSeconds", 5),
        ("scheduling.idleSeconds=600", "idleSeconds", 600),
        ("scheduling.watchAllPods=true", "watchAllPods", True),
        (
            "scheduling.poolSelector.matchLabels.pool=gpu",
            "nodeSelector",
            {"matchLabels": {"pool": "gpu"}},
        ),
        ("scheduling.migration.consolidate=true", "migration", {"consolidate": True}),
    ],
)
def test_each_scheduling_value_given_with_set_reaches_the_default_pool(
    helm: str, flag: str, field: str, expected: Any
) -> None:
    assert _one(_render(helm, "--set", flag), "TrainingPool")["spec"][field] == expected


def test_the_webhook_reads_the_environment_the_chart_sets(
    custom_docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other end of the contract: webhooks.config.Settings parses what the chart renders.
    from webhooks.config import Settings

    for name in list(os.environ):
        if name.startswith("DRAGONET_"):
            monkeypatch.delenv(name)
    for name, value in _env(_webhook(custom_docs)).items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    from webhooks.config import unknown_variable

    assert unknown_variable(os.environ) is None  # `serve` refuses a variable it has no use for
    assert settings.cluster_domain == "cluster.local"
    assert settings.port == 8080
    assert (settings.workers, settings.threads, settings.log_level) == (3, 8, "debug")
    assert settings.inflight_limit() == 6
    assert (settings.max_request_bytes, settings.request_timeout_seconds) == (16 << 20, 5.5)


def test_custom_values_reach_the_pod_spec(custom_docs: list[dict[str, Any]]) -> None:
    deployment = _webhook(custom_docs)
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    [container] = spec["containers"]
    assert container["image"] == "registry.example.com/ml/dragonet:0.1.0-rc1"
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"] == CUSTOM_VALUES["resources"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == CUSTOM_VALUES["nodeSelector"]
    assert spec["tolerations"] == CUSTOM_VALUES["tolerations"]
    assert spec["affinity"] == CUSTOM_VALUES["affinity"]
    assert spec["topologySpreadConstraints"] == CUSTOM_VALUES["topologySpreadConstraints"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["serviceAccountName"] == "dragonet-hooks"
    assert pod["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert pod["metadata"]["labels"]["team"] == "ml"
    sa = _webhook(custom_docs, "ServiceAccount")
    assert sa["metadata"]["name"] == "dragonet-hooks"
    assert sa["metadata"]["annotations"] == {"example.com/owner": "ml-platform"}
    pdb = _one(custom_docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 2
    assert "maxUnavailable" not in pdb["spec"]


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("scheduling.binding=nodename", "binding"),
        ("scheduling.bindng=nodeName", "bindng"),
        ("scheduling.starvationSeconds=-1", "starvationSeconds"),
        ("server.workers=0", "workers"),
        ("server.logLevel=verbose", "logLevel"),
        ("scheduling.poolSelector.matchLabel.pool=training", "matchLabel"),
        ("server.requestTimeoutSeconds=10", "requestTimeoutSeconds"),
        ("server.maxRequestBytes=0", "maxRequestBytes"),
        ("server.memoryCapMi=-1", "memoryCapMi"),
        ("server.memoryBaselineMi=0", "memoryBaselineMi"),
        ("server.memoMaxEntries=50000", "memoMaxEntries"),  # (renamed: memoryCapMi)
        ("server.idleSeconds=0", "idleSeconds"),
        ("server.maxConnections=1", "maxConnections"),
        ("tls.secretName=Not_A_Name", "secretName"),
        ("auth.secretName=Not_A_Name", "secretName"),
        ("auth.secretKey=a/b", "secretKey"),
        ("monitor.auth=ip", "auth"),
        ("monitor.tokenAudience=", "tokenAudience"),
        ("rbac.admissionPolicies=maybe", "admissionPolicies"),
        ("tls.caBundle.inlne=PEM", "inlne"),
        ("networkPolicy.metacontroller.podSelector.matchLabel.app=mc", "matchLabel"),
        ("scheduling.gangScheduler=yunikorn", "gangScheduler"),
        ("scheduling.gangSchedulers={slurm}", "gangSchedulers"),
        ("scheduling.gangScheduler=volcano,scheduling.kubeshare=v1", "kubeshare"),
    ],
)
def test_invalid_values_are_refused_with_a_message(helm: str, flag: str, message: str) -> None:
    proc = _run(helm, "template", "dragonet", str(CHART), "--set", flag, check=False)
    assert proc.returncode != 0, f"helm accepted --set {flag}"
    assert message in proc.stderr, proc.stderr


# --- the webhook Deployment and Service -------------------------------------------------------


def test_webhook_deployment_defaults(default_docs: list[dict[str, Any]]) -> None:
    deployment = _webhook(default_docs)
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "ghcr.io/dragonet/dragonet:0.1.0"
    assert container["command"] + container["args"] == ["dragonet", "serve"]
    # HTTPS by default (tls.enabled), with the probes.
    assert container["ports"] == [{"name": "https", "containerPort": 8080, "protocol": "TCP"}]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {
            "path": path,
            "port": "https",
            "scheme": "HTTPS",
        }, probe
    assert container["resources"]["requests"]
    # Locked down: non-root, read-only root filesystem, no API token.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    assert _webhook(default_docs, "ServiceAccount")["automountServiceAccountToken"] is False
    # gunicorn needs a writable /tmp (worker heartbeats) on the read-only root filesystem.
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert pod["serviceAccountName"] == _webhook(default_docs, "ServiceAccount")["metadata"]["name"]


@pytest.mark.parametrize("fixture", ["default_docs", "custom_docs"])
def test_service_reaches_the_webhook_pods(fixture: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(fixture)
    service = _one(docs, "Service")
    deployment = _webhook(docs)
    [port] = service["spec"]["ports"]
    # 443 with TLS (the default), 80 without (custom_docs).
    assert port["port"] == (443 if fixture == "default_docs" else 80)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    target = port["targetPort"]
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container_ports.get(target, target) == 8080
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = service["spec"]["selector"]
    assert selector.items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    pdb = _one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_pod_disruption_budget_is_optional(helm: str) -> None:
    docs = _render(helm, "--set", "podDisruptionBudget.enabled=false")
    assert [d for d in docs if d["kind"] == "PodDisruptionBudget"] == []


# --- RBAC for namespace users -----------------------------------------------------------------


def test_tfjob_permissions_are_aggregated_into_the_default_roles(
    default_docs: list[dict[str, Any]],
) -> None:
    roles = {d["metadata"]["name"]: d for d in default_docs if d["kind"] == "ClusterRole"}
    edit, view = roles["dragonet-tfjobs-edit"], roles["dragonet-tfjobs-view"]
    agg = "rbac.authorization.k8s.io/aggregate-to-"
    assert edit["metadata"]["labels"][agg + "admin"] == "true"
    assert edit["metadata"]["labels"][agg + "edit"] == "true"
    assert view["metadata"]["labels"][agg + "view"] == "true"
    assert agg + "view" not in edit["metadata"]["labels"]

    def verbs(role: dict[str, Any], resource: str, group: str = "kubeflow.org") -> set[str]:
        return {
            v
            for rule in role["rules"]
            if group in rule["apiGroups"] and resource in rule["resources"]
            for v in rule["verbs"]
        }

    for jobs in ("tfjobs", "mxjobs", "pytorchjobs"):
        assert {"create", "delete", "get", "list", "watch", "patch", "update"} <= verbs(edit, jobs)
        assert verbs(view, jobs) == {"get", "list", "watch"}
        assert verbs(view, f"{jobs}/status") == {"get", "list", "watch"}
        # Users must not be able to forge the status Dragonet keeps its scheduling memory
        # in, nor the pools' decisions: they read Admissions, only Metacontroller writes them.
        assert not {"update", "patch"} & verbs(edit, f"{jobs}/status")
    assert verbs(edit, "admissions", "dragonet.io") == {"get", "list", "watch"}
    assert verbs(view, "admissions", "dragonet.io") == {"get", "list", "watch"}
    pools_admin = roles["dragonet-trainingpools-admin"]
    pools_view = roles["dragonet-trainingpools-view"]
    assert {"create", "delete", "update"} <= verbs(pools_admin, "trainingpools", "dragonet.io")
    assert verbs(pools_view, "trainingpools", "dragonet.io") == {"get", "list", "watch"}
    # Cluster-scoped pools are granted by ClusterRoleBindings, never aggregated into the
    # namespace roles (that would let every namespace admin change every pool).
    assert not any(k.startswith(agg) for k in pools_admin["metadata"].get("labels", {}))


def test_role_aggregation_can_be_turned_off(helm: str) -> None:
    docs = _render(helm, "--set", "rbac.aggregateToDefaultRoles=false")
    roles = [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole"]
    assert sorted(roles) == [
        "dragonet-reaper",  # bound to the reaper's own ServiceAccount, never aggregated
        "dragonet-recorder",  # bound to the recorder's own ServiceAccount, never aggregated
        "dragonet-trainingpools-admin",
        "dragonet-trainingpools-view",
    ]


# --- the CompositeController ------------------------------------------------------------------


def _plain_controller(which: str) -> dict[str, Any]:
    return yaml.safe_load(PLAIN[which].read_text())


def _plain_transport(spec: dict[str, Any]) -> dict[str, Any]:
    """A controller's spec as plain HTTP would make it: no endpointConfigs, http:// hooks
    (the chart's defaults are TLS and the shared secret; metacontroller/ is plain)."""
    spec = copy.deepcopy(spec)
    spec.pop("endpointConfigs", None)
    for hook in spec["hooks"].values():
        hook["webhook"]["url"] = hook["webhook"]["url"].replace("https://", "http://", 1)
    return spec


def _controller(docs: list[dict[str, Any]], which: str) -> dict[str, Any]:
    (found,) = [
        d
        for d in docs
        if d["kind"] == "CompositeController" and d["metadata"]["name"].endswith(f"-{which}")
    ]
    return found


def test_plain_controller_manifests_validate() -> None:
    pools, tfjobs = _plain_controller("pools"), _plain_controller("tfjobs")
    mxjobs, migrations = _plain_controller("mxjobs"), _plain_controller("migrations")
    pytorchjobs = _plain_controller("pytorchjobs")
    for controller in (pools, tfjobs, mxjobs, pytorchjobs, migrations):
        validate_composite_controller(controller)
        assert controller["spec"]["generateSelector"] is True
    # A Migration's controller writes its status only: no children, its own status ignored.
    assert migrations["spec"]["parentResource"] == {
        "apiVersion": "dragonet.io/v1alpha1",
        "resource": "migrations",
        "ignoreStatusChanges": True,
    }
    assert migrations["spec"]["childResources"] == []
    assert pools["metadata"]["name"] == "dragonet-pools"
    assert pools["spec"]["parentResource"] == {
        "apiVersion": "dragonet.io/v1alpha1",
        "resource": "trainingpools",
        "ignoreStatusChanges": True,
    }
    assert pools["spec"]["childResources"] == [
        {
            "apiVersion": "dragonet.io/v1alpha1",
            "resource": "admissions",
            "updateStrategy": {"method": "InPlace"},
        }
    ]
    for plural, jobs in (("tfjobs", tfjobs), ("mxjobs", mxjobs), ("pytorchjobs", pytorchjobs)):
        assert jobs["metadata"]["name"] == f"dragonet-{plural}"
        assert jobs["spec"]["parentResource"] == {
            "apiVersion": "kubeflow.org/v1",
            "resource": plural,
            "ignoreStatusChanges": True,
        }
        children = [
            {"apiVersion": "v1", "resource": r, "updateStrategy": {"method": "OnDelete"}}
            for r in ("pods", "services")
        ]
        if plural == "tfjobs":  # TensorBoards, of TFJobs only
            children.append(
                {
                    "apiVersion": "apps/v1",
                    "resource": "deployments",
                    "updateStrategy": {"method": "OnDelete"},
                }
            )
        assert jobs["spec"]["childResources"] == children
    plain = (("pools", pools), ("tfjobs", tfjobs), ("mxjobs", mxjobs), ("pytorchjobs", pytorchjobs))
    for which, controller in plain:
        hooks = controller["spec"]["hooks"]
        assert set(hooks) == set(HOOKS[which])
        for hook in HOOKS[which]:
            # v2 on every hook: a namespaced TFJob sees its Admission, and the pool's children
            # in other namespaces are keyed namespace/name, only with v2.
            url = f"http://dragonet-webhook.dragonet/{which}/{hook}"
            assert hooks[hook] == {"version": "v2", "webhook": {"url": url, "timeout": "10s"}}


@pytest.mark.parametrize("which", ["pools", "tfjobs", "mxjobs", "pytorchjobs", "migrations"])
def test_chart_controller_equals_the_plain_manifest_for_release_dragonet_in_dragonet(
    default_docs: list[dict[str, Any]], helm: str, which: str
) -> None:
    """With TLS and the shared secret off, exactly the plain manifest; by default, the same
    with https:// hooks and the endpointConfigs entry for the webhook's host."""
    plain = _plain_controller(which)
    off = _render(helm, "--set", "tls.enabled=false", "--set", "auth.enabled=false")
    rendered = _controller(off, which)
    assert rendered["metadata"]["name"] == plain["metadata"]["name"]
    assert rendered["spec"] == plain["spec"]
    default = _controller(default_docs, which)["spec"]
    assert [c["host"] for c in default["endpointConfigs"]] == ["dragonet-webhook.dragonet"]
    assert all(h["webhook"]["url"].startswith("https://") for h in default["hooks"].values())
    assert _plain_transport(default) == plain["spec"]


@pytest.mark.parametrize("which", ["pools", "tfjobs", "mxjobs", "pytorchjobs", "migrations"])
def test_chart_controller_differs_from_the_plain_manifest_only_in_name_and_url(
    custom_docs: list[dict[str, Any]], which: str
) -> None:
    rendered = copy.deepcopy(_controller(custom_docs, which))
    service = _one(custom_docs, "Service")
    # The hooks point at the chart's own Service, in the release namespace, on its port 80.
    base = f"http://{service['metadata']['name']}.training"
    assert base == "http://ml-jobs-dragonet-webhook.training"
    for hook in HOOKS[which]:
        webhook = rendered["spec"]["hooks"][hook]["webhook"]
        assert webhook["url"] == f"{base}/{which}/{hook}"
        webhook["url"] = f"http://dragonet-webhook.dragonet/{which}/{hook}"
    assert rendered["metadata"]["name"] == f"ml-jobs-dragonet-{which}"
    assert rendered["spec"] == _plain_controller(which)["spec"]


# --- gang schedulers: the default pool's backend and the PodGroup child resources -------------


@pytest.fixture(scope="session")
def gang_docs(helm: str) -> list[dict[str, Any]]:
    return _render(
        helm,
        "--set",
        "scheduling.gangScheduler=volcano",
        "--set",
        "scheduling.gangSchedulerName=volcano-ml",
        "--set",
        "scheduling.gangSchedulers={kube-batch,volcano}",
    )


def test_a_gang_scheduler_reaches_the_default_pool(gang_docs: list[dict[str, Any]]) -> None:
    from policy.model.pool import PoolSpec

    _validate_all(gang_docs)
    pool = _one(gang_docs, "TrainingPool")
    assert pool["spec"]["gangScheduler"] == "volcano"
    assert PoolSpec.model_validate(pool["spec"]).scheduler_name == "volcano-ml"


@pytest.mark.parametrize("which", ["tfjobs", "mxjobs", "pytorchjobs"])
def test_the_job_controllers_own_each_backends_pod_groups_as_the_simulator_runs_them(
    gang_docs: list[dict[str, Any]], which: str
) -> None:
    """The plain manifest plus one ``podgroups`` child per backend (in place), which is
    exactly what the simulator runs for those backends (sim.engine.load_controllers)."""
    from sim.engine import load_controllers

    rendered = _controller(gang_docs, which)
    (simulated,) = [
        c
        for c in load_controllers(["kube-batch", "volcano"])
        if c["metadata"]["name"] == f"dragonet-{which}"
    ]
    assert _plain_transport(rendered["spec"]) == simulated["spec"]
    owned = rendered["spec"]["childResources"]
    assert [c for c in owned if c["resource"] == "podgroups"] == [
        {"apiVersion": v, "resource": "podgroups", "updateStrategy": {"method": "InPlace"}}
        for v in ("scheduling.incubator.k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1")
    ]
    assert (
        _plain_transport(_controller(gang_docs, "pools")["spec"])
        == (_plain_controller("pools")["spec"])
    )


def test_users_may_read_the_pod_groups_of_their_jobs(gang_docs: list[dict[str, Any]]) -> None:
    roles = {d["metadata"]["name"]: d for d in gang_docs if d["kind"] == "ClusterRole"}
    for name in ("dragonet-tfjobs-edit", "dragonet-tfjobs-view"):
        groups = {
            g: set(rule["verbs"])
            for rule in roles[name]["rules"]
            if rule["resources"] == ["podgroups"]
            for g in rule["apiGroups"]
        }
        assert groups == {
            "scheduling.incubator.k8s.io": {"get", "list", "watch"},
            "scheduling.volcano.sh": {"get", "list", "watch"},
        }


def test_a_gang_scheduler_with_node_name_binding_is_refused(helm: str) -> None:
    flags = ("--set", "scheduling.gangScheduler=kube-batch", "--set", "scheduling.binding=nodeName")
    proc = _run(helm, "template", "dragonet", str(CHART), *flags, check=False)
    assert proc.returncode != 0
    assert "binding" in proc.stderr and "affinity" in proc.stderr


# --- chart metadata and documentation ---------------------------------------------------------


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["apiVersion"], chart["name"], chart["version"], chart["appVersion"]) == (
        "v2",
        "dragonet",
        "0.1.0",
        "0.1.0",
    )


def _leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_leaves(value, path + "."))
        else:
            out[path] = value
    return out


def _readme_values_table() -> dict[str, Any]:
    rows: dict[str, Any] = {}
    row = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([^`]*)`\s*\|")
    for line in (CHART / "README.md").read_text().splitlines():
        m = row.match(line)
        if m:
            key, default = m.groups()
            assert key not in rows, f"README lists {key} twice"
            rows[key] = json.loads(default)
    return rows


def test_readme_documents_every_value_with_its_default() -> None:
    values = _leaves(yaml.safe_load((CHART / "values.yaml").read_text()))
    documented = _readme_values_table()
    assert sorted(documented) == sorted(values), (
        "chart/README.md's values table and values.yaml list different keys"
    )
    wrong = {k: (documented[k], v) for k, v in values.items() if documented[k] != v}
    assert wrong == {}, "README default != values.yaml default: {key: (readme, values.yaml)}"


# --- locked down: TLS, the shared secret, the NetworkPolicy, PodSecurity ---------------------

SECURED_VALUES: dict[str, Any] = {
    "tls": {"enabled": True, "secretName": "dragonet-webhook-tls"},
    "auth": {"enabled": True, "secretName": "dragonet-webhook-token", "secretKey": "bearer"},
    "networkPolicy": {
        "extraFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]
    },
}


@pytest.fixture(scope="session")
def secured_docs(helm: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    values = _values_file(tmp_path_factory.mktemp("secured"), SECURED_VALUES)
    return _render(helm, "-f", values, release="ml-jobs", namespace="training")


def test_helm_lint_strict_with_tls_and_a_secret(helm: str, tmp_path: Path) -> None:
    _run(helm, "lint", "--strict", str(CHART), "-f", _values_file(tmp_path, SECURED_VALUES))


def test_secured_render_validates(secured_docs: list[dict[str, Any]]) -> None:
    _validate_all(secured_docs)  # endpointConfigs against Metacontroller's own schema too


def test_with_tls_and_a_secret_metacontroller_calls_https_with_the_ca_and_the_token(
    secured_docs: list[dict[str, Any]],
) -> None:
    service = _one(secured_docs, "Service")
    host = f"{service['metadata']['name']}.training"
    assert host == "ml-jobs-dragonet-webhook.training"
    [port] = service["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("https", 443, "https")
    for which in ("pools", "tfjobs", "migrations"):
        spec = copy.deepcopy(_controller(secured_docs, which)["spec"])
        # Matched by host: Metacontroller applies it to every hook URL of that host.
        assert spec.pop("endpointConfigs") == [
            {
                "host": host,
                "caBundle": {
                    "secretRef": {
                        "name": "dragonet-webhook-tls",
                        "namespace": "training",
                        "key": "ca.crt",
                    }
                },
                "authorization": {
                    "type": "Bearer",
                    "secretRef": {
                        "name": "dragonet-webhook-token",
                        "namespace": "training",
                        "key": "bearer",
                    },
                },
            }
        ]
        for hook in HOOKS[which]:
            webhook = spec["hooks"][hook]["webhook"]
            assert webhook["url"] == f"https://{host}/{which}/{hook}"
            webhook["url"] = f"http://dragonet-webhook.dragonet/{which}/{hook}"
        assert spec == _plain_controller(which)["spec"]


def test_with_tls_and_a_secret_the_webhook_serves_what_metacontroller_is_told(
    secured_docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhooks.config import Settings

    pod = _webhook(secured_docs)["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = _env(_webhook(secured_docs))
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The same Secrets Metacontroller reads, mounted where the environment says.
    assert volumes["tls"]["secret"]["secretName"] == "dragonet-webhook-tls"
    assert volumes["auth"]["secret"]["secretName"] == "dragonet-webhook-token"
    files = {
        f"{mounts[name]}/{item['path']}": item["key"]
        for name in ("tls", "auth")
        for item in volumes[name]["secret"]["items"]
    }
    assert files[env["DRAGONET_TLS_CERT_FILE"]] == "tls.crt"
    assert files[env["DRAGONET_TLS_KEY_FILE"]] == "tls.key"
    assert files[env["DRAGONET_SHARED_SECRET_FILE"]] == "bearer"
    assert container["ports"] == [{"name": "https", "containerPort": 8080, "protocol": "TCP"}]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {
            "path": path,
            "port": "https",
            "scheme": "HTTPS",
        }
    for name in list(os.environ):
        if name.startswith("DRAGONET_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.tls_cert_file == "/etc/dragonet/tls/tls.crt"
    assert settings.shared_secret_file == "/etc/dragonet/auth/token"


def test_a_ca_bundle_can_be_given_inline(helm: str) -> None:
    docs = _render(
        helm,
        "--set",
        "tls.enabled=true",
        "--set",
        "tls.secretName=t",
        "--set",
        "auth.enabled=false",
    )
    docs_inline = _render(
        helm,
        "--set",
        "tls.enabled=true",
        "--set",
        "tls.secretName=t",
        "--set",
        "auth.enabled=false",
        "--set",
        "tls.caBundle.inline=-----BEGIN CERTIFICATE-----",
    )
    [config] = _controller(docs, "pools")["spec"]["endpointConfigs"]
    assert config == {
        "host": "dragonet-webhook.dragonet",
        "caBundle": {"secretRef": {"name": "t", "namespace": "dragonet", "key": "ca.crt"}},
    }
    [config] = _controller(docs_inline, "tfjobs")["spec"]["endpointConfigs"]
    assert config["caBundle"] == {"inline": "-----BEGIN CERTIFICATE-----"}


def _metacontroller_pod_labels() -> list[tuple[str, dict[str, str]]]:
    """(namespace labels, pod labels) of Metacontroller as its two installs make it:
    ``kubectl apply -k manifests/production`` and the Helm chart ``metacontroller-helm``
    (release ``metacontroller``), both in namespace ``metacontroller``."""
    ns = {"kubernetes.io/metadata.name": "metacontroller"}
    return [
        (ns, {"app.kubernetes.io/name": "metacontroller"}),
        (
            ns,
            {
                "app.kubernetes.io/name": "metacontroller-helm",
                "app.kubernetes.io/instance": "metacontroller",
            },
        ),
    ]


@pytest.mark.parametrize("fixture", ["default_docs", "secured_docs"])
def test_only_metacontroller_reaches_the_webhook_port(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    from policy.model.pool import LabelSelector

    docs = request.getfixturevalue(fixture)
    [policy] = [
        d
        for d in docs
        if d["kind"] == "NetworkPolicy" and d["metadata"]["name"].endswith("-webhook")
    ]
    deployment = _webhook(docs)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert [p["port"] for p in rule["ports"]] == [p["name"] for p in container["ports"]]
    metacontroller, *extra = rule["from"]
    namespaces = LabelSelector.model_validate(metacontroller["namespaceSelector"])
    pods = LabelSelector.model_validate(metacontroller["podSelector"])
    for ns_labels, labels in _metacontroller_pod_labels():
        assert namespaces.matches(ns_labels) and pods.matches(labels)
    # Not any pod of that namespace, not a pod that calls itself metacontroller elsewhere.
    assert not pods.matches({"app.kubernetes.io/name": "something-else"})
    assert not namespaces.matches({"kubernetes.io/metadata.name": "default"})
    assert extra == (
        SECURED_VALUES["networkPolicy"]["extraFrom"] if fixture == "secured_docs" else []
    )


def test_the_network_policy_is_optional(helm: str) -> None:
    docs = _render(helm, "--set", "networkPolicy.enabled=false")
    assert [d for d in docs if d["kind"] == "NetworkPolicy"] == []


_RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What in a pod spec breaks the PodSecurity "restricted" standard (Kubernetes 1.25+:
    the baseline checks that can apply here, plus every restricted one)."""
    out: list[str] = []
    psc = pod.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append(key)
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            out.append(f"volume {volume['name']}: {sorted(kinds)}")
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities must drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds capabilities {caps['add']}")
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            out.append(f"{name}: runAsNonRoot must be true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"{name}: runs as UID 0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"{name}: hostPort")
    return out


@pytest.mark.parametrize("fixture", ["default_docs", "custom_docs", "secured_docs"])
def test_the_webhook_pod_meets_the_restricted_pod_security_standard(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """So the chart installs into a namespace labelled
    pod-security.kubernetes.io/enforce=restricted (chart/README.md)."""
    docs = request.getfixturevalue(fixture)
    pod = _webhook(docs)["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    [container] = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_restricted_check_catches_a_weakened_pod(helm: str) -> None:
    docs = _render(
        helm,
        "--set",
        "securityContext.allowPrivilegeEscalation=true",
        "--set",
        "podSecurityContext.seccompProfile.type=Unconfined",
    )
    pod = _webhook(docs)["spec"]["template"]["spec"]
    assert restricted_violations(pod) == [
        "webhook: allowPrivilegeEscalation must be false",
        "webhook: seccompProfile must be RuntimeDefault or Localhost",
    ]


# --- KubeShare (docs/kubeshare.md) -------------------------------------------------------------


def test_kubeshare_v1_makes_the_job_controllers_own_sharepods_and_users_read_them(
    helm: str, tmp_path: Path, default_docs: list[dict[str, Any]]
) -> None:
    sharepods = {
        "apiVersion": "kubeshare.nthu/v1",
        "resource": "sharepods",
        "updateStrategy": {"method": "OnDelete"},
    }

    def controllers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {d["metadata"]["name"]: d for d in docs if d["kind"] == "CompositeController"}

    # Without KubeShare v1 nothing names SharePods: Metacontroller could not start a
    # controller whose child resource is not installed.
    assert "sharepods" not in yaml.safe_dump(default_docs)
    values = _values_file(tmp_path, {"scheduling": {"kubeshare": "v1"}})
    docs = _render(helm, "-f", values)
    for name, c in controllers(docs).items():
        validate_composite_controller(c)
        children = c["spec"]["childResources"]
        assert (sharepods in children) == name.endswith(("-tfjobs", "-mxjobs", "-pytorchjobs")), (
            name
        )
    (pool,) = [d for d in docs if d["kind"] == "TrainingPool"]
    assert pool["spec"]["kubeshare"] == "v1"
    validate_custom(pool)
    roles = [d for d in docs if d["kind"] == "ClusterRole" and "tfjobs" in d["metadata"]["name"]]
    assert roles and all(
        any(
            r["apiGroups"] == ["kubeshare.nthu"] and "sharepods" in r["resources"]
            for r in role["rules"]
        )
        for role in roles
    )


def test_kubeshare_v2_sets_only_the_default_pools_field(helm: str, tmp_path: Path) -> None:
    docs = _render(helm, "-f", _values_file(tmp_path, {"scheduling": {"kubeshare": "v2"}}))
    (pool,) = [d for d in docs if d["kind"] == "TrainingPool"]
    assert pool["spec"]["kubeshare"] == "v2"
    assert "sharepods" not in yaml.safe_dump(docs)


def test_an_unknown_kubeshare_value_is_refused_by_the_values_schema(
    helm: str, tmp_path: Path
) -> None:
    values = _values_file(tmp_path, {"scheduling": {"kubeshare": "v3"}})
    result = subprocess.run(
        [helm, "template", "x", str(CHART), "-f", values], capture_output=True, text=True
    )
    assert result.returncode != 0 and "kubeshare" in result.stderr


def test_the_default_pools_stop_policy_is_written_only_when_it_holds_the_pool(
    helm: str, tmp_path: Path
) -> None:
    """None writes no field (a pool held with kubectl stays held across upgrades); Hold or
    HoldAndDrain is the pool's spec.stopPolicy; anything else is refused by the schema."""
    (pool,) = [d for d in _render(helm) if d["kind"] == "TrainingPool"]
    assert "stopPolicy" not in pool["spec"]
    values = _values_file(tmp_path, {"scheduling": {"stopPolicy": "HoldAndDrain"}})
    (pool,) = [d for d in _render(helm, "-f", values) if d["kind"] == "TrainingPool"]
    assert pool["spec"]["stopPolicy"] == "HoldAndDrain"
    validate_custom(pool)
    values = _values_file(tmp_path, {"scheduling": {"stopPolicy": "Drain"}})
    result = subprocess.run(
        [helm, "template", "x", str(CHART), "-f", values], capture_output=True, text=True
    )
    assert result.returncode != 0 and "stopPolicy" in result.stderr


def _notes(helm: str, tmp_path: Path, *extra: str) -> str:
    """NOTES.txt as `helm install` would print it: `helm template` skips NOTES, so a copy
    of the chart renders the same text into a ConfigMap."""
    import shutil

    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy)
    notes = copy / "templates" / "NOTES.txt"
    (copy / "templates" / "_notes.tpl").write_text(
        '{{- define "notes.text" }}' + notes.read_text() + "{{- end }}"
    )
    notes.unlink()
    (copy / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data:\n  notes: {{ include "notes.text" . | toJson }}\n'
    )
    out = _run(
        helm, "template", "dragonet", str(copy), "--show-only", "templates/notes.yaml", *extra
    )
    return yaml.safe_load(out.stdout)["data"]["notes"]


def test_notes_say_how_to_install_metacontroller_and_to_build_the_image(
    helm: str, tmp_path: Path
) -> None:
    """After `helm install`: the Metacontroller command with the flags Dragonet needs, the
    version Chart.yaml names, and, while the image is the unpublished default, that it must
    be built and pushed (not said once another image is set)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    notes = _notes(helm, tmp_path)
    assert "helm install metacontroller oci://ghcr.io/metacontroller/metacontroller-helm" in notes
    assert "--version 4.17.2" in notes and "--client-go-qps=50" in notes
    assert "Metacontroller >= 4.17.2" in chart["description"]
    assert "Metacontroller ≥ 4.17.2" in (ROOT / "README.md").read_text()
    assert "nothing publishes it: build it from the repository's Dockerfile, push it" in (
        " ".join(notes.split())
    )
    own = _notes(helm, tmp_path / "own", "--set", "image.repository=registry.example.com/d")
    assert "nothing publishes it" not in own


def test_readme_installs_the_chart_once() -> None:
    """Two `helm install dragonet` commands cannot both run (the release exists after the
    first): the README shows one, with the image and the pool selector together."""
    readme = (ROOT / "README.md").read_text()
    assert readme.count("helm install dragonet ") == 1
    at = readme.index("helm install dragonet ")
    command = readme[at : readme.index("\n\n", at)]
    assert "image.repository=" in command and "poolSelector" in command


def test_the_charts_job_kinds_are_the_kinds_dragonet_runs(
    default_docs: list[dict[str, Any]],
) -> None:
    """One CompositeController, one CRD and one plain manifest per kind of ``KINDS``: a kind
    added to the webhook and not to the chart's ``dragonet.jobPlurals`` (or the reverse)
    fails here."""
    from policy.model.kinds import KINDS

    plurals = {k.plural for k in KINDS}
    controllers = {
        d["spec"]["parentResource"]["resource"]
        for d in default_docs
        if d["kind"] == "CompositeController"
        and d["spec"]["parentResource"]["apiVersion"] == "kubeflow.org/v1"
    }
    crds = {
        d["spec"]["names"]["plural"]
        for d in default_docs
        if d["kind"] == "CustomResourceDefinition" and d["spec"]["group"] == "kubeflow.org"
    }
    assert controllers == crds == plurals
    assert plurals <= set(PLAIN) and plurals <= set(HOOKS)
