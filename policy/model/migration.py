"""A migration request (``crd/migrations.dragonet.io.yaml``) and what the pool decides of it.

A ``Migration`` asks the pool to move one running pod to another node, make-before-break.
It is named after the pod (one live request per pod: a second create is a 409, so requests
are idempotent), owned by the pod (it dies with it), and created by the Container Monitor
or by an operator with ``kubectl``. Its spec is never changed; only Dragonet writes its
status. The pool's decisions and the durable move count live in the job's Admission
(``moves``, ``migrations``), so they survive a webhook restart (docs/migration.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policy.model.bounds import MAX_EVENTS, MAX_REPLICAS, whole
from policy.model.pool import GROUP, VERSION
from policy.model.timeutil import format_time, parse_time

MIGRATION_KIND = "Migration"
TYPE_KEY = f"{MIGRATION_KIND}.{VERSION}"  # Metacontroller's map key for Migrations

# A request's phase (status.phase).
PENDING = "Pending"  # not decided yet (the pool has not seen it, or it is throttled)
MOVING = "Moving"  # a replacement is being started on status.target
DONE = "Done"  # the replacement runs; the old pod is gone or going
REFUSED = "Refused"  # not moved: status.reason says why
Phase = Literal["Pending", "Moving", "Done", "Refused"]
Reason = Literal["Converged", "Overloaded", "Manual"]  # why a request asks (the CRD enum)

# Why a request is refused or waits (status.reason).
NO_ROOM = "NoRoom"  # no other node has room for the pod's requests
SAME_NODE = "SameNode"  # the best node is the one it is on
MOVE_CAP_REACHED = "MoveCapReached"  # this worker has moved maxMoves times
NOT_A_WORKER = "NotAWorker"  # a parameter server, a scheduler, ...: never moved
IS_CHIEF = "IsChief"  # worker 0 is the job's chief and the job does not survive losing it
STALE = "Stale"  # the pod is not on spec.node (any more), or does not exist
THROTTLED = "Throttled"  # this worker moved less than minIntervalSeconds ago: waits
NOT_RUNNING = "NotRunning"  # the pod or its job does not run (yet): nothing to move
DISABLED = "MigrationDisabled"  # the pool's migration.enabled is false
NO_GAIN = "NoGain"  # (dragonet) no node would make the worker faster than where it is
ALREADY_MOVING = "AlreadyMoving"  # another request moves this worker now
PLANNED = "Planned"  # (status of a Moving/Done request) the pool chose status.target

# The move number of a replacement pod: ``{job}-{type}-{index}-m{n}`` (DRAGON appended a
# random id; a number makes the durable count visible in ``kubectl get pods``).
_MOVE_SUFFIX = re.compile(r"-m([1-9][0-9]*)$")
MOVE_ANNOTATION = f"{GROUP}/move"
# A job without a Chief replica whose program survives losing worker 0 (it restores from a
# checkpoint, or its coordinator runs elsewhere) opts its chief into migration with this.
CHIEF_MOVABLE_ANNOTATION = f"{GROUP}/chief-movable"


def pod_name(base: str, move: int) -> str:
    """The name of a slot's pod after ``move`` moves (``base`` is ``{job}-{type}-{index}``)."""
    return base if move <= 0 else f"{base}-m{move}"


def move_of(name: str) -> int:
    """The move number a pod's name carries (0: never moved)."""
    m = _MOVE_SUFFIX.search(name)
    return int(m.group(1)) if m else 0


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class MigrationSpec(_Model):
    pod: str = Field(min_length=1)
    node: str = Field(min_length=1)
    reason: Reason = "Manual"
    requestedBy: str = ""


@dataclass(frozen=True)
class MigrationRequest:
    """A request as the pool reads it: its spec, and its identity for ordering."""

    namespace: str
    name: str
    uid: str
    created: str
    pod: str
    node: str
    reason: str
    requested_by: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> MigrationRequest:
        """Raises ValueError for an object that is not a readable Migration."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            raise ValueError("Migration without metadata.name")
        try:
            spec = MigrationSpec.model_validate(obj.get("spec"))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in ("spec", *first["loc"]))
            raise ValueError(f"Migration {where}: {first['msg']}") from err
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=meta["name"],
            uid=str(meta.get("uid") or ""),
            created=str(meta.get("creationTimestamp") or ""),
            pod=spec.pod,
            node=spec.node,
            reason=spec.reason,
            requested_by=spec.requestedBy,
        )


@dataclass(frozen=True)
class MigrationAnswer:
    """The pool's answer to one request (kept in the Admission's ``migrations``)."""

    request: str  # the Migration's name
    uid: str  # the Migration's uid: a new request of the same name is decided anew
    pod: str  # the pod it asked to move
    phase: Phase
    reason: str = ""
    message: str = ""
    source: str | None = None
    target: str | None = None
    move: int = 0  # the move number this request made (0: none)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "request": self.request,
            "uid": self.uid,
            "pod": self.pod,
            "phase": self.phase,
        }
        for k, v in (("reason", self.reason), ("message", self.message)):
            if v:
                out[k] = v
        if self.source:
            out["from"] = self.source
        if self.target:
            out["to"] = self.target
        if self.move:
            out["move"] = self.move
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> MigrationAnswer:
        return cls(
            request=str(raw["request"]),
            uid=str(raw.get("uid") or ""),
            pod=str(raw.get("pod") or ""),
            phase=raw["phase"],
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            source=raw.get("from"),
            target=raw.get("to"),
            move=whole(raw.get("move") or 0, "move", MAX_EVENTS),
        )

    def status(self) -> dict[str, Any]:
        """The Migration's status (phase, target, reason, message)."""
        out: dict[str, Any] = {"phase": self.phase}
        if self.target:
            out["target"] = self.target
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out


@dataclass(frozen=True)
class Moves:
    """A worker slot's durable move count: it survives scaling, restarts and the webhook."""

    type: str
    index: int
    count: int
    time: datetime | None  # of the last move (throttling compares it with now); None: none yet
    source: str = ""
    target: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "index": self.index,
            "count": self.count,
            "time": format_time(self.time) if self.time is not None else "",
        }
        for k, v in (("from", self.source), ("to", self.target), ("reason", self.reason)):
            if v:
                out[k] = v
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Moves:
        return cls(
            type=str(raw["type"]),
            index=whole(raw["index"], "index", MAX_REPLICAS - 1),
            count=whole(raw["count"], "count", MAX_EVENTS),
            time=parse_time(raw.get("time")),
            source=str(raw.get("from") or ""),
            target=str(raw.get("to") or ""),
            reason=str(raw.get("reason") or ""),
        )


# The pod labels a request carries (the contract, docs/migration.md): its job, so the pool
# selects it without reading the pod.
# (cluster.L_JOB and L_OPERATOR, spelled out: policy.model.cluster imports this module.)
CONTRACT_LABELS = ("training.kubeflow.org/job-name", "training.kubeflow.org/operator-name")


def request_object(
    pod: Mapping[str, Any], reason: str = "Manual", requested_by: str = ""
) -> dict[str, Any]:
    """The Migration that asks to move ``pod`` (a Pod object as the API server holds it):
    named after it, its labels copied, owned by it, for the node it is on now."""
    meta = pod["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in CONTRACT_LABELS}
    return {
        "apiVersion": VERSION,
        "kind": MIGRATION_KIND,
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace") or "default",
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "pod": meta["name"],
            "node": (pod.get("spec") or {}).get("nodeName") or "",
            "reason": reason,
            "requestedBy": requested_by,
        },
    }
