"""Converting legacy job manifests to today's ``kubeflow.org/v1`` forms (``dragonet convert``).

Pure functions over dicts. ``convert`` takes one object and gives the v1 object and the
notes: one per field (by its path) that could not be carried over, or that was carried over
somewhere else. A ``kubeflow.org/v1`` TFJob or MXJob comes back unchanged, with no note.

* ``tensorflow.org/v1alpha1`` / ``kubeflow.org/v1alpha1`` ``TfJob`` or ``TFJob``
  (tf-operator v0.1: ``spec.replicaSpecs[]`` with ``tfReplicaType``, ``tfPort``) becomes a
  ``TFJob`` with ``spec.tfReplicaSpecs``;
* ``fioravanzo.org/v1alpha1`` / ``kubeflow.org/v1alpha1`` ``MXJob`` (``mxReplicaType``,
  ``mxPort`` / ``PsRootPort``) becomes an ``MXJob`` with ``jobMode: MXTrain`` and
  ``spec.mxReplicaSpecs``.

A legacy TfJob's ``spec.tensorboard`` becomes the annotation ``dragonet.io/tensorboard``
(``policy.model.tensorboard``), checked as the webhook reads it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from policy.model.tensorboard import ANNOTATION as TENSORBOARD_ANNOTATION
from policy.model.tensorboard import parse as parse_tensorboard

V1 = "kubeflow.org/v1"
LEGACY_TF_APIS = ("tensorflow.org/v1alpha1", "kubeflow.org/v1alpha1")
LEGACY_MX_APIS = ("fioravanzo.org/v1alpha1", "kubeflow.org/v1alpha1")

TF_TYPES = {"MASTER": "Master", "WORKER": "Worker", "PS": "PS"}
MX_TYPES = {"SCHEDULER": "Scheduler", "SERVER": "Server", "WORKER": "Worker"}
DEFAULT_TF_IMAGE = "tensorflow/tensorflow:1.3.0"

# What the old operator's default parameter server ran: a standard TF server for this pod's
# job type and index over TF_CONFIG's cluster (v1 writes TF_CONFIG in the same form).
PS_SERVER = (
    "import json, os\n"
    "import tensorflow as tf\n"
    "config = json.loads(os.environ['TF_CONFIG'])\n"
    "task = config.get('task', {})\n"
    "server = tf.train.Server(tf.train.ClusterSpec(config['cluster']),\n"
    "                         job_name=task.get('type', 'ps'),\n"
    "                         task_index=int(task.get('index', 0)))\n"
    "server.join()\n"
)

# Fields the API server sets: a converted object is a new object.
SERVER_SET = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


@dataclass(frozen=True)
class Note:
    """A field that was not carried over as it was: its path and what became of it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConvertError(ValueError):
    """An object that cannot be converted at all; the message names the field."""


def is_v1(doc: Mapping[str, Any]) -> bool:
    from policy.model.kinds import kind_of

    return kind_of(doc) is not None


def is_legacy_tfjob(doc: Mapping[str, Any]) -> bool:
    kind, api = doc.get("kind"), doc.get("apiVersion")
    return (kind == "TfJob" or kind == "TFJob") and api in LEGACY_TF_APIS


