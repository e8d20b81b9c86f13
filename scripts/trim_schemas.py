"""Write the schemas the webhook checks what it emits against (``policy/model/schema/``):

* ``podtemplatespec.json``: Kubernetes' schema of a PodTemplateSpec, trimmed from the one
  ``kubernetes-validate`` ships (a test extra): only the definitions a PodTemplateSpec
  reaches, with only the keywords that decide validity (descriptions and
  ``x-kubernetes-*`` hints go);
* ``job-status.json``: the ``status`` schema of each training-job CRD in ``crd/``, as
  trimmed (the CRDs are not part of the webhook's package).

``policy/model/apischema.py`` reads them; ``tests/test_apischema.py`` checks the shipped
copies are what this script writes, so they cannot drift from their sources.

    .venv/bin/python scripts/trim_schemas.py            # rewrite both files
"""

from __future__ import annotations

import json
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

# The Kubernetes version of the schema: the one the tests validate children against
# (tests/kube_schema.py K8S_VERSION).
K8S_VERSION = "1.33.0"
ROOT_DEFINITION = "io.k8s.api.core.v1.PodTemplateSpec"
REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "policy/model/schema"
# The training-job CRDs: every CRD of Kubeflow's group in crd/ (one per kind in
# policy.model.kinds.KINDS; tests/test_crd.py checks the two agree).
JOB_GROUP = "kubeflow.org"
_KEEP = ("$ref", "type", "properties", "additionalProperties", "items", "required", "oneOf",
         "enum", "format", "minimum", "maximum", "maxLength", "maxItems")  # fmt: skip
_REF = re.compile(r"^.*#/\$defs/")


def _trim(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key in _KEEP:
        if key not in schema:
            continue
        value = schema[key]
        if key == "$ref":
            value = _REF.sub("", value)
        elif key == "properties":
            value = {name: _trim(s) for name, s in value.items()}
        elif key in ("items", "additionalProperties"):
            value = _trim(value)
        elif key == "oneOf":
            value = [_trim(s) for s in value]
        out[key] = value
    return out


# Enumerations the API server enforces (k8s.io/kubernetes pkg/apis/core/validation) that its
# OpenAPI schema states only in words: added to the trimmed schema, so a value such as
# ``imagePullPolicy: always`` fails the job instead of each pod. (definition, field): values.
# (Not the pod's restartPolicy: Dragonet writes it from the replica's.)
ENUMS = {
    ("io.k8s.api.core.v1.Container", "imagePullPolicy"): ["Always", "Never", "IfNotPresent"],
    ("io.k8s.api.core.v1.Container", "terminationMessagePolicy"): ["File",
                                                                   "FallbackToLogsOnError"],
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): ["TCP", "UDP", "SCTP"],
    ("io.k8s.api.core.v1.PodSpec", "dnsPolicy"): ["ClusterFirstWithHostNet", "ClusterFirst",
                                                  "Default", "None"],
    ("io.k8s.api.core.v1.PodSpec", "preemptionPolicy"): ["PreemptLowerPriority", "Never"],
    ("io.k8s.api.core.v1.Toleration", "operator"): ["Exists", "Equal", ""],
    ("io.k8s.api.core.v1.Toleration", "effect"): ["NoSchedule", "PreferNoSchedule",
                                                  "NoExecute", ""],
    ("io.k8s.api.core.v1.NodeSelectorRequirement", "operator"): ["In", "NotIn", "Exists",
                                                                 "DoesNotExist", "Gt", "Lt"],
}  # fmt: skip


def pod_template_schema() -> dict[str, Any]:
    """The trimmed PodTemplateSpec schema, as the shipped file holds it."""
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    source = folder / f"v{K8S_VERSION}-local-strict" / "_definitions.json"
    definitions = json.loads(source.read_text())["$defs"]
    kept: dict[str, Any] = {}
    todo = [ROOT_DEFINITION]
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept[name] = _trim(definitions[name])
        refs = re.findall(r'"\$ref": "([^"]+)"', json.dumps(definitions[name]))
        todo.extend(_REF.sub("", r) for r in refs)
    for (name, field), values in ENUMS.items():
        kept[name]["properties"][field]["enum"] = values
    return {
        "source": f"kubernetes-validate, Kubernetes {K8S_VERSION} (local, strict); enums "
        "from the API server's validation (scripts/trim_schemas.py ENUMS)",
        "kubernetesVersion": K8S_VERSION,
        "root": ROOT_DEFINITION,
        "definitions": kept,
    }


def job_status_schemas() -> dict[str, Any]:
    """Each job kind's status schema (its CRD's storage version), as the shipped file holds it."""
    out = {}
    for path in sorted((REPO / "crd").glob(f"*.{JOB_GROUP}.yaml")):
        crd = yaml.safe_load(path.read_text())
        kind = crd["spec"]["names"]["kind"]
        (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
        out[kind] = _trim(version["schema"]["openAPIV3Schema"]["properties"]["status"])
    return {"source": "crd/ (storage versions)", "kinds": out}


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


FILES = {"podtemplatespec.json": pod_template_schema, "job-status.json": job_status_schemas}

if __name__ == "__main__":
    for name, make in FILES.items():
        path = SCHEMAS / name
        path.write_text(render(make()))
        sys.stdout.write(f"wrote {path} ({path.stat().st_size} bytes)\n")
