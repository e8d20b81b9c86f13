"""What the monitor needs of the Kubernetes API, behind one small interface (``Cluster``),
so the tests use a fake and the service uses the official client (``KubeCluster``).

Every call the real one makes is one the chart's ClusterRole grants, and nothing more:
create TokenReviews (who is reporting, monitor/auth.py), list pods (to find a reporting
pod on this node, and a reporting job's pods), get the pool, list node metrics, create,
get and delete Migrations, and get and patch TFJobs and MXJobs (the throughput history
annotation, docs/speedup.md; the chart's ValidatingAdmissionPolicy lets that patch change
nothing else).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from monitor.imbalance import RESOURCES, amount
from policy.model.cluster import L_JOB, L_TYPE
from policy.model.kinds import KINDS
from policy.model.migration import request_object
from webhooks.kubeapi import AlreadyExists, Api, ApiError  # noqa: F401 - the monitor's errors

GROUP, VERSION = "dragonet.io", "v1alpha1"
JOB_GROUP, JOB_VERSION = "kubeflow.org", "v1"
JOB_PLURALS = {k.kind: k.plural for k in KINDS}  # the kinds whose speed is kept
MIGRATIONS, POOLS = "migrations", "trainingpools"
WORKER = "worker"  # the lower-case replica-type label of a TFJob's workers


@dataclass(frozen=True)
class PodInfo:
    """What the monitor keeps of a reporting pod: who it is (for the request's owner
    reference and labels), where it runs, and its weight (cpu and memory it requests)."""

    name: str
    namespace: str
    uid: str
    node: str
    labels: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, float] = field(default_factory=dict)
    owner: tuple[str, str] | None = None  # its controller's (kind, name): its job
    ip: str = ""  # status.podIP ("" before it has one)

    @property
    def is_worker(self) -> bool:
        return self.labels.get(L_TYPE) == WORKER

    @property
    def job(self) -> str | None:
        return self.labels.get(L_JOB)

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodInfo:
        """From a Pod as the API serves it (a dict); a pod's weight is the sum over its
        containers of requests, or limits where a container gives only limits."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        totals = dict.fromkeys(RESOURCES, 0.0)
        for c in spec.get("containers") or []:
            res = c.get("resources") or {}
            requests, limits = res.get("requests") or {}, res.get("limits") or {}
            for r in RESOURCES:
                given = requests.get(r, limits.get(r))
                if given is not None:
                    totals[r] += amount(given)
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if isinstance(v, str)}
        owner = next(
            (
                (str(o.get("kind")), str(o.get("name")))
                for o in meta.get("ownerReferences") or ()
                if isinstance(o, Mapping) and o.get("controller")
            ),
            None,
        )
        return cls(
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta.get("uid", ""),
            node=spec.get("nodeName") or "",
            labels=labels,
            requests=totals,
            owner=owner,
            ip=str((pod.get("status") or {}).get("podIP") or ""),
        )


