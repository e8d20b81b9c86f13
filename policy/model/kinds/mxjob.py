"""The MXJob kind: Kubeflow's MXJob (training-operator v1.7
``pkg/apis/kubeflow.org/v1/mxnet_types.go``): ps-lite's scheduler, servers and workers
(MXTrain), or TVM's auto-tuning (MXTune). Not elastic. What is MXJob's own: its replica types
and modes, each pod's environment, byte for byte as Kubeflow's MXNet controller writes it,
and its success rule.

Reference: kubeflow/training-operator v1.7.0, ``pkg/controller.v1/mxnet/mxnet.go``
(``SetPodEnv``, ``genMXConfig``, ``genClusterSpec``, ``genLabelsSpec``, ``addBytePSEnv``):
every container gets ``MX_CONFIG`` and ps-lite's ``DMLC_*`` variables, in this order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from policy.model.cluster import Pod
from policy.model.jobs import WORKER, Job, JobKind, child_name
from policy.model.kinds.pods import append_env
from policy.model.lifecycle import all_succeeded

MX_CONFIG = "MX_CONFIG"
# TVM's auto-tuning: a replica template's annotation, copied into MX_CONFIG's labels.
TUNER_SERVER_KEY = "tuner-server-key"
SCHEDULER, SERVER = "Scheduler", "Server"


def _go_json(value: Any) -> str:
    """Go's ``json.Marshal``: compact, UTF-8 as is, but ``<``, ``>``, ``&``, U+2028 and
    U+2029 escaped (struct fields keep their order; callers sort map keys)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(ch, esc)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def mx_config(job: Job, rtype: str, index: int) -> str:
    """``{"cluster": {type: [{url, port}]}, "labels": {type: key}, "task": {type, index}}``;
    urls are the bare Service names (no namespace), map keys sorted as Go sorts them."""
    types = sorted(job.replicas.values(), key=lambda r: r.type.lower())
    cluster = {
        r.type.lower(): [
            {"url": child_name(job, r.type, i), "port": r.port} for i in range(job.size(r.type))
        ]
        for r in types
    }
    labels = {
        r.type.lower(): ((r.template.get("metadata") or {}).get("annotations") or {}).get(
            TUNER_SERVER_KEY, ""
        )
        for r in types
    }
    task = {"type": rtype.lower(), "index": index}
    return _go_json({"cluster": cluster, "labels": labels, "task": task})


def mx_env(job: Job, rtype: str, index: int) -> list[dict[str, str]]:
    """The variables appended to every container of the pod."""
    scheduler = job.replicas.get(SCHEDULER)
    has_root = scheduler is not None and scheduler.replicas > 0
    server, worker = job.replicas.get(SERVER), job.replicas.get(WORKER)
    env = {
        MX_CONFIG: mx_config(job, rtype, index),
        "DMLC_PS_ROOT_PORT": str(scheduler.port if has_root else 0),
        "DMLC_PS_ROOT_URI": child_name(job, SCHEDULER, 0) if has_root else "",
        "DMLC_NUM_SERVER": str(server.replicas if server else 0),
        "DMLC_NUM_WORKER": str(worker.replicas if worker else 0),
        "DMLC_ROLE": rtype.lower(),
        "DMLC_USE_KUBERNETES": "1",
    }
    if rtype == WORKER:  # BytePS reads it
        env["DMLC_WORKER_ID"] = str(index)
    return [{"name": k, "value": v} for k, v in env.items()]


def set_mx_env(pod_spec: dict[str, Any], job: Job, rtype: str, index: int, domain: str) -> None:
    """``mx_env`` appended to every container of the pod (the domain is not used: MX_CONFIG
    lists bare Service names)."""
    append_env(pod_spec, mx_env(job, rtype, index))


# Kubeflow ends the job when its Scheduler succeeds (ps-lite's scheduler exits once every
# worker and server has finalized); all workers done ends it too, and a tuning job ends with
# its Tuner.
DECISIVE = ("Scheduler", "Worker", "Tuner")


def mx_succeeded(job: Job, pods: Sequence[Pod]) -> bool:
    """Every pod of any one decisive type (Scheduler, Worker, Tuner) has succeeded."""
    return any(all_succeeded(job, pods, t) for t in DECISIVE)


MXJOB = JobKind(
    kind="MXJob",
    api_version="kubeflow.org/v1",
    replica_specs_field="mxReplicaSpecs",
    replica_types=("Scheduler", "Server", "Worker", "Tuner", "TunerTracker", "TunerServer"),
    chief_types=(),
    required_types=("Scheduler", "Server", "Tuner", "TunerTracker", "TunerServer"),
    container="mxnet",
    port_name="mxjob-port",
    default_port=9091,
    configure_pod=set_mx_env,
    succeeded=mx_succeeded,
    elastic=False,
    decisive_types=DECISIVE,  # and their running pods make the job Running
    master_role_type="Server",  # Kubeflow's IsMasterRole for MXJobs
    mode_field="jobMode",
    modes=(
        ("MXTrain", ("Scheduler", "Server", "Worker")),
        ("MXTune", ("Tuner", "TunerTracker", "TunerServer")),
    ),
    singletons=("Scheduler",),
)
