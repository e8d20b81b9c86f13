"""When a finished job is deleted: Kubeflow's ``runPolicy.ttlSecondsAfterFinished``.

Kubeflow's controller deletes a job that many seconds after its ``completionTime``. A
Metacontroller hook cannot delete its own parent, so a small controller of its own, the
reaper (``reaper/``), does it; the rule lives here, read from the job *as stored*, so that
a job its own sync failed as invalid expires like any other, and the simulator runs the
very same rule. Pure: the caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from policy.model.bounds import MAX_TTL_SECONDS
from policy.model.jobs import labels_of, managed_elsewhere
from policy.model.timeutil import format_time, parse_time

FIELD = "ttlSecondsAfterFinished"
_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Expiry:
    """A finished job and when it is to be deleted (its uid: delete that one, not a job
    created since under the same name)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    at: datetime

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Sweep:
    due: tuple[Expiry, ...]  # to delete now, oldest expiry first
    next_at: datetime | None  # the soonest expiry still to come (None: none known)


def ttl_seconds(spec: Any) -> int | None:
    """``runPolicy.ttlSecondsAfterFinished``, else the field at the top of the spec
    (tf-operator v1.0's layout); None when unset or not a count of seconds (the job's
    own sync fails such a job, naming the field)."""
    if not isinstance(spec, Mapping):
        return None
    run = spec.get("runPolicy")
    value = run.get(FIELD) if isinstance(run, Mapping) else None
    if value is None:
        value = spec.get(FIELD)
    if type(value) is not int or not 0 <= value <= MAX_TTL_SECONDS:
        return None
    return value


def finished_at(status: Any) -> datetime | None:
    """When the job ended: its ``completionTime``, else when its Succeeded or Failed
    condition became true; None while it has not ended."""
    if not isinstance(status, Mapping):
        return None
    conditions = status.get("conditions")
    ended = [
        c
        for c in (conditions if isinstance(conditions, list) else ())
        if isinstance(c, Mapping) and c.get("type") in _ENDED and c.get("status") == "True"
    ]
    if not ended:
        return None
    for stamp in (status.get("completionTime"), *(c.get("lastTransitionTime") for c in ended)):
        when = parse_time(stamp) if isinstance(stamp, str) else None
        if when is not None:
            return when
    return None


def _held(spec: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """Kubeflow applies no TTL while a job is suspended, nor to MultiKueue's jobs; a job
    Kubeflow runs beside Dragonet is Kubeflow's to delete (docs/kubeflow.md)."""
    run = spec.get("runPolicy")
    suspended = (isinstance(run, Mapping) and run.get("suspend") is True) or spec.get("suspend")
    return suspended is True or managed_elsewhere(spec, labels)


def expiry(obj: Mapping[str, Any]) -> Expiry | None:
    """When this job is to be deleted; None if never (no TTL, not finished, suspended,
    run by MultiKueue, or already being deleted)."""
    meta, spec = obj.get("metadata"), obj.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return None
    if meta.get("deletionTimestamp") is not None or _held(spec, labels_of(obj)):
        return None
    ttl = ttl_seconds(spec)
    ended = finished_at(obj.get("status")) if ttl is not None else None
    name, namespace = meta.get("name"), meta.get("namespace", "default")
    if ttl is None or ended is None or not isinstance(name, str) or not name:
        return None
    try:
        at = ended + timedelta(seconds=ttl)
    except OverflowError:  # past the calendar: never
        return None
    return Expiry(
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(namespace),
        name,
        str(meta.get("uid", "")),
        at,
    )


def sweep(jobs: Iterable[Mapping[str, Any]], now: datetime) -> Sweep:
    """The jobs due for deletion at ``now``, and when the next one falls due."""
    due: list[Expiry] = []
    later: list[datetime] = []
    for obj in jobs:
        e = expiry(obj) if isinstance(obj, Mapping) else None
        if e is None:
            continue
        if e.at <= now:
            due.append(e)
        else:
            later.append(e.at)
    due.sort(key=lambda e: (e.at, e.namespace, e.name))
    return Sweep(tuple(due), min(later) if later else None)


def deletion_note(job_kind: str, spec: Any, completed: Any) -> str:
    """What a finished job's status says of its deletion, from its spec and the
    ``completionTime`` it writes ("" without a TTL): the reaper's rule, in words."""
    ttl = ttl_seconds(spec)
    ended = parse_time(completed) if isinstance(completed, str) else None
    if ttl is None or ended is None or _held(spec, {}):
        return ""
    try:
        at = format_time(ended + timedelta(seconds=ttl))
    except OverflowError:
        return ""
    return f"the {job_kind} is deleted at {at} (runPolicy.{FIELD}: {ttl})"
