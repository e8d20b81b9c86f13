"""What the reaper needs of the Kubernetes API (``Jobs``), so the tests use a fake and the
process the official client (``KubeJobs``). Every call is one the chart's ClusterRole
grants, and nothing more: list and delete TFJobs and MXJobs. On Kubernetes >= 1.30 the
chart's ValidatingAdmissionPolicy lets a delete through only for a job that has ended and
declares a TTL: the only jobs ``policy.model.ttl`` ever names (tests/test_chart_security.py
checks the two agree)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from policy.model.jobs import JobKind
from webhooks.kubeapi import Api, ApiError


def plural(kind: JobKind) -> str:
    return kind.kind.lower() + "s"


class Jobs(Protocol):
    def list(self, kind: JobKind) -> Iterator[Mapping[str, Any]]:
        """Every job of that kind, in every namespace."""

    def delete(self, kind: JobKind, namespace: str, name: str, uid: str) -> bool:
        """Delete that job if it is still the one with ``uid``; False if it was gone or
        is another job by now."""


class KubeJobs:
    """``Jobs`` through the official client, in-cluster config (or kubeconfig)."""

    def __init__(
        self, timeout_seconds: float = 10.0, page_size: int = 500, label_selector: str = ""
    ) -> None:
        self._api = Api(timeout_seconds)
        self._page = page_size
        self._query = {"label_selector": label_selector} if label_selector else {}

    def list(self, kind: JobKind) -> Iterator[Mapping[str, Any]]:
        group, version = kind.api_version.split("/")
        for obj in self._api.list_all(group, version, plural(kind), self._page, **self._query):
            # Items of a list carry no kind; the rule reads it.
            yield {"apiVersion": kind.api_version, "kind": kind.kind, **obj}

    def delete(self, kind: JobKind, namespace: str, name: str, uid: str) -> bool:
        group, version = kind.api_version.split("/")
        try:
            self._api.call(
                self._api.custom.delete_namespaced_custom_object,
                group,
                version,
                namespace,
                plural(kind),
                name,
                body=self._api.delete_options(uid),
            )
        except ApiError as err:
            if err.status in (404, 409):  # gone, or a newer job of that name: leave it
                return False
            raise
        return True
