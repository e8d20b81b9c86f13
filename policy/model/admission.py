"""The Admission: the one object the two tiers share (``crd/admissions.dragonet.io.yaml``).

The pool's sync writes it; a job's sync reads it and nothing else of the cluster. It says
whether the job may run, every pod the job may have and the node of each, the worker
target, the last scaling decision and, for a job that waits, why. The pool reads its own
Admissions back as children: they are the pool's memory between syncs.

One pydantic schema reads and writes it: the ``Admission`` model *is* its spec (with the
namespace and generation of its metadata beside), and ``Placement`` is the one form of
"this pod goes to this node" from the pool's plan to the job's rendered pod. Written, it
is the spec the first hand-written writer wrote, key for key and byte for byte: empty
optional fields are left out (``_OMITTED_WHEN_EMPTY``), so Admissions a running cluster
stored still read, and unchanged ones are not rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Annotated, Any, Final, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
    field_serializer,
)

from policy.model.batch import MAX_BATCH
from policy.model.bounds import MAX_QUEUE, MAX_REPLICAS, Events, GpuSeconds, WholeSeconds
from policy.model.migration import MigrationAnswer, Moves
from policy.model.pool import ADMISSION_KIND, GROUP, VERSION, Binding, admission_name
from policy.model.slot import Slot, SlotLabel
from policy.model.timeutil import Time, TimeOrEmpty

# Where a job stands, the one set of phases both tiers use: the Admission's two (Queued,
# Admitted), and the job's own beyond them (a job's sync writes them into its status).
QUEUED: Final = "Queued"
ADMITTED: Final = "Admitted"
FINISHED: Final = "Finished"
SUSPENDED: Final = "Suspended"
INVALID: Final = "Invalid"
Phase = Literal["Queued", "Admitted"]  # an Admission's
JobPhase = Literal["Queued", "Admitted", "Finished", "Suspended", "Invalid"]
TYPE_KEY = f"{ADMISSION_KIND}.{VERSION}"  # Metacontroller's map key for Admissions
# The Admission generation a pod was created from: a sync that sees a pod newer than the
# Admission it reads knows its view of the Admission is stale (DESIGN §2.4).
GENERATION_ANNOTATION = f"{GROUP}/admission"
L_POOL = f"{GROUP}/pool"
L_JOB = f"{GROUP}/job-name"


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
POOL_HELD = "PoolHeld"  # its pool's spec.stopPolicy is Hold or HoldAndDrain: it admits no job
WAITING_FOR_POOL = "WaitingForPool"  # (a job's own status) no Admission yet


class _Model(BaseModel):
    """Frozen, and compared and hashed by its fields' values in one step (pydantic's own
    comparison is several times slower)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))


