"""The PyTorchJob kind: Kubeflow's PyTorchJob (``kubeflow.org/v1``, ``pytorchReplicaSpecs``),
a Master and Workers running ``torch.distributed`` (or ``torchrun``), elastic under
``spec.elasticPolicy``. Everything PyTorchJob-specific in Dragonet is here: its replica
types, each pod's environment, its ``elasticPolicy`` mapped onto Dragonet's worker bounds,
and its success rule.

References, kubeflow/training-operator v1.9.0 (commit 6f74c7f6b2ed):

* ``pkg/apis/kubeflow.org/v1/pytorch_types.go:22-44``: container ``pytorch``, port
  ``pytorchjob-port`` 23456, types Master and Worker; ``:74-135``: ``nprocPerNode`` and
  ``ElasticPolicy``; ``:142-151``: rendezvous backends (c10d the default).
* ``pytorch_defaults.go:38-55`` (``setElasticPolicy``: a missing bound takes the other's
  value, both missing take ``Worker.replicas``), ``:68-74`` (``nprocPerNode`` defaults to
  ``auto`` unless the deprecated ``elasticPolicy.nProcPerNode`` is given), ``:88``
  (replicas restart ``OnFailure`` by default).
* ``pkg/controller.v1/pytorch/envvar.go:43-127`` (``setPodEnv``: every container gets
  ``PYTHONUNBUFFERED``, with a Master ``MASTER_*``, ``WORLD_SIZE``, ``RANK`` and
  ``PET_NODE_RANK``, then ``PET_NPROC_PER_NODE``, then the elastic variables or
  ``PET_NNODES``), ``:132-148`` (``WORLD_SIZE`` is all replicas times ``nprocPerNode``, 1
  when that is not a number); ``master.go:33-62`` (``MASTER_ADDR`` is the Master's Service
  name, ``MASTER_PORT`` its port); ``elastic.go:68-197`` (``PET_RDZV_ENDPOINT`` worker 0 at
  the Worker's port unless ``rdzvHost``/``rdzvPort``, ``PET_RDZV_BACKEND``, ``PET_NNODES``
  ``min:max``, then the optional ``PET_MAX_RESTARTS``, ``PET_NPROC_PER_NODE``,
  ``PET_RDZV_ID``, ``PET_RDZV_CONF``, ``PET_STANDALONE``).
* ``pytorchjob_controller.go:383-426``: with a Master, the job succeeds when it does;
  without, when every worker has, or with an ``elasticPolicy`` when any one has;
  ``:499-506``: the Master (else worker 0) carries the master role.
* ``pkg/webhooks/pytorch/pytorchjob_webhook.go:93-161``: a Worker is required with an
  ``elasticPolicy``; ``elasticPolicy.nProcPerNode`` may not be given with ``nprocPerNode``;
  the Master has exactly one replica.

Not carried over: Kubeflow's ``init-pytorch`` init container (``initcontainer.go:105-136``,
an ``nslookup`` loop on the Master's name, from an image of the operator's configuration):
Dragonet admits a gang whole, and ``torch.distributed`` retries its connection to the
Master. ``elasticPolicy.metrics`` (an HPA that Kubeflow creates, ``hpa.go``) is refused:
Dragonet itself grows and shrinks an elastic job's workers between the bounds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from policy.model.bounds import MAX_INT32, MAX_REPLICAS
from policy.model.cluster import Pod
from policy.model.jobs import WORKER, InvalidJob, Job, JobKind, KindSpec, Replica, child_name
from policy.model.kinds.pods import append_env
from policy.model.lifecycle import all_succeeded, succeeded_pod

MASTER = "Master"
C10D = "c10d"  # elastic.go:186-196: the rendezvous backend when elasticPolicy names none
_GO_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi reads


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RdzvConf(_Wire):
    key: str = ""
    value: str = ""


class ElasticPolicy(_Wire):
    """``spec.elasticPolicy`` (pytorch_types.go:98-135)."""

    minReplicas: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    maxReplicas: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    rdzvBackend: Literal["c10d", "etcd", "etcd-v2"] | None = None
    rdzvPort: int | None = Field(default=None, ge=1, le=65535)
    rdzvHost: str | None = None
    rdzvId: str | None = None
    rdzvConf: tuple[RdzvConf, ...] | None = None
    standalone: bool | None = None
    nProcPerNode: int | None = Field(default=None, ge=1, le=MAX_INT32)  # deprecated in v1.7
    maxRestarts: int | None = Field(default=None, ge=0, le=MAX_INT32)
    metrics: tuple[Any, ...] | None = None  # refused (see the module's docstring)


class PyTorchSpec(KindSpec):
    """A PyTorchJob's own spec fields."""

    elasticPolicy: ElasticPolicy | None = None
    nprocPerNode: str | None = Field(default=None, max_length=63)
    min_field: ClassVar[str] = "elasticPolicy.minReplicas"

    @property
    def scalable(self) -> bool:
        """Only torchrun's rendezvous lets workers come and go: without an elasticPolicy,
        WORLD_SIZE is fixed when the pods start."""
        return self.elasticPolicy is not None

    def worker_bounds(
        self, kind: JobKind, min_instances: int | None, max_instances: int | None
    ) -> tuple[int | None, int | None]:
        """``elasticPolicy.minReplicas/maxReplicas`` as Dragonet's worker bounds, with
        Kubeflow's defaults (a missing bound takes the other's value). DRAGON's
        ``min-instances``/``max-instances`` may say the same, never something else, and
        only beside an elasticPolicy."""
        policy = self.elasticPolicy
        given = [
            f"spec.{name}"
            for name, value in (("min-instances", min_instances), ("max-instances", max_instances))
            if value is not None
        ]
        if policy is None:
            if given:
                raise InvalidJob(
                    f"{' and '.join(given)}: a PyTorchJob's workers come and go only under "
                    "spec.elasticPolicy (torchrun's rendezvous; without it WORLD_SIZE is fixed "
                    "when the job starts): set spec.elasticPolicy.minReplicas and maxReplicas "
                    "instead"
                )
            return None, None
        for ours, theirs, field in (
            (min_instances, policy.minReplicas, "minReplicas"),
            (max_instances, policy.maxReplicas, "maxReplicas"),
        ):
            if ours is not None and theirs is not None and ours != theirs:
                dragon = "min-instances" if field == "minReplicas" else "max-instances"
                raise InvalidJob(
                    f"spec.{dragon} ({ours}) and spec.elasticPolicy.{field} ({theirs}) "
                    "disagree: give the bound once (elasticPolicy is Kubeflow's field)"
                )
        low = policy.minReplicas if policy.minReplicas is not None else min_instances
        high = policy.maxReplicas if policy.maxReplicas is not None else max_instances
        if low is None and high is not None:  # pytorch_defaults.go:43-45
            low = high
        elif high is None and low is not None:  # :46-47
            high = low
        if low is not None and high is not None and low > high:
            raise InvalidJob(
                f"spec.elasticPolicy.minReplicas ({low}) is greater than maxReplicas ({high})"
            )
        return low, high

    def check(self, kind: JobKind, replicas: Mapping[str, Replica]) -> None:
        """What Kubeflow's admission webhook refuses, and what Dragonet cannot honour."""
        policy = self.elasticPolicy
        if policy is None:
            return
        if WORKER not in replicas:
            raise InvalidJob(
                f"spec.{kind.replica_specs_field}.Worker: must be given with spec.elasticPolicy "
                "(torchrun's rendezvous runs on the workers)"
            )
        if policy.nProcPerNode is not None and self.nprocPerNode is not None:
            raise InvalidJob(
                "spec.elasticPolicy.nProcPerNode: must not be used with spec.nprocPerNode "
                "(it is deprecated: keep spec.nprocPerNode)"
            )
        if policy.metrics is not None:
            raise InvalidJob(
                "spec.elasticPolicy.metrics: not supported: Dragonet grows and shrinks the "
                "workers itself, between minReplicas and maxReplicas, by what they attain "
                "(no HorizontalPodAutoscaler); remove it"
            )


