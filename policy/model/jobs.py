"""Typed training jobs (Kubeflow's ``kubeflow.org/v1`` kinds: ``JobKind``, each defined in
its module under ``policy/model/kinds/``), with DRAGON's ``max-instances``/``min-instances``
for the kinds that are elastic.

``parse_job`` turns the raw object Metacontroller sends into an immutable ``Job``, or
raises ``InvalidJob`` whose message names exactly what is wrong, in the user's field
paths. Pod templates stay plain dicts: they are copied into pods verbatim, and a model
round-trip would drop fields a newer API server knows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from policy.memo import Memo
from policy.model import conditions as cond
from policy.model.apischema import check_template, writable_status
from policy.model.batch import BatchRange, declared
from policy.model.bounds import (
    MAX_DEADLINE_SECONDS,
    MAX_INT32,
    MAX_REPLICAS,
    MAX_SECONDS,
    MAX_TTL_SECONDS,
    OutOfBounds,
    number,
)
from policy.model.gpushare import GPU, BadShare, GpuShare, share_of
from policy.model.hashed import HashedTuple
from policy.model.once import cached_property
from policy.model.podspec import host_ports, pod_request
from policy.model.pool import DEFAULT_POOL
from policy.model.resources import Resources, to_milli
from policy.model.slot import Slot
from policy.model.templates import PodTemplate
from policy.model.tensorboard import ANNOTATION as TENSORBOARD_ANNOTATION
from policy.model.tensorboard import LABEL as TENSORBOARD_LABEL
from policy.model.tensorboard import TensorBoard
from policy.model.tensorboard import parse as parse_tensorboard
from policy.model.throughput import ANNOTATION as THROUGHPUT
from policy.model.timeutil import ReadTime, format_time, parse_time


class InvalidJob(ValueError):
    """The job's spec cannot run; the message is shown to the user in a Failed condition."""


# DRAGON's fractional-GPU mode: the job annotation, and the pods' annotations and resources.
KUBESHARE_ANNOTATION = "DRAGON_KUBESHARE"
KUBESHARE_PREFIX = "kubeshare/"
NO_KUBESHARE_RESOURCE = (
    "KubeShare takes a fractional GPU from the pod's kubeshare/gpu_request, gpu_limit and "
    "gpu_mem annotations (or v2's sharedgpu/* labels), not from container resources"
)
# The schedulerNames of the gang schedulers a pool may delegate binding to (pool.py): a
# template naming one asks for that backend's PodGroup.
GANG_SCHEDULERS = ("kube-batch", "volcano", "scheduler-plugins-scheduler")
# The job's checkpoint interval in seconds (an annotation of ours): how much progress a
# preemption can cost it. A job without one is preempted only for a higher priority.
CHECKPOINT_ANNOTATION = "dragonet.io/checkpoint-interval-seconds"


# What a kind does to one pod of a job (its cluster spec in the environment): given the pod
# spec being rendered, the job, the replica type and index, and the cluster's DNS domain.
# Each kind's module under ``policy/model/kinds/`` gives its own.
ConfigurePod = Callable[[dict[str, Any], "Job", str, int, str], None]
# Whether the job has succeeded, from its observed pods (``policy.model.cluster.Pod``s:
# that module reads this one): Kubeflow's rule for the kind.
SuccessRule = Callable[["Job", Sequence[Any]], bool]


class KindSpec(BaseModel):
    """The fields of a kind's own ``spec`` that no other kind has (e.g. PyTorchJob's
    ``elasticPolicy``), parsed into ``Job.extension``. A kind without any has none."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)
    # The field a user gives the fewest workers in, for a message.
    min_field: ClassVar[str] = "min-instances"

    def worker_bounds(
        self, kind: JobKind, min_instances: int | None, max_instances: int | None
    ) -> tuple[int | None, int | None]:
        """The worker bounds the job asks for, from DRAGON's ``min-instances`` and
        ``max-instances`` and the kind's own fields; raises ``InvalidJob`` where they
        conflict, naming the fields. By default DRAGON's alone."""
        return min_instances, max_instances

    def check(self, kind: JobKind, replicas: Mapping[str, Replica]) -> None:
        """Raise ``InvalidJob`` naming the field where the kind's own fields do not fit the
        job's replicas. By default nothing to check."""

    @property
    def scalable(self) -> bool:
        """Whether Dragonet may change the job's workers while it runs (within its
        bounds); False says so in its status. By default as its kind allows."""
        return True