class _Mirrored(_Model):
    """A part of an Admission that the job's status mirrors: written without its unset
    fields, read back as None when absent or unreadable."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, raw: Any) -> Self | None:
        if raw is None:
            return None
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return None


@dataclass(frozen=True)
class Placement:
    """Where one pod of the job goes (``node`` None: the kube-scheduler chooses): what the
    plan decides, the Admission lists and the job's sync renders. A plain frozen dataclass,
    cheap to make by the thousand in a cycle; the Admission's schema reads and writes it
    (its ``Field`` annotations), and unset fields (None) are not written."""

    type: str
    index: Annotated[int, Field(ge=0, lt=MAX_REPLICAS)]
    node: str | None = None
    hostname: str | None = None  # the node's kubernetes.io/hostname, when not its name
    pod: str | None = None  # the pod's name, when not {job}-{type}-{index} (a moved worker)
    # The node it moves from (make-before-break): its old pod runs until this one is up.
    source: Annotated[str | None, Field(alias="from")] = None
    gpu: str | None = None  # KubeShare v1: the device (GPUID) its fractional GPU is on

    @property
    def slot(self) -> Slot:
        return Slot(self.type, self.index)

    @property
    def host(self) -> str | None:
        return self.hostname or self.node


class JobRef(_Model):
    api_version: str = Field(default="", alias="apiVersion")
    kind: str
    name: str
    uid: str = ""


class LastScale(_Model):
    """A change of the worker target, written once when the pool decides it."""

    time: Time
    before: int = Field(alias="from", ge=0, le=MAX_REPLICAS)
    after: int = Field(alias="to", ge=0, le=MAX_REPLICAS)
    reason: str = ""

    @property
    def shrink(self) -> bool:
        return self.after < self.before

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)

    @classmethod
    def from_json(cls, raw: Any) -> LastScale | None:
        """From a status or an Admission; None if absent or unreadable."""
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return None


class BatchSize(_Model):
    """The global batch the pool chose for a job that declares the batch sizes it can take
    (``policy.model.batch``), and each worker's share: what its pods read at start
    (``DRAGONET_BATCH_SIZE``, ``DRAGONET_BATCH_SIZE_PER_REPLICA``)."""

    size: int = Field(ge=1, le=MAX_BATCH)
    per_replica: int = Field(alias="perReplica", ge=1, le=MAX_BATCH)


class Gang(_Model):
    """The pool's external gang scheduler, as the job's sync needs it: which backend's
    PodGroup to write, and the schedulerName the pods get."""

    scheduler: Literal["kube-batch", "volcano", "coscheduling"]
    scheduler_name: str = Field(alias="schedulerName")


class Preemption(_Model):
    """Why a job was last stopped as a whole: when, for which job, and the rule."""

    time: Time
    by: str  # namespace/name of the job it made room for ("TrainingPool NAME": a drain)
    reason: str = ""  # in words: "higher priority (1000 > 0)", "least attained service: ..."


class AttainedService(_Mirrored):
    """What a job received in runs that ended (they left no pods to read it from): the
    GPU-seconds it attained, and how often it was preempted (``las``: for least attained
    service, what the starvation guard counts). Its GPU-seconds are always written:
    without them, not a record."""

    gpu_seconds: GpuSeconds = Field(alias="gpuSeconds")
    preemptions: Events = 0
    las_preemptions: Events = Field(default=0, alias="lasPreemptions")
    last: Preemption | None = Field(default=None, alias="lastPreemption")

    @field_serializer("gpu_seconds")
    def _rounded(self, value: float) -> float:
        return round(value, 3)


class _MovesEntry(_Model):
    """A ``moves`` entry as written (``policy.model.migration.Moves`` in memory)."""

    type: str
    index: int = Field(ge=0, lt=MAX_REPLICAS)
    count: Events
    time: TimeOrEmpty = None
    source: str = Field(default="", alias="from")
    target: str = Field(default="", alias="to")
    reason: str = ""


class _AnswerEntry(_Model):
    """A ``migrations`` entry as written (``policy.model.migration.MigrationAnswer`` in memory)."""

    request: str
    uid: str = ""
    pod: str = ""
    phase: Literal["Pending", "Moving", "Done", "Refused"]
    reason: str = ""
    message: str = ""
    source: str | None = Field(default=None, alias="from")
    target: str | None = Field(default=None, alias="to")
    move: Events = 0


class Refusal(_Model):
    """A node that refused the job's pods: the kube-scheduler left a pod pinned there
    Unschedulable although the pool saw room for it (pods the pool does not see fill the
    node: ``policy.model.refusal``). ``count`` refusals in a row, the last one counted at
    ``time``: the pool places none of the job's pods there before ``until``. ``seen``: when
    the pool first saw ``seen_pod`` stuck there with room; it counts as a refusal once it
    has stayed so for ``policy.model.refusal.GRACE`` (the kube-scheduler tries again when
    room frees, so a pod that waits that long is refused by something the pool cannot see)."""

    node: str
    pod: str | None = None  # the pod refused last
    count: Events = 0  # refusals in a row
    time: Time | None = None  # when the last one was counted
    until: Time | None = None  # the job's pods avoid the node until then
    seen: Time | None = None
    seen_pod: str | None = Field(default=None, alias="seenPod")

    @property
    def counted(self) -> bool:
        """Refused at least once (not only seen)."""
        return self.count > 0 and self.until is not None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class QueuePlace(_Mirrored):
    """A waiting job's place in its pool's queue (Kueue's ``positionInClusterQueue`` and
    ``positionInLocalQueue``), in the job's own Admission, so that reading it needs no
    access beyond the job's namespace. 1 is next. A number past ``EXACT_UP_TO`` is written
    as the range it falls in (``position`` to ``positionMax``): a job's range changes a
    few times while it waits, where its exact place would change with every job admitted
    ahead of it, and each change is a write of its Admission and of its status
    (``policy.pool.queue_status.place``, docs/architecture.md)."""

    position: int = Field(ge=1, le=MAX_QUEUE)
    position_max: int | None = Field(default=None, alias="positionMax", ge=1, le=MAX_QUEUE)
    length: int = Field(ge=1, le=MAX_QUEUE)
    length_max: int | None = Field(default=None, alias="lengthMax", ge=1, le=MAX_QUEUE)
    # Among the waiting jobs of the job's own namespace, in the same order.
    in_namespace: int = Field(alias="positionInNamespace", ge=1, le=MAX_QUEUE)
    in_namespace_max: int | None = Field(
        default=None, alias="positionInNamespaceMax", ge=1, le=MAX_QUEUE
    )
    namespace_length: int = Field(alias="lengthInNamespace", ge=1, le=MAX_QUEUE)
    namespace_length_max: int | None = Field(
        default=None, alias="lengthInNamespaceMax", ge=1, le=MAX_QUEUE
    )


_MOVES = TypeAdapter(tuple[_MovesEntry, ...])
_ANSWERS = TypeAdapter(tuple[_AnswerEntry, ...])


def _moves(raw: Any) -> tuple[Moves, ...]:
    """Read into the migration's own type at once: nothing is dumped and parsed again."""
    if isinstance(raw, tuple) and all(type(m) is Moves for m in raw):
        return raw
    return tuple(Moves(**dict(m)) for m in _MOVES.validate_python(raw))


