"""``monitor.kube.KubeCluster``, the official client for real, against a small in-memory
API server at the HTTP layer (there is no cluster here): the calls it makes, how it reads
the answers and errors, and that the chart's ClusterRole grants exactly those calls."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.client.rest import RESTResponse

from monitor.kube import AlreadyExists, ApiError, KubeCluster, migration
from tests.kubefake import answer, granted, route, use_kubeconfig
from tests.monitorkit import pod
from tests.test_chart import _render

# (pattern of the path, API group, resource, whether the path names one object)
_ROUTES = [
    (
        r"^/apis/authentication\.k8s\.io/v1/tokenreviews$",
        "authentication.k8s.io",
        "tokenreviews",
        False,
    ),
    (r"^/api/v1/pods$", "", "pods", False),
    (r"^/api/v1/namespaces/[^/]+/pods$", "", "pods", False),
    (r"^/apis/dragonet\.io/v1alpha1/trainingpools/[^/]+$", "dragonet.io", "trainingpools", True),
    (r"^/apis/metrics\.k8s\.io/v1beta1/nodes$", "metrics.k8s.io", "nodes", False),
    (r"^/apis/kubeflow\.org/v1/namespaces/[^/]+/tfjobs/[^/]+$", "kubeflow.org", "tfjobs", True),
    (r"^/apis/kubeflow\.org/v1/namespaces/[^/]+/mxjobs/[^/]+$", "kubeflow.org", "mxjobs", True),
    (
        r"^/apis/kubeflow\.org/v1/namespaces/[^/]+/pytorchjobs/[^/]+$",
        "kubeflow.org",
        "pytorchjobs",
        True,
    ),
    (
        r"^/apis/dragonet\.io/v1alpha1/namespaces/[^/]+/migrations$",
        "dragonet.io",
        "migrations",
        False,
    ),
    (
        r"^/apis/dragonet\.io/v1alpha1/namespaces/[^/]+/migrations/[^/]+$",
        "dragonet.io",
        "migrations",
        True,
    ),
]
_VERBS = {
    ("GET", False): "list",
    ("GET", True): "get",
    ("POST", False): "create",
    ("DELETE", True): "delete",
    ("PATCH", True): "patch",
}


class FakeApiServer:
    """Answers the client's HTTP requests from dicts; records (group, resource, verb)."""

    def __init__(self) -> None:
        self.pods = [pod("w", namespace="team-a"), pod("w", node="node-2", namespace="team-b")]
        self.pool = {
            "apiVersion": "dragonet.io/v1alpha1",
            "kind": "TrainingPool",
            "metadata": {"name": "default"},
            "status": {"nodes": 2},
        }
        self.metrics: list[dict[str, Any]] | None = []
        self.migrations: dict[str, dict[str, Any]] = {}
        self.used: list[tuple[str, str, str]] = []
        self.deleted_with: list[Any] = []
        self.fail: int | None = None
        self.jobs: dict[str, dict[str, Any]] = {}  # "resource/name" -> the job
        self.patched: list[tuple[str | None, Any]] = []  # (content type, body)
        self.reviewed: list[Any] = []  # TokenReviews as sent

    def request(
        self,
        method: str,
        url: str,
        headers=None,
        body=None,
        post_params=None,
        _request_timeout=None,
    ) -> RESTResponse:
        parts = urlsplit(url)
        path, query = parts.path, parse_qs(parts.query)
        for pattern, group, resource, named in _ROUTES:
            if re.match(pattern, path):
                self.used.append((group, resource, _VERBS[(method, named)]))
                break
        else:
            return answer(404, {"kind": "Status", "reason": "NotFound"})
        if self.fail:
            return answer(self.fail, {"kind": "Status", "message": "injected"})
        name = path.rsplit("/", 1)[-1]
        if resource in ("tfjobs", "mxjobs", "pytorchjobs"):
            key = f"{resource}/{name}"
            if method == "PATCH":
                sent = json.loads(body) if isinstance(body, (str, bytes)) else body
                self.patched.append(((headers or {}).get("Content-Type"), sent))
                if key not in self.jobs:
                    return answer(404, {"kind": "Status", "reason": "NotFound"})
                return answer(200, self.jobs[key])
            return answer(200, self.jobs[key]) if key in self.jobs else answer(404, {})
        if resource == "pods" and "labelSelector" in query:
            label, job = query["labelSelector"][0].split("=")
            ns = path.split("/")[4]
            items = [
                p
                for p in self.pods
                if p["metadata"]["labels"].get(label) == job and p["metadata"]["namespace"] == ns
            ]
            return answer(
                200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
            )
        if resource == "pods":
            fields = dict(f.split("=") for f in query["fieldSelector"][0].split(","))
            ns = path.split("/")[4] if "/namespaces/" in path else None
            items = [
                p
                for p in self.pods
                if p["metadata"]["name"] == fields["metadata.name"]
                and p["spec"]["nodeName"] == fields["spec.nodeName"]
                and ns in (None, p["metadata"]["namespace"])
            ]
            return answer(
                200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
            )
        if resource == "tokenreviews":
            review = json.loads(body) if isinstance(body, (str, bytes)) else body
            self.reviewed.append(review)
            status = {"authenticated": False, "error": "invalid bearer token"}
            if review["spec"]["token"] == "good":
                status = {
                    "authenticated": True,
                    "audiences": review["spec"]["audiences"],
                    "user": {
                        "username": "system:serviceaccount:team-a:default",
                        "extra": {"authentication.kubernetes.io/pod-name": ["w"]},
                    },
                }
            return answer(201, {**review, "status": status})
        if resource == "trainingpools":
            return answer(200, self.pool) if name == "default" else answer(404, {})
        if resource == "nodes":
            if self.metrics is None:
                return answer(404, {"kind": "Status", "reason": "NotFound"})
            return answer(200, {"kind": "NodeMetricsList", "items": self.metrics})
        if method == "POST":
            obj = json.loads(body) if isinstance(body, (str, bytes)) else body
            key = obj["metadata"]["name"]
            if key in self.migrations:
                return answer(409, {"kind": "Status", "reason": "AlreadyExists"})
            obj = {**obj, "metadata": {**obj["metadata"], "uid": f"u-{len(self.used)}"}}
            self.migrations[key] = obj
            return answer(201, obj)
        if method == "GET":
            found = self.migrations.get(name)
            return answer(200, found) if found else answer(404, {})
        found = self.migrations.get(name)
        options = json.loads(body) if isinstance(body, (str, bytes)) else body
        self.deleted_with.append(options)
        if found is None:
            return answer(404, {})
        if options["preconditions"]["uid"] != found["metadata"]["uid"]:
            return answer(409, {"kind": "Status", "reason": "Conflict"})
        del self.migrations[name]
        return answer(200, {"kind": "Status", "status": "Success"})


