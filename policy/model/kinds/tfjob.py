"""The TFJob kind: Kubeflow's TFJob (``kubeflow.org/v1``, ``tfReplicaSpecs``), with DRAGON's
elastic workers. What is TFJob's own: its replica types, each pod's ``TF_CONFIG``, byte for
byte as Kubeflow's TensorFlow controller writes it (compact JSON, cluster keys sorted), and
its success rule. The rest of a pod is the same for every kind (``policy.job.render``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from policy.model.cluster import Pod
from policy.model.jobs import WORKER, Job, JobKind, Replica, child_name, replica_name
from policy.model.kinds.pods import main_container
from policy.model.lifecycle import succeeded_pod, workers_done

TF_CONFIG = "TF_CONFIG"


def set_tf_config(pod_spec: dict[str, Any], job: Job, rtype: str, index: int, domain: str) -> None:
    """Give the main container its ``TF_CONFIG`` (replacing the template's own), unless the
    job is a single pod (Kubeflow writes none then)."""
    if not is_distributed(job):
        return
    container = main_container(pod_spec, job)
    env = [e for e in container.get("env") or [] if e.get("name") != TF_CONFIG]
    env.append({"name": TF_CONFIG, "value": tf_config(job, rtype, index, domain)})
    container["env"] = env


def _address(job: Job, replica: Replica, index: int, domain: str) -> str:
    host = f"{child_name(job, replica.type, index)}.{job.namespace}.svc"
    return f"{host}.{domain}:{replica.port}" if domain else f"{host}:{replica.port}"


def cluster_size(job: Job, replica: Replica) -> int:
    """Addresses listed for a type: every pod the job may have. DRAGON lists
    ``max-instances`` workers from the start, so adding or removing a worker never changes
    a running pod's TF_CONFIG."""
    return job.size(replica.type)


def is_distributed(job: Job) -> bool:
    return sum(cluster_size(job, r) for r in job.replicas.values()) != 1


def tf_config(job: Job, rtype: str, index: int, domain: str = "") -> str:
    """TF_CONFIG, byte for byte as the Go operator writes it (compact, cluster keys sorted)."""
    replica = job.replicas[rtype]
    task = {"type": replica.type.lower(), "index": index}
    if job.dynamic_workers:
        ps = job.replicas.get("PS")
        ps_all = [_address(job, ps, i, domain) for i in range(ps.replicas)] if ps else []
        if rtype == WORKER:
            cluster: dict[str, Any] = {
                "worker": {str(index): _address(job, replica, index, domain)},
                "ps": ps_all,
            }
        elif rtype == "PS":
            cluster = {"worker": {}, "ps": [_address(job, replica, index, domain)]}
        else:
            cluster = {"worker": {}, "ps": []}
        body: dict[str, Any] = {"cluster": cluster, "task": task}
        return json.dumps(body, separators=(",", ":"))
    # {"cluster": ..., "task": ..., "environment": "cloud"}, compact: the same cluster for
    # every pod of the job, written once.
    shape = tuple((r.type, r.port, cluster_size(job, r)) for r in job.replicas.values())
    return (
        f'{{"cluster":{dense_cluster(job.namespace, job.name, domain, shape)},"task":'
        f'{json.dumps(task, separators=(",", ":"))},"environment":"cloud"}}'
    )


@lru_cache(maxsize=4096)
def dense_cluster(
    namespace: str, name: str, domain: str, shape: tuple[tuple[str, int, int], ...]
) -> str:
    """Every address of every type (``shape``: each type's name, port and count; lists
    sorted by type), as compact JSON. A pure function of plain values, cached: it lists
    every pod of the job, for each of them, and a job's sync renders its pods again and
    again (the cache changes no answer, only how soon it is made)."""
    suffix = f".{domain}" if domain else ""
    cluster = {
        rtype.lower(): [
            f"{replica_name(name, rtype, i)}.{namespace}.svc{suffix}:{port}" for i in range(size)
        ]
        for rtype, port, size in sorted(shape, key=lambda t: t[0].lower())
    }
    return json.dumps(cluster, separators=(",", ":"))


def tf_succeeded(job: Job, pods: Sequence[Pod]) -> bool:
    """Kubeflow's TFJob rule: the Chief or Master succeeded; without one, every worker did,
    or (unless ``successPolicy: AllWorkers``) worker 0 exited 0."""
    chief = job.chief_type
    if chief:
        return succeeded_pod(job, pods, chief, 0)
    if job.worker is None:
        return False
    if job.success_policy == "AllWorkers":
        return workers_done(job, pods)
    return workers_done(job, pods) or succeeded_pod(job, pods, WORKER, 0, exit_zero=True)


TFJOB = JobKind(
    kind="TFJob",
    api_version="kubeflow.org/v1",
    replica_specs_field="tfReplicaSpecs",
    replica_types=("Chief", "Evaluator", "Master", "PS", "Worker"),
    chief_types=("Chief", "Master"),
    required_types=("Chief", "Master", "PS", "Evaluator"),
    container="tensorflow",
    port_name="tfjob-port",
    default_port=2222,
    configure_pod=set_tf_config,
    succeeded=tf_succeeded,
    tensorboard=True,
)
