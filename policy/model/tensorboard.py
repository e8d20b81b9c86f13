"""A TFJob's TensorBoard, as its user asks for it in the annotation ``dragonet.io/tensorboard``.

The original tf-operator (v1alpha1) ran one TensorBoard per job from ``spec.tensorboard``
(``logDir``, ``volumes``, ``volumeMounts``, ``serviceType``). Kubeflow's ``kubeflow.org/v1``
TFJob has no such field and its CRD prunes unknown spec fields, so the request lives in an
annotation of ours, which survives any TFJob CRD (``dragonet convert`` writes it from a
legacy manifest). Its value is a JSON (or YAML) object::

    {"logDir": "/logs", "image": "...", "volumes": [...], "volumeMounts": [...],
     "serviceType": "ClusterIP", "resources": {"requests": {...}, "limits": {...}}}

``parse`` reads it into a frozen ``TensorBoard`` or raises ``ValueError`` naming the field.
The pod it describes (``pod_spec``) is what both tiers use: the pool counts its requests
like any pod's, and the job's sync renders it into a Deployment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policy.model.slot import Slot

ANNOTATION = "dragonet.io/tensorboard"
# Its slot in an Admission's pods: type TensorBoard, index 0. Its pod's replica-type label.
TYPE = "TensorBoard"
LABEL = "tensorboard"
SLOT = Slot(TYPE, 0)
CONTAINER = "tensorboard"
PORT = 6006
PORT_NAME = "tensorboard"
# A pinned tag (not ``latest``): the same job always gets the same TensorBoard.
DEFAULT_IMAGE = "tensorflow/tensorflow:2.16.1"
# What the pool reserves when the user names no resources: a pod counted as zero would
# over-commit its node (one of DRAGON's defects Dragonet does not copy).
DEFAULT_RESOURCES: Mapping[str, Mapping[str, str]] = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"memory": "1Gi"},
}
ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]


class _Volume(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(min_length=1)


class _Mount(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(min_length=1)
    mountPath: str = Field(min_length=1)


class _Resources(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    requests: dict[str, str | int | float] = Field(default_factory=dict)
    limits: dict[str, str | int | float] = Field(default_factory=dict)


class TensorBoardModel(BaseModel):
    """The annotation's content, as users write it (unknown keys are refused: a typo must
    not silently run a TensorBoard without what was asked)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    logDir: str = Field(min_length=1)
    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    volumes: list[_Volume] = Field(default_factory=list)
    volumeMounts: list[_Mount] = Field(default_factory=list)
    serviceType: ServiceType = "ClusterIP"
    resources: _Resources | None = None


@dataclass(frozen=True)
class TensorBoard:
    log_dir: str
    image: str
    service_type: str
    content: bytes  # the validated request as canonical JSON: volumes, mounts, resources

    @property
    def _parts(self) -> dict[str, Any]:
        return orjson.loads(self.content)

    def pod_spec(self) -> dict[str, Any]:
        """The TensorBoard pod's spec, without placement (a fresh copy each call)."""
        parts = self._parts
        container: dict[str, Any] = {
            "name": CONTAINER,
            "image": self.image,
            "command": ["tensorboard"],
            "args": [f"--logdir={self.log_dir}", "--host=0.0.0.0", f"--port={PORT}"],
            "ports": [{"name": PORT_NAME, "containerPort": PORT}],
            "resources": parts["resources"],
        }
        if parts["volumeMounts"]:
            container["volumeMounts"] = parts["volumeMounts"]
        spec: dict[str, Any] = {"containers": [container]}
        if parts["volumes"]:
            spec["volumes"] = parts["volumes"]
        return spec


def parse(raw: str) -> TensorBoard:
    """Raises ValueError with the offending field's path (relative to the annotation)."""
    try:
        value = orjson.loads(raw)  # the usual form (what convert writes): fast
    except orjson.JSONDecodeError:
        value = _yaml(raw)
    return _validated(value)


def _yaml(raw: str) -> Any:
    try:
        return yaml.load(raw, Loader=_Loader)  # a SafeLoader without aliases
    except yaml.YAMLError as err:
        raise ValueError(f"is neither JSON nor YAML ({_first_line(err)})") from err
    except RecursionError as err:
        raise ValueError("is nested too deeply") from err


def _validated(value: Any) -> TensorBoard:
    if not isinstance(value, Mapping):
        raise ValueError('must be an object such as {"logDir": "/logs"}')
    try:
        m = TensorBoardModel.model_validate(value)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']}" if where else first["msg"]) from err
    volumes = [v.model_dump() for v in m.volumes]
    names = [v["name"] for v in volumes]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"volumes[{i}].name {name!r} is given twice")
    for i, mount in enumerate(m.volumeMounts):
        if mount.name not in names:
            raise ValueError(
                f"volumeMounts[{i}].name {mount.name!r} names no volume of the TensorBoard "
                f"(volumes: {', '.join(names) or 'none'})"
            )
    resources = (
        {k: v for k, v in m.resources.model_dump().items() if v}
        if m.resources is not None
        else {k: dict(v) for k, v in DEFAULT_RESOURCES.items()}
    )
    content = orjson.dumps(
        {
            "volumes": volumes,
            "volumeMounts": [x.model_dump() for x in m.volumeMounts],
            "resources": resources,
        },
        option=orjson.OPT_SORT_KEYS,
    )
    return TensorBoard(m.logDir, m.image, m.serviceType, content)


class _Loader(yaml.SafeLoader):
    """YAML without aliases: an alias bomb (a few bytes that expand to millions of nodes
    once copied) must cost the webhook nothing."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed", event.start_mark
            )
        return super().compose_node(parent, index)


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0]