class Cluster(Protocol):
    def pods_named(self, name: str, node: str, namespace: str | None) -> list[PodInfo]:
        """Pods of that name on that node (in that namespace, if given)."""

    def pool_status(self, pool: str) -> Mapping[str, Any]:
        """The TrainingPool's status."""

    def node_metrics(self) -> list[Mapping[str, Any]] | None:
        """metrics.k8s.io NodeMetrics items; None when no metrics API is served."""

    def create_migration(self, body: Mapping[str, Any]) -> None:
        """Create a Migration; AlreadyExists on 409."""

    def get_migration(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The Migration, or None if there is none."""

    def delete_migration(self, namespace: str, name: str, uid: str) -> None:
        """Delete that Migration if it is still the one with ``uid``."""

    def job_pods(self, namespace: str, job: str) -> list[Mapping[str, Any]]:
        """The job's pods (by its job-name label), as the API serves them."""

    def get_job(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The TFJob or MXJob, or None if there is none."""

    def annotate_job(self, kind: str, namespace: str, name: str, key: str, value: str) -> None:
        """Set one annotation of the job (a merge patch of its metadata)."""

    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        """The ``status`` of a TokenReview of ``token`` for ``audience``."""


def migration(pod: PodInfo, reason: str, requested_by: str) -> dict[str, Any]:
    """The request, as the contract shared with the pool fixes it (one builder for both
    sides: ``policy.model.migration.request_object``): named after the pod, owned by it
    (it goes when the pod goes), labelled with its job so the pool selects it."""
    as_stored = {
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
        },
        "spec": {"nodeName": pod.node},
    }
    return request_object(as_stored, reason, requested_by)


class KubeCluster:
    """``Cluster`` through the official client, in-cluster config (or kubeconfig)."""

    def __init__(self, timeout_seconds: float = 5.0) -> None:
        api = Api(timeout_seconds)
        self._core, self._custom, self._call = api.core, api.custom, api.call
        self._options = api.delete_options
        self._models = api.models
        self._authn = api.models.AuthenticationV1Api(api.client)

    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        m = self._models
        body = m.V1TokenReview(
            api_version="authentication.k8s.io/v1",
            kind="TokenReview",
            spec=m.V1TokenReviewSpec(token=token, audiences=[audience]),
        )
        review = self._call(self._authn.create_token_review, body)
        return self._core.api_client.sanitize_for_serialization(review).get("status") or {}

    def pods_named(self, name: str, node: str, namespace: str | None) -> list[PodInfo]:
        selector = f"metadata.name={name},spec.nodeName={node}"
        if namespace is None:
            found = self._call(self._core.list_pod_for_all_namespaces, field_selector=selector)
        else:
            found = self._call(self._core.list_namespaced_pod, namespace, field_selector=selector)
        api = self._core.api_client
        return [PodInfo.from_pod(api.sanitize_for_serialization(p)) for p in found.items]

    def pool_status(self, pool: str) -> Mapping[str, Any]:
        obj = self._call(self._custom.get_cluster_custom_object, GROUP, VERSION, POOLS, pool)
        return obj.get("status") or {}

    def node_metrics(self) -> list[Mapping[str, Any]] | None:
        try:
            found = self._call(
                self._custom.list_cluster_custom_object, "metrics.k8s.io", "v1beta1", "nodes"
            )
        except ApiError as err:
            if err.status == 404:
                return None  # no metrics-server: requests alone
            raise
        return list(found.get("items") or [])

    def create_migration(self, body: Mapping[str, Any]) -> None:
        namespace = body["metadata"]["namespace"]
        self._call(
            self._custom.create_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            MIGRATIONS,
            dict(body),
        )

    def get_migration(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return self._call(
                self._custom.get_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                MIGRATIONS,
                name,
            )
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def delete_migration(self, namespace: str, name: str, uid: str) -> None:
        options = self._options(uid)
        try:
            self._call(
                self._custom.delete_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                MIGRATIONS,
                name,
                body=options,
            )
        except ApiError as err:
            if err.status not in (404, 409):  # gone, or replaced by a newer one: leave it
                raise

    def job_pods(self, namespace: str, job: str) -> list[Mapping[str, Any]]:
        found = self._call(
            self._core.list_namespaced_pod, namespace, label_selector=f"{L_JOB}={job}"
        )
        api = self._core.api_client
        return [api.sanitize_for_serialization(p) for p in found.items]

    def get_job(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return self._call(
                self._custom.get_namespaced_custom_object,
                JOB_GROUP,
                JOB_VERSION,
                namespace,
                JOB_PLURALS[kind],
                name,
            )
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def annotate_job(self, kind: str, namespace: str, name: str, key: str, value: str) -> None:
        self._call(
            self._custom.patch_namespaced_custom_object,
            JOB_GROUP,
            JOB_VERSION,
            namespace,
            JOB_PLURALS[kind],
            name,
            {"metadata": {"annotations": {key: value}}},
            _content_type="application/merge-patch+json",
        )
