"""The policy's knobs. Plain data: the webhook shell reads them from the environment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Named scheduling policies. ``dragonet`` is the product; the others are the baselines the
# simulator compares it with, run through the same webhook:
#   dragon        DRAGON's rules as its README describes them, without its bugs: FIFO gangs
#                 with backfill, shrink running jobs for a queue head that waited
#                 ``starvation_seconds``, grow them after ``idle_seconds`` without action;
#   gang-fifo     all-or-nothing FIFO with backfill, static sizes, each pod bin-packed on
#                 its own (what Volcano / kube-batch give);
#   kube-default  no admission at all: every pod is created at once, unplaced, and the
#                 kube-scheduler places each on its own (a plain operator).
PolicyName = Literal["dragonet", "dragon", "gang-fifo", "kube-default"]
POLICIES: tuple[PolicyName, ...] = ("dragonet", "dragon", "gang-fifo", "kube-default")


@dataclass(frozen=True)
class PolicyConfig:
    policy: PolicyName = "dragonet"
    # How a planned node reaches the pod: required node affinity on kubernetes.io/hostname
    # (kube-scheduler stays the final arbiter) or spec.nodeName binding, as DRAGON does.
    binding: Literal["affinity", "nodeName"] = "affinity"
    # Appended after ".svc" in TF_CONFIG addresses (Kubeflow's CUSTOM_CLUSTER_DOMAIN).
    cluster_domain: str = ""
    # DRAGON's elastic thresholds: shrink for a job that waited this long; grow after
    # this long without any scheduling or scaling action.
    starvation_seconds: float = 30.0
    idle_seconds: float = 60.0
