"""Kubeflow's training-operator v1.9, as far as a cluster it shares with Dragonet sees it
(docs/kubeflow.md cites each rule), running in the simulator beside Dragonet:

* it reconciles a TFJob only if ``runPolicy.managedBy`` is absent or its own
  (``ManagedByExternalController``, pkg/controller.v1/common/job.go:459; the skip in
  pkg/controller.v1/tensorflow/tfjob_controller.go:130);
* it creates every pod of the job at once, unpinned (the kube-scheduler places them),
  labelled ``training.kubeflow.org/operator-name: tfjob-controller`` and ``job-name``
  (``GenLabels``), with the job as controller (``GenOwnerReference``);
* it lists pods by those labels and claims only the ones it owns or orphans that match
  them (``GetPodsForJob``): a pod another controller owns is never one of its pods;
* it writes the job's status: Created, Running, then Succeeded once every worker has.

It records every object it writes, so a test can tell its writes from anyone else's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.model.jobs import TRAINING_OPERATOR
from sim.apiserver import Obj, object_key, stamp
from sim.engine import Simulation

TFJOBS = "TFJob.kubeflow.org/v1"
PODS = "Pod.v1"
OPERATOR = "tfjob-controller"
L_OPERATOR = "training.kubeflow.org/operator-name"
L_JOB = "training.kubeflow.org/job-name"
# What Kubeflow 1.9's TFJob CRD declares (manifests/base/crds/kubeflow.org_tfjobs.yaml): the
# API server prunes every other field of a TFJob it stores.
SPEC_FIELDS = frozenset({"enableDynamicWorker", "runPolicy", "successPolicy", "tfReplicaSpecs"})
STATUS_FIELDS = frozenset(
    {"completionTime", "conditions", "lastReconcileTime", "replicaStatuses", "startTime"}
)


def runs(job: Mapping[str, Any]) -> bool:
    """Kubeflow's rule: a job whose managedBy is another controller's is skipped."""
    run = job.get("spec", {}).get("runPolicy") or {}
    return run.get("managedBy") in (None, "", TRAINING_OPERATOR)


def pruned(obj: dict[str, Any]) -> dict[str, Any]:
    """A TFJob as an API server with Kubeflow's CRD stores it (structural pruning)."""
    if obj.get("kind") != "TFJob":
        return obj
    out = dict(obj)
    if isinstance(obj.get("spec"), Mapping):
        out["spec"] = {k: v for k, v in obj["spec"].items() if k in SPEC_FIELDS}
    if isinstance(obj.get("status"), Mapping):
        out["status"] = {k: v for k, v in obj["status"].items() if k in STATUS_FIELDS}
    return out


def with_kubeflow_crd(sim: Simulation) -> None:
    """The simulated API server stores TFJobs under Kubeflow's CRD instead of Dragonet's."""
    dress = sim.api.dress
    sim.api.dress = lambda old, new: dress(old, pruned(new)) if dress else pruned(new)


@dataclass
class FakeKubeflow:
    sim: Simulation
    run_s: float = 300.0  # how long each of its pods runs before it exits 0
    reconciled: list[str] = field(default_factory=list)  # job keys it reconciled
    skipped: list[str] = field(default_factory=list)  # job keys it skipped (managedBy)
    # (type key, object key, resourceVersion) of every object version it wrote
    wrote: set[tuple[str, str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.sim.api.watchers.append(self._on_change)

    def _write(self, tkey: str, obj: Obj | None) -> None:
        if obj is not None:
            self.wrote.add((tkey, object_key(obj), obj["metadata"]["resourceVersion"]))

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == TFJOBS and old is None and new is not None:
            key = object_key(new)
            if runs(new):
                self.sim.schedule(0.0, lambda: self._start(key))
            else:
                self.skipped.append(key)
        elif tkey == PODS and new is not None and self._mine(new) is not None:
            phase = (new.get("status") or {}).get("phase")
            was = (old.get("status") or {}).get("phase") if old else None
            if phase == "Running" and was != "Running":
                key = object_key(new)
                self.sim.schedule(self.run_s, lambda: self.sim.kube.exit(key, 0))
            if phase != was:
                job = self._mine(new)
                self.sim.schedule(0.0, lambda: self._status(job))

    def _mine(self, pod: Obj) -> str | None:
        """The key of the job whose pod this is, by Kubeflow's own claim: its labels and a
        controller reference to a job it runs."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        if labels.get(L_OPERATOR) != OPERATOR:
            return None
        key = f"{meta['namespace']}/{labels.get(L_JOB)}"
        job = self.sim.api.get(TFJOBS, key)
        owners = [r for r in meta.get("ownerReferences") or () if r.get("controller")]
        if job is None or not owners or owners[0]["uid"] != job["metadata"]["uid"]:
            return None
        return key

    def _start(self, key: str) -> None:
        job = self.sim.api.get(TFJOBS, key)
        if job is None:
            return
        self.reconciled.append(key)
        meta = job["metadata"]
        owner = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        for rtype, rspec in job["spec"]["tfReplicaSpecs"].items():
            for index in range(int(rspec.get("replicas", 1))):
                template = rspec["template"]
                labels = {
                    **((template.get("metadata") or {}).get("labels") or {}),
                    L_OPERATOR: OPERATOR,
                    L_JOB: meta["name"],
                    "training.kubeflow.org/replica-type": rtype.lower(),
                    "training.kubeflow.org/replica-index": str(index),
                }
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{meta['name']}-{rtype.lower()}-{index}",
                        "namespace": meta["namespace"],
                        "labels": labels,
                        "ownerReferences": [owner],
                    },
                    "spec": {**template["spec"], "restartPolicy": "Never"},
                }
                self._write(PODS, self.sim.api.create(pod))
        self._status(key)

    def _status(self, key: str) -> None:
        job = self.sim.api.get(TFJOBS, key)
        if job is None:
            return
        pods = [
            p
            for p in self.sim.api.list(PODS)
            if self._mine(p) == key
            and p["metadata"]["labels"].get(L_JOB) == job["metadata"]["name"]
        ]
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        now = stamp(self.sim.now)
        conditions = list((job.get("status") or {}).get("conditions") or [])
        types = {c["type"] for c in conditions}

        def add(ctype: str, reason: str) -> None:
            if ctype not in types:
                conditions.append(
                    {"type": ctype, "status": "True", "reason": reason, "lastTransitionTime": now}
                )

        add("Created", "TFJobCreated")
        if phases and all(p in ("Running", "Succeeded") for p in phases):
            add("Running", "TFJobRunning")
        status: dict[str, Any] = {**(job.get("status") or {}), "conditions": conditions}
        status.setdefault("startTime", now)
        if phases and all(p == "Succeeded" for p in phases):
            add("Succeeded", "TFJobSucceeded")
            status["completionTime"] = now
        if status != job.get("status"):
            self._write(TFJOBS, self.sim.api.patch(TFJOBS, key, status=status))