@dataclass(frozen=True)
class JobKind:
    """Everything a training-job kind differs in: the kinds Dragonet runs are the instances
    in ``policy.model.kinds.KINDS``, one module each (``policy/model/kinds/``), and every
    other part (render, status, the pool, the webhook's routes, the manifests, the
    simulator, the reaper, recorder and monitor) reads them from there."""

    kind: str
    api_version: str
    replica_specs_field: str
    replica_types: tuple[str, ...]  # canonical CamelCase, in Kubeflow's status order
    chief_types: tuple[str, ...]  # types whose pod decides success
    required_types: tuple[str, ...]  # types that must be part of every gang
    container: str
    port_name: str
    default_port: int
    configure_pod: ConfigurePod  # the cluster spec in each pod's environment
    succeeded: SuccessRule  # Kubeflow's success rule
    # DRAGON's min-instances/max-instances: workers may come and go while the job runs.
    # False (MXJob): the worker count is fixed at start, and the two fields are refused.
    elastic: bool = True
    # Types whose running pods make it Running (empty: the chief, else the workers).
    decisive_types: tuple[str, ...] = ()
    master_role_type: str | None = None  # its pods get job-role=master (else chief/worker 0)
    # Job modes (``spec.<mode_field>``; the first is the default) and the types each needs.
    mode_field: str = ""
    modes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    singletons: tuple[str, ...] = ()  # types of which a job has exactly one pod
    default_restart_policy: RestartPolicy = "Never"  # a replica spec's, when it gives none
    tensorboard: bool = False  # may ask for a TensorBoard (annotation dragonet.io/tensorboard)
    extension: type[KindSpec] = KindSpec  # the kind's own spec fields

    @property
    def group(self) -> str:
        return self.api_version.partition("/")[0]

    @property
    def singular(self) -> str:
        """``tfjob``: the resource's singular name, and ``kubectl dragonet``'s kind word."""
        return self.kind.lower()

    @property
    def plural(self) -> str:
        """``tfjobs``: the resource, the CompositeController's and the routes' name."""
        return self.singular + "s"

    @property
    def crd_name(self) -> str:
        """``tfjobs.kubeflow.org``: its CRD's name, and its file's under ``crd/``."""
        return f"{self.plural}.{self.group}"


WORKER = "Worker"
RestartPolicy = Literal["Always", "OnFailure", "Never", "ExitCode"]
CleanPodPolicy = Literal["None", "Running", "All"]
# runPolicy.managedBy: who runs the job. Absent, or the training-operator's own value: the
# job is ours, since Dragonet serves TFJobs in the training-operator's place. MultiKueue's:
# Kueue runs the job on a worker cluster and mirrors its status here, so Dragonet leaves it
# alone (no pods, no status, no capacity). Dragonet's own value marks a job for Dragonet on
# a cluster where Kubeflow's training-operator runs the others (docs/kubeflow.md): Kubeflow
# skips a job whose managedBy is not its own. There, Dragonet's jobs also carry the label
# COEXIST_LABEL, which is what Metacontroller can select parents by; a labelled job whose
# managedBy is Kubeflow's (or MultiKueue's) is theirs, and Dragonet leaves it alone.
TRAINING_OPERATOR = "kubeflow.org/training-operator"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
DRAGONET = "dragonet.io/dragonet"
COEXIST_LABEL = "dragonet.io/managed-by"
COEXIST_LABEL_VALUE = "dragonet"
COEXIST_SELECTOR = f"{COEXIST_LABEL}={COEXIST_LABEL_VALUE}"  # as a list's labelSelector

_PLANNED_CONDITIONS = ("Succeeded", "Failed", "Suspended")

_STATUS_TIMES = ("enqueueTime", "startTime", "startRunTime", "completionTime", "lastReconcileTime")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


# --- wire models (what users write) -----------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class ReplicaSpecModel(_Model):
    replicas: int = Field(default=1, ge=0, le=MAX_REPLICAS)
    restartPolicy: RestartPolicy | None = None  # None: the kind's default
    template: dict[str, Any] = Field(default_factory=dict)


class SchedulingPolicyModel(_Model):
    minAvailable: int | None = Field(default=None, ge=0, le=MAX_INT32)  # a PodGroup's int32
    queue: str | None = None
    priorityClass: str | None = None
    scheduleTimeoutSeconds: int | None = Field(default=None, ge=0, le=MAX_INT32)
    # The PodGroup's minResources, as given (quantities); else computed from the pods.
    minResources: dict[str, str | int] | None = None


class RunPolicyModel(_Model):
    cleanPodPolicy: CleanPodPolicy | None = None
    ttlSecondsAfterFinished: int | None = Field(default=None, ge=0, le=MAX_TTL_SECONDS)
    activeDeadlineSeconds: int | None = Field(default=None, ge=0, le=MAX_DEADLINE_SECONDS)
    backoffLimit: int | None = Field(default=None, ge=0, le=MAX_INT32)
    schedulingPolicy: SchedulingPolicyModel | None = None
    suspend: bool = False
    managedBy: str | None = None


class JobSpecModel(RunPolicyModel):
    """Spec but for the replica specs; the run-policy fields at top level are tf-operator
    v1.0's (DRAGON's) and mxnet-operator v1's layout."""

    max_instances: int | None = Field(default=None, alias="max-instances", ge=1, le=MAX_REPLICAS)
    min_instances: int | None = Field(default=None, alias="min-instances", ge=1, le=MAX_REPLICAS)
    # container-migration's (DRAGON's fork, PR #18): try the whole job on this node first.
    node_preference: str | None = Field(default=None, alias="node-preference", max_length=253)
    runPolicy: RunPolicyModel | None = None
    successPolicy: Literal["", "AllWorkers"] = ""
    enableDynamicWorker: bool = False
    jobMode: str | None = None


_REPLICA_SPECS = TypeAdapter(dict[str, ReplicaSpecModel | None])


class MetadataModel(_Model):
    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    creationTimestamp: ReadTime = None  # parsed once, here
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    deletionTimestamp: str | None = None

    @field_validator("namespace")
    @classmethod
    def _a_namespace(cls, value: str) -> str:
        # Every child goes into it: a name no API server stores would make each one a 422.
        if len(value) > 63 or not _DNS1123_LABEL.match(value):
            raise ValueError(
                f"{value[:80]!r} is not a namespace an API server stores (a DNS-1123 label: "
                "at most 63 lower-case letters, digits and '-', starting and ending with a "
                "letter or digit)"
            )
        return value


