"""A TrainingPool: which Nodes it schedules onto and with which policy.

The pool's spec is what the first design read from environment variables; now it is an
object in the API (``crd/trainingpools.dragonet.io.yaml``), so several pools can run side
by side with different policies, and changing one is a ``kubectl edit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

GROUP = "dragonet.io"
VERSION = f"{GROUP}/v1alpha1"
POOL_KIND = "TrainingPool"
ADMISSION_KIND = "Admission"
DEFAULT_POOL = "default"  # the pool of a job that names none (Kubeflow's queue default)

# Named scheduling policies. ``dragonet`` is the product; the others are the baselines the
# simulator compares it with, run through the same webhook:
#   dragon        DRAGON's rules as its README describes them, without its bugs: FIFO gangs
#                 with backfill, shrink running jobs for a queue head that waited
#                 ``starvationSeconds``, grow them after ``idleSeconds`` without action;
#   gang-fifo     all-or-nothing FIFO with backfill, static sizes, each pod bin-packed on
#                 its own (what Volcano / kube-batch give);
#   kube-default  no admission at all: every pod is created at once, unplaced, and the
#                 kube-scheduler places each on its own (a plain operator);
#   dragonet-las  dragonet, with the queue in discretised least-attained-service order and
#                 whole jobs preempted for jobs that attained less (policy/pool/service.py);
#   tiresias      a Tiresias-like baseline: discretised LAS with preemption, static sizes,
#                 whole gangs placed for locality.
PolicyName = Literal["dragonet", "dragon", "gang-fifo", "kube-default", "dragonet-las", "tiresias"]
POLICIES: tuple[PolicyName, ...] = (
    "dragonet",
    "dragon",
    "gang-fifo",
    "kube-default",
    "dragonet-las",
    "tiresias",
)
Binding = Literal["affinity", "nodeName"]


class LabelSelector(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    matchLabels: dict[str, str] | None = None
    matchExpressions: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes' label-selector semantics; an empty selector matches everything."""
        for k, v in (self.matchLabels or {}).items():
            if labels.get(k) != v:
                return False
        for e in self.matchExpressions or ():
            key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
            present = key in labels
            ok = {
                "In": present and labels.get(key) in values,
                "NotIn": not present or labels.get(key) not in values,
                "Exists": present,
                "DoesNotExist": not present,
            }.get(op, False)
            if not ok:
                return False
        return True


class PoolSpec(BaseModel):
    """``TrainingPool.spec``; absent fields take the CRD's defaults."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    nodeSelector: LabelSelector = Field(default_factory=LabelSelector)
    policy: PolicyName = "dragonet"
    # How a planned node reaches the pod: required node affinity on kubernetes.io/hostname
    # (kube-scheduler stays the final arbiter) or spec.nodeName binding, as DRAGON does.
    binding: Binding = "affinity"
    # DRAGON's elastic thresholds: shrink for a job that waited this long; grow after
    # this long without any scheduling or scaling action.
    starvationSeconds: float = Field(default=30.0, ge=0)
    idleSeconds: float = Field(default=60.0, ge=0)
    # Count every pod on the pool's nodes, not only Dragonet's (costlier hook requests).
    watchAllPods: bool = False
    # Least attained service (dragonet-las, tiresias): the queues' upper limits in GPU-hours
    # a job has received (Tiresias' discretised LAS); a job that attained more than the
    # last one is in the last queue.
    lasThresholdsGPUHours: tuple[float, ...] = Field(default=(1.0, 10.0), max_length=8)
    # The starvation guard: a job is preempted for least attained service at most this
    # many times (priority preemption is not limited).
    maxPreemptions: int = Field(default=3, ge=0)
    # terminationGracePeriodSeconds of the pods the pool admits (a pod template's own value
    # wins): how long training code has to checkpoint when preempted. None: Kubernetes' 30 s.
    preemptionGraceSeconds: int | None = Field(default=None, ge=0)


def pool_object(name: str = DEFAULT_POOL, **spec: Any) -> dict[str, Any]:
    """A TrainingPool manifest, as a user or the chart writes it (``spec`` in its own keys)."""
    return {
        "apiVersion": VERSION,
        "kind": POOL_KIND,
        "metadata": {"name": name, "labels": {f"{GROUP}/pool": name}},
        "spec": PoolSpec.model_validate(spec).model_dump(mode="json", exclude_defaults=True),
    }


def pool_of(job_spec: Mapping[str, Any]) -> str:
    """The pool a job asks for: Kubeflow's ``runPolicy.schedulingPolicy.queue`` (DRAGON's
    top-level run-policy layout too), else the default pool."""
    for holder in (job_spec.get("runPolicy"), job_spec):
        if isinstance(holder, Mapping):
            policy = holder.get("schedulingPolicy")
            queue = policy.get("queue") if isinstance(policy, Mapping) else None
            if isinstance(queue, str) and queue:
                return queue
    return DEFAULT_POOL


def admission_name(kind: str, job: str) -> str:
    """``tfjob-job1``: a TFJob and an MXJob of one name never share an Admission."""
    return f"{kind.lower()}-{job}"