def _answers(raw: Any) -> tuple[MigrationAnswer, ...]:
    if isinstance(raw, tuple) and all(type(d) is MigrationAnswer for d in raw):
        return raw
    return tuple(MigrationAnswer(**d.model_dump()) for d in _ANSWERS.validate_python(raw))


MovesField = Annotated[
    tuple[Moves, ...],
    BeforeValidator(_moves),
    PlainSerializer(lambda ms: [m.to_json() for m in ms]),
]
AnswersField = Annotated[
    tuple[MigrationAnswer, ...],
    BeforeValidator(_answers),
    PlainSerializer(lambda ds: [d.to_json() for d in ds]),
]
# Written only when not empty (as the first writer did); every other field is written
# unless it is None.
_OMITTED_WHEN_EMPTY = ("gang_note", "moves", "migrations", "kubeshare", "refused")


class Admission(_Model):
    """An Admission: its spec's fields, and the ``namespace`` and ``generation`` of its
    metadata (never written into the spec)."""

    # Built in code with a misspelt field (``mesage=``), it is refused, never dropped; what
    # an API object holds beyond the fields (a newer writer's) is left out by ``from_object``.
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        arbitrary_types_allowed=True,
    )

    pool: str
    job: JobRef
    phase: Phase
    reason: str = ""  # why it waits, as a code (policy.pool.explain)
    message: str = ""
    binding: Binding = "affinity"
    workers: int = Field(default=0, ge=0, le=MAX_REPLICAS)
    pods: tuple[Placement, ...] = ()
    # When the pool admitted the job (written once).
    admitted_at: Time | None = Field(default=None, alias="admittedTime")
    last_scale: LastScale | None = Field(default=None, alias="lastScale")
    gang: Gang | None = None  # the pool's gang scheduler, if any
    # Its pods name a gang scheduler the pool does not use: what to do.
    gang_note: str = Field(default="", alias="gangNote")
    moves: MovesField = ()  # durable move counts, per worker slot (migration)
    migrations: AnswersField = ()  # the pool's answers to live Migration requests
    # How its fractional-GPU pods are written: "" (none), "v1" SharePods, "v2" labelled Pods.
    kubeshare: Literal["", "v1", "v2"] = ""
    service: AttainedService | None = None  # attained in earlier runs, preemptions
    # The pool's terminationGracePeriodSeconds for its pods.
    grace_seconds: WholeSeconds | None = Field(default=None, alias="gracePeriodSeconds")
    # Nodes the kube-scheduler refused its pods on, each avoided until its backoff ends.
    refused: tuple[Refusal, ...] = ()
    # Queued in a planned queue: its place there (positions, the queue's length).
    queue: QueuePlace | None = None
    # The batch chosen for a job that declares a range (dragonet.io/batch-size); None: it
    # keeps its own.
    batch: BatchSize | None = None
    namespace: str = Field(default="", exclude=True)
    generation: int = Field(default=0, exclude=True)  # 0 for one not written yet

    @cached_property
    def slots(self) -> Mapping[Slot, Placement]:
        return {p.slot: p for p in self.pods}

    @cached_property
    def labelled(self) -> frozenset[SlotLabel]:
        """The slots as pods label them: (lower-case type, index)."""
        return frozenset(SlotLabel(t.lower(), i) for t, i in self.slots)

    @property
    def job_kind(self) -> str:
        return self.job.kind

    @property
    def job_name(self) -> str:
        return self.job.name

    @property
    def job_uid(self) -> str:
        return self.job.uid

    @property
    def name(self) -> str:
        return admission_name(self.job.kind, self.job.name)

    @cached_property
    def job_key(self) -> str:
        return f"{self.namespace}/{self.job.name}"

    @cached_property
    def fingerprint(self) -> int:
        """The hash of its fields, computed once: every pool sync hashes each Admission it
        observed (the plan's fingerprint, policy.pool.sync)."""
        return hash(tuple(self.__dict__[k] for k in type(self).model_fields))

    def __hash__(self) -> int:
        return self.fingerprint

    def __eq__(self, other: object) -> bool:  # its fields only (not what it cached)
        if self is other:
            return True
        if type(other) is not Admission:
            return NotImplemented
        return all(self.__dict__[k] == other.__dict__[k] for k in type(self).model_fields)

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
        return {
            "apiVersion": VERSION,
            "kind": ADMISSION_KIND,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {L_POOL: self.pool, L_JOB: self.job.name},
            },
            "spec": self.model_dump(
                mode="json",
                by_alias=True,
                exclude_none=True,
                exclude={k for k in _OMITTED_WHEN_EMPTY if not getattr(self, k)},
            ),
        }

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Admission:
        """Raises ValueError for an object that is not a readable Admission."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("namespace"), str):
            raise ValueError("Admission without metadata.namespace")
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            raise ValueError("unreadable Admission spec: not an object")
        generation = meta.get("generation")
        known = {k: v for k, v in spec.items() if k in _spec_keys()}
        try:
            return cls.model_validate(
                {
                    **known,
                    "namespace": meta["namespace"],
                    "generation": generation if type(generation) is int else 0,
                }
            )
        except ValidationError as err:
            raise ValueError(f"unreadable Admission spec: {err.errors()[0]['msg']}") from err


@cache
def _spec_keys() -> frozenset[str]:
    """The spec keys an Admission is read from: each field's name and alias, but the two
    of its metadata."""
    return frozenset(
        key
        for name, field in Admission.model_fields.items()
        if name not in ("namespace", "generation")
        for key in (name, field.alias)
        if key
    )
