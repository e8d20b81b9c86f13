"""The TFJob CustomResourceDefinition in crd/ (and its copy in chart/crds/).

What a user would notice: the CRD is refused by the API server (not structural, invalid object),
an existing TFJob manifest is refused, a typo or wrong type is silently accepted, a status the
webhook writes is refused or pruned, or `kubectl get tfjobs` shows empty columns.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.kube_schema import (
    CRD_PATH,
    ROOT,
    tfjob_crd,
    tfjob_schema,
    validate_k8s,
    validate_tfjob,
    validate_tfjob_status,
)

# Manifests users already run (DRAGON's examples, Kubeflow's gang example), vendored from
# the workspace's shared/compat/ so the test runs anywhere.
COMPAT_DIR = ROOT / "tests" / "fixtures" / "compat"
CHART_CRD_PATH = ROOT / "chart" / "crds" / "tfjobs.kubeflow.org.yaml"


def _compat_tfjobs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(COMPAT_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("apiVersion") == "kubeflow.org/v1" and doc.get("kind") == "TFJob":
                found.append((path.name, doc))
    return found


COMPAT_TFJOBS = _compat_tfjobs()


def _minimal_tfjob() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "ns"},
        "spec": {
            "max-instances": 4,
            "min-instances": 1,
            "tfReplicaSpecs": {
                "PS": {
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"name": "tensorflow", "image": "tf:1.15"}]}
                    },
                },
                "Worker": {
                    "replicas": 4,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "spec": {"containers": [{"name": "tensorflow", "image": "tf:1.15"}]}
                    },
                },
            },
        },
    }


def _full_status() -> dict[str, Any]:
    """Every status field of the contract between the webhook and the CRD."""
    t = "2026-11-21T13:46:00Z"
    return {
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "TFJobCreated",
                "message": "TFJob mnist is created.",
                "lastUpdateTime": t,
                "lastTransitionTime": t,
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "TFJobRunning",
                "message": "TFJob ns/mnist is running.",
                "lastUpdateTime": "2026-11-21T13:47:05.123456+01:00",
                "lastTransitionTime": "2026-11-21T13:47:05Z",
            },
        ],
        "replicaStatuses": {
            "PS": {"active": 1, "succeeded": 0, "failed": 0},
            "Worker": {"active": 3, "succeeded": 0, "failed": 1},
            "Chief": {"active": 0},
        },
        "startTime": t,
        "completionTime": t,
        "lastReconcileTime": t,
        "enqueueTime": t,
        "startRunTime": t,
        "finishedTime": t,
        "scheduling": {
            "phase": "Running",
            "message": "Running 3 of 4 workers on node-a, node-b.",
            "workers": {"current": 3, "target": 3, "min": 1, "max": 4},
            "nodes": ["node-a", "node-b"],
        },
    }


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy of obj with the dotted path set (keys may contain '-')."""
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return out


