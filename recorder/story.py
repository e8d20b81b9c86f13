"""What happened to a job, read from the objects that hold it: pure, no clock, no I/O.

Each fact is derived from one object as it is now, with the time it happened where the
object records one (``admittedTime``, ``lastScale.time``, ``lastPreemption.time``, a
move's ``time``, a condition's ``lastTransitionTime``, a TTL's expiry). So a recorder
that restarts derives the same facts again, and one that looks twice sees a repeat only
when the object records a newer time. An object it cannot read yields no fact (the pool's
and the job's own syncs say what is wrong with it).

* An **Admission** (the pool's decision): admitted (where), waiting (the reason code, once
  per code and queued spell), preempted (by whom), shrunk or grown (from and to how many,
  why), a worker migrated (from and to).
* A **job** (TFJob, MXJob): succeeded or failed (its terminal condition); when the reaper
  deletes it for its ``ttlSecondsAfterFinished`` (``policy.model.ttl``, the reaper's rule).
* A **TrainingPool**: each object its status says it left out of the plan (on the pool, and
  on the object itself in its namespace when it has one: its tenant reads why there); that
  it was held or drained (its ``Active`` condition False, reason ``Stopped``:
  ``policy.pool.stop``), at the condition's transition time.

One Event per fact: the Admitted Event tells the placement the job was admitted with, never
a later scale or move (those are Grown, Shrunk, Migrated); an Admission read only after it
was scaled or moved no longer holds that placement, so its Admitted note says so instead of
telling the scaling again. A note never names another namespace's job (``private``): an
Event is read by whoever may read its namespace's Events.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from policy.model import admission as adm
from policy.model.conditions import FAILED, SUCCEEDED
from policy.model.gpushare import SHAREPODS
from policy.model.kinds import KINDS
from policy.model.migration import TYPE_KEY as MIGRATIONS
from policy.model.pool import POOL_KIND, VERSION
from policy.model.request import job_type_key
from policy.model.timeutil import format_time, parse_time
from policy.model.ttl import FIELD, expiry, finished_at, ttl_seconds

EventType = Literal["Normal", "Warning"]
# Waiting that does not end by itself (a spec or the pool must change): a Warning.
_STUCK = frozenset(
    {
        adm.NO_NODES,
        adm.NO_FEASIBLE_NODE,
        adm.TOO_LARGE,
        adm.NO_SHRINK_HELPS,
        adm.NO_SUCH_POOL,
        adm.NO_KUBESHARE,
        adm.PODS_WAITING_FOR_ROOM,
    }
)
NOTE_LIMIT = 1024  # bytes: the API server refuses a longer events.k8s.io/v1 note
CLUSTER_NAMESPACE = "default"  # where Events about cluster-scoped objects go, as Nodes'
ANOTHER_NAMESPACE = "a job in another namespace"
# A job's key as the pool writes it (``namespace/name``): a DNS label with a letter, a slash,
# a name. Not a resource or label name such as ``nvidia.com/gpu`` (a dot before the slash).
_JOB_KEY = re.compile(
    r"(?<![\w./-])(?=[0-9-]*[a-z])([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)"
    r"/([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)(?![\w/-])"
)


def private(text: str, namespace: str) -> str:
    """``text`` with every other namespace's job key (``team-c/urgent``) replaced by
    "a job in another namespace": the same namespace's may be named."""
    return _JOB_KEY.sub(
        lambda m: m.group(0) if m.group(1) == namespace else ANOTHER_NAMESPACE, text
    )


