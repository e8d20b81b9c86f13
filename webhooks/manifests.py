"""Reading the files users hand the CLI: job manifests and cluster (nodes) files.

A nodes file holds real ``v1`` Node objects (one per document, or a ``List``), or the
short form ``nodes: [{name, cpu, memory, gpu, pods, labels, taints}]`` for examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field


class ShortNode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    cpu: str | int = "8"
    memory: str = "32Gi"
    gpu: int = 0
    pods: int = 110
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, str]] = Field(default_factory=list)
    unschedulable: bool = False

    def to_node(self) -> dict[str, Any]:
        allocatable: dict[str, Any] = {
            "cpu": str(self.cpu),
            "memory": self.memory,
            "pods": str(self.pods),
        }
        if self.gpu:
            allocatable["nvidia.com/gpu"] = str(self.gpu)
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = self.taints
        if self.unschedulable:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {"kubernetes.io/hostname": self.name, **self.labels},
            },
            "spec": spec,
            "status": {
                "allocatable": allocatable,
                "capacity": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }


def load_documents(path: str | Path) -> list[dict[str, Any]]:
    """Every object in a YAML file, with ``List`` objects flattened."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for doc in yaml.safe_load_all(fh):
            if not doc:
                continue
            if not isinstance(doc, dict):
                raise ValueError(f"{path}: every YAML document must be a mapping")
            if doc.get("kind", "").endswith("List") and "items" in doc:
                out.extend(doc["items"] or [])
            else:
                out.append(doc)
    return out


def load_nodes(path: str | Path) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    for doc in load_documents(path):
        if "nodes" in doc and "kind" not in doc:
            nodes.extend(ShortNode.model_validate(n).to_node() for n in doc["nodes"])
        elif doc.get("kind") == "Node":
            nodes.append(doc)
        else:
            raise ValueError(f"{path}: expected Node objects or a 'nodes:' list")
    return nodes
