"""The Admission: the one object the two tiers share (``crd/admissions.dragonet.io.yaml``).

The pool's sync writes it; a job's sync reads it and nothing else of the cluster. It says
whether the job may run, every pod the job may have and the node of each, the worker
target, the last scaling decision and, for a job that waits, why. The pool reads its own
Admissions back as children: they are the pool's memory between syncs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policy.model.bounds import MAX_REPLICAS, Events, GpuSeconds, WholeSeconds
from policy.model.migration import MigrationAnswer, Moves
from policy.model.pool import ADMISSION_KIND, GROUP, VERSION, Binding, admission_name

QUEUED = "Queued"
ADMITTED = "Admitted"
Phase = Literal["Queued", "Admitted"]
TYPE_KEY = f"{ADMISSION_KIND}.{VERSION}"  # Metacontroller's map key for Admissions
# The Admission generation a pod was created from: a sync that sees a pod newer than the
# Admission it reads knows its view of the Admission is stale (DESIGN §2.4).
GENERATION_ANNOTATION = f"{GROUP}/admission"
L_POOL = f"{GROUP}/pool"
L_JOB = f"{GROUP}/job-name"

Slot = tuple[str, int]  # (replica type, index)

# Why a job waits, as a code (the Admission's and the job status's ``reason``). While the
# code stays the same, the pool keeps the message it first wrote for it (explain.py).
NO_NODES = "NoNodes"  # the pool has no nodes
NO_FEASIBLE_NODE = "NoFeasibleNode"  # no node may take one of its replica types
TOO_LARGE = "TooLarge"  # it would not fit even in the empty pool
WAITING_FOR_CAPACITY = "WaitingForCapacity"  # running or older jobs hold the room it needs
WAITING_FOR_SHRINK = "WaitingForShrink"  # its room is being freed by workers of other jobs
NO_SHRINK_HELPS = "NoShrinkHelps"  # it starves, and no shrink it may cause would make room
BLOCKED_BEHIND_HEAD = "BlockedBehindHead"  # dragon: the starving head blocks everyone behind
PODS_WAITING_FOR_ROOM = "PodsWaitingForRoom"  # admitted, but some pods found no room
WAITING_FOR_PREEMPTION = "WaitingForPreemption"  # jobs it preempted are terminating
PREEMPTED = "Preempted"  # stopped as a whole and re-queued for another job
NO_SUCH_POOL = "NoSuchPool"  # it names a TrainingPool that does not exist
NO_KUBESHARE = "NoKubeShare"  # it asks for a fraction of a GPU; its pool has no KubeShare
WAITING_FOR_POOL = "WaitingForPool"  # (a job's own status) no Admission yet


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class PodEntry(_Model):
    type: str
    index: int = Field(ge=0, lt=MAX_REPLICAS)
    node: str | None = None
    hostname: str | None = None
    gpu: str | None = None  # KubeShare v1: the GPUID of the device its share is on
    # The pod's name when it is not ``{job}-{type}-{index}`` (a migrated worker's
    # replacement, ``...-m<n>``), and the node it is moving from (make-before-break).
    pod: str | None = None
    from_: str | None = Field(default=None, alias="from")


class MovesModel(_Model):
    type: str
    index: int = Field(ge=0, lt=MAX_REPLICAS)
    count: Events
    time: str = ""
    from_: str = Field(default="", alias="from")
    to: str = ""
    reason: str = ""


class DecisionModel(_Model):
    request: str
    uid: str = ""
    pod: str = ""
    phase: Literal["Pending", "Moving", "Done", "Refused"]
    reason: str = ""
    message: str = ""
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
    move: Events = 0


class JobRef(_Model):
    apiVersion: str = ""
    kind: str
    name: str
    uid: str = ""


class LastScaleModel(_Model):
    time: str
    from_: int = Field(alias="from", ge=0, le=MAX_REPLICAS)
    to: int = Field(ge=0, le=MAX_REPLICAS)
    reason: str = ""


class GangModel(_Model):
    scheduler: Literal["kube-batch", "volcano", "coscheduling"]
    schedulerName: str


class PreemptionModel(_Model):
    time: str
    by: str
    reason: str = ""


class ServiceModel(_Model):
    gpuSeconds: GpuSeconds  # always written (Service.to_json): without it, not a record
    preemptions: Events = 0
    lasPreemptions: Events = 0
    lastPreemption: PreemptionModel | None = None


class AdmissionSpec(_Model):
    pool: str
    job: JobRef
    phase: Phase
    reason: str = ""
    message: str = ""
    binding: Binding = "affinity"
    workers: int = Field(default=0, ge=0, le=MAX_REPLICAS)
    pods: list[PodEntry] = Field(default_factory=list)
    admittedTime: str | None = None
    lastScale: LastScaleModel | None = None
    kubeshare: Literal["", "v1", "v2"] = ""
    moves: list[MovesModel] = Field(default_factory=list)
    migrations: list[DecisionModel] = Field(default_factory=list)
    gang: GangModel | None = None
    gangNote: str = ""
    service: ServiceModel | None = None
    gracePeriodSeconds: WholeSeconds | None = None


@dataclass(frozen=True)
class Gang:
    """The pool's external gang scheduler, as the job's sync needs it: which backend's
    PodGroup to write, and the schedulerName the pods get."""

    scheduler: str  # kube-batch | volcano | coscheduling
    scheduler_name: str


@dataclass(frozen=True)
class Preemption:
    """Why a job was last stopped as a whole: when, for which job, and the rule."""

    time: str
    by: str  # namespace/name of the job it made room for
    reason: str  # in words: "higher priority (1000 > 0)", "least attained service: ..."


@dataclass(frozen=True)
class Service:
    """What a job received in runs that ended (they left no pods to read it from): the
    GPU-seconds it attained, and how often it was preempted (``las``: for least attained
    service, what the starvation guard counts)."""

    gpu_seconds: float = 0.0
    preemptions: int = 0
    las_preemptions: int = 0
    last: Preemption | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gpuSeconds": round(self.gpu_seconds, 3),
            "preemptions": self.preemptions,
            "lasPreemptions": self.las_preemptions,
        }
        if self.last is not None:
            out["lastPreemption"] = {
                "time": self.last.time,
                "by": self.last.by,
                "reason": self.last.reason,
            }
        return out

    @classmethod
    def from_json(cls, raw: Any) -> Service | None:
        """From an Admission or a job's status; None if absent or unreadable."""
        if raw is None:
            return None
        try:
            m = ServiceModel.model_validate(raw)
        except ValidationError:
            return None
        return cls._of(m)

    @classmethod
    def _of(cls, m: ServiceModel) -> Service:
        last = m.lastPreemption
        return cls(
            m.gpuSeconds,
            m.preemptions,
            m.lasPreemptions,
            None if last is None else Preemption(last.time, last.by, last.reason),
        )


