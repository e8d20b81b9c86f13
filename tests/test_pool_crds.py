"""Dragonet's own CRDs: TrainingPool (cluster-scoped) and Admission (namespaced).

What a user would notice: a CRD the API server refuses, `kubectl get trainingpools` with empty
columns, a pool whose defaults differ from what the webhook assumes, a misspelt policy
accepted, or an Admission the webhook writes refused (its job would never run).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from policy.model.pool import PoolSpec
from tests import metacontroller as mc
from tests.kube_schema import ROOT, validate_custom, validate_k8s
from tests.test_crd import _schema_at, _structural_violations

CRDS = sorted((ROOT / "crd").glob("*.yaml"))
OURS = {
    "TrainingPool": ROOT / "crd" / "trainingpools.dragonet.io.yaml",
    "Admission": ROOT / "crd" / "admissions.dragonet.io.yaml",
}


def _crd(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _version(kind: str) -> dict[str, Any]:
    (version,) = _crd(OURS[kind])["spec"]["versions"]
    return version


def test_every_crd_has_a_byte_identical_copy_in_the_chart() -> None:
    chart = sorted((ROOT / "chart" / "crds").glob("*.yaml"))
    assert [p.name for p in chart] == [p.name for p in CRDS]
    for path in CRDS:
        assert (ROOT / "chart" / "crds" / path.name).read_bytes() == path.read_bytes(), (
            f"chart/crds/{path.name} differs from crd/{path.name}: cp crd/*.yaml chart/crds/"
        )


@pytest.mark.parametrize("kind", sorted(OURS))
def test_crd_is_a_valid_structural_kubernetes_object(kind: str) -> None:
    crd = _crd(OURS[kind])
    validate_k8s(crd)
    schema = _version(kind)["schema"]["openAPIV3Schema"]
    assert _structural_violations(schema, "openAPIV3Schema", root=True) == []


def test_scopes_and_names() -> None:
    pools, admissions = _crd(OURS["TrainingPool"]), _crd(OURS["Admission"])
    assert pools["spec"]["scope"] == "Cluster"
    assert pools["spec"]["names"]["plural"] == "trainingpools"
    assert admissions["spec"]["scope"] == "Namespaced"
    assert admissions["spec"]["names"]["plural"] == "admissions"
    # The pool's status is written by Metacontroller (UpdateStatus): it needs the subresource.
    assert _version("TrainingPool")["subresources"] == {"status": {}}


def test_the_crds_defaults_are_the_webhooks_defaults() -> None:
    """A pool with only a name gets from the API server exactly what the webhook assumes
    for absent fields."""
    spec = _version("TrainingPool")["schema"]["openAPIV3Schema"]["properties"]["spec"]
    defaults = {k: v["default"] for k, v in spec["properties"].items() if "default" in v}
    model = PoolSpec().model_dump(mode="json")
    assert defaults == {k: model[k] for k in defaults}
    assert sorted(defaults) == [
        "allocationIntervalSeconds",
        "binding",
        "decisionIntervalSeconds",
        "gangScheduler",
        "idleSeconds",
        "kubeshare",
        "lasByRemaining",
        "lasPreemptLaterInQueue",
        "lasPromotion",
        "lasThresholdsGPUHours",
        "maxPreemptions",
        "minGainPerWorker",
        "policy",
        "restartSeconds",
        "starvationSeconds",
        "stopPolicy",
        "watchAllPods",
    ]


def test_pool_printer_columns_show_policy_nodes_queue_admitted_usage() -> None:
    version = _version("TrainingPool")
    columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert [name for name, _ in columns] == [
        "Policy",
        "Nodes",
        "Queued",
        "Admitted",
        "Usage",
        "Message",
        "Age",
    ]
    schema = version["schema"]["openAPIV3Schema"]
    for column in version["additionalPrinterColumns"]:
        if not column["jsonPath"].startswith(".metadata."):
            assert _schema_at(schema, column["jsonPath"])["type"] == column["type"], column


def test_admission_printer_columns_point_at_declared_fields() -> None:
    version = _version("Admission")
    schema = version["schema"]["openAPIV3Schema"]
    for column in version["additionalPrinterColumns"]:
        if not column["jsonPath"].startswith(".metadata."):
            assert _schema_at(schema, column["jsonPath"])["type"] == column["type"], column


def test_a_pool_manifest_validates_and_a_misspelt_policy_does_not() -> None:
    pool = mc.pool("gpu", nodeSelector={"matchLabels": {"pool": "gpu"}}, binding="nodeName")
    validate_custom(pool)
    for field, value in (("policy", "fastest"), ("binding", "nodename"), ("idleSeconds", -1)):
        bad = copy.deepcopy(pool)
        bad["spec"][field] = value
        with pytest.raises(AssertionError, match=field):
            validate_custom(bad)


def test_an_admission_validates_and_an_unknown_phase_does_not() -> None:
    job = mc.tfjob("dragon-job1-cpu.yaml")
    admission = mc.admission(job, [("PS", 0, "n-1"), ("Worker", 0, "n-1")], workers=1)
    validate_custom(admission)
    bad = copy.deepcopy(admission)
    bad["spec"]["phase"] = "Running"
    with pytest.raises(AssertionError, match="Running"):
        validate_custom(bad)
