"""Offline validation of Kubernetes objects, shared by the tests.

There is no API server here, so three validators stand in for it:

* ``validate_k8s``: built-in kinds (and CustomResourceDefinition objects themselves) against the
  OpenAPI schemas of Kubernetes ``K8S_VERSION``, strict (unknown fields are errors), with
  ``kubernetes_validate``.
* ``validate_tfjob``: a TFJob instance against the openAPIV3Schema of
  ``crd/tfjobs.kubeflow.org.yaml``.
* ``validate_composite_controller``: a CompositeController against Metacontroller's own CRD schema,
  vendored in ``tests/schemas/``.
* ``validate_custom``: an instance of any of our own CRDs (TrainingPool, Admission, TFJob).
* ``validate_pod_group``: a PodGroup of kube-batch, Volcano or scheduler-plugins against the
  CRD its project publishes, vendored in ``tests/schemas/``.
* ``validate_sharepod``: a KubeShare v1 SharePod, against its CRD vendored in
  ``tests/schemas/`` (group, version, kind, scope) and its Go type: ObjectMeta and a core/v1
  PodSpec (validated as a Pod's), plus the annotations KubeShare reads.
* ``validate_monitoring``: a prometheus-operator ServiceMonitor or PodMonitor, against its
  CRD vendored in ``tests/schemas/``.
* ``validate_child``: any child a job's sync returns (``validate_sharepod`` for SharePods,
  ``validate_k8s`` for the rest).

The two custom-resource validators use ``jsonschema.Draft4Validator`` and mimic what the API server
does with a structural schema under ``kubectl``'s default strict field validation:

* an unknown field is an error (objects that declare ``properties`` are closed, unless they carry
  ``x-kubernetes-preserve-unknown-fields``);
* ``null`` field values are dropped before validation (the API server prunes them, nullable or not);
* ``format: date-time`` strings must be RFC 3339 timestamps, ``format: duration`` strings Go
  durations such as ``10s`` (Metacontroller parses hook timeouts with Go's time.ParseDuration).

``validate_tfjob_status`` checks a status alone, e.g. the one a sync hook returns.

Every validator raises ``AssertionError`` with the error text, so a failing test says what is wrong.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parent.parent
CRD_PATH = ROOT / "crd" / "tfjobs.kubeflow.org.yaml"
COMPOSITE_CONTROLLER_SCHEMA_PATH = (
    Path(__file__).resolve().parent / "schemas" / ("compositecontroller-v1alpha1.yaml")
)

# The Kubernetes version whose API schemas built-in objects are checked against.
K8S_VERSION = "1.33.0"

_GO_DURATION = re.compile(r"^[-+]?(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+$")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def validate_k8s(obj: dict[str, Any]) -> None:
    """Validate a built-in Kubernetes object (strict) against Kubernetes ``K8S_VERSION``.

    A kind that has no schema (a custom resource, a typo in ``kind`` or ``apiVersion``) is an
    error, not a silent pass.
    """
    where = _describe(obj)
    validator = _k8s_validator(str(obj.get("kind")), str(obj.get("apiVersion")))
    if validator is None:
        raise AssertionError(
            f"{where}: Couldn't find schema for kind {obj.get('kind')} with api version "
            f"{obj.get('apiVersion')} for kubernetes version {K8S_VERSION}"
        )
    e = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    if e is not None:
        path = "/".join(str(p) for p in e.absolute_path) or "<root>"
        raise AssertionError(f"{where}: at {path}: {e.message}") from None


@functools.cache
def _k8s_validator(kind: str, api_version: str) -> jsonschema.Validator | None:
    """What ``kubernetes_validate.validate(obj, K8S_VERSION, strict=True)`` builds from its
    schema files on every call (which costs ~12 ms an object), built once per kind."""
    folder = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    folder = folder / f"v{K8S_VERSION}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = folder / f"{kind.lower()}-{group}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    registry = Resource.from_contents(_k8s_definitions()) @ Registry()
    registry = Resource.from_contents(schema) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


@functools.cache
def _k8s_definitions() -> dict[str, Any]:
    folder = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    return json.loads((folder / f"v{K8S_VERSION}-local-strict" / "_definitions.json").read_text())


def validate_tfjob(obj: dict[str, Any]) -> None:
    """Validate a TFJob instance against the CRD in ``crd/`` (spec and status)."""
    if obj.get("apiVersion") != "kubeflow.org/v1" or obj.get("kind") != "TFJob":
        raise AssertionError(
            f"{_describe(obj)}: not a kubeflow.org/v1 TFJob "
            f"(apiVersion={obj.get('apiVersion')!r}, kind={obj.get('kind')!r})"
        )
    _validate_with(_tfjob_validator(), obj)


def validate_composite_controller(obj: dict[str, Any]) -> None:
    """Validate a CompositeController against Metacontroller's CRD schema."""
    if (
        obj.get("apiVersion") != "metacontroller.k8s.io/v1alpha1"
        or obj.get("kind") != "CompositeController"
    ):
        raise AssertionError(
            f"{_describe(obj)}: not a metacontroller.k8s.io/v1alpha1 CompositeController"
        )
    _validate_with(_composite_controller_validator(), obj)