@pytest.fixture
def api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[KubeCluster, FakeApiServer]]:
    use_kubeconfig(tmp_path, monkeypatch)
    cluster = KubeCluster(timeout_seconds=1)
    server = FakeApiServer()
    route(cluster._core.api_client, server.request, monkeypatch)
    yield cluster, server


def test_pods_are_found_by_name_on_this_node_in_any_namespace(api) -> None:
    cluster, _ = api
    (found,) = cluster.pods_named("w", "node-1", None)
    assert (found.namespace, found.node, found.uid, found.is_worker) == (
        "team-a",
        "node-1",
        "uid-team-a-w",
        True,
    )
    assert found.requests == {"cpu": 0.5, "memory": 2**30}
    assert cluster.pods_named("w", "node-2", "team-a") == []
    assert [p.namespace for p in cluster.pods_named("w", "node-2", "team-b")] == ["team-b"]


def test_the_pool_and_node_metrics_are_read_and_a_missing_metrics_api_is_none(api) -> None:
    cluster, server = api
    assert cluster.pool_status("default") == {"nodes": 2}
    assert cluster.node_metrics() == []
    server.metrics = None
    assert cluster.node_metrics() is None
    with pytest.raises(ApiError, match="404"):
        cluster.pool_status("other")


def test_a_migration_is_created_once_read_and_deleted_only_by_uid(api) -> None:
    cluster, server = api
    (found,) = cluster.pods_named("w", "node-1", None)
    body = migration(found, "Converged", "monitor/node-1")
    cluster.create_migration(body)
    with pytest.raises(AlreadyExists):
        cluster.create_migration(body)
    stored = cluster.get_migration("team-a", "w")
    assert stored["spec"] == body["spec"]
    cluster.delete_migration("team-a", "w", "not-its-uid")  # a newer one: left alone
    assert "w" in server.migrations
    cluster.delete_migration("team-a", "w", stored["metadata"]["uid"])
    assert server.migrations == {} and cluster.get_migration("team-a", "w") is None
    assert server.deleted_with[-1]["preconditions"] == {"uid": stored["metadata"]["uid"]}
    cluster.delete_migration("team-a", "w", "gone")  # already gone: fine


