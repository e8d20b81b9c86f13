"""A TrainingPool: which Nodes it schedules onto and with which policy.

The pool's spec is what the first design read from environment variables; now it is an
object in the API (``crd/trainingpools.dragonet.io.yaml``), so several pools can run side
by side with different policies, and changing one is a ``kubectl edit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policy.model.bounds import MAX_EVENTS, Events, Gain, GpuHours, Seconds, WholeSeconds

GROUP = "dragonet.io"
VERSION = f"{GROUP}/v1alpha1"
POOL_KIND = "TrainingPool"
ADMISSION_KIND = "Admission"
DEFAULT_POOL = "default"  # the pool of a job that names none (Kubeflow's queue default)

# Named scheduling policies. ``dragonet-las`` (the default) and ``dragonet`` are the
# product; the others are the baselines the simulator compares them with, run through the
# same webhook:
#   dragon        DRAGON's rules as its README describes them, without its bugs: FIFO gangs
#                 with backfill, shrink running jobs for a queue head that waited
#                 ``starvationSeconds``, grow them after ``idleSeconds`` without action;
#   gang-fifo     all-or-nothing FIFO with backfill, static sizes, each pod bin-packed on
#                 its own (what Volcano / kube-batch give);
#   kube-default  no admission at all: every pod is created at once, unplaced, and the
#                 kube-scheduler places each on its own (a plain operator);
#   dragonet-las  dragonet, with the queue in discretised least-attained-service order and
#                 whole jobs preempted for jobs that attained less
#                 (policy/pool/attained_service.py);
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
# An external gang scheduler that binds the pool's pods (docs/gang-schedulers.md): Dragonet
# still queues, admits and places; the backend only binds, all of a PodGroup or none.
GangScheduler = Literal["none", "kube-batch", "volcano", "coscheduling"]
GANG_SCHEDULERS: tuple[GangScheduler, ...] = ("kube-batch", "volcano", "coscheduling")
GANG_SCHEDULER_CHOICES: tuple[GangScheduler, ...] = ("none", *GANG_SCHEDULERS)
# The pods' schedulerName for each backend, unless the pool names another: what each
# project's own install calls its scheduler (scheduler-plugins' "as a second scheduler").
DEFAULT_SCHEDULER_NAMES: Mapping[str, str] = {
    "kube-batch": "kube-batch",
    "volcano": "volcano",
    "coscheduling": "scheduler-plugins-scheduler",
}
# Fractional GPUs (docs/kubeshare.md): none (a job asking for a fraction of a GPU waits,
# told why), KubeShare v1 (Dragonet writes SharePods with their node and GPUID, as DRAGON
# did) or KubeShare v2 (labelled Pods for kubeshare-scheduler, which picks the device on the
# node Dragonet admits them to).
KubeShare = Literal["none", "v1", "v2"]
# Kueue's ClusterQueue ``stopPolicy``, for a pool (policy/pool/stop.py): None admits as
# usual; Hold admits nothing new and lets admitted jobs run to completion; HoldAndDrain also
# stops every admitted job, as a preemption, so the pool empties.
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
STOP_POLICIES: tuple[StopPolicy, ...] = ("None", "Hold", "HoldAndDrain")


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


# How a migration's target is chosen (docs/migration.md): "dragon" is DRAGON's limits-based
# load score (lowest wins, no move when the source is among the best), without its bugs;
# "dragonet" is the worker's expected speed (its parameter servers' node, then CPU share).
MigrationScore = Literal["dragon", "dragonet"]


class MigrationSettings(BaseModel):
    """``TrainingPool.spec.migration``: how the pool answers Migration requests, and whether
    it moves workers on its own."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    enabled: bool = True  # answer Migration requests (false: refuse each, saying so)
    score: MigrationScore | None = None  # None: the pool policy's (dragon -> dragon)
    maxMoves: int = Field(default=3, ge=0, le=100)  # per worker, durable
    minIntervalSeconds: Seconds = 3.0  # per worker, between moves
    # (dragonet score) a requested move must make the worker this much faster, relatively
    # (a restore costs time); a Manual request skips this test.
    minGain: Gain = 0.2
    # The planner moves a lonely worker onto its parameter servers' node when room frees
    # there (off until measured: benchmarks/README.md).
    consolidate: bool = False
    # The planner moves running workers (at most two) off one node so that the first
    # waiting gang, which fits in the pool's free room but on no placement, fits there
    # (off until measured: benchmarks/README.md).
    defragment: bool = False
    # The planner moves a running CPU worker (no GPUs) off a node whose CPU its workers
    # oversubscribe (their limits exceed what the parameter servers leave) to a node with
    # idle CPU where the score says it runs minGain faster, one a cycle, in the queue's
    # order. None: on under the dragonet score (benchmarks/README.md, container-migration's
    # speed scenarios).
    balance: bool | None = None