@dataclass(frozen=True)
class Placement:
    """Where one pod of the job goes (``node`` None: the kube-scheduler chooses)."""

    type: str
    index: int
    node: str | None
    hostname: str | None = None  # the node's kubernetes.io/hostname, when not its name
    pod: str | None = None  # the pod's name, when not {job}-{type}-{index} (a moved worker)
    source: str | None = None  # the node it moves from: its old pod runs until it is up
    gpu: str | None = None  # KubeShare v1: the device (GPUID) its fractional GPU is on

    @property
    def slot(self) -> Slot:
        return (self.type, self.index)

    @property
    def host(self) -> str | None:
        return self.hostname or self.node


@dataclass(frozen=True)
class LastScale:
    """A change of the worker target, written once when the pool decides it."""

    time: str
    before: int
    after: int
    reason: str

    @property
    def shrink(self) -> bool:
        return self.after < self.before

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "from": self.before, "to": self.after, "reason": self.reason}

    @classmethod
    def from_json(cls, raw: Any) -> LastScale | None:
        """From a status or an Admission; None if absent or unreadable."""
        try:
            m = LastScaleModel.model_validate(raw)
        except ValidationError:
            return None
        return cls(m.time, m.from_, m.to, m.reason)


@dataclass(frozen=True)
class Admission:
    pool: str
    namespace: str
    job_kind: str
    job_name: str
    job_uid: str
    job_api_version: str
    phase: Phase
    message: str = ""
    binding: Binding = "affinity"
    workers: int = 0
    pods: tuple[Placement, ...] = ()
    reason: str = ""  # why it waits, as a code (policy.pool.explain)
    last_scale: LastScale | None = None
    admitted_at: str | None = None  # when the pool admitted the job (written once)
    generation: int = 0  # of the observed object; 0 for one not written yet
    gang: Gang | None = None  # the pool's gang scheduler, if any
    gang_note: str = ""  # its pods name a gang scheduler the pool does not use: what to do
    moves: tuple[Moves, ...] = ()  # durable move counts, per worker slot (migration)
    migrations: tuple[MigrationAnswer, ...] = ()  # the pool's answers to live Migration requests
    # How its fractional-GPU pods are written: "" (none), "v1" SharePods, "v2" labelled Pods.
    kubeshare: str = ""
    service: Service | None = None  # attained in earlier runs, preemptions
    grace_seconds: int | None = None  # the pool's terminationGracePeriodSeconds for its pods

    @cached_property
    def slots(self) -> Mapping[Slot, Placement]:
        return {p.slot: p for p in self.pods}

    @cached_property
    def labelled(self) -> frozenset[Slot]:
        """The slots as pods label them: (lower-case type, index)."""
        return frozenset((t.lower(), i) for t, i in self.slots)

    @property
    def name(self) -> str:
        return admission_name(self.job_kind, self.job_name)

    @cached_property
    def job_key(self) -> str:
        return f"{self.namespace}/{self.job_name}"

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self)))

    def __hash__(self) -> int:  # what the dataclass's would be, once per object: every
        return self._hash  # pool sync hashes each Admission it observed (its fingerprint)

    @property
    def admitted(self) -> bool:
        return self.phase == ADMITTED

    @property
    def preempted(self) -> bool:
        """Stopped as a whole and queued again: its job deletes every pod it has. (A job
        once admitted goes back to Queued only by a preemption.)"""
        return self.phase == QUEUED and self.service is not None and self.service.last is not None

    def to_object(self) -> dict[str, Any]:
        """The child the pool's sync answers (Metacontroller adds owner and selector)."""
        spec: dict[str, Any] = {
            "pool": self.pool,
            "job": {
                "apiVersion": self.job_api_version,
                "kind": self.job_kind,
                "name": self.job_name,
                "uid": self.job_uid,
            },
            "phase": self.phase,
            "reason": self.reason,
            "message": self.message,
            "binding": self.binding,
            "workers": self.workers,
            "pods": [_entry(p) for p in self.pods],
        }
        if self.admitted_at is not None:
            spec["admittedTime"] = self.admitted_at
        if self.last_scale is not None:
            spec["lastScale"] = self.last_scale.to_json()
        if self.gang is not None:
            spec["gang"] = {
                "scheduler": self.gang.scheduler,
                "schedulerName": self.gang.scheduler_name,
            }
        if self.gang_note:
            spec["gangNote"] = self.gang_note
        if self.moves:
            spec["moves"] = [m.to_json() for m in self.moves]
        if self.migrations:
            spec["migrations"] = [d.to_json() for d in self.migrations]
        if self.kubeshare:
            spec["kubeshare"] = self.kubeshare
        if self.service is not None:
            spec["service"] = self.service.to_json()
        if self.grace_seconds is not None:
            spec["gracePeriodSeconds"] = self.grace_seconds
        return {
            "apiVersion": VERSION,
            "kind": ADMISSION_KIND,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {L_POOL: self.pool, L_JOB: self.job_name},
            },
            "spec": spec,
        }

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Admission:
        """Raises ValueError for an object that is not a readable Admission."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("namespace"), str):
            raise ValueError("Admission without metadata.namespace")
        try:
            spec = AdmissionSpec.model_validate(obj.get("spec"))
        except ValidationError as err:
            raise ValueError(f"unreadable Admission spec: {err.errors()[0]['msg']}") from err
        generation = meta.get("generation")
        scale = spec.lastScale
        return cls(
            pool=spec.pool,
            namespace=meta["namespace"],
            job_kind=spec.job.kind,
            job_name=spec.job.name,
            job_uid=spec.job.uid,
            job_api_version=spec.job.apiVersion,
            phase=spec.phase,
            reason=spec.reason,
            message=spec.message,
            binding=spec.binding,
            workers=spec.workers,
            pods=tuple(
                Placement(p.type, p.index, p.node, p.hostname, p.pod, p.from_, p.gpu)
                for p in spec.pods
            ),
            last_scale=None
            if scale is None
            else LastScale(scale.time, scale.from_, scale.to, scale.reason),
            admitted_at=spec.admittedTime,
            generation=generation if type(generation) is int else 0,
            gang=None if spec.gang is None else Gang(spec.gang.scheduler, spec.gang.schedulerName),
            gang_note=spec.gangNote,
            moves=tuple(Moves.from_json(m.model_dump(by_alias=True)) for m in spec.moves),
            migrations=tuple(
                MigrationAnswer.from_json(d.model_dump(by_alias=True)) for d in spec.migrations
            ),
            kubeshare=spec.kubeshare,
            service=None if spec.service is None else Service._of(spec.service),
            grace_seconds=spec.gracePeriodSeconds,
        )


def _entry(p: Placement) -> dict[str, Any]:
    out: dict[str, Any] = {"type": p.type, "index": p.index}
    if p.node is not None:
        out["node"] = p.node
    if p.hostname and p.hostname != p.node:
        out["hostname"] = p.hostname
    if p.pod:
        out["pod"] = p.pod
    if p.source:
        out["from"] = p.source
    if p.gpu is not None:
        out["gpu"] = p.gpu
    return out