def is_legacy_mxjob(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == "MXJob" and doc.get("apiVersion") in LEGACY_MX_APIS


def convert(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[Note]]:
    """The v1 form of one job manifest, and what could not be carried over."""
    if is_v1(doc):
        return copy.deepcopy(dict(doc)), []
    if is_legacy_tfjob(doc):
        return _convert(doc, _TF)
    if is_legacy_mxjob(doc):
        return _convert(doc, _MX)
    raise ConvertError(
        f"kind {doc.get('kind')!r} (apiVersion {doc.get('apiVersion')!r}): not a job "
        "'dragonet convert' knows (legacy tensorflow.org/v1alpha1 or kubeflow.org/v1alpha1 "
        "TfJob, fioravanzo.org/v1alpha1 or kubeflow.org/v1alpha1 MXJob, or kubeflow.org/v1 "
        "TFJob/MXJob)"
    )


@dataclass(frozen=True)
class _Flavour:
    kind: str
    type_key: str  # tfReplicaType / mxReplicaType
    types: Mapping[str, str]
    specs_key: str  # tfReplicaSpecs / mxReplicaSpecs
    container: str
    port_name: str
    chief_type: str  # the type whose success decides a v1 job


_TF = _Flavour(
    "TFJob", "tfReplicaType", TF_TYPES, "tfReplicaSpecs", "tensorflow", "tfjob-port", "MASTER"
)
_MX = _Flavour(
    "MXJob", "mxReplicaType", MX_TYPES, "mxReplicaSpecs", "mxnet", "mxjob-port", "SCHEDULER"
)


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConvertError(f"{path}: must be a mapping")
    return dict(value)


def _metadata(doc: Mapping[str, Any], notes: list[Note]) -> dict[str, Any]:
    meta = copy.deepcopy(_mapping(doc.get("metadata"), "metadata"))
    for key in SERVER_SET:
        if key in meta:
            del meta[key]
            notes.append(Note(f"metadata.{key}", "not carried over: set by the API server"))
    return meta


def _tensorboard(value: Any, meta: dict[str, Any], path: str) -> None:
    """The old ``spec.tensorboard`` becomes Dragonet's annotation (a v1 TFJob has no such
    field, and Kubeflow's CRD would prune it), checked as the webhook will read it."""
    board = _mapping(value, path)
    text = json.dumps(board, separators=(",", ":"), sort_keys=True)
    try:
        parse_tensorboard(text)
    except ValueError as err:
        raise ConvertError(f"{path}: {err}") from err
    annotations = _mapping(meta.get("annotations"), "metadata.annotations")
    given = annotations.get(TENSORBOARD_ANNOTATION)
    if given is not None and given != text:
        raise ConvertError(
            f"metadata.annotations[{TENSORBOARD_ANNOTATION!r}] and {path} both ask for a "
            "TensorBoard, differently: keep one"
        )
    meta["annotations"] = {**annotations, TENSORBOARD_ANNOTATION: text}


def _convert(doc: Mapping[str, Any], fl: _Flavour) -> tuple[dict[str, Any], list[Note]]:
    notes: list[Note] = []
    meta = _metadata(doc, notes)
    spec = _mapping(doc.get("spec"), "spec")
    items = spec.get("replicaSpecs")
    if not isinstance(items, list) or not items:
        raise ConvertError("spec.replicaSpecs: a legacy job needs a non-empty list of replicas")
    legacy_mx_kubeflow = fl is _MX and doc.get("apiVersion") == "kubeflow.org/v1alpha1"
    default_type = "WORKER" if fl is _MX else "MASTER"
    default_port = 2222 if fl is _TF else (9091 if legacy_mx_kubeflow else 9000)
    port_keys = ("tfPort",) if fl is _TF else ("mxPort", "PsRootPort")
    image = spec.get("tfImage") or DEFAULT_TF_IMAGE
    scheduler_name = spec.get("schedulerName")
    own: list[str] = []  # replicas whose template names another scheduler
    replicas: dict[str, dict[str, Any]] = {}
    generated = False
    for i, item in enumerate(items):
        where = f"spec.replicaSpecs[{i}]"
        item = _mapping(item, where)
        rtype = item.get(fl.type_key) or default_type
        if not isinstance(rtype, str) or rtype not in fl.types:
            raise ConvertError(
                f"{where}.{fl.type_key}: {rtype!r} is not one of {', '.join(fl.types)}"
            )
        name = fl.types[rtype]
        if name in replicas:
            raise ConvertError(f"{where}.{fl.type_key}: {rtype} is given twice")
        port = next((item[k] for k in port_keys if item.get(k) is not None), default_port)
        if not isinstance(port, int) or isinstance(port, bool):
            raise ConvertError(f"{where}.{port_keys[0]}: must be an integer, not {port!r}")
        count = item.get("replicas", 1)
        if count is None:
            count = 1
        template = item.get("template")
        if template is None and fl is _TF and rtype == "PS":
            template = _default_ps(image)
            generated = True
            notes.append(
                Note(
                    f"{where}.template",
                    f"none given: generated the old operator's default parameter server "
                    f"(container tensorflow, image {image}, a tf.train.Server from TF_CONFIG)",
                )
            )
        elif template is None:
            raise ConvertError(f"{where}.template: a {rtype} replica needs a pod template")
        template = copy.deepcopy(_mapping(template, f"{where}.template"))
        pod = _mapping(template.get("spec"), f"{where}.template.spec")
        replica: dict[str, Any] = {"replicas": count}
        if "restartPolicy" in pod:
            replica["restartPolicy"] = pod.pop("restartPolicy")
        _set_port(pod, fl, port, f"{where}.template")
        if scheduler_name and not pod.get("schedulerName"):
            pod["schedulerName"] = scheduler_name
        elif scheduler_name and pod.get("schedulerName") != scheduler_name:
            own.append(name)
        template["spec"] = pod
        replica["template"] = template
        for key in sorted(set(item) - {"replicas", "template", fl.type_key, *port_keys}):
            notes.append(Note(f"{where}.{key}", "not carried over: unknown to the legacy form"))
        replicas[name] = replica

    new_spec: dict[str, Any] = {}
    if fl is _MX:
        new_spec["jobMode"] = "MXTrain"
    new_spec[fl.specs_key] = replicas
    for key, value in spec.items():
        if key == "replicaSpecs":
            continue
        path = f"spec.{key}"
        if key == "schedulerName":
            if value:
                notes.append(
                    Note(
                        path,
                        f"moved into every replica template's spec.schedulerName ({value})"
                        + (
                            f", except {', '.join(own)}, whose template names its own"
                            if own
                            else ""
                        ),
                    )
                )
        elif key == "tfImage" and fl is _TF:
            if not generated:
                notes.append(
                    Note(
                        path,
                        "not carried over: only the default parameter server used it, "
                        "and every PS has a template",
                    )
                )
        elif key == "mxImage" and fl is _MX:
            notes.append(Note(path, "not carried over: every replica has its own template"))
        elif key == "terminationPolicy":
            note = _chief(value, fl, replicas, path)
            if note:
                notes.append(note)
        elif key == "cleanupPodPolicy" and fl is _MX:
            new_spec["runPolicy"] = {"cleanPodPolicy": value}
        elif key == "RuntimeId":
            notes.append(
                Note(
                    path, "not carried over: v1 names pods {job}-{type}-{index}, with no runtime id"
                )
            )
        elif key == "tensorboard" and fl is _TF:
            _tensorboard(value, meta, path)
        else:
            notes.append(Note(path, "not carried over: unknown to the legacy form"))
    if fl is _MX and "cleanupPodPolicy" not in spec:
        # The old operator deleted every pod when the job ended; v1's default keeps them.
        new_spec["runPolicy"] = {"cleanPodPolicy": "All"}
    if "terminationPolicy" not in spec and (fl is _TF or legacy_mx_kubeflow):
        # The old default chief (MASTER 0; WORKER 0 for kubeflow.org's MXJob) decided.
        note = _chief({}, fl, replicas, "spec.terminationPolicy", given=False)
        if note:
            notes.append(note)
    if "status" in doc:
        notes.append(Note("status", "not carried over: the controller writes a v1 job's status"))
    for key in sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec", "status"}):
        notes.append(Note(key, "not carried over: unknown to the legacy form"))
    out = {"apiVersion": V1, "kind": fl.kind, "metadata": meta, "spec": new_spec}
    return out, notes


def _default_ps(image: str) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {"name": "tensorflow", "image": image, "command": ["python", "-c", PS_SERVER]}
            ]
        }
    }