SHAREPOD_CRD_PATH = Path(__file__).resolve().parent / "schemas" / "sharepods.kubeshare.nthu.yaml"
_FRACTION = re.compile(r"^(0(\.\d+)?|1(\.0+)?|\.\d+)$")


def validate_sharepod(obj: dict[str, Any]) -> None:
    """Validate a KubeShare v1 SharePod (see the module docstring)."""
    crd = yaml.safe_load(SHAREPOD_CRD_PATH.read_text())["spec"]
    where = _describe(obj)
    expected = f"{crd['group']}/{crd['version']}"
    if obj.get("apiVersion") != expected or obj.get("kind") != crd["names"]["kind"]:
        raise AssertionError(f"{where}: not a {expected} {crd['names']['kind']}")
    meta = obj.get("metadata") or {}
    if crd["scope"] == "Namespaced" and not meta.get("namespace"):
        raise AssertionError(f"{where}: a namespaced SharePod needs metadata.namespace")
    extra = set(obj) - {"apiVersion", "kind", "metadata", "spec", "status"}
    if extra:
        raise AssertionError(f"{where}: unknown fields {sorted(extra)}")
    validate_k8s({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": obj.get("spec")})
    annotations = meta.get("annotations") or {}
    for key in ("kubeshare/gpu_request", "kubeshare/gpu_limit"):
        value = annotations.get(key)
        if value is None or not _FRACTION.match(value) or float(value) <= 0:
            raise AssertionError(f"{where}: annotation {key}={value!r} is not in (0, 1.0]")
    if float(annotations["kubeshare/gpu_limit"]) < float(annotations["kubeshare/gpu_request"]):
        raise AssertionError(f"{where}: kubeshare/gpu_limit is below kubeshare/gpu_request")
    mem = annotations.get("kubeshare/gpu_mem", "0")
    if not mem.isdigit():
        raise AssertionError(f"{where}: annotation kubeshare/gpu_mem={mem!r} is not bytes")
    if bool((obj.get("spec") or {}).get("nodeName")) != bool(annotations.get("kubeshare/GPUID")):
        raise AssertionError(f"{where}: spec.nodeName and kubeshare/GPUID go together")


def validate_child(obj: dict[str, Any]) -> None:
    """A child a job's sync returns: a SharePod, a PodGroup, else a built-in object."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == "SharePod":
        validate_sharepod(obj)
    elif kind == "PodGroup":
        validate_pod_group(obj)
    else:
        validate_k8s(obj)


def validate_tfjob_status(status: dict[str, Any]) -> None:
    """Validate a TFJob ``status`` alone (e.g. the one a sync response returns) against the CRD."""
    _validate_with(_tfjob_status_validator(), status, what="TFJob status")


def validate_job_status(kind: str, status: dict[str, Any]) -> None:
    """Validate a training job's ``status`` (TFJob, MXJob) against its kind's CRD."""
    _validate_with(_status_validator(kind), status, what=f"{kind} status")


@functools.cache
def _status_validator(kind: str) -> jsonschema.Draft4Validator:
    return _validator(_served_version(kind)["schema"]["openAPIV3Schema"]["properties"]["status"])


def validate_custom(obj: dict[str, Any]) -> None:
    """Validate an instance of one of our own CRDs in ``crd/`` (TrainingPool, Admission,
    TFJob), chosen by its kind."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind not in _OWN_CRDS:
        raise AssertionError(f"{_describe(obj)}: no CRD of ours defines kind {kind!r}")
    group_version = f"{_crd_for(kind)['spec']['group']}/{_served_version(kind)['name']}"
    if obj.get("apiVersion") != group_version:
        raise AssertionError(f"{_describe(obj)}: apiVersion must be {group_version}")
    _validate_with(_custom_validator(kind), obj)


# The PodGroup CRDs of the gang schedulers, as their projects publish them (tests/schemas/).
POD_GROUP_CRDS = {
    "scheduling.incubator.k8s.io/v1alpha1": "podgroups.scheduling.incubator.k8s.io.yaml",
    "scheduling.volcano.sh/v1beta1": "podgroups.scheduling.volcano.sh.yaml",
    "scheduling.x-k8s.io/v1alpha1": "podgroups.scheduling.x-k8s.io.yaml",
}


def validate_pod_group(obj: dict[str, Any]) -> None:
    """Validate a PodGroup against its backend's CRD, chosen by ``apiVersion``."""
    api_version = obj.get("apiVersion") if isinstance(obj, dict) else None
    if obj.get("kind") != "PodGroup" or api_version not in POD_GROUP_CRDS:
        raise AssertionError(f"{_describe(obj)}: not a PodGroup of a known gang scheduler")
    _validate_with(_pod_group_validator(api_version), obj)


@functools.cache
def _pod_group_validator(api_version: str) -> jsonschema.Draft4Validator:
    path = Path(__file__).resolve().parent / "schemas" / POD_GROUP_CRDS[api_version]
    crd = yaml.safe_load(path.read_text())
    version = api_version.split("/")[1]
    if crd["apiVersion"] == "apiextensions.k8s.io/v1beta1":  # kube-batch's, one version
        assert crd["spec"]["version"] == version
        schema = crd["spec"]["validation"]["openAPIV3Schema"]
    else:
        (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
        schema = served["schema"]["openAPIV3Schema"]
    assert f"{crd['spec']['group']}/{version}" == api_version
    return _validator(schema)


# prometheus-operator's CRDs (v0.93.0, example/prometheus-operator-crd/), for the chart's
# ServiceMonitor and PodMonitor.
MONITORING_CRDS = {
    "ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml",
    "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
}


def validate_monitoring(obj: dict[str, Any]) -> None:
    """Validate a ``monitoring.coreos.com/v1`` ServiceMonitor or PodMonitor against the CRD
    prometheus-operator publishes (vendored in ``tests/schemas/``), strictly."""
    if (
        obj.get("apiVersion") != "monitoring.coreos.com/v1"
        or obj.get("kind") not in MONITORING_CRDS
    ):
        raise AssertionError(f"{_describe(obj)}: not a monitoring.coreos.com/v1 monitor")
    _validate_with(_monitoring_validator(obj["kind"]), obj)


@functools.cache
def _monitoring_validator(kind: str) -> jsonschema.Draft4Validator:
    path = Path(__file__).resolve().parent / "schemas" / MONITORING_CRDS[kind]
    crd = yaml.safe_load(path.read_text())
    assert crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return _validator(served["schema"]["openAPIV3Schema"])


def validate_pool_status(status: dict[str, Any]) -> None:
    """Validate a TrainingPool ``status`` alone (the one a pool sync returns)."""
    schema = _served_version("TrainingPool")["schema"]["openAPIV3Schema"]["properties"]["status"]
    _validate_with(_validator(schema), status, what="TrainingPool status")


def tfjob_crd() -> dict[str, Any]:
    """The CustomResourceDefinition in ``crd/`` (parsed, a fresh copy)."""
    return copy.deepcopy(_load_crd())


def tfjob_schema() -> dict[str, Any]:
    """The openAPIV3Schema of the v1 version of the TFJob CRD (a fresh copy)."""
    return copy.deepcopy(_crd_schema(_load_crd()))


# --------------------------------------------------------------------------------------------


def _describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return f"<{type(obj).__name__}>"
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')} {meta.get('name', '?')!s}"


@functools.cache
def _load_crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


def _crd_schema(crd: dict[str, Any]) -> dict[str, Any]:
    versions = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    assert len(versions) == 1, "the TFJob CRD must define version v1 exactly once"
    return versions[0]["schema"]["openAPIV3Schema"]


def _closed(schema: Any) -> Any:
    """Copy of a structural schema in which every object with ``properties`` rejects unknown
    fields, as the API server does under strict field validation."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {name: _closed(s) for name, s in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    for key in ("additionalProperties", "items", "not"):
        if isinstance(schema.get(key), dict):
            out[key] = _closed(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            out[key] = [_closed(s) for s in schema[key]]
    return out


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


_format_checker = jsonschema.FormatChecker()


@_format_checker.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.match(value):
        return False
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))  # rejects 2024-13-45 etc.
    return True


@_format_checker.checks("duration")
def _is_duration(value: object) -> bool:
    return not isinstance(value, str) or bool(_GO_DURATION.match(value))


def _validator(schema: dict[str, Any]) -> jsonschema.Draft4Validator:
    closed = _closed(schema)
    jsonschema.Draft4Validator.check_schema(closed)
    return jsonschema.Draft4Validator(closed, format_checker=_format_checker)


@functools.cache
def _tfjob_validator() -> jsonschema.Draft4Validator:
    return _validator(_crd_schema(_load_crd()))


@functools.cache
def _tfjob_status_validator() -> jsonschema.Draft4Validator:
    return _validator(_crd_schema(_load_crd())["properties"]["status"])


_OWN_CRDS = {
    "TFJob": "tfjobs.kubeflow.org.yaml",
    "MXJob": "mxjobs.kubeflow.org.yaml",
    "PyTorchJob": "pytorchjobs.kubeflow.org.yaml",
    "TrainingPool": "trainingpools.dragonet.io.yaml",
    "Admission": "admissions.dragonet.io.yaml",
    "Migration": "migrations.dragonet.io.yaml",
}


@functools.cache
def _crd_for(kind: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "crd" / _OWN_CRDS[kind]).read_text())


def _served_version(kind: str) -> dict[str, Any]:
    versions = [v for v in _crd_for(kind)["spec"]["versions"] if v.get("storage")]
    assert len(versions) == 1, f"the {kind} CRD must have one storage version"
    return versions[0]


@functools.cache
def _custom_validator(kind: str) -> jsonschema.Draft4Validator:
    return _validator(_served_version(kind)["schema"]["openAPIV3Schema"])


@functools.cache
def _composite_controller_validator() -> jsonschema.Draft4Validator:
    return _validator(yaml.safe_load(COMPOSITE_CONTROLLER_SCHEMA_PATH.read_text()))


def _validate_with(
    validator: jsonschema.Draft4Validator, obj: dict[str, Any], what: str | None = None
) -> None:
    errors = sorted(
        validator.iter_errors(_drop_nulls(obj)), key=lambda e: list(map(str, e.absolute_path))
    )
    if errors:
        lines = [
            f"  at {'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in errors
        ]
        raise AssertionError(f"{what or _describe(obj)} is invalid:\n" + "\n".join(lines))
