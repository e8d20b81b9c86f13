"""The parts of a pod template Dragonet reads or writes, checked before it touches them.

The CRD keeps templates schemaless (``x-kubernetes-preserve-unknown-fields``), so anything
can arrive. These models check the fields the policy uses (containers, ports, env,
resources, node selection) first, with the messages users know; every field, these
included, is then checked as the API server would (``policy.model.apischema``). The
official client's models are stricter than the API server (they refuse
``nvidia.com/gpu: 1``, which DRAGON's own examples write), so they are not used here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

Quantity = str | int | float


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ContainerPort(_Open):
    # Strict: "2222" would pass a lax check and then be copied into the pod as a string.
    containerPort: int = Field(strict=True, ge=1, le=65535)
    name: str | None = None


class EnvVar(_Open):
    name: str


class ResourceRequirements(_Open):
    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None


class Container(_Open):
    name: str
    image: str | None = None
    ports: list[ContainerPort] | None = None
    env: list[EnvVar] | None = None
    resources: ResourceRequirements | None = None


class NodeSelectorRequirement(_Open):
    key: str
    operator: str
    values: list[str] | None = None


class NodeSelectorTerm(_Open):
    matchExpressions: list[NodeSelectorRequirement] | None = None
    matchFields: list[NodeSelectorRequirement] | None = None


class NodeSelector(_Open):
    nodeSelectorTerms: list[NodeSelectorTerm]


class NodeAffinity(_Open):
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector | None = None


class Affinity(_Open):
    nodeAffinity: NodeAffinity | None = None


class Toleration(_Open):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None


class PodSpec(_Open):
    containers: list[Container] = Field(min_length=1)
    initContainers: list[Container] | None = None
    nodeSelector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    overhead: dict[str, Quantity] | None = None
    nodeName: str | None = None


class TemplateMetadata(_Open):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplate(_Open):
    metadata: TemplateMetadata | None = None
    spec: PodSpec