# --- the policy's view ------------------------------------------------------------------


@dataclass(frozen=True)
class Replica:
    """One replica type of a job, defaulted, with its per-pod resource request."""

    type: str
    replicas: int
    restart_policy: RestartPolicy
    template: Mapping[str, Any]
    request: Resources
    port: int
    gpu_share: GpuShare | None = None  # KubeShare: a fraction of one GPU per pod


@dataclass(frozen=True)
class Job:
    kind: JobKind
    namespace: str
    name: str
    uid: str
    generation: int
    created: datetime | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    replicas: Mapping[str, Replica]  # canonical type -> replica, in kind.replica_types order
    min_workers: int
    max_workers: int
    elastic: bool  # DRAGON's max/min given: TF_CONFIG lists max-instances workers
    dynamic_workers: bool  # Kubeflow's enableDynamicWorker: sparse TF_CONFIG
    success_policy: str
    clean_pod_policy: CleanPodPolicy
    active_deadline_seconds: int | None
    backoff_limit: int | None
    suspend: bool
    managed_elsewhere: bool
    deleting: bool
    # runPolicy.schedulingPolicy.priorityClass, else the pods' priorityClassName
    priority_class: str | None = None
    pool: str = DEFAULT_POOL  # runPolicy.schedulingPolicy.queue: the TrainingPool it asks for
    # runPolicy.schedulingPolicy as given: what an external gang scheduler's PodGroup reads
    scheduling_policy: SchedulingPolicyModel | None = field(default=None, compare=False)
    # spec.node-preference (container-migration): the whole gang there if it fits, at admission
    node_preference: str | None = None
    # Seconds between its checkpoints (CHECKPOINT_ANNOTATION); None: not preemptible except
    # by a job of higher priority.
    checkpoint_interval: float | None = None
    spec_content: bytes = field(default=b"", repr=False, compare=False)  # the spec, as JSON
    _types: Mapping[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    status: Mapping[str, Any] = field(default_factory=dict)
    # Its TensorBoard (annotation ``dragonet.io/tensorboard``), and what its pod requests.
    tensorboard: TensorBoard | None = None
    tensorboard_request: Resources | None = None
    # The kind's own spec fields (``JobKind.extension``), e.g. a PyTorchJob's elasticPolicy.
    extension: KindSpec = field(default_factory=KindSpec, compare=False)
    # The global batch sizes it can train at (annotation ``dragonet.io/batch-size``): the
    # pool chooses one for each size it gives the job (policy.model.batch). None: the job
    # keeps its own batch, as before.
    batch_range: BatchRange | None = None

    @cached_property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @cached_property
    def tensorboard_constraints(self) -> dict[str, Any]:
        """Where its TensorBoard may run: the nodeSelector and tolerations of its parameter
        servers (else its chief's, else its workers'), so it runs beside them, on the
        tainted nodes of a GPU pool too. (Callers copy before they change it.)"""
        for rtype in ("PS", "Chief", "Master", WORKER):
            replica = self.replicas.get(rtype)
            if replica is not None:
                spec = replica.template.get("spec") or {}
                return {k: spec[k] for k in ("nodeSelector", "tolerations") if spec.get(k)}
        return {}

    @cached_property
    def plan_key(self) -> tuple:
        """Everything of the job a pool's plan reads, by value: its spec's content and the
        few status fields the pool keeps as memory (not its replica counts or message)."""
        status = self.status
        conditions = status.get("conditions")
        conds = tuple(  # the ones a plan reads: finished, suspended
            (c.get("type"), c.get("status"))
            for c in (conditions if isinstance(conditions, list) else ())
            if isinstance(c, Mapping) and c.get("type") in _PLANNED_CONDITIONS
        )
        # The worker target and lastScale a job's status copies from its Admission, and its
        # startTime, are read only without an Admission (see policy.pool.sync); the enqueue
        # time is the creation time until the job's sync writes it.
        enqueued = status.get("enqueueTime") or (
            format_time(self.created) if self.created else None
        )
        memory = orjson.dumps([enqueued, bool(status.get("startRunTime"))])
        identity = (
            self.namespace,
            self.name,
            self.uid,
            self.created,
            self.deleting,
            self.checkpoint_interval,
            self.annotations.get(THROUGHPUT),  # the allocation rule reads it
            self.batch_range,  # and chooses a batch for a job that declares one
        )
        return HashedTuple((identity, self.spec_content, conds, memory, self.tensorboard))

    @cached_property
    def gang_types(self) -> tuple[str, ...]:
        """The replica types every gang holds: PS, chief/master, evaluator, and workers
        unless min-instances is 0."""
        return tuple(r.type for r in self.required()) + ((WORKER,) if self.min_workers else ())

    @cached_property
    def constraints(self) -> tuple[tuple[str, bytes], ...]:
        """Each replica type with what the filter phase reads of its pod spec, as bytes:
        replica types of equal constraints may go to the same nodes (one filter pass)."""
        return tuple(
            (t, constraints_key(r.template.get("spec") or {})) for t, r in self.replicas.items()
        )

    @cached_property
    def finished(self) -> bool:
        """A terminal condition (Succeeded, Failed) holds in its status."""
        return cond.terminal(self.status.get("conditions") or []) is not None

    @cached_property
    def resumed(self) -> bool:
        """Just resumed from suspension: Suspended is still true in its status, though its
        spec no longer asks for it (it joins the queue again now). True of a finished job
        too; the job's own status never resumes a finished one
        (``policy.job.view.JobSyncView.resumed``)."""
        return not self.suspend and cond.is_true(
            self.status.get("conditions") or [], cond.SUSPENDED
        )

    @cached_property
    def enqueued(self) -> datetime | None:
        """When it joined the queue: the enqueueTime its status keeps, else its creation."""
        return parse_time(self.status.get("enqueueTime")) or self.created

    @cached_property
    def started_at(self) -> datetime | None:
        """The startTime its status keeps, parsed once (the pool reads it every cycle)."""
        return parse_time(self.status.get("startTime"))

    @cached_property
    def gang_shape(self) -> tuple:
        """What decides whether its gang fits, but for where each type may go: each gang
        type's count and request, the workers', and min-instances."""
        required = tuple((r.type, r.replicas, r.request) for r in self.required())
        worker = self.worker
        workers = (worker.type, worker.replicas, worker.request) if worker else None
        return (required, workers, self.min_workers)

    @cached_property
    def placement_shape(self) -> HashedTuple:
        """Its gang shape and where each replica type may go: jobs of one placement shape
        fit alike. Hashed once: a pool's cycle looks it up for every queued job."""
        return _interned(HashedTuple((self.gang_shape, self.constraints)))

    def type_of(self, label: str) -> str | None:
        """The replica type whose pods carry this (lower-case) replica-type label."""
        return self._types.get(label)

    def size(self, rtype: str) -> int:
        """How many pods of a type the job may have, indices ``0 .. size-1``.

        Workers go up to ``max-instances``, not ``Worker.replicas``: an elastic job grows
        there without a spec change, and its TF_CONFIG lists that many workers from the
        start (without max-instances the two are equal, Kubeflow's bound). Any other type
        has exactly its ``replicas``."""
        return self.max_workers if rtype == WORKER else self.replicas[rtype].replicas

    def holds(self, rtype: str, index: int) -> bool:
        """Whether (type, index) is a pod of this job. Kubeflow deletes a pod at or above
        its type's count (``ps-1`` once ``PS.replicas`` is 1), with its Service."""
        return rtype in self.replicas and 0 <= index < self.size(rtype)

    def slot(self, label: str, index: int) -> Slot | None:
        """The (replica type, index) of a pod with this replica-type label and index, or
        None for a pod that is not part of the job (see ``holds``)."""
        rtype = self._types.get(label)
        return Slot(rtype, index) if rtype is not None and self.holds(rtype, index) else None

    def __post_init__(self) -> None:
        object.__setattr__(self, "_types", {t.lower(): t for t in self.replicas})

    @cached_property
    def chief_type(self) -> str | None:
        return next((t for t in self.kind.chief_types if t in self.replicas), None)

    @cached_property
    def gpu_share(self) -> GpuShare | None:
        """The fraction of one GPU each of its fractional pods asks for (KubeShare), if any."""
        return next((r.gpu_share for r in self.replicas.values() if r.gpu_share), None)

    @cached_property
    def uses_gpus(self) -> bool:
        """A replica requests GPUs (``*/gpu``): its service is measured in GPUs, else in CPU
        cores (``policy.pool.attained_service``). Once per job, not per use in each sync."""
        return any(
            sum(v for k, v in r.request.items() if k.endswith("/gpu")) != 0
            for r in self.replicas.values()
        )

    @cached_property
    def wants_kubeshare(self) -> bool:
        """Asks for fractional GPUs: a pod with a share, or DRAGON's job annotation."""
        flag = str(self.annotations.get(KUBESHARE_ANNOTATION, "")).lower() == "true"
        return flag or self.gpu_share is not None

    @property
    def worker(self) -> Replica | None:
        return self.replicas.get(WORKER)

    def required(self) -> list[Replica]:
        """Replica types that belong to every gang: PS, Chief/Master, Evaluator."""
        return [r for t, r in self.replicas.items() if t in self.kind.required_types]


def _canonical_type(kind: JobKind, key: str) -> str:
    for t in kind.replica_types:
        if t.lower() == key.lower():
            return t
    raise InvalidJob(
        f"spec.{kind.replica_specs_field} has unknown replica type {key!r}; "
        f"expected one of {', '.join(kind.replica_types)}"
    )


def _format_validation_error(err: ValidationError, prefix: str) -> str:
    problems = []
    for e in err.errors():
        path = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        problems.append(f"{path}: {e['msg']}")
    return "; ".join(problems)


@lru_cache(maxsize=4096)
def _interned(shape: HashedTuple) -> HashedTuple:
    """The first equal shape seen: jobs of one shape then share one object, which a cycle's
    look-ups compare by identity instead of item by item."""
    return shape


def constraints_key(pod_spec: Mapping[str, Any]) -> bytes:
    """What the filter phase reads of a pod spec (node selector, affinity, tolerations),
    as a hashable key."""
    return orjson.dumps(
        [pod_spec.get("nodeSelector"), pod_spec.get("affinity"), pod_spec.get("tolerations")],
        option=orjson.OPT_SORT_KEYS,
    )


def _unreadable_quantity(pod_spec: Mapping[str, Any]) -> str:
    """Where in a pod spec the first quantity ``to_milli`` cannot read is ("" if none is
    found there), so that the Failed condition names the field."""
    _unreadable = (TypeError, ValueError, ArithmeticError, AttributeError)
    for group in ("containers", "initContainers"):
        for i, c in enumerate(pod_spec.get(group) or []):
            res = c.get("resources") if isinstance(c, Mapping) else None
            for part in ("requests", "limits"):
                values = res.get(part) if isinstance(res, Mapping) else None
                for name, v in values.items() if isinstance(values, Mapping) else ():
                    try:
                        to_milli(v)
                    except _unreadable:
                        return f".{group}[{i}].resources.{part}[{name!r}]"
    return ".overhead" if pod_spec.get("overhead") else ""


def _replica(kind: JobKind, rtype: str, spec: ReplicaSpecModel) -> Replica:
    try:
        content: bytes | None = orjson.dumps(spec.template)
    except TypeError:  # no JSON (an integer beyond 64 bits): analysed without the cache
        content = None
    got = _analysed(kind, rtype, content) if content is not None else None
    if got is None:
        got = _analysis(kind, rtype, spec.template)
    if isinstance(got, InvalidJob):
        raise InvalidJob(str(got))
    request, port, share = got
    return Replica(
        type=rtype,
        replicas=spec.replicas,
        restart_policy=spec.restartPolicy or kind.default_restart_policy,
        template=MappingProxyType(spec.template),
        request=request,
        port=port,
        gpu_share=share,
    )


@lru_cache(maxsize=512)
def _analysed(
    kind: JobKind, rtype: str, content: bytes
) -> tuple[Resources, int, GpuShare | None] | InvalidJob | None:
    """``_analysis`` once per template content: the jobs of one team or sweep share their
    templates, and a cold pool sync of 1,000 waiting jobs spent a fifth of its time here
    (issue 36). The same answer as without the cache (the content is the template); None
    for content nested deeper than the decoder reads (analysed without the cache)."""
    try:
        template = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return _analysis(kind, rtype, template)


def _analysis(
    kind: JobKind, rtype: str, template: Mapping[str, Any]
) -> tuple[Resources, int, GpuShare | None] | InvalidJob:
    """What a replica's pods are, from its template alone (request, port, fractional GPU),
    or why the template cannot run (returned: a cache keeps either)."""
    try:
        return _analyse(kind, rtype, template)
    except InvalidJob as err:
        return InvalidJob(str(err))  # (without its traceback, which holds the template)


def _analyse(
    kind: JobKind, rtype: str, template: Mapping[str, Any]
) -> tuple[Resources, int, GpuShare | None]:
    where = f"spec.{kind.replica_specs_field}.{rtype}.template"
    try:
        PodTemplate.model_validate(template)
    except ValidationError as err:
        raise InvalidJob(_format_validation_error(err, where)) from err
    # Everything else a pod made from it holds, as the API server would check it.
    problem = check_template(template)
    if problem is not None:
        raise InvalidJob(f"{where}.{problem}")
    where += ".spec"
    pod_spec = template["spec"]
    containers = pod_spec["containers"]
    for i, c in enumerate(containers):
        if not c.get("image"):
            raise InvalidJob(f"{where}.containers[{i}] ({c['name']}) has no image")
    main = [c for c in containers if c.get("name") == kind.container]
    if not main:
        names = ", ".join(repr(c.get("name")) for c in containers)
        raise InvalidJob(
            f"{where} has no container named {kind.container!r} (found {names}); "
            f"Dragonet injects the cluster spec into that container"
        )
    _refuse_kubeshare(template, f"spec.{kind.replica_specs_field}.{rtype}.template")
    share = _gpu_share(template, f"spec.{kind.replica_specs_field}.{rtype}.template.")
    port = kind.default_port
    added = (port,)  # the pod Dragonet renders lists the task's port (policy.job.render)
    for p in main[0].get("ports") or []:
        if p.get("name") == kind.port_name:
            port = p["containerPort"]
            added = ()
    try:
        request = pod_request(pod_spec)
        if ports := host_ports(pod_spec, added):
            request = request + ports
    except (TypeError, ValueError, ArithmeticError, AttributeError) as err:
        at = _unreadable_quantity(pod_spec)
        raise InvalidJob(f"{where}{at} has an unreadable resource quantity: {err}") from err
    if share is not None:
        if request[GPU]:
            raise InvalidJob(
                f"{where} asks for whole GPUs ({GPU}) and a fraction of one (KubeShare); "
                "ask for one or the other"
            )
        request = request + Resources(share.vector())
    return request, port, share


def _gpu_share(template: Mapping[str, Any], where: str) -> GpuShare | None:
    meta = template.get("metadata") or {}
    try:
        return share_of(meta.get("annotations") or {}, meta.get("labels") or {}, where)
    except BadShare as err:
        raise InvalidJob(str(err)) from err


def _refuse_kubeshare(template: Mapping[str, Any], where: str) -> None:
    """``kubeshare/*`` container resources are nothing any scheduler gives: running the pod
    would silently give it no GPU."""
    for i, c in enumerate((template.get("spec") or {}).get("containers") or []):
        for part in ("limits", "requests"):
            for name in (c.get("resources") or {}).get(part) or {}:
                if str(name).startswith(KUBESHARE_PREFIX):
                    at = f"{where}.spec.containers[{i}].resources.{part}[{name!r}]"
                    raise InvalidJob(f"{at}: {NO_KUBESHARE_RESOURCE}")


def template_schedulers(job: Job) -> tuple[str, ...]:
    """The schedulerNames the job's pod templates give, in replica order, once each."""
    names = ((r.template.get("spec") or {}).get("schedulerName") for r in job.replicas.values())
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def parse_metadata(obj: Mapping[str, Any]) -> MetadataModel:
    """Metadata is part of the request's shape: failing here is a malformed request
    (``ValueError`` naming the field)."""
    try:
        return MetadataModel.model_validate(obj.get("metadata"))
    except ValidationError as err:
        raise ValueError(_format_validation_error(err, "metadata")) from None


def checkpoint_interval(annotations: Mapping[str, str]) -> float | None:
    """The declared checkpoint interval, or None; raises ``InvalidJob`` naming the
    annotation for a value that is not a positive number of seconds within the bound."""
    raw = annotations.get(CHECKPOINT_ANNOTATION)
    if raw is None:
        return None
    where = f"metadata.annotations[{CHECKPOINT_ANNOTATION!r}]"
    what = "the seconds between the job's checkpoints (at most 100 years)"
    try:
        return number(raw, where, what=what, most=MAX_SECONDS, example="600")
    except OutOfBounds as err:
        raise InvalidJob(str(err)) from None


def parsed_job(obj: Mapping[str, Any], kind: JobKind, memo: Memo) -> Job | InvalidJob:
    """``job_or_why``, once per content of the object (``memo``)."""
    return memo.parsed("job:" + kind.kind, obj, partial(job_or_why, kind=kind))


def _queue(policy: SchedulingPolicyModel | None) -> str | None:
    """The pool a scheduling policy asks for (``policy.model.pool.pool_of``, read from the
    validated spec: Kubeflow's ``runPolicy`` first, then DRAGON's top-level layout)."""
    return policy.queue if policy is not None and policy.queue else None


def job_or_why(obj: Mapping[str, Any], kind: JobKind) -> Job | InvalidJob:
    """The job, or what makes it invalid (returned, not raised: a memo keeps either)."""
    try:
        return parse_job(obj, kind)
    except InvalidJob as err:
        return err


def parse_job(obj: Mapping[str, Any], kind: JobKind) -> Job:
    """Parse and validate; raise ``InvalidJob`` with a message that names the problem."""
    meta = parse_metadata(obj)
    if not _DNS1035.match(meta.name) or len(meta.name) > 63:
        raise InvalidJob(
            f"metadata.name {meta.name!r} must be a DNS-1035 label (lower-case letters, "
            f"digits and '-', starting with a letter)"
        )
    checkpoint = checkpoint_interval(meta.annotations)
    try:
        batch_range = declared(meta.annotations)
    except OutOfBounds as err:
        raise InvalidJob(str(err)) from None
    raw_spec = obj.get("spec")
    if not isinstance(raw_spec, dict):
        raise InvalidJob("spec is missing")
    problems = []
    specs_field = kind.replica_specs_field
    try:
        raw_replicas = raw_spec[specs_field]
        replica_specs = _REPLICA_SPECS.validate_python(raw_replicas)
    except KeyError:
        problems.append(f"spec.{specs_field}: Field required")
    except ValidationError as err:
        problems.append(_format_validation_error(err, f"spec.{specs_field}"))
    try:
        spec = JobSpecModel.model_validate(raw_spec)
    except ValidationError as err:
        problems.append(_format_validation_error(err, "spec"))
    try:
        extension = kind.extension.model_validate(raw_spec)
    except ValidationError as err:
        problems.append(_format_validation_error(err, "spec"))
    if problems:
        raise InvalidJob("; ".join(problems))
    run = spec.runPolicy or RunPolicyModel()
    owner = run.managedBy or spec.managedBy
    if owner not in (None, "", TRAINING_OPERATOR, MULTIKUEUE, DRAGONET):
        where = "spec.runPolicy.managedBy" if run.managedBy else "spec.managedBy"
        raise InvalidJob(
            f"{where} {owner!r} is not supported: {TRAINING_OPERATOR!r} (or none) or "
            f"{DRAGONET!r} for Dragonet to run the job, or {MULTIKUEUE!r} for MultiKueue to"
        )

    replicas: dict[str, Replica] = {}
    for key, rspec in replica_specs.items():
        rtype = _canonical_type(kind, key)
        if rtype in replicas:
            raise InvalidJob(f"spec.{kind.replica_specs_field} lists {rtype} twice")
        if rspec is None:
            raise InvalidJob(f"spec.{kind.replica_specs_field}.{key} is empty")
        replicas[rtype] = _replica(kind, rtype, rspec)
    if not replicas:
        raise InvalidJob(f"spec.{kind.replica_specs_field} defines no replicas")
    replicas = {t: replicas[t] for t in kind.replica_types if t in replicas}
    shares = {r.gpu_share for r in replicas.values() if r.gpu_share is not None}
    if len(shares) > 1:
        raise InvalidJob(
            f"spec.{kind.replica_specs_field}: every replica type with a fractional GPU must "
            "ask for the same kubeshare/gpu_request, gpu_limit and gpu_mem (Dragonet accounts "
            "a job's fractional pods as one shape)"
        )

    chiefs = [t for t in kind.chief_types if t in replicas]
    if len(chiefs) > 1:
        raise InvalidJob(f"spec.{kind.replica_specs_field} may define Chief or Master, not both")
    for t in chiefs:
        if replicas[t].replicas > 1:
            raise InvalidJob(f"{t}.replicas is {replicas[t].replicas}; a job has one {t}")
    _check_mode(kind, spec, replicas)
    extension.check(kind, replicas)
    if sum(r.replicas for r in replicas.values()) == 0:
        raise InvalidJob("the job asks for 0 replicas in total")
    longest = max(len(f"{meta.name}-{t.lower()}-{max(r.replicas, 1)}") for t, r in replicas.items())
    if longest > 63:
        raise InvalidJob(
            f"metadata.name {meta.name!r} is too long: pod and service names "
            f"'<name>-<type>-<index>' must stay within 63 characters"
        )

    worker = replicas.get(WORKER)
    n = worker.replicas if worker else 0
    _check_elastic(kind, spec)
    low, high = extension.worker_bounds(kind, spec.min_instances, spec.max_instances)
    elastic = high is not None or low is not None
    if elastic and worker is None:
        raise InvalidJob("max-instances/min-instances are set but the job has no Worker replicas")
    max_w = high if high is not None else max(n, low or 0)
    min_w = low if low is not None else min(n, max_w)
    if min_w > max_w:
        raise InvalidJob(f"min-instances ({min_w}) is greater than max-instances ({max_w})")
    if max_w == 0 and not chiefs and (kind.chief_types or worker is not None):
        # Kubeflow decides such a job's success by its workers (a TFJob with no Chief or
        # Master, an MXTrain MXJob): with none, it never trains and never succeeds; refused
        # here so the webhook, render and the simulator all say so instead of waiting for
        # ever. (An MXTune job has no Worker type: its tuners decide.)
        raise InvalidJob(
            f"spec.{kind.replica_specs_field}.Worker.replicas: the job has no Worker to run"
            + (" and no Chief or Master" if kind.chief_types else "")
            + "; nothing would train and it would never succeed (give it workers)"
        )
    if worker and not min_w <= n <= max_w:
        raise InvalidJob(
            f"Worker.replicas ({n}) must lie between min-instances ({min_w}) "
            f"and max-instances ({max_w})"
        )

    def pick(name: str) -> Any:
        value = getattr(run, name)
        return value if value is not None else getattr(spec, name)

    tensorboard, tb_request = _tensorboard(kind, meta.name, meta.annotations)
    policy = run.schedulingPolicy or spec.schedulingPolicy
    _check_min_resources(policy, "spec.runPolicy" if run.schedulingPolicy else "spec")
    named = policy.priorityClass if policy else None
    for r in replicas.values():
        named = named or (r.template.get("spec") or {}).get("priorityClassName")

    return Job(
        kind=kind,
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        generation=meta.generation,
        created=meta.creationTimestamp,
        labels=MappingProxyType(dict(meta.labels)),
        annotations=MappingProxyType(dict(meta.annotations)),
        replicas=MappingProxyType(replicas),
        min_workers=min_w,
        max_workers=max_w,
        elastic=elastic,
        dynamic_workers=spec.enableDynamicWorker and kind.elastic,
        success_policy=spec.successPolicy,
        clean_pod_policy=pick("cleanPodPolicy") or "None",
        active_deadline_seconds=pick("activeDeadlineSeconds"),
        backoff_limit=pick("backoffLimit"),
        suspend=run.suspend or spec.suspend,
        managed_elsewhere=_elsewhere(owner, meta.labels),
        deleting=meta.deletionTimestamp is not None,
        priority_class=named if isinstance(named, str) and named else None,
        pool=_queue(run.schedulingPolicy) or _queue(spec.schedulingPolicy) or DEFAULT_POOL,
        scheduling_policy=policy,
        node_preference=spec.node_preference or None,
        checkpoint_interval=checkpoint,
        status=readable_status(obj.get("status"), kind),
        spec_content=_content(raw_spec),
        tensorboard=tensorboard,
        tensorboard_request=tb_request,
        extension=extension,
        batch_range=batch_range,
    )


def _check_min_resources(policy: SchedulingPolicyModel | None, where: str) -> None:
    """minResources goes into a PodGroup verbatim: each value must be a quantity."""
    for name, value in ((policy.minResources or {}) if policy else {}).items():
        try:
            to_milli(value)
        except (ValueError, ArithmeticError):
            raise InvalidJob(
                f"{where}.schedulingPolicy.minResources[{name!r}]: {value!r} is not a quantity"
            ) from None


def _tensorboard(
    kind: JobKind, name: str, annotations: Mapping[str, str]
) -> tuple[TensorBoard | None, Resources | None]:
    """The job's TensorBoard, if it asks for one; refused out loud where it cannot run."""
    raw = annotations.get(TENSORBOARD_ANNOTATION)
    if raw is None:
        return None, None
    where = f"metadata.annotations[{TENSORBOARD_ANNOTATION!r}]"
    if not kind.tensorboard:
        raise InvalidJob(f"{where}: TensorBoard is supported on TFJobs only, not {kind.kind}s")
    try:
        tb = parse_tensorboard(raw)
    except ValueError as err:
        raise InvalidJob(f"{where}: {err}") from err
    problem = check_template({"spec": tb.pod_spec()})
    if problem is not None:  # e.g. a volume's source of the wrong type
        raise InvalidJob(f"{where}: its pod's {problem}")
    try:
        request = pod_request(tb.pod_spec())
    except (TypeError, ValueError, ArithmeticError, AttributeError) as err:
        raise InvalidJob(f"{where}: resources: unreadable quantity: {err}") from err
    if len(f"{name}-{TENSORBOARD_LABEL}") > 63:
        raise InvalidJob(
            f"metadata.name {name!r} is too long for a TensorBoard: its Deployment and "
            f"Service '<name>-{TENSORBOARD_LABEL}' must stay within 63 characters"
        )
    return tb, request


def _check_mode(kind: JobKind, spec: JobSpecModel, replicas: Mapping[str, Replica]) -> None:
    """A kind with job modes: the mode is known, it has every type it needs and no other;
    and a singleton type it has holds exactly one pod (any kind)."""
    where = f"spec.{kind.replica_specs_field}"
    if kind.modes:
        modes = dict(kind.modes)
        mode = spec.jobMode or kind.modes[0][0]
        if mode not in modes:
            raise InvalidJob(
                f"spec.{kind.mode_field} {mode!r} is not supported: {' or '.join(modes)}"
            )
        needs = modes[mode]
        foreign = [t for t in replicas if t not in needs]
        if foreign:
            owner = next((m for m, types in kind.modes if foreign[0] in types), None)
            raise InvalidJob(
                f"{where}.{foreign[0]} belongs to {kind.mode_field} {owner or 'none'}, not "
                f"{mode} ({mode} has {', '.join(needs)})"
            )
        missing = [t for t in needs if t not in replicas]
        if missing:
            raise InvalidJob(
                f"{where} has no {' and no '.join(missing)}: {kind.mode_field} {mode} needs "
                f"{', '.join(needs)}"
            )
    for t in kind.singletons:
        if t in replicas and replicas[t].replicas != 1:
            raise InvalidJob(
                f"{where}.{t}.replicas is {replicas[t].replicas}; the job needs exactly one {t}"
            )


def _check_elastic(kind: JobKind, spec: JobSpecModel) -> None:
    if kind.elastic:
        return
    given = [
        f"spec.{name}"
        for name, value in (
            ("min-instances", spec.min_instances),
            ("max-instances", spec.max_instances),
        )
        if value is not None
    ]
    if given:
        raise InvalidJob(
            f"{' and '.join(given)}: {kind.kind}s are not elastic (ps-lite fixes the number "
            f"of workers when the job starts), so it runs Worker.replicas workers; remove "
            f"{'them' if len(given) > 1 else 'it'}"
        )


def readable_status(raw: Any, kind: JobKind) -> Mapping[str, Any]:
    """The job's status with every field Dragonet reads of the right type, and the rest as
    its CRD accepts it (what the job's sync writes back). The status is Dragonet's own
    memory, but anyone allowed to write it can break it; what cannot be read is treated as
    never written (the job's sync writes it anew), so a broken status costs that job its
    memory, never anyone else their plan, and is never echoed into a status write the API
    server would refuse."""
    if not isinstance(raw, Mapping):
        return MappingProxyType({})
    conditions = raw.get("conditions")
    if conditions is not None:
        # Before the CRD's pruning: a condition with one unreadable field is written anew
        # whole, not kept with that field pruned away (its message would be lost).
        conditions = [
            c for c in (conditions if isinstance(conditions, list) else ()) if _readable(c)
        ]
        raw = {**raw, "conditions": conditions}
    raw = writable_status(kind.kind, raw)
    status = {k: v for k, v in raw.items() if k not in _STATUS_TIMES or _is_time(v)}
    for key in ("scheduling", "replicaStatuses"):
        if key in status and not isinstance(status[key], Mapping):
            del status[key]
    workers = (status.get("scheduling") or {}).get("workers")
    if workers is not None and not (
        isinstance(workers, Mapping) and _is_count(workers.get("target"))
    ):
        status["scheduling"] = {k: v for k, v in status["scheduling"].items() if k != "workers"}
    return MappingProxyType(status)


def _readable(condition: Any) -> bool:
    """Kubeflow's JobCondition holds only strings: anything else (a message nested 300
    deep) is not echoed back."""
    return (
        isinstance(condition, Mapping)
        and isinstance(condition.get("type"), str)
        and isinstance(condition.get("status"), str)
        and all(isinstance(v, str) for v in condition.values())
        and all(
            _is_time(condition[k])
            for k in ("lastTransitionTime", "lastUpdateTime")
            if k in condition
        )
    )


def _is_time(value: Any) -> bool:
    return isinstance(value, str) and parse_time(value) is not None


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_REPLICAS


def managed_elsewhere(spec: Mapping[str, Any], labels: Any = None) -> bool:
    """MultiKueue runs this job, or (labelled ``COEXIST_LABEL``, so on a cluster where
    Kubeflow runs the jobs not marked for Dragonet) Kubeflow does: read from the raw spec and
    labels so that their job is left alone whatever else it holds, as Kubeflow's controller
    leaves one whose ``managedBy`` is not its own."""
    run = spec.get("runPolicy")
    owner = (run.get("managedBy") if isinstance(run, Mapping) else None) or spec.get("managedBy")
    return _elsewhere(owner, labels if isinstance(labels, Mapping) else {})


def _elsewhere(owner: Any, labels: Mapping[str, Any]) -> bool:
    if owner == MULTIKUEUE:
        return True
    marked = labels.get(COEXIST_LABEL) == COEXIST_LABEL_VALUE
    return marked and owner in (None, "", TRAINING_OPERATOR)


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's labels as given, or none when its metadata does not hold a map of them."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _content(spec: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)
    except TypeError as err:  # e.g. an integer beyond 64 bits: no API server stores one
        raise InvalidJob(f"spec holds a value Kubernetes cannot store: {err}") from err


def child_name(job: Job, rtype: str, index: int) -> str:
    """Kubeflow's pod and service name: ``{job}-{lower-case type}-{index}``."""
    return replica_name(job.name, rtype, index)


def replica_name(job_name: str, rtype: str, index: int) -> str:
    """``child_name`` from the job's name alone."""
    return f"{job_name}-{rtype.lower()}-{index}"
