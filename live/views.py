"""What ``kubectl dragonet status``, ``queue`` and ``nodes`` show, as pure functions of the
objects the API server returned and ``now``: one plain dict per row of machine values
(exact quantities, counts, timestamps, seconds), from which ``live/items.py`` makes the
``-o json|yaml`` objects and the tables make their humanised cells.

Pods are read the way the pool reads them (``policy.model.cluster.Pod``: requests of init
containers and overhead, the node a pending pod is pinned to), and quantities are written
the way the pool writes them (``format_quantity``), so these numbers and the pool's status
agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from policy.model.cluster import Node, Pod
from policy.model.kinds import MAIN_CONTAINERS
from policy.model.pool import DEFAULT_POOL, LabelSelector, PoolSpec
from policy.model.resources import PODS, Resources, format_quantity
from policy.model.timeutil import parse_time

Obj = Mapping[str, Any]
_SHOWN = ("cpu", "memory")  # and every GPU-like resource a node has


def age(since: str | None, now: datetime) -> str:
    """kubectl's short duration (``45s``, ``3m12s``, ``5h``, ``2d3h``) since a timestamp."""
    seconds = seconds_since(since, now)
    return "<unknown>" if seconds is None else duration(seconds)


def seconds_since(since: str | None, now: datetime) -> int | None:
    """Whole seconds from a timestamp to ``now`` (None when it cannot be read)."""
    at = parse_time(since) if since else None
    return None if at is None else max(0, int((now - at).total_seconds()))


def duration(seconds: int) -> str:
    """kubectl's short form of a duration (``HumanDuration``): ``45s``, ``3m12s``, ``5h``."""
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def exact_quantity(name: str, milli: int) -> str:
    """A quantity in the API's exact form (``500m``, ``8``, ``32834012Ki``): what
    ``-o json|yaml`` prints, so that a script reads the same amount the API server holds."""
    if milli % 1000:
        return f"{milli}m"
    units = milli // 1000
    if name.endswith("memory") or name.startswith(("ephemeral-storage", "hugepages-")):
        for suffix, size in _BINARY:
            if units and units % size == 0:
                return f"{units // size}{suffix}"
    return str(units)


def human_quantity(name: str, quantity: str | None) -> str:
    """An exact quantity as a table shows it, rounded the way the pool writes it (``31.3Gi``)."""
    return format_quantity(name, Resources.parse({name: quantity or "0"})[name])


def _quantities(values: Resources, names: Iterable[str]) -> dict[str, str]:
    return {k: exact_quantity(k, values[k]) for k in names}


def _headline(names: Iterable[str]) -> list[str]:
    """The resources a table shows: GPUs if any, then cpu and memory."""
    names = list(names)
    gpus = sorted(k for k in names if k.endswith("/gpu") or k.endswith("gpu"))
    return [*gpus, *(k for k in _SHOWN if k in names)]


def pool_rows(pools: Iterable[Obj]) -> list[dict[str, Any]]:
    """``status``: each pool's policy, nodes, queued and admitted jobs, and free room."""
    rows = []
    for pool in sorted(pools, key=lambda p: p["metadata"]["name"]):
        spec, status = pool.get("spec") or {}, pool.get("status") or {}
        capacity = Resources.parse(status.get("capacity"))
        allocated = Resources.parse(status.get("allocated"))
        names = sorted(k for k in capacity if k != PODS)
        row: dict[str, Any] = {
            "name": pool["metadata"]["name"],
            "policy": spec.get("policy") or PoolSpec.model_fields["policy"].default,
            "stopPolicy": spec.get("stopPolicy") or PoolSpec.model_fields["stopPolicy"].default,
            "nodes": status.get("nodes", 0),
            "queued": status.get("queued", 0),
            "admitted": status.get("admitted", 0),
            "capacity": _quantities(capacity, names),
            "allocated": _quantities(allocated, names),
            "free": _quantities(capacity - allocated, names),
        }
        if status.get("message"):
            row["message"] = status["message"]
        rows.append(row)
    return rows