@dataclass(frozen=True)
class Regarding:
    """The object an Event is about (``regarding``)."""

    api_version: str
    kind: str
    namespace: str  # "" for a cluster-scoped object
    name: str
    uid: str

    def to_json(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class Fact:
    """One thing that happened: an Event to write, or to count again in its series.

    ``identity`` tells apart the facts of one object and reason that are different
    stories (another placement, another preemption reason); facts equal in it are one
    story that may repeat (a series), each repeat known by a later ``at``. ``at`` is None
    for a fact the objects give no time for: written once, when first seen."""

    regarding: Regarding
    type: EventType
    reason: str  # CamelCase, as Kubernetes' reasons are
    action: str  # what was done: Admit, Queue, Preempt, Scale, Migrate, Finish, Delete, Plan
    note: str
    at: datetime | None
    identity: str


def _note(text: str) -> str:
    raw = text.encode()
    if len(raw) <= NOTE_LIMIT:
        return text
    return raw[: NOTE_LIMIT - 3].decode(errors="ignore") + "..."


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _placement(pods: Iterable[adm.Placement]) -> str:
    """Where the pods go, per node: ``gpu-1 (1 PS, 4 Worker), gpu-2 (2 Worker)``."""
    by_node: dict[str, Counter[str]] = {}
    for p in pods:
        by_node.setdefault(p.node or "any node", Counter())[p.type] += 1
    return ", ".join(
        f"{node} ({', '.join(f'{n} {t}' for t, n in sorted(types.items()))})"
        for node, types in sorted(by_node.items())
    )


def _changed_since(a: adm.Admission, admitted: datetime) -> bool:
    """Whether a scale or a move since the admission has changed its placement."""
    times = [a.last_scale.time] if a.last_scale is not None else []
    times += [m.time for m in a.moves if m.time is not None and m.count >= 1]
    return any(t >= admitted for t in times)


def admission_facts(obj: Mapping[str, Any]) -> list[Fact]:
    """What one Admission records about its job."""
    try:
        a = adm.Admission.from_object(obj)
    except ValueError:
        return []
    if not a.job.name:
        return []
    job = Regarding(a.job.api_version, a.job.kind, a.namespace, a.job.name, a.job.uid)
    facts: list[Fact] = []

    def add(kind: EventType, reason: str, action: str, note: str, at: Any, ident: str) -> None:
        when = at if isinstance(at, datetime) else None
        text = _note(private(note, a.namespace))
        facts.append(Fact(job, kind, reason, action, text, when, ident))

    last = a.service.last if a.service is not None else None
    if a.phase == adm.ADMITTED and a.admitted_at:
        # One Event per admission, with the placement it was admitted with: later moves and
        # scaling have Events of their own, so an Admission changed since no longer tells it.
        if _changed_since(a, a.admitted_at):
            note = f"admitted by pool {a.pool} (its placement then was not seen: it has been"
            note += " scaled or moved since)"
        else:
            workers = f"{a.workers} worker{'' if a.workers == 1 else 's'}"
            note = f"admitted by pool {a.pool} with {workers}: {_placement(a.pods)}"
        add("Normal", "Admitted", "Admit", note, a.admitted_at, format_time(a.admitted_at))
    if a.reason and a.reason != adm.PREEMPTED:
        # Once per reason code while the job waits; a preemption starts a new spell.
        kind: EventType = "Warning" if a.reason in _STUCK else "Normal"
        spell = format_time(last.time) if last is not None else ""
        add(kind, a.reason, "Queue", a.message or a.reason, None, spell)
    if last is not None:
        why = last.reason if last.by in last.reason else f"by {last.by}: {last.reason}"
        note = f"preempted: {why}; it queues again as a whole gang"
        add("Warning", "Preempted", "Preempt", note, last.time, note)
    if a.last_scale is not None and a.last_scale.after != a.last_scale.before:
        s = a.last_scale
        reason = "Shrunk" if s.shrink else "Grown"
        note = f"workers from {s.before} to {s.after}" + (f": {s.reason}" if s.reason else "")
        add("Normal", reason, "Scale", note, s.time, note)
    for m in a.moves:
        if not m.time or m.count < 1:
            continue
        note = f"{m.type} {m.index} moved" + (f" from {m.source}" if m.source else "")
        note += (f" to {m.target}" if m.target else "") + (f": {m.reason}" if m.reason else "")
        add("Normal", "Migrated", "Migrate", note, m.time, note)
    return facts


def _job(obj: Mapping[str, Any]) -> Regarding | None:
    meta = _meta(obj)
    name, namespace = meta.get("name"), meta.get("namespace")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not all(isinstance(v, str) and v for v in (name, namespace, api_version, kind)):
        return None
    return Regarding(api_version, kind, namespace, name, str(meta.get("uid") or ""))


def job_facts(obj: Mapping[str, Any]) -> list[Fact]:
    """What one TFJob or MXJob records about itself: how it ended, and when its
    ``ttlSecondsAfterFinished`` has the reaper delete it."""
    job = _job(obj)
    if job is None:
        return []
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    facts: list[Fact] = []
    for c in conditions if isinstance(conditions, list) else ():
        if not isinstance(c, Mapping) or c.get("status") != "True":
            continue
        ctype = c.get("type")
        if ctype not in (SUCCEEDED, FAILED):
            continue
        reason = c.get("reason") if isinstance(c.get("reason"), str) else ""
        note = c.get("message") if isinstance(c.get("message"), str) else ""
        at = parse_time(c.get("lastTransitionTime"))
        kind: EventType = "Normal" if ctype == SUCCEEDED else "Warning"
        reason = reason or f"{job.kind}{ctype}"
        note = private(note or reason, job.namespace)
        facts.append(Fact(job, kind, reason, "Finish", _note(note), at, str(ctype)))
    due = expiry(obj)
    if due is not None:
        # Said when it is decided (the job ended): an Event written once the job is gone
        # would be shown by no `kubectl describe`.
        ttl = ttl_seconds(obj.get("spec"))
        note = f"deleted at {format_time(due.at)} by dragonet-reaper: runPolicy.{FIELD} is {ttl} s"
        ended = finished_at(obj.get("status"))
        facts.append(Fact(job, "Normal", "TTLAfterFinished", "Delete", note, ended, "ttl"))
    return facts


def pool_facts(obj: Mapping[str, Any]) -> list[Fact]:
    """What a TrainingPool's status records: each object it left out of its plan, and that
    it is held (once per hold: each has its own transition time)."""
    meta = _meta(obj)
    name = meta.get("name")
    status = obj.get("status")
    if not isinstance(name, str) or not name or not isinstance(status, Mapping):
        return []
    pool = Regarding(VERSION, POOL_KIND, "", name, str(meta.get("uid") or ""))
    problems = status.get("problems")
    facts = [
        fact
        for p in (problems if isinstance(problems, list) else ())
        if isinstance(p, str) and p
        for fact in _left_out(pool, p)
    ]
    conditions = status.get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if not isinstance(c, Mapping) or c.get("type") != "Active":
            continue
        since = c.get("lastTransitionTime")
        when = parse_time(since) if isinstance(since, str) else None
        if c.get("status") == "False" and c.get("reason") == "Stopped" and when is not None:
            note = _note(str(c.get("message") or "held"))
            facts.append(Fact(pool, "Normal", "Stopped", "Hold", note, when, f"stopped {since}"))
    return facts


# The namespaced objects a pool reads, by kind: their apiVersion, for an Event about one.
_NAMESPACED = dict(
    t.split(".", 1)
    for t in ("Pod.v1", SHAREPODS, adm.TYPE_KEY, MIGRATIONS, *(job_type_key(k) for k in KINDS))
)
# How the pool says it left one out (policy.pool.observe, policy.pool.sync,
# policy.model.speedup): "Admission team-a/tfjob-x is left out: why", "TFJob team-a/x: its
# throughput is left out: why".
_LEFT_OUT = re.compile(
    r"(?P<kind>[A-Z][A-Za-z]*) (?P<namespace>[a-z0-9][-a-z0-9]*)/(?P<name>[^\s:/]+)"
    r"(?P<what>: its throughput is| is) left out: (?P<why>.*)",
    re.S,
)


def _left_out(pool: Regarding, problem: str) -> list[Fact]:
    """An object the pool left out of its plan: an Event on the pool (in the default
    namespace: another namespace's object is not named there), and, for a namespaced
    object, one on the object itself, in its namespace, where its tenant reads why."""

    def fact(on: Regarding, note: str) -> Fact:
        text = _note(private(note, on.namespace or CLUSTER_NAMESPACE))
        return Fact(on, "Warning", "ObjectLeftOut", "Plan", text, None, problem)

    said = _LEFT_OUT.fullmatch(problem)
    api_version = _NAMESPACED.get(said["kind"]) if said else None
    if said is None or api_version is None:  # a Node, a PriorityClass: the cluster's own
        return [fact(pool, problem)]
    kind, namespace, why = said["kind"], said["namespace"], said["why"]
    throughput = said["what"] != " is"
    if namespace == CLUSTER_NAMESPACE:
        on_pool = problem
    else:
        article = "an" if kind[0] in "AEIOU" else "a"
        what = "whose throughput is" if throughput else "is"
        on_pool = (
            f"{article} {kind} in another namespace {what} left out: {why} (an Event on it "
            "says so in its namespace)"
        )
    name = said["name"]
    what = f"{kind} {name}" + (": its throughput is" if throughput else " is")
    on_object = f"{what} left out of pool {pool.name}'s plan: {why}"
    owner = Regarding(api_version, kind, namespace, name, "")
    return [fact(pool, on_pool), fact(owner, on_object)]