def _delete(obj: dict[str, Any], path: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    del node[last]
    return out


# --- the CRD object itself -------------------------------------------------------------------


def test_crd_is_a_valid_kubernetes_object() -> None:
    validate_k8s(tfjob_crd())


def test_crd_names_scope_and_version() -> None:
    crd = tfjob_crd()
    assert crd["metadata"]["name"] == "tfjobs.kubeflow.org"
    spec = crd["spec"]
    assert spec["group"] == "kubeflow.org"
    assert spec["scope"] == "Namespaced"
    names = spec["names"]
    assert (names["kind"], names["plural"], names["singular"], names["listKind"]) == (
        "TFJob",
        "tfjobs",
        "tfjob",
        "TFJobList",
    )
    [v1] = spec["versions"]
    assert v1["name"] == "v1"
    assert v1["served"] is True
    assert v1["storage"] is True
    # Metacontroller writes status through /status; without it every status write bumps the
    # generation and defeats the customize cache.
    assert v1["subresources"] == {"status": {}}


def _structural_violations(node: Any, path: str, *, root: bool = False) -> list[str]:
    """Violations of the API server's structural-schema rules (apiextensions.k8s.io/v1)."""
    bad: list[str] = []
    if not isinstance(node, dict):
        return [f"{path}: schema node is not an object"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if not node.get("type") and not (preserve or int_or_string):
        bad.append(
            f"{path}: no type (and neither x-kubernetes-preserve-unknown-fields "
            "nor x-kubernetes-int-or-string)"
        )
    if int_or_string and node.get("type"):
        bad.append(f"{path}: x-kubernetes-int-or-string must not have a type")
    if "properties" in node and "additionalProperties" in node:
        bad.append(f"{path}: both properties and additionalProperties")
    if node.get("additionalProperties") is False:
        bad.append(f"{path}: additionalProperties: false is not allowed")
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, branch in enumerate(node.get(junctor, [])):
            where = f"{path}.{junctor}[{i}]"
            allowed_int_or_string = (
                junctor == "anyOf"
                and int_or_string
                and branch in ({"type": "integer"}, {"type": "string"})
            )
            for key in ("type", "default", "description", "nullable", "additionalProperties"):
                if key in branch and not allowed_int_or_string:
                    bad.append(f"{where}: {key} is not allowed inside {junctor}")
    if root:
        if node.get("type") != "object":
            bad.append(f"{path}: root must be type: object")
        meta = node.get("properties", {}).get("metadata")
        if meta is not None and meta != {"type": "object"}:
            bad.append(f"{path}.metadata: only `type: object` is allowed at the root's metadata")
    for name, child in node.get("properties", {}).items():
        bad += _structural_violations(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        bad += _structural_violations(node["additionalProperties"], f"{path}.<key>")
    if "items" in node:
        bad += _structural_violations(node["items"], f"{path}[]")
    return bad


def test_crd_schema_is_structural() -> None:
    assert _structural_violations(tfjob_schema(), "openAPIV3Schema", root=True) == []


def test_structural_check_catches_a_node_without_type() -> None:
    # The check above must be able to fail: a field with no type is refused by the API server.
    schema = tfjob_schema()
    schema["properties"]["spec"]["properties"]["max-instances"] = {"description": "untyped"}
    violations = _structural_violations(schema, "openAPIV3Schema", root=True)
    assert violations == [
        "openAPIV3Schema.spec.max-instances: no type (and neither "
        "x-kubernetes-preserve-unknown-fields nor x-kubernetes-int-or-string)"
    ]


def test_chart_crd_is_a_byte_identical_copy() -> None:
    assert CHART_CRD_PATH.read_bytes() == CRD_PATH.read_bytes(), (
        "chart/crds/tfjobs.kubeflow.org.yaml differs from crd/tfjobs.kubeflow.org.yaml; "
        "copy crd/ over it: cp crd/tfjobs.kubeflow.org.yaml chart/crds/"
    )


# --- printer columns (kubectl get tfjobs) ----------------------------------------------------


def test_printer_columns() -> None:
    [v1] = tfjob_crd()["spec"]["versions"]
    columns = {
        c["name"]: (c["jsonPath"], c["type"], c.get("priority", 0))
        for c in v1["additionalPrinterColumns"]
    }
    assert columns == {
        "State": (".status.conditions[-1:].type", "string", 0),
        "Scheduling": (".status.scheduling.phase", "string", 0),
        "Pool": (".status.scheduling.pool", "string", 0),
        "Reason": (".status.scheduling.reason", "string", 0),
        "Position": (".status.scheduling.queue.position", "integer", 0),
        "Workers": (".status.scheduling.workers.current", "integer", 0),
        "Max": (".status.scheduling.workers.max", "integer", 1),
        "Message": (".status.scheduling.message", "string", 1),
        "Age": (".metadata.creationTimestamp", "date", 0),
    }
    assert [c["name"] for c in v1["additionalPrinterColumns"]][-1] == "Age"


def _schema_at(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    node = schema
    for part in json_path.lstrip(".").split("."):
        name, _, index = part.partition("[")
        node = node["properties"][name]
        if index:
            node = node["items"]
    return node


def test_printer_columns_point_at_declared_fields_of_the_right_type() -> None:
    # A column whose path is not in the schema stays empty forever in `kubectl get`.
    [v1] = tfjob_crd()["spec"]["versions"]
    schema = v1["schema"]["openAPIV3Schema"]
    for column in v1["additionalPrinterColumns"]:
        if column["jsonPath"].startswith(".metadata."):
            continue
        field = _schema_at(schema, column["jsonPath"])
        assert field["type"] == column["type"], column


# --- TFJob instances --------------------------------------------------------------------------


def test_compat_directory_has_v1_tfjobs() -> None:
    # Guard against the parametrized test below silently running on nothing.
    assert len(COMPAT_TFJOBS) >= 4, [name for name, _ in COMPAT_TFJOBS]


@pytest.mark.parametrize("doc", [d for _, d in COMPAT_TFJOBS], ids=[n for n, _ in COMPAT_TFJOBS])
def test_crd_accepts_existing_tfjob_manifests_unchanged(doc: dict[str, Any]) -> None:
    validate_tfjob(doc)


def test_crd_accepts_dragon_fields_and_every_spec_field() -> None:
    job = _minimal_tfjob()
    job["spec"].update(
        {
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "ttlSecondsAfterFinished": 600,
                "activeDeadlineSeconds": 3600,
                "backoffLimit": 3,
                "schedulingPolicy": {
                    "minAvailable": 2,
                    "queue": "research",
                    "minResources": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": 2},
                    "priorityClass": "high",
                    "scheduleTimeoutSeconds": 60,
                },
                "suspend": False,
                "managedBy": "kubeflow.org/training-operator",
            },
            "successPolicy": "AllWorkers",
            "enableDynamicWorker": True,
            "cleanPodPolicy": "All",
            "ttlSecondsAfterFinished": 100,
            "activeDeadlineSeconds": 7200,
            "backoffLimit": 1,
        }
    )
    job["status"] = _full_status()
    validate_tfjob(job)


@pytest.mark.parametrize(
    ("path", "value", "expected_in_error"),
    [
        ("spec.max-instances", "four", "max-instances"),
        ("spec.min-instances", "1", "min-instances"),
        ("spec.max-instances", 2.5, "max-instances"),
        ("spec.tfReplicaSpecs.Worker.replicas", "4", "replicas"),
        ("spec.tfReplicaSpecs.Worker.template", "pod", "template"),
        ("spec.tfReplicaSpecs", [], "tfReplicaSpecs"),
        ("spec.runPolicy.suspend", "yes", "suspend"),
        ("spec.runPolicy.schedulingPolicy.minResources", {"cpu": True}, "minResources"),
        ("spec.cleanPodPolicy", 3, "cleanPodPolicy"),
        ("spec.enableDynamicWorker", "true", "enableDynamicWorker"),
        # Unknown fields: kubectl's strict field validation refuses typos such as these.
        ("spec.maxInstances", 4, "maxInstances"),
        ("spec.tfReplicaSpecs.Worker.replica", 4, "replica"),
    ],
)
def test_crd_rejects_wrong_types_and_unknown_fields(
    path: str, value: Any, expected_in_error: str
) -> None:
    job = _set(_minimal_tfjob(), path, value)
    with pytest.raises(AssertionError, match=expected_in_error):
        validate_tfjob(job)


def test_crd_requires_tf_replica_specs() -> None:
    with pytest.raises(AssertionError, match="tfReplicaSpecs"):
        validate_tfjob(_delete(_minimal_tfjob(), "spec.tfReplicaSpecs"))


@pytest.mark.parametrize(
    "spec_change",
    [
        {"min-instances": 5, "max-instances": 2},
        {"min-instances": -1},
        {"tfReplicaSpecs": {"PS": {"replicas": 1}}},  # no Worker, no template
        {"tfReplicaSpecs": {"worker": {"replicas": 0, "restartPolicy": "Sometimes"}}},
        {"cleanPodPolicy": "Whenever"},
    ],
    ids=["min>max", "negative-min", "no-worker", "odd-values", "unknown-policy"],
)
def test_crd_lets_semantic_errors_through_to_the_webhook(spec_change: dict[str, Any]) -> None:
    # The webhook answers these with a Failed condition that says what is wrong; the API server
    # would only say "invalid".
    job = _minimal_tfjob()
    job["spec"].update(spec_change)
    validate_tfjob(job)


# --- status written by the webhook ------------------------------------------------------------


def test_crd_accepts_the_status_contract() -> None:
    validate_tfjob_status(_full_status())


@pytest.mark.parametrize("phase", ["Queued", "Running", "Finished", "Suspended", "Invalid"])
def test_crd_accepts_every_scheduling_phase(phase: str) -> None:
    validate_tfjob_status({"scheduling": {"phase": phase, "message": "m"}})


def test_crd_prunes_null_status_fields_like_the_api_server() -> None:
    validate_tfjob_status({"completionTime": None, "scheduling": {"message": None}})


@pytest.mark.parametrize(
    ("status", "expected_in_error"),
    [
        ({"startTime": "yesterday"}, "startTime"),
        ({"enqueueTime": "2026-11-21 13:46"}, "enqueueTime"),
        ({"conditions": [{"type": "Running"}]}, "status"),
        ({"replicaStatuses": {"Worker": {"active": "3"}}}, "active"),
        ({"replicaStatuses": {"Worker": {"running": 3}}}, "running"),
        ({"scheduling": {"workers": {"current": 1.5}}}, "current"),
        ({"scheduling": {"nodes": "node-a"}}, "nodes"),
        # A field the CRD does not declare would be silently pruned by the API server.
        ({"scheduling": {"queuePosition": 3}}, "queuePosition"),
    ],
)
def test_crd_rejects_a_status_the_api_server_would_refuse_or_prune(
    status: dict[str, Any], expected_in_error: str
) -> None:
    with pytest.raises(AssertionError, match=expected_in_error):
        validate_tfjob_status(status)


def test_every_job_kind_has_its_crd_and_every_job_crd_a_kind() -> None:
    """``KINDS`` and the Kubeflow CRDs in crd/ (which scripts/trim_schemas.py reads for the
    status schemas) name the same kinds, each CRD in its kind's file with its kind's names,
    and chart/crds/ holds a byte-identical copy of each."""
    from policy.model.kinds import KINDS

    files = sorted(p.name for p in (ROOT / "crd").glob("*.kubeflow.org.yaml"))
    assert files == sorted(f"{k.crd_name}.yaml" for k in KINDS)
    for kind in KINDS:
        path = ROOT / "crd" / f"{kind.crd_name}.yaml"
        crd = yaml.safe_load(path.read_text())
        names = crd["spec"]["names"]
        assert (crd["metadata"]["name"], names["kind"], names["plural"], names["singular"]) == (
            kind.crd_name,
            kind.kind,
            kind.plural,
            kind.singular,
        )
        assert crd["spec"]["group"] == kind.group
        required = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert kind.replica_specs_field in required["properties"], kind.kind
        assert (ROOT / "chart" / "crds" / path.name).read_bytes() == path.read_bytes()