def test_a_jobs_pods_are_listed_by_label_and_its_annotation_merge_patched(api) -> None:
    cluster, server = api
    server.jobs = {"tfjobs/job1": {"metadata": {"name": "job1", "annotations": {"a": "b"}}}}
    assert [p["metadata"]["name"] for p in cluster.job_pods("team-a", "job1")] == ["w"]
    assert cluster.job_pods("team-a", "other") == []
    assert cluster.get_job("TFJob", "team-a", "job1")["metadata"]["annotations"] == {"a": "b"}
    assert cluster.get_job("MXJob", "team-a", "job1") is None
    cluster.annotate_job("TFJob", "team-a", "job1", "dragonet.io/throughput", "{}")
    assert server.patched == [
        (
            "application/merge-patch+json",
            {"metadata": {"annotations": {"dragonet.io/throughput": "{}"}}},
        )
    ]


def test_a_token_is_reviewed_with_the_monitors_audience(api) -> None:
    """The TokenReview as the API server takes it (authentication.k8s.io/v1, the audience
    in spec.audiences), and its status read back as the API serves it."""
    cluster, server = api
    status = cluster.review_token("good", "dragonet-monitor")
    assert server.reviewed == [
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": "good", "audiences": ["dragonet-monitor"]},
        }
    ]
    assert status["authenticated"] is True and status["audiences"] == ["dragonet-monitor"]
    assert status["user"]["extra"] == {"authentication.kubernetes.io/pod-name": ["w"]}
    assert cluster.review_token("bad", "dragonet-monitor")["authenticated"] is False
    server.fail = 403
    with pytest.raises(ApiError, match="403"):
        cluster.review_token("good", "dragonet-monitor")


def test_api_errors_become_api_error(api) -> None:
    cluster, server = api
    server.fail = 403
    with pytest.raises(ApiError, match="403"):
        cluster.pods_named("w", "node-1", None)
    server.fail = 500
    with pytest.raises(ApiError, match="500"):
        cluster.node_metrics()


def test_the_charts_cluster_role_grants_exactly_what_the_monitor_calls(api, helm: str) -> None:
    cluster, server = api
    cluster.review_token("good", "dragonet-monitor")
    (found,) = cluster.pods_named("w", "node-1", None)
    cluster.pods_named("w", "node-1", "team-a")
    cluster.pool_status("default")
    cluster.node_metrics()
    cluster.create_migration(migration(found, "Overloaded", "monitor/node-1"))
    stored = cluster.get_migration("team-a", "w")
    cluster.delete_migration("team-a", "w", stored["metadata"]["uid"])
    server.jobs = {
        "tfjobs/job1": {"metadata": {"name": "job1"}},
        "mxjobs/job2": {},
        "pytorchjobs/job3": {},
    }
    cluster.job_pods("team-a", "job1")
    for kind, name in (("TFJob", "job1"), ("MXJob", "job2"), ("PyTorchJob", "job3")):
        cluster.get_job(kind, "team-a", name)
        cluster.annotate_job(kind, "team-a", name, "dragonet.io/throughput", "{}")
    used = set(server.used)
    docs = _render(helm, "--set", "monitor.enabled=true")
    role = next(
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dragonet-monitor"
    )
    assert granted(role) == used
    (pools,) = [r for r in role["rules"] if r["resources"] == ["trainingpools"]]
    assert pools["resourceNames"] == ["default"]
