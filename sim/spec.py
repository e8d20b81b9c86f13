"""What the simulator runs: training jobs as TFJob manifests plus how fast they train.

The manifest is the real TFJob object the simulated user creates; everything the scheduler
may know comes from it. ``steps`` and ``profile`` are the simulated truth of the training
program, hidden from every policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

IMAGE = "tensorflow/tensorflow:1.15.5"
MX_IMAGE = "mxjob/mxnet:gpu"
PYTORCH_IMAGE = "kubeflow/pytorch-dist-mnist:latest"


class ScenarioError(ValueError):
    """A scenario, manifest or trace the simulator cannot use. Here, not in ``sim.scenario``
    (which loads the simulator), so that ``dragonet simulate`` refuses a file at once."""


@dataclass(frozen=True)
class TrainingProfile:
    """Throughput of an asynchronous parameter-server job (constants: docs/simulator.md).

    A worker that runs on a node holding one of the job's parameter servers does one step
    every ``step_time_s / efficiency``; elsewhere it runs at ``remote_factor`` of that.
    ``efficiency = 1 / (1 + contention * (workers - 1) / ps)`` models the PS fan-in. A
    worker contributes only ``restore_s`` after it started running (checkpoint restore).
    """

    name: str = "default"
    step_time_s: float = 1.0
    remote_factor: float = 0.65
    contention: float = 0.05
    restore_s: float = 30.0
    # Training at the CPU its pods get (a user's manifests, container-migration's speed
    # scenarios): a CPU worker runs at the share of its cap its node's CFS gives it
    # (sim/cpu.py); a GPU worker at its GPUs' pace.
    cpu_bound: bool = False
    # The program saves its state when stopped (AdaptDL does on SIGTERM): losing its
    # parameter servers costs the restore, never progress.
    saves_on_stop: bool = False
    # An all-reduce job (Pollux's, as its simulator models them): any change to its set of
    # running workers restarts every worker, which trains again only ``restore_s`` later.
    # False (a parameter-server job): only a new worker waits; the others keep training.
    restarts_whole: bool = False

    def efficiency(self, workers: int, ps: int) -> float:
        return 1.0 / (1.0 + self.contention * max(workers - 1, 0) / max(ps, 1))

    def rate_of(self, shares: list[tuple[bool, float]], ps: int) -> float:
        """Global steps per second of workers given as (next to a PS, CPU share)."""
        if not shares:
            return 0.0
        total = sum((1.0 if near else self.remote_factor) * share for near, share in shares)
        return self.efficiency(len(shares), ps) * total / self.step_time_s

    def rate_on(self, placement: Sequence[int], local: int, remote: int, ps: int) -> float:
        """Global steps per second of workers placed ``placement`` (workers per node),
        ``local`` of them on a PS node and ``remote`` not; this model needs only the split
        (``sim.pollux_model.PolluxProfile`` times the placement itself)."""
        return self.rate(local, remote, ps)

    def rate(self, local: int, remote: int, ps: int) -> float:
        """Global steps per second with ``local`` workers on a PS node and ``remote`` not."""
        n = local + remote
        if n == 0:
            return 0.0
        return self.efficiency(n, ps) * (local + self.remote_factor * remote) / self.step_time_s


@dataclass(frozen=True)
class JobSpec:
    """One job of a scenario or trace: created at ``arrival_s`` (seconds after the start)."""

    manifest: Mapping[str, Any]
    arrival_s: float = 0.0
    steps: float = 1000.0
    profile: TrainingProfile = field(default_factory=TrainingProfile)
    # The job's run time in the source trace at its requested size (None: not from a trace).
    trace_duration_s: float | None = None

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.manifest["metadata"].get("namespace") or "default"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _container(resources: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": "tensorflow",
        "image": IMAGE,
        "ports": [{"name": "tfjob-port", "containerPort": 2222}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
    }


def tfjob_manifest(
    name: str,
    *,
    workers: int,
    ps: int | None = None,
    min_workers: int | None = None,
    max_workers: int | None = None,
    worker_resources: Mapping[str, Any] | None = None,
    ps_resources: Mapping[str, Any] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A DRAGON-style TFJob: ``ps`` parameter servers (default ceil(workers/4)) and workers.

    ``min_workers``/``max_workers`` become DRAGON's ``min-instances``/``max-instances``.
    """
    ps = ps if ps is not None else max(1, math.ceil(workers / 4))
    worker_resources = worker_resources or {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    ps_resources = ps_resources or {"cpu": "2", "memory": "8Gi"}
    worker: dict[str, Any] = {
        "replicas": workers,
        "restartPolicy": "OnFailure",
        "template": {"spec": {"containers": [_container(worker_resources)]}},
    }
    replica_specs: dict[str, Any] = {"Worker": worker}
    if ps:
        replica_specs = {
            "PS": {
                "replicas": ps,
                "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [_container(ps_resources)]}},
            },
            **replica_specs,
        }
    spec: dict[str, Any] = {}
    if max_workers is not None:
        spec["max-instances"] = max_workers
    if min_workers is not None:
        spec["min-instances"] = min_workers
    spec["tfReplicaSpecs"] = replica_specs
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def as_mxjob(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The MXJob (MXTrain) with a TFJob's shape: its parameter servers become servers, the
    same workers, plus a scheduler sized like a server. MXJobs are not elastic: the workers
    are ``Worker.replicas``, whatever ``min-instances``/``max-instances`` the TFJob had."""
    tf = manifest["spec"]["tfReplicaSpecs"]
    worker, ps = tf["Worker"], tf.get("PS")

    def mx(replica: Mapping[str, Any], n: int) -> dict[str, Any]:
        (container,) = replica["template"]["spec"]["containers"]
        resources = container["resources"]["requests"]
        main = {**_container(resources), "name": "mxnet", "image": MX_IMAGE}
        main["ports"] = [{"name": "mxjob-port", "containerPort": 9091}]
        return {
            "replicas": n,
            "restartPolicy": replica.get("restartPolicy", "OnFailure"),
            "template": {"spec": {"containers": [main]}},
        }

    servers = ps or worker
    specs = {
        "Scheduler": mx(servers, 1),
        "Server": mx(servers, ps["replicas"] if ps else 1),
        "Worker": mx(worker, worker["replicas"]),
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": dict(manifest["metadata"]),
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": specs},
    }


def as_pytorchjob(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The PyTorchJob with a TFJob's shape: all-reduce needs no parameter servers. An
    elastic TFJob (DRAGON's ``min-instances``/``max-instances``) becomes torchrun workers
    under an ``elasticPolicy`` with the same bounds; a fixed one, a Master (rank 0) and the
    other workers, each sized like a worker."""
    tf = manifest["spec"]["tfReplicaSpecs"]
    worker = tf["Worker"]
    (container,) = worker["template"]["spec"]["containers"]
    main = {**_container(container["resources"]["requests"]), "name": "pytorch"}
    main["image"] = PYTORCH_IMAGE
    main["ports"] = [{"name": "pytorchjob-port", "containerPort": 23456}]

    def replica(n: int) -> dict[str, Any]:
        policy = worker.get("restartPolicy", "OnFailure")
        return {
            "replicas": n,
            "restartPolicy": policy,
            "template": {"spec": {"containers": [main]}},
        }

    spec = manifest["spec"]
    n = worker["replicas"]
    low, high = spec.get("min-instances"), spec.get("max-instances")
    body: dict[str, Any]
    if low is not None or high is not None:
        bounds = {"minReplicas": low or min(n, high), "maxReplicas": high or max(n, low)}
        body = {"elasticPolicy": bounds, "pytorchReplicaSpecs": {"Worker": replica(n)}}
    else:
        specs = {"Master": replica(1), **({"Worker": replica(n - 1)} if n > 1 else {})}
        body = {"pytorchReplicaSpecs": specs}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": dict(manifest["metadata"]),
        "spec": body,
    }
