"""The Migration controller's hooks: a request's status is the pool's answer, copied.

Metacontroller writes only a parent's status and its children, and the pool's children are
Admissions; so each Migration is the parent of a tiny controller (``dragonet-migrations``)
whose customize asks for its job's Admission and whose sync reports the answer the pool
recorded there. It decides nothing: kill it at any moment, and the next sync writes the
same status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.admission import Admission
from policy.model.cluster import L_JOB
from policy.model.kinds import KINDS
from policy.model.migration import DONE, MOVING, PENDING, REFUSED, MigrationRequest
from policy.model.pool import VERSION, admission_name
from policy.model.request import MalformedRequest

WAITING_FOR_POOL = "WaitingForPool"
# A pod Dragonet names: {job}-{type}-{index}, a moved worker's ...-m<n>.
_POD_NAME = re.compile(
    r"^(?P<job>.+)-(?:worker|ps|chief|master|evaluator|server|scheduler)-\d+(?:-m\d+)?$"
)


def _meta(parent: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any]]:
    meta = parent.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise MalformedRequest("parent.metadata.name must be a string")
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise MalformedRequest("parent.metadata.labels must be an object")
    return meta["name"], str(meta.get("namespace") or "default"), labels


def job_of(parent: Mapping[str, Any]) -> str | None:
    """The job whose pod the request names: its label (the monitor copies the pod's),
    else read from the pod's name."""
    name, _, labels = _meta(parent)
    job = labels.get(L_JOB)
    if isinstance(job, str) and job:
        return job
    spec = parent.get("spec")
    pod = spec.get("pod") if isinstance(spec, Mapping) else None
    m = _POD_NAME.match(pod if isinstance(pod, str) else name)
    return m.group("job") if m else None


def related_rules(parent: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Admissions a job of that name may have (one per job kind), by name."""
    _, namespace, _ = _meta(parent)
    job = job_of(parent)
    if job is None:
        return []
    return [
        {
            "apiVersion": VERSION,
            "resource": "admissions",
            "namespace": namespace,
            "names": [admission_name(k.kind, job) for k in KINDS],
        }
    ]


def sync(parent: Mapping[str, Any], related: Mapping[str, Any]) -> dict[str, Any]:
    """The request's status: the pool's answer, or why there is none yet."""
    name, namespace, _ = _meta(parent)
    try:
        request = MigrationRequest.from_object(parent)
    except ValueError as err:
        return {"phase": "Refused", "reason": "Invalid", "message": str(err)}
    job = job_of(parent)
    for obj in (related.get(ADMISSIONS) or {}).values():
        if not isinstance(obj, Mapping):
            continue
        try:
            admission = Admission.from_object(obj)
        except ValueError:
            continue
        if admission.namespace != namespace or admission.job_name != job:
            continue
        for d in admission.migrations:
            if d.request == name and d.uid in ("", request.uid):
                return d.status()
    kept = parent.get("status")
    if isinstance(kept, Mapping) and kept.get("phase") in (MOVING, DONE, REFUSED):
        # The answer is no longer in an Admission (the job finished or went away): an
        # answer never changes, so the request keeps the one it was given.
        return {k: kept[k] for k in ("phase", "target", "reason", "message") if k in kept}
    who = f"job {job}" if job else f"the job of pod {request.pod}"
    return {
        "phase": PENDING,
        "reason": WAITING_FOR_POOL,
        "message": f"waiting for the pool to decide ({who} has no answer for it yet)",
    }
