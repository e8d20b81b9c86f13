"""Metacontroller's customize requests (CompositeController, hook ``version: v2``) and the
customize answers of both controllers. (Sync requests are read by ``webhooks.lazy``.)

A request that does not fit is a malformed request (HTTP 400). Responses carry only the
fields Metacontroller's strict v2 decoder knows, so it never rejects one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policy.model.cluster import L_OPERATOR, OPERATOR_NAME
from policy.model.gpushare import SHAREPOD_API
from policy.model.jobs import COEXIST_LABEL, COEXIST_LABEL_VALUE, JobKind
from policy.model.kinds import KINDS
from policy.model.pool import DEFAULT_POOL, GROUP, PoolSpec
from policy.model.request import MalformedRequest

SHARD = f"{GROUP}/shard"
# Matches no Node: a pool whose spec cannot be read plans nothing (its sync says why).
_NO_NODE = {"matchExpressions": [{"key": f"{GROUP}/no-such-label", "operator": "Exists"}]}


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")
    controller: dict[str, Any] = Field(default_factory=dict)
    parent: dict[str, Any]


class CustomizeRequest(_Request):
    pass


def _plural(kind: JobKind) -> str:
    return kind.kind.lower() + "s"


def pool_related_resources(
    parent: Mapping[str, Any], kubeflow_coexist: bool = False
) -> list[dict[str, Any]]:
    """What a pool's sync must see to plan: its Nodes, the pods that use them, every
    training job (the queue: each names its pool in a spec field, which no selector can
    read) and the PriorityClasses that order it. The default pool also watches the other
    pools, to tell a job that names a pool that does not exist. Beside Kubeflow's
    training-operator (``kubeflow_coexist``, docs/kubeflow.md), only the jobs labelled for
    Dragonet are its queue, and the pods of Kubeflow's jobs (every kind's carry
    ``training.kubeflow.org/operator-name``) count as taken room."""
    try:
        spec = PoolSpec.model_validate(parent.get("spec") or {})
        nodes, pods_everywhere = spec.nodeSelector.as_dict(), spec.watchAllPods
        kubeshare = spec.kubeshare
    except ValidationError:
        nodes, pods_everywhere, kubeshare = _NO_NODE, False, "none"
    if pods_everywhere:
        pods: dict[str, Any] = {}
    elif kubeflow_coexist:
        pods = {"matchExpressions": [{"key": L_OPERATOR, "operator": "Exists"}]}
    else:
        pods = {"matchLabels": {L_OPERATOR: OPERATOR_NAME}}
    # A pool of a shard (label dragonet.io/shard, metacontroller/README.md) reads only the
    # jobs of its shard.
    meta = parent.get("metadata")
    if not isinstance(meta, Mapping):
        raise MalformedRequest("parent.metadata must be an object")
    labels = meta.get("labels") or {}
    shard = labels.get(SHARD) if isinstance(labels, dict) else None
    marks = {SHARD: shard} if isinstance(shard, str) and shard else {}
    if kubeflow_coexist:
        marks[COEXIST_LABEL] = COEXIST_LABEL_VALUE
    jobs = {"matchLabels": marks} if marks else {}
    rules: list[dict[str, Any]] = [
        {"apiVersion": "v1", "resource": "nodes", "labelSelector": nodes},
        {"apiVersion": "v1", "resource": "pods", "labelSelector": pods},
        *(
            {"apiVersion": k.api_version, "resource": _plural(k), "labelSelector": jobs}
            for k in KINDS
        ),
        {"apiVersion": "scheduling.k8s.io/v1", "resource": "priorityclasses", "labelSelector": {}},
        # Requests to move a worker (docs/migration.md), in every namespace.
        {"apiVersion": f"{GROUP}/v1alpha1", "resource": "migrations", "labelSelector": {}},
    ]
    if kubeshare == "v1":  # Dragonet's SharePods hold GPU shares on the pool's nodes
        sharepods = pods if pods_everywhere else {"matchLabels": {L_OPERATOR: OPERATOR_NAME}}
        rules.append(
            {"apiVersion": SHAREPOD_API, "resource": "sharepods", "labelSelector": sharepods}
        )
    if meta.get("name") == DEFAULT_POOL:
        # Not itself: its own status changes would wake it (ignoreStatusChanges covers the
        # parent, not related objects).
        others = {"key": f"{GROUP}/pool", "operator": "NotIn", "values": [DEFAULT_POOL]}
        rules.append(
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "resource": "trainingpools",
                "labelSelector": {"matchExpressions": [others]},
            }
        )
    return rules