class PoolSpec(BaseModel):
    """``TrainingPool.spec``; absent fields take the CRD's defaults."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    nodeSelector: LabelSelector = Field(default_factory=LabelSelector)
    policy: PolicyName = "dragonet-las"
    # How a planned node reaches the pod: required node affinity on kubernetes.io/hostname
    # (kube-scheduler stays the final arbiter) or spec.nodeName binding, as DRAGON does.
    binding: Binding = "affinity"
    # DRAGON's elastic thresholds: shrink for a job that waited this long; grow after
    # this long without any scheduling or scaling action.
    starvationSeconds: Seconds = 30.0
    idleSeconds: Seconds = 60.0
    # Count every pod on the pool's nodes, not only Dragonet's (costlier hook requests).
    watchAllPods: bool = False
    # Least attained service (dragonet-las, tiresias): the queues' upper limits in GPU-hours
    # a job has received (Tiresias' discretised LAS); a job that attained more than the
    # last one is in the last queue. The defaults of this and the next three fields are
    # Pollux's Tiresias (sim/pollux_model.py TIRESIAS_POOL), which Dragonet's simulator
    # agrees with, and what measured best for dragonet-las on Pollux's workloads
    # (benchmarks/README.md).
    lasThresholdsGPUHours: tuple[GpuHours, ...] = Field(default=(16.0,), max_length=8)
    # The starvation guard: a job is preempted for least attained service at most this
    # many times (priority preemption is not limited).
    maxPreemptions: Events = MAX_EVENTS
    # Least attained service: a waiting job may also preempt jobs of its own queue that were
    # enqueued after it, so each cycle re-applies the queue order (Tiresias' and Pollux's
    # simulators do).
    lasPreemptLaterInQueue: bool = True
    # Tiresias' promotion: a preempted job that has waited as long as it ran goes back to
    # queue 0 (false: never, as Pollux's Tiresias, whose _solve_starvation is 0).
    lasPromotion: bool = False
    # dragonet-las: a job whose reports say how far it is (step of totalSteps) queues by
    # the GPU-time it has left, shortest first; one that does not, by attained service.
    lasByRemaining: bool = True
    # The allocation rule (docs/speedup.md): a job's reported throughput decides who grows.
    # Growth is decided again at most this often (0: at every event), a new worker is
    # charged this long before it trains, and a job whose reports promise less than this
    # relative speed-up per worker (after the charge) does not grow.
    allocationIntervalSeconds: Seconds = 0.0
    # The pool decides at most once per this many seconds, at the interval's ticks (Pollux's
    # simulator re-allocates every 60 s); an event between two ticks waits for the next one
    # (policy/pool/cadence.py). 0: at every event.
    decisionIntervalSeconds: Seconds = 0.0
    restartSeconds: Seconds = 30.0
    minGainPerWorker: float = Field(default=0.05, ge=0.0, le=1.0)
    # terminationGracePeriodSeconds of the pods the pool admits (a pod template's own value
    # wins): how long training code has to checkpoint when preempted. None: Kubernetes' 30 s.
    preemptionGraceSeconds: WholeSeconds | None = None
    kubeshare: KubeShare = "none"
    migration: MigrationSettings = Field(default_factory=MigrationSettings)
    # An external gang scheduler binds the pods: each admitted job gets that backend's
    # PodGroup, its pods the scheduler's name and the group's annotation or label, and the
    # planned node as preferred (not required) affinity.
    gangScheduler: GangScheduler = "none"
    # The pods' schedulerName under the gang scheduler (default: the backend's own name).
    gangSchedulerName: str | None = Field(default=None, min_length=1, max_length=253)
    # Hold or drain the pool (``kubectl dragonet hold|drain|release``): Hold admits no new
    # job and grows none; HoldAndDrain also preempts every admitted job. None: admit.
    stopPolicy: StopPolicy = "None"

    @model_validator(mode="after")
    def _gang_needs_a_scheduler(self) -> PoolSpec:
        if self.gangScheduler != "none" and self.binding == "nodeName":
            raise ValueError(
                f"binding nodeName bypasses every scheduler, so gangScheduler "
                f"{self.gangScheduler} could never bind the pods: use binding affinity"
            )
        if self.gangScheduler != "none" and self.kubeshare != "none":
            raise ValueError(
                f"kubeshare {self.kubeshare} places fractional-GPU pods itself (v1: SharePods "
                f"bound by nodeName, v2: kubeshare-scheduler), so gangScheduler "
                f"{self.gangScheduler} would wait for pods it never schedules: a pool uses "
                "one or the other"
            )
        return self

    @property
    def scheduler_name(self) -> str:
        """The schedulerName the pool's pods get ("" without a gang scheduler)."""
        if self.gangScheduler == "none":
            return ""
        return self.gangSchedulerName or DEFAULT_SCHEDULER_NAMES[self.gangScheduler]


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
