"""What the recorder needs of the Kubernetes API, and the official client's version of it.

``Objects`` lists and watches what the story is read from (Admissions, TFJobs, MXJobs,
TrainingPools): a list's items with its resourceVersion, then a watch from there
(``kubernetes.watch.Watch``, with bookmarks), as client-go's reflector does;
``KubeEvents`` (``recorder.write.Events``) lists, reads, creates and patches the
recorder's own ``events.k8s.io/v1`` Events. Every call is one the chart's ClusterRole
grants, and nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

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


def job_resource(kind: JobKind) -> Resource:
    return Resource(kind.api_version, kind.kind, kind.kind.lower() + "s")


ChangeType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


@dataclass(frozen=True)
class Change:
    """One event of a watch: what happened to which object (a bookmark carries only the
    resourceVersion the watch has reached)."""

    type: ChangeType
    object: Mapping[str, Any]

    @property
    def resource_version(self) -> str:
        meta = self.object.get("metadata")
        return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


@dataclass(frozen=True)
class Listing:
    items: list[Mapping[str, Any]]
    resource_version: str  # where a watch of what changed since starts


class Gone(ApiError):
    """410 Gone: the resourceVersion a watch starts from is older than the API server
    keeps; the objects must be listed again."""


class Objects(Protocol):
    def list(self, resource: Resource) -> Listing:
        """Every object of that resource, in every namespace, with its kind."""

    def watch(
        self, resource: Resource, resource_version: str, timeout_seconds: int
    ) -> Iterator[Change]:
        """What changes after ``resource_version``, each object with its kind, until the
        API server ends the watch (about ``timeout_seconds``); ``Gone`` on 410, another
        ``ApiError`` for a connection that failed or dropped."""


def _with_kind(resource: Resource, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    # Items of a list carry no kind; the story reads it.
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


JOB_API_VERSIONS = frozenset(k.api_version for k in KINDS)


class KubeObjects:
    """``Objects`` through the official client: pages of ``page_size`` (limit/continue),
    watches with bookmarks (``allowWatchBookmarks``)."""

    def __init__(self, api: Api, page_size: int = 500, jobs_selector: str = "") -> None:
        """``jobs_selector``: a labelSelector for the training jobs (none for Admissions and
        pools), so that Kubeflow's jobs beside Dragonet's get no Event (docs/kubeflow.md)."""
        self._api, self._page = api, page_size
        self._jobs = {"label_selector": jobs_selector} if jobs_selector else {}

    def _query(self, resource: Resource) -> dict[str, str]:
        return self._jobs if resource.api_version in JOB_API_VERSIONS else {}

    def list(self, resource: Resource) -> Listing:
        group, version = resource.api_version.split("/")
        items: list[Mapping[str, Any]] = []
        token: str | None = None
        version_seen = ""
        while True:
            page = self._api.call(
                self._api.custom.list_cluster_custom_object,
                group,
                version,
                resource.plural,
                limit=self._page,
                **self._query(resource),
                **({"_continue": token} if token else {}),
            )
            items += (_with_kind(resource, o) for o in page.get("items") or [])
            meta = page.get("metadata") or {}
            # Every page of one list is of the first page's snapshot.
            version_seen = version_seen or str(meta.get("resourceVersion") or "")
            token = meta.get("continue")
            if not token:
                return Listing(items, version_seen)

    def watch(
        self, resource: Resource, resource_version: str, timeout_seconds: int
    ) -> Iterator[Change]:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        group, version = resource.api_version.split("/")
        stream = watch.Watch().stream(
            self._api.custom.list_cluster_custom_object,
            group,
            version,
            resource.plural,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            **self._query(resource),
            # The API server ends the watch then; the read timeout is a little longer,
            # so a connection that went silent is noticed.
            timeout_seconds=timeout_seconds,
            _request_timeout=(self._api.timeout, timeout_seconds + self._api.timeout),
        )
        try:
            for event in stream:
                kind, obj = event.get("type"), event.get("raw_object")
                if kind in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") and isinstance(
                    obj, Mapping
                ):
                    yield Change(kind, obj if kind == "BOOKMARK" else _with_kind(resource, obj))
        except ApiException as err:
            if err.status == 410:
                raise Gone(f"410 {err.reason}", 410) from err
            raise ApiError(f"{err.status} {err.reason}", err.status) from err
        except ApiError:
            raise
        except Exception as err:  # the connection dropped, timed out, or sent garbage
            raise ApiError(f"{type(err).__name__}: {err}") from err


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
