"""What the recorder needs of the Kubernetes API, and the official client's version of it.

``Objects`` lists what the story is read from (Admissions, TFJobs, MXJobs, TrainingPools);
``KubeEvents`` (``recorder.write.Events``) lists, reads, creates and patches the
recorder's own ``events.k8s.io/v1`` Events. Every call is one the chart's ClusterRole
grants, and nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from policy.model.jobs import JobKind
from policy.model.kinds import KINDS
from policy.model.pool import ADMISSION_KIND, POOL_KIND, VERSION
from recorder.write import SELECTOR
from webhooks.kubeapi import Api, ApiError


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str


ADMISSIONS = Resource(VERSION, ADMISSION_KIND, "admissions")
POOLS = Resource(VERSION, POOL_KIND, "trainingpools")
JOB_API_VERSIONS = frozenset(k.api_version for k in KINDS)


def job_resource(kind: JobKind) -> Resource:
    return Resource(kind.api_version, kind.kind, kind.kind.lower() + "s")


class Objects(Protocol):
    def list(self, resource: Resource) -> Iterator[Mapping[str, Any]]:
        """Every object of that resource, in every namespace, with its kind."""


class KubeObjects:
    """``Objects`` through the official client: pages of ``page_size`` (limit/continue)."""

    def __init__(self, api: Api, page_size: int = 500, jobs_selector: str = "") -> None:
        """``jobs_selector``: a labelSelector for the training jobs (none for Admissions and
        pools), so that Kubeflow's jobs beside Dragonet's get no Event (docs/kubeflow.md)."""
        self._api, self._page = api, page_size
        self._jobs = {"label_selector": jobs_selector} if jobs_selector else {}

    def list(self, resource: Resource) -> Iterator[Mapping[str, Any]]:
        group, version = resource.api_version.split("/")
        query = self._jobs if resource.api_version in JOB_API_VERSIONS else {}
        for obj in self._api.list_all(group, version, resource.plural, self._page, **query):
            # Items of a list carry no kind; the story reads it.
            yield {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


class KubeEvents:
    """``recorder.write.Events`` through the official client. Events go through its
    untyped calls (``CustomObjectsApi`` serves any group): its typed ``EventsV1Api``
    would turn ``eventTime`` into a datetime and write it back without the fraction a
    ``MicroTime`` must have, which the API server refuses."""

    GROUP, VERSION, PLURAL = "events.k8s.io", "v1", "events"

    def __init__(self, api: Api, page_size: int = 500) -> None:
        self._api, self._page = api, page_size

    def list_ours(self) -> Iterator[Mapping[str, Any]]:
        return self._api.list_all(
            self.GROUP, self.VERSION, self.PLURAL, self._page, label_selector=SELECTOR
        )

    def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return self._api.call(
                self._api.custom.get_namespaced_custom_object,
                self.GROUP,
                self.VERSION,
                namespace,
                self.PLURAL,
                name,
            )
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def create(self, event: Mapping[str, Any]) -> None:
        self._api.call(
            self._api.custom.create_namespaced_custom_object,
            self.GROUP,
            self.VERSION,
            event["metadata"]["namespace"],
            self.PLURAL,
            dict(event),
        )

    def patch(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self._api.call(
            self._api.custom.patch_namespaced_custom_object,
            self.GROUP,
            self.VERSION,
            namespace,
            self.PLURAL,
            name,
            dict(body),
        )
