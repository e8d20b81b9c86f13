"""Metacontroller hook payloads (CompositeController, hook ``version: v2``).

Requests are validated into these models; anything that does not fit is a malformed
request (HTTP 400). Responses carry only the fields Metacontroller's strict v2 decoder
knows, so it never rejects one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from policy.model.cluster import L_OPERATOR, OPERATOR_NAME
from policy.model.jobs import JobKind
from webhooks.config import Settings

ObjectMap = dict[str, dict[str, dict[str, Any]]]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")
    controller: dict[str, Any] = Field(default_factory=dict)
    parent: dict[str, Any]


class CustomizeRequest(_Request):
    pass


class SyncRequest(_Request):
    children: ObjectMap = Field(default_factory=dict)
    related: ObjectMap = Field(default_factory=dict)
    finalizing: bool = False


def related_resources(settings: Settings, kind: JobKind) -> list[dict[str, Any]]:
    """What every sync must see to plan globally: the pool's Nodes, the pods that use it,
    every job of this kind (the queue), and the PriorityClasses that order it."""
    pods = {} if settings.watch_all_pods else {"matchLabels": {L_OPERATOR: OPERATOR_NAME}}
    plural = kind.kind.lower() + "s"
    return [
        {
            "apiVersion": "v1",
            "resource": "nodes",
            "labelSelector": settings.pool_selector.as_dict(),
        },
        {"apiVersion": "v1", "resource": "pods", "labelSelector": pods},
        {"apiVersion": kind.api_version, "resource": plural, "labelSelector": {}},
        {"apiVersion": "scheduling.k8s.io/v1", "resource": "priorityclasses", "labelSelector": {}},
    ]


def object_key(obj: dict[str, Any]) -> str:
    """v2 map key: ``namespace/name`` for namespaced objects, ``name`` for cluster-scoped."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else meta["name"]


def type_key(obj: dict[str, Any]) -> str:
    """v2 map type key: ``Kind.version`` for the core group, ``Kind.group/version`` else."""
    return f"{obj['kind']}.{obj['apiVersion']}"


def object_map(objects: list[dict[str, Any]], types: list[str]) -> ObjectMap:
    """Group objects the way Metacontroller does; every declared type is present."""
    out: ObjectMap = {t: {} for t in types}
    for obj in objects:
        out.setdefault(type_key(obj), {})[object_key(obj)] = obj
    return out
