"""The objects ``kubectl dragonet ... -o json|yaml`` prints: one typed object per row, as
kubectl prints the objects it gets, with machine values (counts as numbers, quantities in
the API's exact form, timestamps in RFC 3339, durations in seconds) rather than the table's
humanised cells.

They are views, not API resources: their apiVersion is ``view.dragonet.io/v1alpha1``, and
each says which object it is about in ``regarding`` (as an Event does). ``-o name`` prints
that object's ``kind.group/name`` (``tfjob.kubeflow.org/big``), so it pipes into
``kubectl describe`` or ``kubectl get``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

API_VERSION = "view.dragonet.io/v1alpha1"
POOL_API = "dragonet.io/v1alpha1"
JOB_API = "kubeflow.org/v1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ObjectMeta(_Strict):
    name: str
    namespace: str | None = None


class ObjectRef(_Strict):
    """The object an item is about."""

    apiVersion: str
    kind: str
    name: str
    namespace: str | None = None

    @property
    def resource_name(self) -> str:
        """``kind.group/name`` as ``kubectl get -o name`` prints it (``node/x`` for core)."""
        group = self.apiVersion.rpartition("/")[0]
        return f"{self.kind.lower()}{'.' + group if group else ''}/{self.name}"

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace or ''}/{self.name}"


class Item(_Strict):
    apiVersion: Literal["view.dragonet.io/v1alpha1"] = API_VERSION
    kind: str
    metadata: ObjectMeta
    regarding: ObjectRef

    # Fields that change with the clock, not with the cluster: a watch does not reprint a
    # row for them alone (kubectl's watch prints objects that changed).
    CLOCK: ClassVar[frozenset[str]] = frozenset()

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def unchanged(self, other: Item) -> bool:
        mine, theirs = self.document(), other.document()
        for field in self.CLOCK:
            mine.pop(field, None)
            theirs.pop(field, None)
        return mine == theirs


class PoolSummary(Item):
    """``status``: a TrainingPool's policy, nodes, queue and room."""

    kind: Literal["PoolSummary"] = "PoolSummary"
    policy: str
    stopPolicy: str
    nodes: int
    queued: int
    admitted: int
    capacity: dict[str, str]
    allocated: dict[str, str]
    free: dict[str, str]
    message: str | None = None


class QueueEntry(Item):
    """``queue``: one waiting job's place in its pool's queue."""

    kind: Literal["QueueEntry"] = "QueueEntry"
    CLOCK = frozenset({"waitedSeconds"})
    pool: str
    position: int | None
    priority: int | None = None  # not in a job's own status (a tenant's view)
    lasQueue: int | None = None
    enqueued: str | None = None
    waitedSeconds: int
    reason: str
    message: str | None = None
    # The job's place as its own status holds it (status.scheduling.queue: position and
    # length in the pool and in its namespace, with a range's upper ends): a tenant's view.
    place: dict[str, int] | None = None


class NodeUsage(Item):
    """``nodes``: what a node holds (pods by job) and has free."""

    kind: Literal["NodeUsage"] = "NodeUsage"
    pools: list[str]
    pods: int
    jobs: dict[str, int]
    allocatable: dict[str, str]
    requested: dict[str, str]
    free: dict[str, str]
    unschedulable: str | None = None


class JobExplanation(Item):
    """``explain``: why a job waits, shrank or was preempted, and what would let it run."""

    kind: Literal["JobExplanation"] = "JobExplanation"
    pool: str
    phase: str
    reason: str
    message: str
    position: int | None = None
    queued: int | None = None
    # Its place as its own status holds it (status.scheduling.queue), ranges included.
    place: dict[str, int] | None = None
    enqueued: str | None = None
    waitedSeconds: int | None = None
    workers: dict[str, Any] | None = None
    needs: str | None = None
    room: str | None = None
    wouldRun: str | None = None
    preempted: dict[str, Any] | None = None
    lastScale: dict[str, Any] | None = None
    admission: dict[str, Any] | None = None
    finished: dict[str, Any] | None = None
    events: list[dict[str, Any]]
    eventsUnread: str | None = None
    # Who runs the job when Dragonet does not (beside Kubeflow: its training-operator).
    runBy: str | None = None


def _job_ref(kind: str, key: str) -> ObjectRef:
    namespace, _, name = key.rpartition("/")
    return ObjectRef(apiVersion=JOB_API, kind=kind, name=name, namespace=namespace or None)


def pool_summary(row: Mapping[str, Any]) -> PoolSummary:
    name = str(row["name"])
    return PoolSummary(
        metadata=ObjectMeta(name=name),
        regarding=ObjectRef(apiVersion=POOL_API, kind="TrainingPool", name=name),
        **{k: v for k, v in row.items() if k != "name"},
    )


def queue_entry(row: Mapping[str, Any]) -> QueueEntry:
    ref = _job_ref(str(row.get("kind") or "TFJob"), str(row["job"]))
    fields = {k: v for k, v in row.items() if k not in ("job", "kind")}
    return QueueEntry(
        metadata=ObjectMeta(name=ref.name, namespace=ref.namespace), regarding=ref, **fields
    )


def node_usage(row: Mapping[str, Any]) -> NodeUsage:
    name = str(row["name"])
    return NodeUsage(
        metadata=ObjectMeta(name=name),
        regarding=ObjectRef(apiVersion="v1", kind="Node", name=name),
        **{k: v for k, v in row.items() if k != "name"},
    )


def job_explanation(info: Mapping[str, Any], now: datetime) -> JobExplanation:
    """``explain``'s dict (``live/explain.py``) as an object: the wait in seconds, and each
    Event by its last time (the table's ages are the reader's clock)."""
    from live.views import seconds_since

    ref = _job_ref(str(info["kind"]), str(info["job"]))
    skip = ("job", "kind", "waited", "events", "queue")
    fields = {k: v for k, v in info.items() if k not in skip}
    if info.get("queue"):
        fields["place"] = info["queue"]
    if info.get("enqueued"):
        fields["waitedSeconds"] = seconds_since(info["enqueued"], now)
    events = [{k: v for k, v in e.items() if k != "age"} for e in info.get("events") or []]
    return JobExplanation(
        metadata=ObjectMeta(name=ref.name, namespace=ref.namespace),
        regarding=ref,
        events=events,
        **fields,
    )
