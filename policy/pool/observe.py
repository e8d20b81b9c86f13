"""From the pool's hook request to the immutable snapshot its cycle plans on.

Metacontroller's v2 maps (``Kind.group/version`` -> ``namespace/name`` -> object) are read
here and nowhere else in the pool. Pods an Admission places but whose job has not created
them yet join the observed pods as *assumed* pods, so they hold their node's room.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.memo import Memo, content_key
from policy.model import conditions as cond
from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.admission import Admission
from policy.model.cluster import Cluster, Node, Pod
from policy.model.jobs import TFJOB, InvalidJob, Job, JobKind, child_name, parse_job
from policy.model.pool import DEFAULT_POOL, POOL_KIND, VERSION, PoolSpec
from policy.model.priority import Priorities

NODES = "Node.v1"
PODS = "Pod.v1"
PRIORITY_CLASSES = "PriorityClass.scheduling.k8s.io/v1"
POOLS = f"{POOL_KIND}.{VERSION}"
KINDS: tuple[JobKind, ...] = (TFJOB,)

ObjectMap = Mapping[str, Mapping[str, Mapping[str, Any]]]


class MalformedRequest(ValueError):
    """The request is not a hook request we can read (answered with HTTP 400)."""


@dataclass(frozen=True)
class PoolSnapshot:
    name: str
    spec: PoolSpec
    cluster: Cluster  # the pool's nodes; observed and assumed pods
    jobs: tuple[Job, ...]  # the pool's valid jobs
    admissions: Mapping[str, Admission]  # observed, by job key, for jobs that still exist
    priorities: Priorities = field(default_factory=Priorities)
    # Jobs that name a pool that does not exist (seen by the default pool only), and that pool.
    orphans: tuple[tuple[Job, str], ...] = ()
    other_pools: tuple[str, ...] = ()


def job_type_key(kind: JobKind) -> str:
    return f"{kind.kind}.{kind.api_version}"


def objects(group: ObjectMap, type_key: str) -> list[Mapping[str, Any]]:
    objs = group.get(type_key) or {}
    if not isinstance(objs, Mapping):
        raise MalformedRequest(f"{type_key} must map names to objects")
    return [o for o in objs.values() if isinstance(o, Mapping)]


def parsed_job(obj: Mapping[str, Any], kind: JobKind, memo: Memo) -> Job | InvalidJob:
    def make() -> Job | InvalidJob:
        try:
            return parse_job(obj, kind)
        except InvalidJob as err:
            return err

    return memo.get(content_key("job", obj, kind.kind), make)


def _admissions(children: ObjectMap, memo: Memo) -> dict[str, Admission]:
    out: dict[str, Admission] = {}
    for obj in objects(children, ADMISSIONS):
        try:
            key = content_key("admission", obj)
            adm = memo.get(key, lambda obj=obj: Admission.from_object(obj))
        except ValueError:
            continue  # not readable: the pool writes it anew
        out[adm.job_key] = adm
    return out


def _jobs(
    related: ObjectMap, pool: str, known_pools: frozenset[str] | None, memo: Memo
) -> tuple[list[Job], list[tuple[Job, str]]]:
    """The pool's valid jobs, and (default pool only) jobs naming a pool that does not exist.
    An invalid job gets no capacity; its own sync reports why."""
    mine: list[Job] = []
    orphans: list[tuple[Job, str]] = []
    for kind in KINDS:
        for obj in objects(related, job_type_key(kind)):
            try:
                job = parsed_job(obj, kind, memo)
            except (ValueError, TypeError, KeyError, AttributeError):
                continue  # unreadable: one job never stops the plan for everyone else
            if isinstance(job, InvalidJob):
                continue
            if job.pool == pool:
                mine.append(job)
            elif known_pools is not None and job.pool not in known_pools:
                orphans.append((job, job.pool))
    return mine, orphans


def _assumed(
    job: Job, admission: Admission, existing: set[tuple[str, str]], nodes: Mapping
) -> list[Pod]:
    """Pods the Admission places that the job has not created: they hold their room."""
    out = []
    for p in admission.pods:
        replica = job.replicas.get(p.type)
        if replica is None or (job.namespace, child_name(job, p.type, p.index)) in existing:
            continue
        node = nodes.get(p.node) if p.node is not None else None
        if p.node is not None and (node is None or node.unschedulable_reason):
            continue  # its node left the pool or takes no new pods: placed again
        out.append(Pod.assume(job.namespace, job.name, p.slot, p.node, replica.request))
    return out


def _may_run(job: Job) -> bool:
    """Not finished, suspended or going away: its Admission's pods are still to come."""
    ended = cond.terminal(job.status.get("conditions") or [])
    return ended is None and not job.suspend and not job.deleting and not job.managed_elsewhere


def observe(
    parent: Mapping[str, Any], children: ObjectMap, related: ObjectMap, memo: Memo
) -> PoolSnapshot:
    """Raises ``MalformedRequest`` for a request we cannot read, ``ValueError`` for a pool
    spec we cannot use."""
    meta = parent.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise MalformedRequest("parent.metadata.name must be a string")
    name = meta["name"]
    spec = PoolSpec.model_validate(parent.get("spec") or {})
    try:
        node_objs = objects(related, NODES)
        nodes = [
            memo.get(content_key("node", o), lambda o=o: Node.from_object(o)) for o in node_objs
        ]
        renamed = {n.hostname: n.name for n in nodes if n.hostname != n.name}
        pods: dict[tuple[str, str], Pod] = {}
        for obj in objects(related, PODS):
            pod = memo.get(
                content_key("pod", obj, TFJOB.container),
                lambda obj=obj: Pod.from_object(obj, TFJOB.container),
            )
            if renamed:
                pod = pod.on_nodes(renamed)
            pods[(pod.namespace, pod.name)] = pod
    except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as err:
        raise MalformedRequest(f"unreadable Node or Pod in the request: {err}") from err
    known = None
    others: tuple[str, ...] = ()
    if name == DEFAULT_POOL:
        others = tuple(
            sorted(
                o["metadata"]["name"]
                for o in objects(related, POOLS)
                if isinstance(o.get("metadata"), Mapping)
                and isinstance(o["metadata"].get("name"), str)
            )
        )
        known = frozenset((name, *others))
    jobs, orphans = _jobs(related, name, known, memo)
    by_key = {j.key: j for j in jobs}
    admissions = {
        k: a
        for k, a in _admissions(children, memo).items()
        if k in by_key and a.job_uid in ("", by_key[k].uid) and a.job_kind == by_key[k].kind.kind
    }
    existing = set(pods)
    by_name = {n.name: n for n in nodes}
    assumed = [
        pod
        for key, adm in admissions.items()
        if adm.admitted and _may_run(by_key[key])
        for pod in _assumed(by_key[key], adm, existing, by_name)
    ]
    cluster = Cluster.observe(nodes, [*pods.values(), *assumed])
    priorities = Priorities.observe(objects(related, PRIORITY_CLASSES))
    return PoolSnapshot(
        name, spec, cluster, tuple(jobs), admissions, priorities, tuple(orphans), others
    )