def queue_rows(
    pools: Iterable[Obj],
    now: datetime,
    namespace: str | None = None,
    messages: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """``queue``: each pool's listed queue (``status.queue``), in order, with how long
    each job has waited; only ``namespace``'s jobs when given (positions stay the pool's).
    ``messages`` (job key -> its status message) adds the full why (``-o wide``)."""
    rows = []
    for pool in sorted(pools, key=lambda p: p["metadata"]["name"]):
        for entry in (pool.get("status") or {}).get("queue") or []:
            job = str(entry.get("job", ""))
            if namespace is not None and not job.startswith(f"{namespace}/"):
                continue
            row = {
                "pool": pool["metadata"]["name"],
                "position": entry.get("position"),
                "job": job,
                "kind": entry.get("kind", ""),
                "priority": entry.get("priority", 0),
                "lasQueue": entry.get("lasQueue"),
                "enqueued": entry.get("enqueued"),
                "waitedSeconds": seconds_since(entry.get("enqueued"), now)
                if entry.get("enqueued")
                else 0,
                "reason": entry.get("reason", ""),
            }
            if messages is not None:
                row["message"] = messages.get(f"{row['kind']}:{job}", "")
            rows.append(row)
    return rows


ELSEWHERE = "(another namespace)"


def unnamed(rows: list[dict[str, Any]], readable: Iterable[str]) -> list[dict[str, Any]]:
    """The rows of jobs the caller may not read (outside ``readable`` namespaces) with
    their name left out: their place in line stays, whose job it is does not."""
    mine = set(readable)
    return [
        r if str(r["job"]).partition("/")[0] in mine else {**r, "job": ELSEWHERE, "message": ""}
        for r in rows
    ]


def place(queue: Mapping[str, Any], key: str = "position") -> str:
    """A place or a length as a job's status writes it: exact, or its range ("11-20")."""
    first, last = queue.get(key), queue.get(f"{key}Max")
    return f"{first}-{last}" if last is not None else str(first or "")


def own_queue_rows(
    jobs: Iterable[Obj], now: datetime, pool: str | None = None
) -> list[dict[str, Any]]:
    """``queue`` without access to the pools: each waiting job's place, from its own
    status (``status.scheduling.queue``, which the pool writes into the job's Admission
    and the job's sync copies), ordered as the pool admits them."""
    rows = []
    for job in jobs:
        meta, status = job.get("metadata") or {}, job.get("status") or {}
        scheduling = status.get("scheduling") or {}
        if scheduling.get("phase") != "Queued" or (pool and scheduling.get("pool") != pool):
            continue
        queue = dict(scheduling.get("queue") or {})
        enqueued = status.get("enqueueTime")
        rows.append(
            {
                "pool": scheduling.get("pool", ""),
                "position": queue.get("position"),
                "job": f"{meta.get('namespace')}/{meta.get('name')}",
                "kind": job.get("kind", ""),
                "enqueued": enqueued,
                "waitedSeconds": seconds_since(enqueued, now) if enqueued else 0,
                "reason": scheduling.get("reason", ""),
                "message": scheduling.get("message", ""),
                "place": queue or None,
            }
        )
    return sorted(rows, key=lambda r: (r["pool"], r["position"] or 2**31, r["job"]))


def listed_more(pools: Iterable[Obj]) -> list[str]:
    """One line per pool whose status lists fewer waiting jobs than it counts."""
    out = []
    for pool in pools:
        status = pool.get("status") or {}
        listed, queued = len(status.get("queue") or []), status.get("queued", 0)
        if queued > listed:
            out.append(
                f"TrainingPool {pool['metadata']['name']}: {queued} jobs wait; its status "
                f"lists the first {listed}"
            )
    return out


def pools_of(node: Obj, pools: Sequence[Obj]) -> list[str]:
    """The pools whose nodeSelector takes the node."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    out = []
    for pool in pools:
        selector = (pool.get("spec") or {}).get("nodeSelector") or {}
        try:
            if LabelSelector.model_validate(selector).matches(labels):
                out.append(pool["metadata"]["name"])
        except ValueError:
            continue
    return out


def node_rows(
    nodes: Sequence[Obj], pods: Iterable[Obj], pools: Sequence[Obj]
) -> list[dict[str, Any]]:
    """``nodes``: what each node holds (pods by job) and has free, per resource; a pod
    counts on the node it is bound or pinned to until it ends, as in the pool's sync.
    A node or pod that cannot be read is left out, as the pool leaves it out."""
    parsed: list[tuple[Node, Obj]] = []
    for obj in nodes:
        try:
            parsed.append((Node.from_object(obj), obj))
        except (ValueError, TypeError, AttributeError):
            continue
    by_node: dict[str, list[Pod]] = {n.name: [] for n, _ in parsed}
    host = {n.hostname: n.name for n, _ in parsed}
    for obj in pods:
        try:
            pod = Pod.from_object(obj, MAIN_CONTAINERS)
        except (ValueError, TypeError, AttributeError):
            continue
        node = host.get(pod.node or "", pod.node)
        if node in by_node and pod.occupies:
            by_node[node].append(pod)
    rows = []
    for node, obj in parsed:
        held = by_node[node.name]
        requested = Resources.total(p.request for p in held)
        names = sorted(k for k in node.allocatable if k != PODS)
        jobs: dict[str, int] = {}
        for p in held:
            jobs[p.job or "(other)"] = jobs.get(p.job or "(other)", 0) + 1
        row: dict[str, Any] = {
            "name": node.name,
            "pools": pools_of(obj, pools),
            "allocatable": _quantities(node.allocatable, names),
            "requested": _quantities(requested, names),
            "free": _quantities(node.allocatable - requested, names),
            "pods": len(held),
            "jobs": dict(sorted(jobs.items())),
        }
        if node.unschedulable_reason:
            row["unschedulable"] = node.unschedulable_reason
        rows.append(row)
    return rows


def headline(rows: Iterable[Mapping[str, Any]], field: str = "free") -> list[str]:
    """The resources a table of these rows shows (GPUs first, then cpu and memory)."""
    names: set[str] = set()
    for row in rows:
        names.update(row.get(field) or {})
    return _headline(names)


def utc_now() -> datetime:
    return datetime.now(UTC)


def job_pool(job: Obj) -> str:
    """The pool a job names (``spec.runPolicy.schedulingPolicy.queue``), else default."""
    from policy.model.pool import pool_of

    spec = job.get("spec")
    return pool_of(spec) if isinstance(spec, Mapping) else DEFAULT_POOL
