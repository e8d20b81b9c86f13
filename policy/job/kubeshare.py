"""A fractional-GPU pod as KubeShare wants it (docs/kubeshare.md).

* v1 (``kubeshare.nthu/v1``): a ``SharePod`` (ObjectMeta plus a PodSpec) annotated with
  ``kubeshare/gpu_request``, ``gpu_limit``, ``gpu_mem`` and the ``kubeshare/GPUID`` of the device
  the pool chose, with ``spec.nodeName`` set: KubeShare's scheduler leaves a SharePod that
  names both alone, and its device manager binds the GPUID to a physical GPU, as DRAGON did.
* v2 (``sharedgpu/*``): a plain Pod labelled ``sharedgpu/gpu_request``, ``gpu_limit`` and
  ``gpu_mem``, scheduled by ``kubeshare-scheduler``, which picks the device; Dragonet only
  admits the pod and pins it to its node by required node affinity (never ``nodeName``,
  which would bypass the scheduler that assigns the device).

Both are pure rewrites of the pod ``render_pod`` wrote.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from policy.model.gpushare import (
    SHAREPOD_API,
    SHAREPOD_KIND,
    V1_GPUID,
    V1_LIMIT,
    V1_MEMORY,
    V1_REQUEST,
    V2_LIMIT,
    V2_MEMORY,
    V2_REQUEST,
    V2_SCHEDULER,
    GpuShare,
)


def fraction(thousandths: int) -> str:
    """``500`` -> ``"0.5"``, ``1000`` -> ``"1.0"`` (KubeShare's own spelling)."""
    text = str((Decimal(thousandths) / 1000).normalize())
    return text if "." in text else f"{text}.0"


def _values(share: GpuShare) -> tuple[str, str, str]:
    return fraction(share.request), fraction(share.limit), str(share.memory)


def as_sharepod(pod: dict[str, Any], share: GpuShare, gpu: str | None) -> dict[str, Any]:
    """KubeShare v1: the pod as a SharePod on its node and device."""
    meta = pod["metadata"]
    spec = pod["spec"]
    request, limit, memory = _values(share)
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("sharedgpu/")
    }
    annotations |= {V1_REQUEST: request, V1_LIMIT: limit, V1_MEMORY: memory}
    if gpu is not None:
        annotations[V1_GPUID] = gpu
    meta["annotations"] = annotations
    labels = {k: v for k, v in meta["labels"].items() if not k.startswith("sharedgpu/")}
    meta["labels"] = labels
    return {"apiVersion": SHAREPOD_API, "kind": SHAREPOD_KIND, "metadata": meta, "spec": spec}


def as_kubeshare_v2(pod: dict[str, Any], share: GpuShare) -> dict[str, Any]:
    """KubeShare v2: the pod labelled for kubeshare-scheduler, pinned to its node."""
    meta = pod["metadata"]
    spec = pod["spec"]
    request, limit, memory = _values(share)
    meta["labels"] |= {V2_REQUEST: request, V2_LIMIT: limit, V2_MEMORY: memory}
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("kubeshare/")
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    spec["schedulerName"] = V2_SCHEDULER
    return pod


def binding_for(kubeshare: str, binding: str) -> str:
    """How a fractional pod reaches its node: v1 SharePods name it (``nodeName``, with the
    GPUID); v2 pods are pinned by affinity, so that kubeshare-scheduler still binds them and
    picks the device."""
    return {"v1": "nodeName", "v2": "affinity"}.get(kubeshare, binding)
