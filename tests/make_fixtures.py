"""Writes tests/fixtures/*.json: hook requests exactly as Metacontroller sends them.

Run ``python -m tests.make_fixtures`` after changing a scenario; the JSON is committed so a
reader can see the exact wire format each test feeds the webhook: the pool's sync
(``pool-sync-*``: parent a TrainingPool, related the cluster, children its Admissions) and a
job's sync (``job-sync-*``: parent a TFJob or an MXJob, related its Admission).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests import metacontroller as mc

OUT = Path(__file__).parent / "fixtures"
JOB1 = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers, 4 cpu / 8Gi each (limits only), min 1, max 4


def mxjob(name: str, created: str) -> dict:
    """An MXJob (MXTrain): 1 scheduler, 2 servers, 3 workers, 2 cpu / 4Gi each."""

    def replica(n: int) -> dict:
        container = {
            "name": "mxnet",
            "image": "mxjob/mxnet:cpu",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
        }
        return {"replicas": n, "template": {"spec": {"containers": [container]}}}

    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Scheduler": replica(1),
                "Server": replica(2),
                "Worker": replica(3),
            },
        },
    }
    return mc.tfjob(manifest, created=created)


# gang-tfjob.yaml's pods select gpu=1060g1 (Kubeflow's kube-batch guide).
GANG = "gang-tfjob.yaml"
GANG_SCHEDULER_NAMES = {
    "kube-batch": "kube-batch",
    "volcano": "volcano",
    "coscheduling": "scheduler-plugins-scheduler",
}


def gang_scenarios() -> dict[str, dict]:
    """A pool that delegates binding to a gang scheduler, and the job sync of its
    Admission for each backend (the job controller then owns that backend's PodGroups)."""
    nodes = [mc.node(f"gpu-{i}", cpu="8", gpu=1, labels={"gpu": "1060g1"}) for i in (1, 2)]
    job = mc.tfjob(GANG, namespace="kubeflow")
    out = {
        "pool-sync-gang-tfjob-kube-batch.json": mc.pool_request(
            mc.world(job, nodes), parent=mc.pool(gangScheduler="kube-batch")
        )
    }
    for backend, name in GANG_SCHEDULER_NAMES.items():
        # The same job as written for a pool of that backend: it names no scheduler itself
        # (kube-batch's pool runs the manifest unchanged).
        own = job if backend == "kube-batch" else _unnamed(job)
        admitted = mc.admission(
            own, [("PS", 0, "gpu-1"), ("Worker", 0, "gpu-1")], workers=1, gang=(backend, name)
        )
        out[f"job-sync-gang-tfjob-{backend}.json"] = mc.job_request(
            mc.world(own, nodes), admitted, gang=[backend]
        )
    return out


def _unnamed(job: dict) -> dict:
    """``job`` without the schedulerName and group annotation its templates give."""
    out = copy.deepcopy(job)
    for replica in out["spec"]["tfReplicaSpecs"].values():
        del replica["template"]["spec"]["schedulerName"]
        del replica["template"]["metadata"]
    return out


def scenarios() -> dict[str, dict]:
    big = [mc.node("big-1", cpu="24", memory="64Gi"), mc.node("small-1"), mc.node("small-2")]
    job1 = mc.tfjob(JOB1)
    # Three 12-cpu nodes: the 20-cpu job cannot sit on one, so it spills.
    spill = [mc.node(f"node-{i}", cpu="12", memory="32Gi") for i in (1, 2, 3)]
    # Nodes with 2 cpu: not even the parameter server and one worker fit.
    tiny = [mc.node(f"tiny-{i}", cpu="2", memory="8Gi") for i in (1, 2)]
    # One node, two jobs: only one of them fits; job-a was created first.
    one = [mc.node("only-1", cpu="24", memory="64Gi")]
    job_a = mc.tfjob(JOB1, name="job-a", created="2026-11-21T09:00:00Z")
    job_b = mc.tfjob(JOB1, name="job-b", created="2026-11-21T09:00:05Z")
    # What the pool decides for job1 on big-1 (written out here, not by the code under test).
    slots = [("PS", 0), *(("Worker", i) for i in range(4))]
    admitted = mc.admission(job1, [(t, i, "big-1") for t, i in slots], workers=4)
    # One 16-cpu node, an MXJob (12 cpu) and job1 (at least 8 cpu: its PS and min-instances
    # 1 worker): only one fits; the MXJob is older.
    mx_node = [mc.node("only-1", cpu="16", memory="64Gi")]
    mx = mxjob("mx", created="2026-11-21T09:00:00Z")
    job1_later = mc.tfjob(JOB1, created="2026-11-21T09:00:05Z")
    mx_slots = [("Scheduler", 0), ("Server", 0), ("Server", 1), *(("Worker", i) for i in range(3))]
    mx_admitted = mc.admission(mx, [(t, i, "only-1") for t, i in mx_slots], workers=3)
    # job1 with a TensorBoard: the pool places it beside the PS on big-1 (20 of 24 cpu are
    # the gang's); the job renders it where its Admission says.
    boarded = mc.with_tensorboard(job1)
    board = ("TensorBoard", 0, "big-1")
    tb_admitted = mc.admission(boarded, [*((t, i, "big-1") for t, i in slots), board], workers=4)
    return {
        "pool-sync-job1-tensorboard.json": mc.pool_request(mc.world(boarded, big)),
        "job-sync-job1-tensorboard.json": mc.job_request(mc.world(boarded, big), tb_admitted),
        "pool-sync-mxjob-and-tfjob.json": mc.pool_request(
            mc.world(mx, mx_node, jobs=[job1_later, mx])
        ),
        "job-sync-mxjob-admitted.json": mc.job_request(mc.world(mx, mx_node), mx_admitted),
        "pool-sync-job1-one-big-node.json": mc.pool_request(mc.world(job1, big)),
        "pool-sync-job1-spill.json": mc.pool_request(mc.world(job1, spill)),
        "pool-sync-job1-cannot-fit.json": mc.pool_request(mc.world(job1, tiny)),
        # Related maps arrive in no particular order: job-b is listed first.
        "pool-sync-two-jobs.json": mc.pool_request(mc.world(job_a, one, jobs=[job_b, job_a])),
        "job-sync-job1-admitted.json": mc.job_request(mc.world(job1, big), admitted),
        **gang_scenarios(),
    }


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    for name, request in scenarios().items():
        (OUT / name).write_text(json.dumps(request, indent=1, sort_keys=True) + "\n")
        print("wrote", OUT / name)


if __name__ == "__main__":
    main()
