"""From a hook request's objects to the immutable snapshot the policy plans on.

Metacontroller's v2 maps (``Kind.group/version`` -> ``namespace/name`` -> object) are read
here and nowhere else. The parent object is the freshest view of its own job, so it
replaces the copy of itself that arrives among the related jobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policy.config import PolicyConfig
from policy.memo import Identity, Memo, identity
from policy.model.cluster import Cluster, Node, Pod
from policy.model.jobs import TFJOB, InvalidJob, Job, JobKind, parse_job, parse_metadata
from policy.model.priority import Priorities
from policy.plan import plan
from policy.reconcile import Decision, invalid, reconcile

NODES = "Node.v1"
PODS = "Pod.v1"
SERVICES = "Service.v1"
PRIORITY_CLASSES = "PriorityClass.scheduling.k8s.io/v1"

ObjectMap = Mapping[str, Mapping[str, Mapping[str, Any]]]


class MalformedRequest(ValueError):
    """The request is not a hook request we can read (answered with HTTP 400)."""


@dataclass(frozen=True)
class Snapshot:
    cluster: Cluster
    jobs: tuple[Job, ...]
    priorities: Priorities = field(default_factory=Priorities)


_NO_MEMO = Memo(limit=0)


def _keyed(kind: str, obj: Mapping[str, Any], *extra: Any) -> tuple | None:
    ident = identity(obj)
    return None if ident is None else (kind, *ident, *extra)


def _parsed_job(obj: Mapping[str, Any], kind: JobKind, memo: Memo) -> Job | InvalidJob:
    def make() -> Job | InvalidJob:
        try:
            return parse_job(obj, kind)
        except InvalidJob as err:
            return err

    return memo.get(_keyed("job", obj, kind.kind), make)


def _objects(group: ObjectMap, type_key: str) -> list[Mapping[str, Any]]:
    objs = group.get(type_key) or {}
    if not isinstance(objs, Mapping):
        raise MalformedRequest(f"{type_key} must map names to objects")
    return [o for o in objs.values() if isinstance(o, Mapping)]


def job_type_key(kind: JobKind) -> str:
    return f"{kind.kind}.{kind.api_version}"


def observe(
    parent_job: Job | None,
    children: ObjectMap,
    related: ObjectMap,
    kind: JobKind = TFJOB,
    memo: Memo = _NO_MEMO,
) -> Snapshot:
    try:
        node_objs = _objects(related, NODES)
        nodes = [memo.get(_keyed("node", o), lambda o=o: Node.from_object(o)) for o in node_objs]
        node_ids = _all_identities(node_objs)
        node_of_host = {n.hostname: n.name for n in nodes}
        pod_objs = [*_objects(related, PODS), *_objects(children, PODS)]
        pods: dict[tuple[str, str], Pod] = {}
        for obj in pod_objs:
            pod = memo.get(
                None if node_ids is None else _keyed("pod", obj, node_ids, kind.container),
                lambda obj=obj: Pod.from_object(obj, node_of_host, kind.container),
            )
            pods[(pod.namespace, pod.name)] = pod
        pod_ids = _all_identities(pod_objs)
        cluster = memo.get(
            None if node_ids is None or pod_ids is None else ("cluster", node_ids, pod_ids),
            lambda: Cluster.observe(nodes, pods.values()),
        )
    except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as err:
        raise MalformedRequest(f"unreadable Node or Pod in the request: {err}") from err
    jobs: dict[str, Job] = {}
    for obj in _objects(related, job_type_key(kind)):
        try:
            job = _parsed_job(obj, kind, memo)
        except ValueError:
            continue  # unreadable: its own sync reports why
        if isinstance(job, InvalidJob):
            continue  # an invalid job gets no capacity; its own sync reports why
        jobs[job.key] = job
    if parent_job is not None:
        jobs[parent_job.key] = parent_job
    priorities = Priorities.observe(_objects(related, PRIORITY_CLASSES))
    return Snapshot(cluster, tuple(jobs.values()), priorities)


def _all_identities(objs: list[Mapping[str, Any]]) -> frozenset[Identity] | None:
    idents = {identity(o) for o in objs}
    return None if None in idents else frozenset(idents)  # type: ignore[arg-type]


def _identities(objs: Any, skip: str | None = None) -> Iterator[Identity | None]:
    if not isinstance(objs, Mapping):
        yield None
        return
    for key, obj in objs.items():
        if key == skip:
            continue
        try:
            meta = obj["metadata"]
            uid, rv = meta["uid"], meta["resourceVersion"]
        except (KeyError, TypeError):
            yield None
            continue
        yield (uid, rv) if type(uid) is str and type(rv) is str else None


def _snapshot_key(
    parent: Mapping[str, Any], children: ObjectMap, related: ObjectMap, kind: JobKind
) -> frozenset | None:
    """Every object's identity (the parent's own, not its related copy), or None if one
    has none: two requests with equal keys hold exactly the same objects."""
    meta = parent.get("metadata") or {}
    own = f"{meta.get('namespace')}/{meta.get('name')}"
    idents = {identity(parent)}
    idents.update(_identities(related.get(NODES) or {}))
    idents.update(_identities(related.get(PODS) or {}))
    idents.update(_identities(children.get(PODS) or {}))
    idents.update(_identities(related.get(job_type_key(kind)) or {}, skip=own))
    idents.update(_identities(related.get(PRIORITY_CLASSES) or {}))
    return None if None in idents else frozenset(idents)


def _metadata(parent: Mapping[str, Any]):
    try:
        return parse_metadata(parent)
    except ValueError as err:
        raise MalformedRequest(f"parent.metadata: {err}") from err


def sync(
    parent: Mapping[str, Any],
    children: ObjectMap,
    related: ObjectMap,
    now: datetime,
    config: PolicyConfig,
    kind: JobKind = TFJOB,
    memo: Memo = _NO_MEMO,
) -> Decision:
    """The whole sync hook, as a pure function of the request and ``now`` (``memo`` only
    remembers work done for identical objects before)."""
    meta = _metadata(parent)
    status = parent.get("status") or {}
    if not isinstance(status, Mapping):
        raise MalformedRequest("parent.status must be an object")
    job = _parsed_job(parent, kind, memo)
    if isinstance(job, InvalidJob):
        key = f"{meta.namespace}/{meta.name}"
        return invalid(status, kind, key, meta.name, str(job), now)
    key = _snapshot_key(parent, children, related, kind)
    snap = memo.get(
        None if key is None else ("snapshot", key),
        lambda: observe(job, children, related, kind, memo),
    )
    plan_key = None if key is None else ("plan", key, now, config)
    whole = memo.get(plan_key, lambda: plan(snap.jobs, snap.cluster, now, config, snap.priorities))
    jp = whole.jobs.get(job.key)
    if jp is None:  # managed by another controller: leave it alone
        return Decision(children=[], status=dict(status))
    return reconcile(jp, snap.cluster, now, config)


def finalize(parent: Mapping[str, Any], children: ObjectMap) -> tuple[Decision, bool]:
    """On deletion: remove every child; finalized once none is left."""
    _metadata(parent)
    remaining = len(_objects(children, PODS)) + len(_objects(children, SERVICES))
    return Decision(children=[], status=dict(parent.get("status") or {})), remaining == 0
