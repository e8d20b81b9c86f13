"""A fake ``monitor.kube.Cluster`` (there is no API server here) and pods shaped as the
API serves them, for the monitor's tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.config import MonitorSettings
from monitor.kube import AlreadyExists, ApiError, PodInfo
from monitor.service import Clock, Monitor

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
AUDIENCE = "dragonet-monitor"


def token_for(
    name: str, namespace: str = "team-a", uid: str | None = None, audience: str = AUDIENCE
) -> str:
    """A pod-bound projected ServiceAccount token, as ``FakeCluster.review_token`` reads it:
    the pod (by default with ``pod()``'s uid) and the audience it was issued for."""
    return "|".join(("pod", namespace, name, uid or f"uid-{namespace}-{name}", audience))


def bearer(name: str, namespace: str = "team-a", **kw: Any) -> dict[str, str]:
    """The header a pod sends with its report."""
    return {"Authorization": f"Bearer {token_for(name, namespace, **kw)}"}


def pod(
    name: str,
    node: str = "node-1",
    namespace: str = "team-a",
    job: str = "job1",
    rtype: str = "worker",
    cpu: str = "500m",
    memory: str = "1Gi",
    limits_only: bool = False,
) -> dict[str, Any]:
    """A Pod as Dragonet renders it and the API serves it back (uid, nodeName)."""
    resources = {"limits": {"cpu": cpu, "memory": memory}}
    if not limits_only:
        resources["requests"] = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": {
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/operator-name": "dragonet",
                "training.kubeflow.org/replica-type": rtype,
                "training.kubeflow.org/replica-index": "0",
            },
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "tensorflow",
                    "image": "tensorflow/tensorflow:1.15.0-py3",
                    "resources": resources,
                }
            ],
        },
    }


def allocation(node: str, cpu: str, memory: str, alloc_cpu="4", alloc_mem="16Gi") -> dict:
    return {
        "name": node,
        "allocatable": {"cpu": alloc_cpu, "memory": alloc_mem, "nvidia.com/gpu": "0"},
        "allocated": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": "0"},
    }


@dataclass
class FakeCluster:
    pods: list[dict[str, Any]] = field(default_factory=list)
    pool: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] | None = None
    migrations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    down: bool = False  # every call fails as if the API were unreachable
    calls: list[str] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)  # bodies as sent
    jobs: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # kind,ns,name
    patches: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    now: datetime = T0
    reviews: list[tuple[str, str]] = field(default_factory=list)  # (token, audience)

    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        """As the API server reviews a token: a ``token_for`` token is valid for its own
        audience and names its pod; anything else is not a token."""
        self.reviews.append((token, audience))
        if self.down:
            raise ApiError("ConnectionRefusedError: the API is down")
        parts = token.split("|")
        if len(parts) != 5 or parts[0] != "pod":
            return {"authenticated": False, "error": "invalid bearer token"}
        _, namespace, name, uid, issued_for = parts
        if issued_for != audience:
            return {
                "authenticated": False,
                "error": f"token audiences [{issued_for!r}] is invalid for the target "
                f"audiences [{audience!r}]",
            }
        return {
            "authenticated": True,
            "audiences": [audience],
            "user": {
                "username": f"system:serviceaccount:{namespace}:default",
                "extra": {
                    "authentication.kubernetes.io/pod-name": [name],
                    "authentication.kubernetes.io/pod-uid": [uid],
                },
            },
        }

    def _check(self, call: str) -> None:
        self.calls.append(call)
        if self.down:
            raise ApiError("ConnectionRefusedError: the API is down")

    def pods_named(self, name: str, node: str, namespace: str | None) -> list[PodInfo]:
        self._check("list_pods")
        return [
            PodInfo.from_pod(p)
            for p in self.pods
            if p["metadata"]["name"] == name
            and p["spec"]["nodeName"] == node
            and namespace in (None, p["metadata"]["namespace"])
        ]

    def pool_status(self, pool: str) -> Mapping[str, Any]:
        self._check("get_pool")
        if pool not in self.pool:
            raise ApiError(f'404 trainingpools.dragonet.io "{pool}" not found')
        return self.pool[pool]

    def node_metrics(self) -> list[Mapping[str, Any]] | None:
        self._check("node_metrics")
        return copy.deepcopy(self.metrics)

    def create_migration(self, body: Mapping[str, Any]) -> None:
        self._check("create_migration")
        self.created.append(copy.deepcopy(dict(body)))
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        if key in self.migrations:
            raise AlreadyExists("Conflict")
        stored = copy.deepcopy(dict(body))
        stored["metadata"]["uid"] = f"mig-{len(self.calls)}"
        stored["metadata"]["creationTimestamp"] = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        self.migrations[key] = stored

    def get_migration(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self._check("get_migration")
        return copy.deepcopy(self.migrations.get((namespace, name)))

    def delete_migration(self, namespace: str, name: str, uid: str) -> None:
        self._check("delete_migration")
        found = self.migrations.get((namespace, name))
        if found is not None and found["metadata"]["uid"] == uid:
            del self.migrations[(namespace, name)]

    def job_pods(self, namespace: str, job: str) -> list[Mapping[str, Any]]:
        self._check("list_job_pods")
        return [
            copy.deepcopy(p)
            for p in self.pods
            if p["metadata"]["namespace"] == namespace
            and p["metadata"]["labels"].get("training.kubeflow.org/job-name") == job
        ]

    def get_job(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        self._check("get_job")
        return copy.deepcopy(self.jobs.get((kind, namespace, name)))

    def annotate_job(self, kind: str, namespace: str, name: str, key: str, value: str) -> None:
        self._check("annotate_job")
        self.patches.append((kind, namespace, name, key, value))
        job = self.jobs.setdefault((kind, namespace, name), {"metadata": {"name": name}})
        job["metadata"].setdefault("annotations", {})[key] = value


@dataclass
class FakeClock:
    t: float = 1000.0
    cluster: FakeCluster | None = None

    def advance(self, seconds: float) -> None:
        self.t += seconds
        if self.cluster is not None:
            self.cluster.now += timedelta(seconds=seconds)

    def clock(self) -> Clock:
        return Clock(
            monotonic=lambda: self.t,
            wall=lambda: self.cluster.now if self.cluster else T0,
        )


def make_monitor(cluster: FakeCluster, node: str = "node-1", **settings: Any):
    ticks = FakeClock(cluster=cluster)
    config = MonitorSettings(node_name=node, **settings)
    return Monitor(cluster, config, clock=ticks.clock()), ticks