def _spec(job: Job) -> PyTorchSpec:
    ext = job.extension
    return ext if isinstance(ext, PyTorchSpec) else PyTorchSpec()


def _nproc_per_node(spec: PyTorchSpec) -> str | None:
    """``spec.nprocPerNode`` as Kubeflow defaults it (pytorch_defaults.go:68-74)."""
    if spec.nprocPerNode is not None:
        return spec.nprocPerNode
    policy = spec.elasticPolicy
    return "auto" if policy is None or policy.nProcPerNode is None else None


def _as_int(text: str | None) -> int:
    """envvar.go:132-140: ``nprocPerNode`` as a number, 1 when it is not one (``auto``)."""
    if text is None or not _GO_INT.fullmatch(text) or abs(int(text)) >= 2**63:
        return 1
    return int(text)


def pytorch_env(job: Job, rtype: str, index: int) -> list[dict[str, str]]:
    """The variables Kubeflow appends to every container of the pod, in its order."""
    spec = _spec(job)
    total = sum(r.replicas for r in job.replicas.values())  # envvar.go:142-148
    nproc = _nproc_per_node(spec)
    env = [("PYTHONUNBUFFERED", "1")]
    master = job.replicas.get(MASTER)
    if master is not None:
        rank = index + 1 if rtype == WORKER else index
        address = child_name(job, MASTER, 0)
        env += [
            ("MASTER_PORT", str(master.port)),
            ("PET_MASTER_PORT", str(master.port)),
            ("MASTER_ADDR", address),
            ("PET_MASTER_ADDR", address),
            ("WORLD_SIZE", str(total * _as_int(nproc))),
            ("RANK", str(rank)),
            ("PET_NODE_RANK", str(rank)),
        ]
    if nproc is not None:
        env.append(("PET_NPROC_PER_NODE", nproc))
    policy = spec.elasticPolicy
    if policy is None:
        env.append(("PET_NNODES", str(total)))
        return [{"name": k, "value": v} for k, v in env]
    worker = job.replicas[WORKER]  # PyTorchSpec.check: an elasticPolicy has workers
    host = policy.rdzvHost if policy.rdzvHost is not None else child_name(job, WORKER, 0)
    port = policy.rdzvPort if policy.rdzvPort is not None else worker.port
    env += [
        ("PET_RDZV_ENDPOINT", f"{host}:{port}"),
        ("PET_RDZV_BACKEND", policy.rdzvBackend or C10D),
        ("PET_NNODES", f"{job.min_workers}:{job.max_workers}"),
    ]
    if policy.maxRestarts is not None:
        env.append(("PET_MAX_RESTARTS", str(policy.maxRestarts)))
    if policy.nProcPerNode is not None:
        env.append(("PET_NPROC_PER_NODE", str(policy.nProcPerNode)))
    if policy.rdzvId is not None:
        env.append(("PET_RDZV_ID", policy.rdzvId))
    if policy.rdzvConf:  # (Go slices an empty list's text out of range: taken as none)
        env.append(("PET_RDZV_CONF", ",".join(f"{c.key}={c.value}" for c in policy.rdzvConf)))
    if policy.standalone:
        env.append(("PET_STANDALONE", ""))
    return [{"name": k, "value": v} for k, v in env]


