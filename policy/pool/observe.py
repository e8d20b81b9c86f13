"""From the pool's hook request to the immutable snapshot its cycle plans on.

Metacontroller's v2 maps (``Kind.group/version`` -> ``namespace/name`` -> object) are read
here and nowhere else in the pool, but for one fallback: when the request cannot be read
(or the pool is held), ``sync`` echoes the Admissions it was sent without parsing them.
Pods an Admission places but whose job has not created them yet join the observed pods as
*assumed* pods, so they hold their node's room.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import orjson

from policy.memo import MISSING, NO_MEMO, Encoded, Memo
from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.admission import Admission, Placement
from policy.model.cluster import L_JOB, Cluster, Node, Pod
from policy.model.gpushare import SHAREPODS, with_device
from policy.model.jobs import InvalidJob, Job, child_name, job_or_why
from policy.model.kinds import KINDS, MAIN_CONTAINERS
from policy.model.migration import TYPE_KEY as MIGRATIONS
from policy.model.migration import MigrationRequest
from policy.model.podspec import pod_limits
from policy.model.pool import DEFAULT_POOL, POOL_KIND, VERSION, PoolSpec
from policy.model.priority import Priorities
from policy.model.priority import entry as priority_class
from policy.model.request import UNREADABLE, MalformedRequest, ObjectMap, items, job_type_key
from policy.model.speedup import Speedup
from policy.model.speedup import of_jobs as speedups_of
from policy.model.tensorboard import LABEL as TB
from policy.model.tensorboard import SLOT as TENSORBOARD

NODES = "Node.v1"
PODS = "Pod.v1"
PRIORITY_CLASSES = "PriorityClass.scheduling.k8s.io/v1"
POOLS = f"{POOL_KIND}.{VERSION}"

T = TypeVar("T")


@dataclass(frozen=True)
class PoolSnapshot:
    name: str
    spec: PoolSpec  # the same object again while the spec's content is (policy.memo)
    cluster: Cluster  # the pool's nodes; observed and assumed pods
    jobs: tuple[Job, ...]  # the pool's valid jobs
    admissions: Mapping[str, Admission]  # observed, by job key, for jobs that still exist
    priorities: Priorities = field(default_factory=Priorities)
    # Jobs that name a pool that does not exist (seen by the default pool only), and that pool.
    orphans: tuple[tuple[Job, str], ...] = ()
    other_pools: tuple[str, ...] = ()
    # Jobs asking for fractional GPUs in a pool without KubeShare: they wait, told why.
    no_kubeshare: tuple[Job, ...] = ()
    # Objects of the request that could not be read, and why: left out of the plan.
    problems: tuple[str, ...] = ()
    # The other pools' gang schedulers (default pool only; None elsewhere): (name,
    # gangScheduler, schedulerName), to tell a job which pool writes the PodGroup it asks for.
    other_gangs: tuple[tuple[str, str, str], ...] | None = None
    # Migration requests, by the key of the job whose pod they ask to move.
    requests: Mapping[str, tuple[MigrationRequest, ...]] = field(default_factory=dict)
    # The spec as canonical JSON (what memos key on); None if JSON cannot hold a value of it.
    spec_content: bytes | None = b"{}"
    # Reporting jobs' throughput models, by job key (policy.model.speedup; docs/speedup.md).
    speedups: Mapping[str, Speedup] = field(default_factory=dict)


def _admissions(children: ObjectMap, memo: Memo) -> dict[str, Admission]:
    out: dict[str, Admission] = {}
    for name, obj in items(children, ADMISSIONS):
        if not isinstance(obj, Mapping):
            continue
        try:
            adm = memo.parsed("admission", obj, Admission.from_object, name)
        except ValueError:
            continue  # not readable: the pool writes it anew
        out[adm.job_key] = adm
    return out


def _jobs(
    related: ObjectMap,
    pool: str,
    known_pools: frozenset[str] | None,
    memo: Memo,
    problems: list[str],
) -> tuple[list[Job], list[tuple[Job, str]]]:
    """The pool's valid jobs, and (default pool only) jobs naming a pool that does not exist.
    An invalid job gets no capacity; its own sync reports why."""
    mine: list[Job] = []
    orphans: list[tuple[Job, str]] = []
    for kind in KINDS:
        # One job that cannot be read never stops the plan for everyone else.
        read = partial(job_or_why, kind=kind)
        for job in read_objects(related, job_type_key(kind), read, problems, memo):
            if isinstance(job, InvalidJob):
                continue  # its own sync marks it Failed with what is wrong
            if job.managed_elsewhere:
                continue  # MultiKueue's: no pool plans it, none tells it of a missing pool
            if job.pool == pool:
                mine.append(job)
            elif known_pools is not None and job.pool not in known_pools:
                orphans.append((job, job.pool))
    return mine, orphans


def _assumed(
    job: Job,
    admission: Admission,
    existing: set[tuple[str, str]],
    nodes: Mapping,
    boarded: frozenset[tuple[str, str]],
    memo: Memo,
) -> list[Pod]:
    """Pods the Admission places that the job has not created: they hold their room."""
    slots, assumed = memo.derive("slots", (job, admission), partial(_slots, job, admission))
    out = []
    for i, (p, key, board) in enumerate(slots):
        if key in (boarded if board else existing):
            continue
        if p.node is not None and ((n := nodes.get(p.node)) is None or n.unschedulable_reason):
            continue  # its node left the pool or takes no new pods: placed again
        pod = assumed.get(i)
        if pod is None:
            pod = assumed[i] = _assume(job, p)
        out.append(pod)
    return out


def _slots(
    job: Job, admission: Admission
) -> tuple[tuple[tuple[Placement, tuple[str, str], bool], ...], dict[int, Pod]]:
    """The Admission's pods this job may have, each with the key that says it exists (its
    namespace and pod name; for a TensorBoard, its job's) and whether it is a TensorBoard;
    and, by slot, the pods assumed so far for those not created yet (filled as needed)."""
    out = []
    for p in admission.pods:
        if p.slot == TENSORBOARD:
            if job.tensorboard_request is not None:
                out.append((p, (job.namespace, job.name), True))
        elif p.type in job.replicas:
            out.append((p, (job.namespace, p.pod or child_name(job, p.type, p.index)), False))
    return tuple(out), {}


def _assume(job: Job, p: Placement) -> Pod:
    if p.slot == TENSORBOARD:
        request, limits = job.tensorboard_request, None
    else:
        replica = job.replicas[p.type]
        request, limits = replica.request, pod_limits(replica.template.get("spec") or {})
    assert request is not None  # (_slots keeps a TensorBoard only with its request)
    if p.gpu is not None:
        request = with_device(request, p.gpu)
    return Pod.assume(job.namespace, job.name, p.slot, p.node, request, p.pod, limits)


def _may_run(job: Job) -> bool:
    """Not finished, suspended or going away: its Admission's pods are still to come."""
    return not (job.finished or job.suspend or job.deleting or job.managed_elsewhere)