def _set_port(pod: dict[str, Any], fl: _Flavour, port: int, where: str) -> None:
    containers = pod.get("containers")
    if not isinstance(containers, list):
        raise ConvertError(f"{where}.spec.containers: must be a list of containers")
    main = next(
        (c for c in containers if isinstance(c, Mapping) and c.get("name") == fl.container),
        None,
    )
    if main is None:
        raise ConvertError(f"{where}.spec.containers: no container named {fl.container!r}")
    ports = main.get("ports") or []
    if not isinstance(ports, list) or not all(isinstance(p, dict) for p in ports):
        raise ConvertError(
            f"{where}.spec.containers: {fl.container}.ports: must be a list of ports"
        )
    named = next((p for p in ports if p.get("name") == fl.port_name), None)
    if named is not None:
        named["containerPort"] = port
    else:
        ports.append({"name": fl.port_name, "containerPort": port})
    main["ports"] = ports


def _chief(
    value: Any, fl: _Flavour, replicas: Mapping[str, Any], path: str, *, given: bool = True
) -> Note | None:
    """A note when the legacy chief is not the replica whose success decides a v1 job."""
    chief = _mapping(_mapping(value, path).get("chief"), f"{path}.chief")
    default = "MASTER" if fl is _TF else "WORKER"
    rtype = chief.get("replicaName") or default
    index = chief.get("replicaIndex") or 0
    if fl is _TF:
        decider = ("MASTER", 0) if "Master" in replicas else ("WORKER", 0)
        rule = "the Master decides (worker 0 when there is none)"
    else:
        decider = ("SCHEDULER", 0)
        rule = "the Scheduler decides (or all workers)"
    if (rtype, index) == decider:
        return None
    return Note(
        f"{path}.chief",
        f"not carried over: replica {rtype} {index}{'' if given else ' (the default chief)'} "
        f"decided success; in v1 {rule}",
    )


class _Dumper(yaml.SafeDumper):
    """YAML as people write it: a multi-line string (the default PS's script) as a block."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(documents: list[dict[str, Any]]) -> str:
    """YAML documents, keys in the order the conversion wrote them."""
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False)