def set_pytorch_env(
    pod_spec: dict[str, Any], job: Job, rtype: str, index: int, domain: str
) -> None:
    """``pytorch_env`` appended to every container (addresses are bare Service names, as
    Kubeflow writes them: the domain is not used)."""
    append_env(pod_spec, pytorch_env(job, rtype, index))


def pytorch_succeeded(job: Job, pods: Sequence[Pod]) -> bool:
    """pytorchjob_controller.go:383-426: the Master succeeded; without one, every worker
    did, or (with an elasticPolicy: torchrun ends the group together) any one worker."""
    if MASTER in job.replicas:
        return succeeded_pod(job, pods, MASTER, 0)
    if job.worker is None:
        return False
    if _spec(job).elasticPolicy is not None:
        return any(p.replica_type == "worker" and p.phase == "Succeeded" for p in pods)
    return all_succeeded(job, pods, WORKER)


PYTORCHJOB = JobKind(
    kind="PyTorchJob",
    api_version="kubeflow.org/v1",
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=(MASTER, WORKER),
    chief_types=(MASTER,),
    required_types=(MASTER,),
    container="pytorch",
    port_name="pytorchjob-port",
    default_port=23456,
    configure_pod=set_pytorch_env,
    succeeded=pytorch_succeeded,
    singletons=(MASTER,),
    default_restart_policy="OnFailure",
    extension=PyTorchSpec,
)