def observe(
    parent: Mapping[str, Any], children: ObjectMap, related: ObjectMap, memo: Memo
) -> PoolSnapshot:
    """Raises ``MalformedRequest`` for a request we cannot read, ``ValueError`` for a pool
    spec we cannot use."""
    meta = parent.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise MalformedRequest("parent.metadata.name must be a string")
    name = meta["name"]
    raw_spec = parent.get("spec") or {}
    try:
        spec_content: bytes | None = orjson.dumps(raw_spec, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a value JSON cannot hold (an integer beyond 64 bits): not memoised
        spec_content = None
    spec = memo.get(
        ("pool-spec", spec_content) if spec_content is not None else None,
        partial(PoolSpec.model_validate, raw_spec),
    )
    problems: list[str] = []
    nodes = read_objects(related, NODES, Node.from_object, problems, memo)
    renamed = {n.hostname: n.name for n in nodes if n.hostname != n.name}
    pods: dict[tuple[str, str], Pod] = {}
    types = (PODS, SHAREPODS) if spec.kubeshare == "v1" else (PODS,)
    # (How a pod reads depends on the mode: the memo keys on it.)
    read_pod = partial(Pod.in_pool, main=MAIN_CONTAINERS, kubeshare=spec.kubeshare)
    tag = "" if spec.kubeshare == "none" else f" {spec.kubeshare}"
    for type_key in types:
        for pod in read_objects(related, type_key, read_pod, problems, memo, type_key + tag):
            if pod is not None:
                pods[(pod.namespace, pod.name)] = pod.on_nodes(renamed) if renamed else pod
    known = None
    others: tuple[str, ...] = ()
    gangs: tuple[tuple[str, str, str], ...] | None = None
    if name == DEFAULT_POOL:
        pools = [p for p in read_objects(related, POOLS, _other_pool, [], NO_MEMO) if p is not None]
        others = tuple(sorted(n for n, _ in pools))
        known = frozenset((name, *others))
        gangs = tuple(sorted((n, *gang) for n, gang in pools if gang is not None))
    jobs, orphans = _jobs(related, name, known, memo, problems)
    refused: list[Job] = []
    if spec.kubeshare == "none":
        refused = [j for j in jobs if j.wants_kubeshare]
        jobs = [j for j in jobs if not j.wants_kubeshare]
    by_key = {j.key: j for j in jobs}
    admissions = {
        k: a
        for k, a in _admissions(children, memo).items()
        if k in by_key and a.job_uid in ("", by_key[k].uid) and a.job_kind == by_key[k].kind.kind
    }
    existing = set(pods)
    boarded = frozenset(  # (namespace, job) whose TensorBoard pod exists and may run
        (p.namespace, p.labels[L_JOB])
        for p in pods.values()
        if p.job and p.replica_type == TB and p.live and not p.stuck
    )
    by_name = {n.name: n for n in nodes}
    assumed = [
        pod
        for key, adm in admissions.items()
        if adm.admitted and _may_run(by_key[key])
        for pod in _assumed(by_key[key], adm, existing, by_name, boarded, memo)
    ]
    cluster = Cluster.observe(nodes, [*pods.values(), *assumed], spec.kubeshare != "none", memo)
    priorities = Priorities.of(
        read_objects(related, PRIORITY_CLASSES, priority_class, problems, memo)
    )
    requests = _requests(related, pods, by_key, problems)
    speedups = speedups_of(jobs, memo.get, problems)
    return PoolSnapshot(
        name,
        spec,
        cluster,
        tuple(jobs),
        admissions,
        priorities,
        tuple(orphans),
        others,
        tuple(refused),
        tuple(sorted(problems)),
        gangs,
        requests,
        spec_content,
        speedups,
    )


def _other_pool(obj: Mapping[str, Any]) -> tuple[str, tuple[str, str] | None] | None:
    """A pool's name, and its gang scheduler (gangScheduler, schedulerName) if it uses one;
    a spec that cannot be read uses none. None for a pool without a name."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str):
        return None
    try:
        spec = PoolSpec.model_validate(obj.get("spec") or {})
    except ValueError:
        return name, None
    return name, (spec.gangScheduler, spec.scheduler_name) if spec.gangScheduler != "none" else None


def _requests(
    related: ObjectMap,
    pods: Mapping[tuple[str, str], Pod],
    jobs: Mapping[str, Job],
    problems: list[str],
) -> dict[str, tuple[MigrationRequest, ...]]:
    """Migration requests for the pool's jobs, by job key: the job its labels name (as the
    Container Monitor copies them from the pod), else the job of the pod it names."""
    out: dict[str, list[MigrationRequest]] = {}
    for q, named in read_objects(related, MIGRATIONS, _migration, problems, NO_MEMO):
        pod = pods.get((q.namespace, q.pod))
        job = f"{q.namespace}/{named}" if named else None
        job = job or (pod.job if pod is not None else None)
        if job in jobs:
            out.setdefault(job, []).append(q)
    return {k: tuple(v) for k, v in out.items()}


def _migration(obj: Mapping[str, Any]) -> tuple[MigrationRequest, str | None]:
    """A migration request, and the job its labels name (None: they name none)."""
    q = MigrationRequest.from_object(obj)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    named = labels.get(L_JOB) if isinstance(labels, Mapping) else None
    return q, named if isinstance(named, str) and named else None


def read_objects(
    group: ObjectMap,
    type_key: str,
    parse: Callable[[Mapping[str, Any]], T],
    problems: list[str],
    memo: Memo,
    tag: str | None = None,
) -> list[T]:
    """``parse`` of each object of a type, handed the object decoded, once per content:
    ``memo`` keeps each parse by the object's name and bytes (under ``tag``: the type key
    unless said), and a warm sync parses nothing again. An object that cannot be read is
    left out, and said in ``problems``."""
    objs = group.get(type_key) or {}
    if not isinstance(objs, Mapping):
        raise MalformedRequest(f"{type_key} must map names to objects")
    tag = tag or type_key
    out: list[T] = []
    for key, obj in objs.items():
        raw = obj.raw if type(obj) is Encoded else None
        value = MISSING if raw is None else memo.kept(tag, key, raw)
        if value is MISSING:
            try:
                if not isinstance(obj, Mapping):
                    raise TypeError("not an object")
                value = parse(obj if raw is None else obj.decoded())
            except UNREADABLE as err:
                problems.append(f"{type_key.split('.', 1)[0]} {key} is left out: {_why(err)}")
                continue
            if raw is not None:
                memo.keep(tag, key, raw, value)
        out.append(value)
    return out


def _why(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."
