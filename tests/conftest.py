from __future__ import annotations

import json
import shutil
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests import metacontroller as mc
from tests.kube_schema import (
    validate_child,
    validate_custom,
    validate_job_status,
    validate_pool_status,
)
from webhooks.app import create_app
from webhooks.config import Settings

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def helm() -> str:
    """The real helm binary (tests/test_chart*.py). These tests never skip: without helm
    they fail and say how to get it."""
    path = shutil.which("helm")
    if path is None:
        pytest.fail(
            "helm is not on PATH. Install it with `make helm` (bash scripts/install-helm.sh "
            ".tools) and run the tests with PATH=$PWD/.tools/bin:$PATH, as `make test` does."
        )
    return path


NOW = datetime(2026, 11, 21, 10, 1, 0, tzinfo=UTC)  # one minute after mc.T0


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Hook:
    """Talks to the real Flask app the way Metacontroller's two controllers do, and keeps
    what the API server would: the Admissions the pool answered (applied ``InPlace``).

    Every 200 answer is checked: each child validates against Kubernetes' schemas or our
    CRDs, each status against its CRD."""

    def __init__(
        self,
        settings: Settings | None = None,
        clock: Clock | None = None,
        pool: dict[str, Any] | None = None,
    ) -> None:
        self.clock = clock or Clock()
        self.app = create_app(settings or Settings(), clock=self.clock)
        self.client = self.app.test_client()
        self.pool = pool or mc.pool()
        self.admissions: dict[str, dict[str, Any]] = {}  # namespace/name -> stored object
        self.last_pool: dict[str, Any] = {}  # the pool's last answer

    def post(self, path: str, body: Any) -> Any:
        data = body if isinstance(body, (bytes, str)) else orjson.dumps(versioned(body))
        return self.client.post(path, data=data, content_type="application/json")

    def pool_sync(self, request: dict[str, Any]) -> dict[str, Any]:
        """One pool sync; its Admissions replace the stored ones, as Metacontroller applies
        them (an Admission left out is deleted)."""
        response = self.post("/pools/sync", request)
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_json()
        stored = {}
        for child in body["children"]:
            validate_custom(child)
            assert child["metadata"].get("namespace"), "a cluster-scoped parent's child"
            key = f"{child['metadata']['namespace']}/{child['metadata']['name']}"
            stored[key] = mc.stored_admission(self.pool, child, self.admissions.get(key))
        validate_pool_status(body["status"])
        self.admissions = stored
        self.last_pool = body
        return body

    def job_sync(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = request["parent"].get("kind", "TFJob")
        response = self.post(f"/{kind.lower()}s/sync", request)
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_json()
        for child in body["children"]:
            validate_child(child)
            # Metacontroller aborts the whole sync if a child's labels miss the selector's.
            assert "training.kubeflow.org/job-name" in child["metadata"]["labels"]
        validate_job_status(kind, body["status"])
        return body

    def admission(self, job: dict[str, Any]) -> dict[str, Any] | None:
        meta, kind = job["metadata"], job.get("kind", "TFJob").lower()
        return self.admissions.get(f"{meta['namespace']}/{kind}-{meta['name']}")

    def render(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job's sync on its stored Admission, before it has pods."""
        return self.job_sync(mc.job_request(mc.world(job, []), self.admission(job)))

    def plan_then_render(self, pool_request: dict[str, Any], job: str) -> dict[str, Any]:
        """A pool sync request (a fixture), then the sync of one of its jobs ("ns/name")."""
        self.pool_sync(pool_request)
        related = pool_request["related"]
        jobs = {
            **related.get("TFJob.kubeflow.org/v1", {}),
            **related.get("MXJob.kubeflow.org/v1", {}),
            **related.get("PyTorchJob.kubeflow.org/v1", {}),
        }
        return self.render(jobs[job])

    def sync(self, w: mc.World) -> dict[str, Any]:
        """What Metacontroller does after a change: the pool plans, then the job renders
        its Admission. Returns the job's answer."""
        self.pool_sync(mc.pool_request(w, self.admissions.values(), self.pool))
        return self.job_sync(mc.job_request(w, self.admission(w.parent)))


def _versioned_object(obj: Any) -> Any:
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return obj
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    content = orjson.dumps({**obj, "metadata": meta}, option=orjson.OPT_SORT_KEYS)
    return {**obj, "metadata": {**meta, "resourceVersion": str(zlib.crc32(content))}}


def versioned(body: Any) -> Any:
    """The request as an API server would have it: tests edit objects in place, but a real
    API server gives every written content a new resourceVersion (the webhook's memo of
    parsed objects relies on that)."""
    if not isinstance(body, dict):
        return body
    out = dict(body)
    if "parent" in out:
        out["parent"] = _versioned_object(out["parent"])
    for group in ("children", "related"):
        if isinstance(out.get(group), dict):
            out[group] = {
                t: {k: _versioned_object(o) for k, o in objs.items()}
                if isinstance(objs, dict)
                else objs
                for t, objs in out[group].items()
            }
    return out


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def hook(clock: Clock) -> Hook:
    return Hook(clock=clock)


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def pods_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in body["children"] if c["kind"] == "Pod"}


def services_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in body["children"] if c["kind"] == "Service"}


def node_of(pod: dict[str, Any]) -> str:
    if pod["spec"].get("nodeName"):
        return pod["spec"]["nodeName"]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    values = {
        v
        for t in terms["nodeSelectorTerms"]
        for e in t["matchExpressions"]
        if e["key"] == "kubernetes.io/hostname"
        for v in e["values"]
    }
    assert len(values) == 1, values
    return values.pop()


def tf_config(pod: dict[str, Any]) -> str | None:
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")
    return next((e["value"] for e in main.get("env", []) if e["name"] == "TF_CONFIG"), None)


def condition(body: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in body["status"].get("conditions", []) if c["type"] == ctype), None)


def observe(
    parent: dict[str, Any], body: dict[str, Any], **pod_state: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pods and services of an answer, as the cluster reports them afterwards."""
    pods = [mc.observed_pod(parent, p, **pod_state) for p in pods_of(body).values()]
    svcs = [mc.observed_service(parent, s) for s in services_of(body).values()]
    return pods, svcs


def with_status(parent: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The parent after Metacontroller wrote the answer's status."""
    updated = dict(parent)
    updated["status"] = {**body["status"], "observedGeneration": parent["metadata"]["generation"]}
    return updated
