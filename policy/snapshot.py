"""From a hook request's objects to the immutable snapshot the policy plans on.

Metacontroller's v2 maps (``Kind.group/version`` -> ``namespace/name`` -> object) are read
here and nowhere else. The parent object is the freshest view of its own job, so it
replaces the copy of itself that arrives among the related jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from policy.cluster import Cluster, Node, Pod
from policy.config import PolicyConfig
from policy.jobs import TFJOB, InvalidJob, Job, JobKind, parse_job, parse_metadata
from policy.plan import plan
from policy.reconcile import Decision, invalid, reconcile

NODES = "Node.v1"
PODS = "Pod.v1"
SERVICES = "Service.v1"

ObjectMap = Mapping[str, Mapping[str, Mapping[str, Any]]]


class MalformedRequest(ValueError):
    """The request is not a hook request we can read (answered with HTTP 400)."""


@dataclass(frozen=True)
class Snapshot:
    cluster: Cluster
    jobs: tuple[Job, ...]


def _objects(group: ObjectMap, type_key: str) -> list[Mapping[str, Any]]:
    objs = group.get(type_key) or {}
    if not isinstance(objs, Mapping):
        raise MalformedRequest(f"{type_key} must map names to objects")
    return [o for o in objs.values() if isinstance(o, Mapping)]


def job_type_key(kind: JobKind) -> str:
    return f"{kind.kind}.{kind.api_version}"


def observe(
    parent_job: Job | None, children: ObjectMap, related: ObjectMap, kind: JobKind = TFJOB
) -> Snapshot:
    try:
        nodes = [Node.from_object(o) for o in _objects(related, NODES)]
        node_of_host = {n.hostname: n.name for n in nodes}
        pods: dict[tuple[str, str], Pod] = {}
        for obj in [*_objects(related, PODS), *_objects(children, PODS)]:
            pod = Pod.from_object(obj, node_of_host, kind.container)
            pods[(pod.namespace, pod.name)] = pod
        cluster = Cluster.observe(nodes, pods.values())
    except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as err:
        raise MalformedRequest(f"unreadable Node or Pod in the request: {err}") from err
    jobs: dict[str, Job] = {}
    for obj in _objects(related, job_type_key(kind)):
        try:
            job = parse_job(obj, kind)
        except (InvalidJob, ValueError):
            continue  # an invalid job gets no capacity; its own sync reports why
        jobs[job.key] = job
    if parent_job is not None:
        jobs[parent_job.key] = parent_job
    return Snapshot(cluster, tuple(jobs.values()))


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
) -> Decision:
    """The whole sync hook, as a pure function of the request and ``now``."""
    meta = _metadata(parent)
    status = parent.get("status") or {}
    if not isinstance(status, Mapping):
        raise MalformedRequest("parent.status must be an object")
    try:
        job = parse_job(parent, kind)
    except InvalidJob as err:
        key = f"{meta.namespace}/{meta.name}"
        return invalid(status, kind, key, meta.name, str(err), now)
    snap = observe(job, children, related, kind)
    jp = plan(snap.jobs, snap.cluster, now, config.policy).jobs.get(job.key)
    if jp is None:  # managed by another controller: leave it alone
        return Decision(children=[], status=dict(status))
    return reconcile(jp, snap.cluster, now, config)


def finalize(parent: Mapping[str, Any], children: ObjectMap) -> tuple[Decision, bool]:
    """On deletion: remove every child; finalized once none is left."""
    _metadata(parent)
    remaining = len(_objects(children, PODS)) + len(_objects(children, SERVICES))
    return Decision(children=[], status=dict(parent.get("status") or {})), remaining == 0
